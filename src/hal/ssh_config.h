/*
 * ssh_config.h - the subset of OpenSSH's ssh_config that the ssh backend honours,
 * so that `ssh h1`-style names work the same through the HAL.
 *
 * Keys understood (case-insensitive, "Key value" or "Key=value", values may be
 * double-quoted):
 *   Host PATTERN...            starts a block; patterns use * and ?, a leading !
 *                              negates (a block with a matching negated pattern
 *                              does not apply); options before the first Host
 *                              apply to every host
 *   Match                      only "Match all" is understood (applies to every
 *                              host); any other Match block is skipped as a whole
 *   HostName NAME              %h (the alias) and %% are expanded
 *   User NAME
 *   Port N                     1..65535
 *   IdentityFile PATH          repeatable, every matching one is tried in order;
 *                              ~ and %d (home), %h, %r (user), %u (local user) expanded
 *   UserKnownHostsFile PATH... several files per line; the first is the one new
 *                              keys are added to; "none" means no file
 *   StrictHostKeyChecking V    yes|ask (both: refuse unknown), accept-new, no|off
 *   ConnectTimeout T           seconds (or 500ms, 1m)
 * As in OpenSSH, for every key the first value obtained wins (IdentityFile
 * accumulates). Unknown keys are ignored (Include too: its files are not read).
 * A malformed line (known key without value or with a bad value, an unterminated
 * quote, Host without pattern) is an error naming "file:line".
 *
 * Ownership: struct mr_ssh_config is opaque and owned by the caller, freed with
 * mr_ssh_config_free(). mr_ssh_config_lookup() fills a caller-owned struct
 * mr_ssh_host_cfg whose strings it allocates; mr_ssh_host_cfg_release() frees them.
 */
#ifndef MR_SSH_CONFIG_H
#define MR_SSH_CONFIG_H

#include "common/compat.h"
#include "common/strvec.h"
#include "meshrun/err.h"

enum mr_ssh_strict {
	MR_SSH_STRICT_UNSET = 0,
	MR_SSH_STRICT_YES,        /* unknown and changed keys refused */
	MR_SSH_STRICT_ACCEPT_NEW, /* unknown keys added, changed keys refused */
	MR_SSH_STRICT_NO,         /* unknown keys added, changed keys accepted */
};

/* The options that apply to one host, after lookup. */
struct mr_ssh_host_cfg {
	char *dest;                   /* the destination as given: [user@]alias */
	char *alias;                  /* the name looked up (dest without user@) */
	char *hostname;               /* HostName (expanded), else the alias */
	char *user;                   /* dest's user, else User, else NULL */
	bool user_from_dest;          /* user came from "user@" in dest */
	int port;                     /* Port, or 0 when not set (22) */
	struct mr_strvec identity_files;  /* expanded paths, in order */
	struct mr_strvec known_hosts;     /* UserKnownHostsFile (expanded); empty: not set */
	bool known_hosts_none;        /* "UserKnownHostsFile none" */
	enum mr_ssh_strict strict;
	int connect_timeout_ms;       /* 0 when not set */
};

#define MR_SSH_HOST_CFG_INIT { NULL, NULL, NULL, NULL, false, 0, MR_STRVEC_INIT, MR_STRVEC_INIT, false, \
			       MR_SSH_STRICT_UNSET, 0 }

struct mr_ssh_config;

/* Parse text (len bytes, need not be NUL-terminated); name is used in errors. */
int mr_ssh_config_parse(struct mr_ssh_config **out, const char *text, size_t len,
			const char *name, struct meshrun_err *err);
/*
 * Load the config: path if non-NULL (must exist), else $MESHRUN_SSH_CONFIG if set
 * and non-empty (must exist), else ~/.ssh/config (a missing file is an empty config).
 */
int mr_ssh_config_load(struct mr_ssh_config **out, const char *path, struct meshrun_err *err);
void mr_ssh_config_free(struct mr_ssh_config *cfg);

/*
 * An ssh destination "[user@]host" as OpenSSH splits it: at the last '@'. The
 * host is an IP address or a name of [A-Za-z0-9_.-]; the user is [A-Za-z0-9_.-];
 * neither may be empty or start with '-' (ssh would read it as an option), and
 * nothing else (whitespace, quotes, shell metacharacters, a second '@') is
 * accepted: MESHRUN_E_USAGE, "ssh destination 'DEST': ..." naming the part.
 * *user (NULL when there is no "user@") and *host are allocated; either out
 * pointer may be NULL.
 */
int mr_ssh_dest_split(const char *dest, char **user, char **host, struct meshrun_err *err);

/*
 * Options for dest, "[user@]alias" (mr_ssh_dest_split; cfg may be NULL: nothing
 * configured): blocks are matched against the alias; the user is dest's, else
 * the configured User. %u is the local user ($USER, else the password database),
 * %r that user, else %u. Errors: a bad destination, an unknown %-token.
 */
int mr_ssh_config_lookup(const struct mr_ssh_config *cfg, const char *dest,
			 struct mr_ssh_host_cfg *out, struct meshrun_err *err);
/* The local user name ($USER, else the password database, else "root"). */
const char *mr_ssh_local_user(void);
void mr_ssh_host_cfg_release(struct mr_ssh_host_cfg *h);

/* OpenSSH pattern match: * any run, ? any one character (no character classes). */
bool mr_ssh_pattern_match(const char *pattern, const char *s);
/* "~" or "~/x" -> "$HOME/x", "~user/x" -> that user's home; others copied. NULL on error. */
char *mr_ssh_expand_tilde(const char *path);
/* The user's home directory ($HOME, else the password database); never NULL. */
const char *mr_ssh_home(void);

#endif
