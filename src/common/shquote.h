/*
 * shquote.h - POSIX shell quoting, and the validators for names that go into
 * remote shell commands.
 *
 * mr_shquote() appends one argument quoted so that any POSIX sh (and bash, zsh,
 * as run by sshd with `<shell> -c <string>`) reads back exactly the same bytes:
 * spaces, quotes, $, `, \, newlines and globs included. Plain words made only of
 * [A-Za-z0-9_@%+=:,./-] are left bare for readability; everything else is put in
 * single quotes, with each ' written as '\''. The empty string becomes ''.
 *
 * mr_shquote_sh_c() is how a script reaches a remote host: sshd runs every command
 * with the user's login shell (zsh on a Mac: no word splitting of $var, other
 * globbing and option rules), so every multi-statement command we send is
 * wrapped as `exec /bin/sh -c 'SCRIPT' NAME ARGS...` and only that one simple
 * command is read by the login shell. exec keeps the pid, so $$ inside SCRIPT is
 * still the process (group) sshd started.
 */
#ifndef MR_SHQUOTE_H
#define MR_SHQUOTE_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"

int mr_shquote(struct mr_buf *out, const char *arg);
/* Quote every argument and join with single spaces. */
int mr_shquote_argv(struct mr_buf *out, char *const *argv);

/* The POSIX shell every remote script runs under, whatever the login shell. */
#define MR_SH_PATH "/bin/sh"
/* What every such command line starts with (mr_shquote_sh_c). */
#define MR_SH_EXEC_C "exec " MR_SH_PATH " -c "
/*
 * Append `exec /bin/sh -c 'SCRIPT'` and, when args is not NULL, each of args
 * quoted (args[0] becomes $0, args[1] $1, ...). 0, or -1 on ENOMEM.
 */
int mr_shquote_sh_c(struct mr_buf *out, const char *script, char *const *args);

/* Predicates for strings that come from remote output or the user. */
bool mr_is_shell_safe(const char *s); /* the bare-word set above, non-empty */
bool mr_is_ifname(const char *s);     /* [A-Za-z0-9][A-Za-z0-9_.-]*, 1..15 chars */
bool mr_is_hostname(const char *s);   /* DNS labels or an ssh alias: [A-Za-z0-9_.-], no leading '-' */
bool mr_is_ipv4(const char *s);
bool mr_is_ipv6(const char *s);
bool mr_is_ip(const char *s);
bool mr_is_env_name(const char *s);   /* [A-Za-z_][A-Za-z0-9_]* */

#endif
