/*
 * ssh_config.h - a host's effective ssh options, resolved the way OpenSSH does it,
 * so that whatever `ssh HOST` reaches, the ssh backends reach (issue 21).
 *
 * Two resolvers, one result (struct mr_ssh_host_cfg):
 *  - `ssh -G [-F FILE] DEST` where an OpenSSH client is installed (default;
 *    $MESHRUN_SSH_RESOLVER=auto|ssh|builtin chooses): OpenSSH evaluates Include,
 *    Match, tokens, CanonicalizeHostname itself; we read its "key value" lines.
 *    It runs through common/spawn.h (no shell, DEST validated by
 *    mr_ssh_dest_split), once per destination (cached in the config), several
 *    at once with mr_ssh_config_prefetch().
 *  - the built-in parser (fallback; also when `ssh` has no -G, OpenSSH < 6.8,
 *    found at the first lookup and said in one warning), which understands:
 *   Host PATTERN...            starts a block; patterns use * and ?, a leading !
 *                              negates (a block with a matching negated pattern
 *                              does not apply); options before the first Host
 *                              apply to every host
 *   Match CRITERIA             all, host/originalhost PATTERNS, user PATTERNS
 *                              (comma-separated, ! negates; all criteria must
 *                              hold); a block with another criterion (exec,
 *                              canonical, final, ...) never applies and is named
 *                              in the warning
 *   Include PATH...            globs; relative paths are under ~/.ssh; read in
 *                              place (at most 16 deep), inside the current block
 *   HostName NAME              %h (the alias) and %% are expanded
 *   User NAME, Port N (1..65535)
 *   IdentityFile PATH          repeatable, every matching one is tried in order;
 *                              ~ and %d (home), %h, %r (user), %u (local user) expanded
 *   CertificateFile PATH       repeatable, expanded like IdentityFile
 *   UserKnownHostsFile PATH... several files per line; the first is the one new
 *                              keys are added to; "none" means no file
 *   StrictHostKeyChecking V    yes|ask (both: refuse unknown), accept-new, no|off
 *   ConnectTimeout T           seconds (or 500ms, 1m)
 *   AddressFamily any|inet|inet6, ProxyJump, ProxyCommand, IdentityAgent,
 *   IdentitiesOnly yes|no, BatchMode and LogLevel (no effect: we never prompt)
 *   As in OpenSSH, for every key the first value obtained wins (IdentityFile and
 *   CertificateFile accumulate). Every other directive is collected and named,
 *   once, by mr_ssh_config_unsupported() (the backend warns with it).
 *   A malformed line (known key without value or with a bad value, an
 *   unterminated quote, Host without pattern) is an error naming "file:line".
 *
 * What libssh2 cannot do for a host is said in two ways: libssh2_gaps (the
 * libssh2 backend cannot reach the host as configured: --ssh auto picks the
 * OpenSSH backend: PKCS11Provider, an existing FIDO sk- IdentityFile, an
 * existing CertificateFile with libssh2 < 1.11, which sshd refuses the signature
 * of) and auth_notes (an auth method libssh2 lacks, GSSAPI: named in the
 * authentication error; other methods may still work). Both name the option.
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
	int address_family;           /* AF_UNSPEC (any), AF_INET, AF_INET6 */
	char *proxy_jump;             /* "[user@]host[:port][,...]", NULL: none */
	char *proxy_command;          /* %h %p %r %n expanded; run under /bin/sh -c; NULL: none */
	char *identity_agent;         /* agent socket path; NULL: $SSH_AUTH_SOCK */
	bool identity_agent_none;     /* "IdentityAgent none": no agent */
	bool identities_only;         /* only agent keys whose .pub is an IdentityFile's */
	struct mr_strvec certificate_files; /* expanded paths */
	struct mr_strvec libssh2_gaps;  /* "Option value: why libssh2 cannot" */
	struct mr_strvec auth_notes;    /* "Option: ..." methods libssh2 lacks (soft) */
	bool from_ssh_g;              /* resolved by `ssh -G` */
};

