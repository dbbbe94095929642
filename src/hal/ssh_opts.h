/*
 * ssh_opts.h - the ssh and host-key options that meshrun and meshconfig share:
 * one set of flags, one help text each, and one way they become the hal's
 * options, so that a hint one tool prints names a flag the other has too.
 *
 *   --ssh-config FILE          ssh_config (default $MESHRUN_SSH_CONFIG, else ~/.ssh/config)
 *   --ssh auto|libssh2|openssh which ssh client (default $MESHRUN_SSH, else auto)
 *   --persist DURATION|stop    the per-user connection daemon (default $MESHRUN_SSH_PERSIST)
 *   --known-hosts FILE         the known_hosts file checked, and where new keys go
 *   --accept-new-hostkeys      record unknown host keys instead of failing
 *
 * A tool embeds struct mr_ssh_opts in its options and puts MR_SSH_OPTS() in its
 * option table (common/opt.h), where the group "Remote hosts (ssh)" shall appear:
 *
 *	struct mr_launch_opts { ...; struct mr_ssh_opts ssh; };
 *	{ MR_OPT_GROUP("Hosts"), ..., MR_SSH_OPTS(&(o)->ssh), MR_OPT_GROUP("Command"), ... }
 *	rc = mr_ssh_opts_apply(&o->ssh, &hal_opts, &stop, &err);
 *
 * The strings point into argv (the option parser's rule); nothing is owned.
 */
#ifndef MR_HAL_SSH_OPTS_H
#define MR_HAL_SSH_OPTS_H

#include "common/compat.h"
#include "common/opt.h"
#include "hal/hal.h"

struct mr_ssh_opts {
	const char *config;       /* --ssh-config; NULL: $MESHRUN_SSH_CONFIG, else ~/.ssh/config */
	const char *client;       /* --ssh; NULL: $MESHRUN_SSH, else auto */
	const char *persist;      /* --persist; NULL: $MESHRUN_SSH_PERSIST */
	const char *known_hosts;  /* --known-hosts; NULL: ssh_config's, else ~/.ssh/known_hosts */
	bool accept_new_hostkeys; /* --accept-new-hostkeys */
};

#define MR_SSH_OPTS_INIT { NULL, NULL, NULL, NULL, false }

/* The group and its five entries of an option table (a comma-separated list). */
#define MR_SSH_OPTS(so)                                                                          \
	MR_OPT_GROUP("Remote hosts (ssh)"),                                                     \
	MR_OPT_STRING(0, "ssh-config", &(so)->config, "FILE",                                   \
		      "ssh_config for the remote hosts (default: $MESHRUN_SSH_CONFIG, else "    \
		      "~/.ssh/config)"),                                                        \
	MR_OPT_CHOICE(0, "ssh", &(so)->client, "auto|libssh2|openssh",                          \
		      "how remote hosts are reached: libssh2, the OpenSSH client with a control " \
		      "master, or auto: libssh2 unless a host's ssh_config needs OpenSSH "      \
		      "(PKCS11Provider, a FIDO key) (default: $MESHRUN_SSH, else auto)"),       \
	MR_OPT_STRING(0, "persist", &(so)->persist, "DURATION|stop",                            \
		      "keep ssh connections in a per-user background process for DURATION "     \
		      "after the last use (10m, 90s, 1h; default: $MESHRUN_SSH_PERSIST), shared " \
		      "by meshrun and meshconfig; 'stop' ends that process and does nothing "   \
		      "else"),                                                                  \
	MR_OPT_STRING(0, "known-hosts", &(so)->known_hosts, "FILE",                             \
		      "the known_hosts file host keys are checked against and new ones added "  \
		      "to (default: ssh_config's UserKnownHostsFile, else ~/.ssh/known_hosts)"), \
	MR_OPT_BOOL(0, "accept-new-hostkeys", &(so)->accept_new_hostkeys,                       \
		    "record the key of a host not yet in known_hosts instead of failing (as "   \
		    "ssh's StrictHostKeyChecking=accept-new; a changed key still fails)")

/* The tools' choice: opt (--ssh) when not NULL, else $MESHRUN_SSH when set and
 * not empty, else auto. MESHRUN_E_USAGE naming the flag or the variable. */
int mr_hal_ssh_pick(const char *opt, enum mr_hal_ssh *out, struct meshrun_err *err);
/*
 * --persist's value: opt when not NULL, else $MESHRUN_SSH_PERSIST when set and
 * not empty, else none. "stop" sets *stop; "0"/"off"/"no" mean none; else a
 * duration ("10m", "90s", "1h", "1500ms"; a bare number is seconds) into *ms.
 * MESHRUN_E_USAGE naming the flag or the variable.
 */
int mr_hal_persist_pick(const char *opt, int64_t *ms, bool *stop, struct meshrun_err *err);

/* True when so asks for --persist stop (the tool then stops the daemon and exits). */
bool mr_ssh_opts_wants_stop(const struct mr_ssh_opts *so);

/*
 * Fill the ssh part of ho from so: ssh_config, known_hosts, accept_new_hostkeys,
 * the client (mr_hal_ssh_pick: --ssh, else $MESHRUN_SSH) and the persist time
 * (mr_hal_persist_pick: --persist, else $MESHRUN_SSH_PERSIST). *stop is set
 * when that says "stop" (stop may be NULL: then "stop" from the environment is
 * a usage error naming MESHRUN_SSH_PERSIST). 0, or MESHRUN_E_USAGE naming the
 * flag or the variable. ho's strings point into so.
 */
int mr_ssh_opts_apply(const struct mr_ssh_opts *so, struct mr_hal_opts *ho, bool *stop,
		      struct meshrun_err *err);

#endif
