/*
 * ssh_config_impl.h - what the files of ssh_config.h share (internal to src/hal;
 * the public contract is ssh_config.h):
 *
 *   ssh_config.c        the public API: load (which resolver), lookup, the
 *                       helpers (home, local user, ~, destinations, sk keys),
 *                       %-token expansion and finish (raw values -> struct
 *                       mr_ssh_host_cfg, with libssh2_gaps and auth_notes), the
 *                       fall back to the built-in parser when ssh has no -G
 *   ssh_config_parse.c  the built-in parser: ssh_config text (Include, Host and
 *                       Match blocks) into cfg->blocks, matching the blocks
 *                       against a host (mr_ssh_pattern_match), taking their values
 *   ssh_config_g.c      `ssh -G` runs (several at once: mr_ssh_config_prefetch),
 *                       their answers cached in cfg->g, and reading an answer
 *
 * Both resolvers produce the same thing: a struct raw_opts, the values as written
 * (first one wins), which ssh_config.c's finish() expands into the host's options.
 * Calls go from ssh_config.c to the other two; back the other way only
 * mr_sshcfg_expand (the parser's Match host sees the HostName so far, expanded)
 * and the public helpers; ssh_config_g.c reads an answer's values with the
 * parser's mr_sshcfg_parse_value.
 *
 * Ownership: struct mr_ssh_config owns its blocks, unsupported names, ssh_bin,
 * file and g entries (each entry its dest and text); mr_ssh_config_free() frees
 * them all. A struct raw_opts owns only its three strvecs (ids, certs, kh; freed by
 * ssh_config.c's raw_release); its const char * members point into cfg's blocks
 * (built-in) or into the copy of ssh -G's text that lookup() passes to
 * mr_sshcfg_collect_g() and frees after finish(). Both collect functions may set
 * h->user (allocated; h owns it).
 */
#ifndef MR_HAL_SSH_CONFIG_IMPL_H
#define MR_HAL_SSH_CONFIG_IMPL_H

#include "common/compat.h"
#include "common/strvec.h"
#include "hal/ssh_config.h"
#include "meshrun/err.h"

enum opt_key {
	K_HOSTNAME,
	K_USER,
	K_PORT,
	K_IDENTITY,
	K_KNOWN_HOSTS,
	K_STRICT,
	K_TIMEOUT,
	K_CERT,
	K_AF,
	K_PROXYJUMP,
	K_PROXYCMD,
	K_AGENT,
	K_IDONLY,
	K_NOOP,     /* understood, no effect for us */
};

struct cfg_opt {
	enum opt_key key;
	struct mr_strvec args; /* one value, or several for UserKnownHostsFile */
	int ival;              /* parsed Port, StrictHostKeyChecking, ConnectTimeout */
};

struct cfg_block {
	struct mr_strvec patterns; /* empty with match_all: applies to everyone */
	struct mr_strvec m_hosts;  /* Match host (comma lists, one entry per criterion) */
	struct mr_strvec m_orig;   /* Match originalhost */
	struct mr_strvec m_users;  /* Match user */
	bool match_all;
	bool never;                /* a Match block with an unsupported criterion */
	struct cfg_opt *opts;
	size_t nopts, alloc;
};

/* One `ssh -G` result: its output, or why it failed. */
struct g_entry {
	char *dest;
	char *text;
	struct meshrun_err err;
	bool done;
	bool no_g;  /* ssh refused -G as an unknown option: OpenSSH before 6.8 */
};

struct mr_ssh_config {
	struct cfg_block *blocks;
	size_t nblocks, alloc;
	struct mr_strvec unsupported; /* built-in parser: directives it skipped */
	char *unsupported_str;
	char *ssh_bin;                /* `ssh -G` resolves; NULL: the blocks above */
	char *file;                   /* its -F FILE, NULL: ssh's defaults */
	bool fell_back;               /* ssh had no -G: the blocks were read after all */
	struct g_entry *g;
	size_t ng, g_alloc;
};

/* Values as written (first one wins), before tokens are expanded. */
struct raw_opts {
	const char *hostname, *jump, *cmd, *agent;
	struct mr_strvec ids, certs, kh;
	int port, strict, timeout_ms, af, idonly;
	bool have_af, have_idonly, kh_set, gssapi;
	const char *pkcs11;
};

/*
 * ssh_config_parse.c
 */
/* Parse v for o->key into o->ival (Port, StrictHostKeyChecking, ConnectTimeout,
 * AddressFamily, IdentitiesOnly; other keys: nothing to do). -1 with *why set. */
int mr_sshcfg_parse_value(struct cfg_opt *o, const char *v, const char **why);
/* The built-in parser's part of a load: path (NULL: ~/.ssh/config, which may be
 * missing) read into cfg's blocks. */
int mr_sshcfg_load_builtin(struct mr_ssh_config *cfg, const char *path, struct meshrun_err *err);
/* The blocks that apply to h->alias into r (cfg may be NULL); sets h->user from
 * User when dest had none (allocated, h owns it). -1: out of memory. */
int mr_sshcfg_collect_builtin(const struct mr_ssh_config *cfg, struct mr_ssh_host_cfg *h, struct raw_opts *r);

/*
 * ssh_config_g.c
 */
/* The cached `ssh -G` entry for dest, or NULL (points into cfg->g: a later
 * prefetch may move it). */
struct g_entry *mr_sshcfg_g_find(struct mr_ssh_config *cfg, const char *dest);
/* `ssh -G`'s lines into r; text is cut into lines in place and r's values point
 * into it. -1 with *why saying what is wrong, or *why NULL: out of memory. */
int mr_sshcfg_collect_g(char *text, struct mr_ssh_host_cfg *h, struct raw_opts *r, const char **why);

/*
 * ssh_config.c
 */
/* Expand ~ at the start (paths only) and %-tokens; the result is allocated.
 * NULL on error, *why saying what is wrong with v, or NULL: out of memory. */
char *mr_sshcfg_expand(const char *v, bool path, const struct mr_ssh_host_cfg *h, const char **why);

#endif