#define MR_SSH_HOST_CFG_INIT { NULL, NULL, NULL, NULL, false, 0, MR_STRVEC_INIT, MR_STRVEC_INIT, false, \
			       MR_SSH_STRICT_UNSET, 0, 0, NULL, NULL, NULL, false, false,            \
			       MR_STRVEC_INIT, MR_STRVEC_INIT, MR_STRVEC_INIT, false }

struct mr_ssh_config;

/* Parse text (len bytes, need not be NUL-terminated); name is used in errors. */
int mr_ssh_config_parse(struct mr_ssh_config **out, const char *text, size_t len,
			const char *name, struct meshrun_err *err);
/*
 * Load the config: path if non-NULL (must exist), else $MESHRUN_SSH_CONFIG if set
 * and non-empty (must exist), else ~/.ssh/config (a missing file is an empty config).
 * With `ssh -G` (see the top) the file is only checked here and read by ssh on
 * lookup (without a path, ssh reads ~/.ssh/config and /etc/ssh/ssh_config).
 */
int mr_ssh_config_load(struct mr_ssh_config **out, const char *path, struct meshrun_err *err);
void mr_ssh_config_free(struct mr_ssh_config *cfg);
/* The `ssh` program resolving hosts, or NULL for the built-in parser. */
const char *mr_ssh_config_resolver(const struct mr_ssh_config *cfg);
/*
 * Built-in parser: the directives (and Match criteria) it read but does not
 * support, as one "A, B, Match exec" string; NULL when there are none (or with
 * `ssh -G`, which supports them all). Owned by cfg.
 */
const char *mr_ssh_config_unsupported(const struct mr_ssh_config *cfg);
/*
 * True once `ssh` turned out to have no -G (OpenSSH before 6.8): the lookups fell
 * back to the built-in parser, with a one-line warning that named what it does
 * not support (so the caller need not warn again).
 */
bool mr_ssh_config_fell_back(const struct mr_ssh_config *cfg);
/*
 * With `ssh -G`: resolve these destinations now, in parallel (up to 32 at once),
 * so that the lookups that follow are cache hits. Errors are kept for the
 * lookups to report; cfg NULL or the built-in parser: nothing to do.
 */
void mr_ssh_config_prefetch(struct mr_ssh_config *cfg, const char *const *dests, size_t n);

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
 * configured): `ssh -G`'s answer (cached in cfg; its failure, e.g. a bad config,
 * is the error, naming the host and ssh's message), else the built-in blocks,
 * matched against the alias; the user is dest's, else the configured User.
 * Built-in: %u is the local user ($USER, else the password database); with
 * `ssh -G` ssh's own rules hold (the password database). %r is that user.
 * Errors: a bad destination, an unknown %-token.
 */
int mr_ssh_config_lookup(struct mr_ssh_config *cfg, const char *dest,
			 struct mr_ssh_host_cfg *out, struct meshrun_err *err);
/*
 * The same from `ssh -G DEST`'s output that the caller ran itself (the auto
 * backend choice): out->libssh2_gaps non-empty means the libssh2 backend cannot
 * do this host as configured (each entry names the option and why).
 */
int mr_ssh_host_cfg_from_g(const char *dest, const char *ssh_g_output, struct mr_ssh_host_cfg *out,
			   struct meshrun_err *err);
/* The local user name ($USER, else the password database, else "root"). */
const char *mr_ssh_local_user(void);
void mr_ssh_host_cfg_release(struct mr_ssh_host_cfg *h);

/* OpenSSH pattern match: * any run, ? any one character (no character classes). */
bool mr_ssh_pattern_match(const char *pattern, const char *s);
/* "~" or "~/x" -> "$HOME/x", "~user/x" -> that user's home; others copied. NULL on error. */
char *mr_ssh_expand_tilde(const char *path);
/* A private key usable only with a FIDO security key (its .pub says sk-..., or
 * the name ends in _sk): libssh2 cannot sign with it. */
bool mr_ssh_key_is_sk(const char *path);
/* The user's home directory ($HOME, else the password database); never NULL. */
const char *mr_ssh_home(void);

#endif
