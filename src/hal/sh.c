/*
 * hal/sh.c - the /bin/sh protocol every remote backend speaks (sh.h): the
 * spawn line and its pgid marker, the watchdog, spare and kill scripts, the
 * job directory's setup script, and the names signals travel by.
 */
#include "common/compat.h"
#include "common/array.h"
#include "common/err.h"
#include "common/port.h"
#include "common/shquote.h"
#include "common/strvec.h"
#include "hal/sh.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

/* --- what a remote spawn sends --- */

int mr_hal_check_env(const char *host, char *const *env, struct meshrun_err *err)
{
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		char name[256];

		if (!eq || (size_t)(eq - env[i]) >= sizeof(name))
			return mr_err_set(err, MESHRUN_E_INVAL, "spawn on '%s': environment entry '%s' is not NAME=VALUE",
					  host, env[i]);
		memcpy(name, env[i], (size_t)(eq - env[i]));
		name[eq - env[i]] = '\0';
		if (!mr_is_env_name(name))
			return mr_err_set(err, MESHRUN_E_INVAL, "spawn on '%s': invalid environment variable name '%s'",
					  host, name);
	}
	return 0;
}

/*
 * POSIX sh only (dash, bash, zsh's sh mode and macOS's /bin/sh read it alike):
 * $p is split into words on purpose, which zsh as a login shell would not do;
 * mr_hal_watchdog_cmdline() runs it under /bin/sh for that reason.
 * A "T" name (an argument or a line) is a directory that a setup command may
 * still be creating in ${TMPDIR:-/tmp}: until a "D" line says the setup is over
 * ($w), the removal waits a second, so a mkdir racing our death comes first.
 * An "M" name is the same, and made here at once (mkdir -m 700) and marked:
 * the remote backends' form (mr_hal_makes_dirs), whose setup waits for the
 * mark before it writes there, so that a host stopped at any instant keeps no
 * directory of theirs without a mark (but for the exit of our own mkdir).
 * (nm: a "T" or "M" name of line $l, as $x; a path in it is refused.)
 * A "D" directory gets MR_HAL_WATCHDOG_MARK ("HOST PID" of this shell, mk):
 * the liveness mark that lets a later job's setup sweep it should we die with
 * the host's other processes (nobody left to read our EOF; docs/contracts.md);
 * only into a directory of ours that is no link, and not again when it is
 * there (a rewrite empties it for an instant). An "A" directory is the same
 * without the mark (the local hal writes it itself). The host's name (hs) is
 * looked up once per watchdog (a persist daemon's serves many jobs), before an
 * "M" name's mkdir, and without an exec where /proc has it (Linux; the
 * setup's first wait is on it); elsewhere `uname -n`. At the end only what
 * still exists costs an rm.
 */
const char mr_hal_watchdog_script[] =
	"trap '' HUP INT PIPE; p=' '; w=0; hn=; "
	"hs() { [ -n \"$hn\" ] || " MR_HAL_SH_HOSTNAME("hn") "; }; "
	"mk() { [ -d \"$x\" ] && [ -O \"$x\" ] && ! [ -L \"$x\" ] && { hs; "
	"{ read -r a b <\"$x/" MR_HAL_WATCHDOG_MARK "\" && [ \"$a $b\" = \"$hn $$\" ]; } 2>/dev/null || "
	"echo \"$hn $$\" 2>/dev/null >\"$x/" MR_HAL_WATCHDOG_MARK "\"; }; }; "
	"nm() { case ${l#?} in */*|.|..) return 1;; esac; x=${TMPDIR:-/tmp}/${l#?}; w=1; "
	"case $l in M*) hs; mkdir -m 700 \"$x\" 2>/dev/null; mk;; esac; return 0; }; "
	"for l do shift; case $l in [TM]?*) nm && set -- \"$@\" \"$x\";; esac; done; "
	"while read -r l; do case $l in "
	"+*) p=\"$p${l#+} \";; "
	"-*) x=${l#-}; case $p in *\" $x \"*) p=${p%%\" $x \"*}\" \"${p#*\" $x \"};; esac;; "
	"A/*) set -- \"$@\" \"${l#A}\"; w=0;; "
	"D/*) x=${l#D}; set -- \"$@\" \"$x\"; w=0; mk;; "
	"R?*) x=${l#R}; case $x in /*) ;; */*|.|..) x=;; *) x=\"${TMPDIR:-/tmp}/$x\";; esac; "
	"[ -z \"$x\" ] || { for a do shift; [ \"$a\" = \"$x\" ] || set -- \"$@\" \"$a\"; done; [ ! -e \"$x\" ] || rm -rf -- \"$x\"; };; "
	"[TM]?*) nm && set -- \"$@\" \"$x\";; "
	"esac; done; "
	"for x in $p; do kill -TERM -$x; done 2>/dev/null; "
	"[ \"$p\" = ' ' ] && [ $w = 0 ] || { sleep 1; for x in $p; do kill -KILL -$x; done 2>/dev/null; }; "
	"for x do [ -e \"$x\" ] && { rm -rf -- \"$@\"; break; }; done; exit 0";

/*
 * sh.h's "spare": $1 the token. `read` takes one byte at a time from a pipe,
 * so what follows the token line stays for the command's stdin; `eval` of an
 * `exec /bin/sh -c ...` line keeps this pid, the process group sshd made. A
 * line MR_HAL_SPARE_SH_C SCRIPT [ARG0 ARGS...] (mr_hal_spare_line) runs the
 * script in this /bin/sh, with ARGS as "$@": the same as that exec, one exec
 * of sh fewer (each costs milliseconds of CPU on a busy host).
 */
const char mr_hal_spare_script[] =
	"echo " MR_HAL_SPARE_READY "; c=; "
	MR_HAL_SPARE_SH_C "() { s=$1; shift; [ $# = 0 ] || shift; eval \"$s\"; }; "
	"while IFS= read -r l; do [ \"$l\" = \"$1\" ] && { eval \"$c\"; exit; }; c=\"$c$l\n\"; done; exit 0";

/* $1 a signal name (TERM), $2 a process group; BSD and procps kill both take it. */
const char mr_hal_kill_script[] = "kill -\"$1\" -\"$2\" 2>/dev/null; exit 0";

/*
 * sh.h's "setup": the check before launch and the job directory on a host,
 * which the watchdog above makes ("M" names) or takes over ("D" lines), marks
 * and removes; its sweep reads the watchdog's mark.
 */
const char mr_hal_setup_script[] =
	"exe=$1; cwd=$2; defcwd=$3; name=$4; wd=$5; shift 5; bad=0\n"
	"if [ -n \"$exe\" ] && ! command -v \"$exe\" >/dev/null 2>&1; then\n"
	"  echo \"command '$exe' not found\" >&2; bad=1; fi\n"
	"if [ -n \"$cwd\" ] && ! [ -d \"$cwd\" ]; then\n"
	"  echo \"working directory '$cwd' does not exist\" >&2; bad=1; fi\n"
	"[ $bad = 0 ] || exit 3\n"
	/* sweep: see launch/run.c's mr_launch_dir_is_stale() (the same rule, for the all-local path) */
	"me=; lp=; lv=\n"
	"for o in \"${TMPDIR:-/tmp}\"/meshrun.*; do\n"
	/* our own job's directory (its mark is there when WD is 1): no ps for it */
	"  [ \"${o##*/}\" != \"$name\" ] && [ -O \"$o\" ] && ! [ -L \"$o\" ] && read -r oh op <\"$o/" MR_HAL_WATCHDOG_MARK "\" || continue\n"
	"  [ -n \"$me\" ] || " MR_HAL_SH_HOSTNAME("me") "\n"
	"  case $op in ''|*[!0-9]*) continue;; esac; [ \"$oh\" = \"$me\" ] || continue\n"
	/* our names only (letters, digits, dots): a word each in $lv below */
	"  case ${o##*/} in *[!A-Za-z0-9.]*) continue;; esac\n"
	"  if kill -0 \"$op\" 2>/dev/null; then lp=\"$lp,$op\"; lv=\"$lv $op/${o##*/}\"; else rm -rf \"$o\"; fi\n"
	"done 2>/dev/null\n"
	/* live pids: one ps for all (BSD and procps take a list), a pid whose
	 * command is no watchdog was reused; a killed watchdog can be a zombie
	 * that init reaps between kill -0 and ps: no answer from ps keeps the
	 * directory only while the pid still lives */
	"if [ -n \"$lp\" ]; then a=$(ps -ww -o pid= -o args= -p \"${lp#,}\" 2>/dev/null) || a=\n"
	"  for c in $lv; do op=${c%%/*}; w=\n"
	"    while read -r p r; do [ \"$p\" = \"$op\" ] && w=\"x$r\"; done <<EOF\n"
	"$a\n"
	"EOF\n"
	"    case $w in *meshrun-watchdog*) continue;; esac\n"
	"    [ -n \"$w\" ] || ! kill -0 \"$op\" 2>/dev/null || continue\n"
	"    rm -rf \"${TMPDIR:-/tmp}/${c#*/}\"\n"
	"  done 2>/dev/null; fi\n"
	"d=-\n"
	"if [ $# -gt 0 ]; then\n"
	/* the host's watchdog makes and marks it (an "M" name, hal.h; WD 1): so
	 * that no file of ours lands in a directory a stopped host keeps unmarked,
	 * wait for the mark (first 2 ms: the watchdog's mkdir is usually about to
	 * end); after about a second (no watchdog there) make it here.
	 * Taken if there (no exec of mkdir): ours, no link; also when our mkdir
	 * fails because a watchdog slower than our wait made it meanwhile (a
	 * loaded host); the last mkdir only says why not */
	"  if [ -n \"$name\" ]; then d=${TMPDIR:-/tmp}/$name; i=0; s=0.002\n"
	"    while [ \"$wd\" = 1 ] && ! [ -s \"$d/" MR_HAL_WATCHDOG_MARK "\" ] && [ $i -lt 100 ]; do\n"
	"      sleep $s; s=0.01; i=$((i + 1)); done\n"
	"    ours() { [ -d \"$d\" ] && [ -O \"$d\" ] && ! [ -L \"$d\" ]; }\n"
	"    ours || mkdir -m 700 \"$d\" 2>/dev/null || ours || { mkdir -m 700 \"$d\"; exit 4; }\n"
	"  else d=$(mktemp -d \"${TMPDIR:-/tmp}/meshrun.XXXXXX\") || exit 4; fi\n"
	/* a failed write (a full disk) takes the directory with it: meshrun hears of none */
	"  while [ $# -ge 2 ]; do printf '%s' \"$2\" >\"$d/$1\" ||\n"
	"    { echo \"cannot write '$d/$1'\" >&2; rm -rf \"$d\"; exit 4; }; shift 2; done\n"
	"fi\n"
	"printf '%s\\n' \"$d\"\n"
	"if [ -n \"$defcwd\" ] && [ -d \"$defcwd\" ]; then echo 1; else echo 0; fi\n";

int mr_hal_setup_argv(struct mr_strvec *argv, const char *exe, const char *cwd, const char *defcwd)
{
	if (mr_strvec_push(argv, MR_SH_PATH) < 0 || mr_strvec_push(argv, "-c") < 0 ||
	    mr_strvec_push(argv, mr_hal_setup_script) < 0 || mr_strvec_push(argv, "meshrun-setup") < 0 ||
	    mr_strvec_push(argv, exe) < 0 || mr_strvec_push(argv, cwd) < 0 ||
	    mr_strvec_push(argv, defcwd) < 0 ||
	    mr_strvec_push(argv, "DIRNAME") < 0 || mr_strvec_push(argv, "WD") < 0)
		return -1;
	return 0;
}

/* The NAME of a NAME=VALUE entry is one of the variables meshrun sets (and an identifier). */
static bool export_safe(const char *entry, const char *eq)
{
	static const char *const prefixes[] = { "MLX_", "MESHRUN_", "NCCL_", "JACCL_", "OMPI_" };
	size_t len = (size_t)(eq - entry);
	char name[256];

	if (len >= sizeof(name))
		return false;
	memcpy(name, entry, len);
	name[len] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++)
		if (len > strlen(prefixes[i]) && !strncmp(name, prefixes[i], strlen(prefixes[i])))
			return mr_is_env_name(name);
	return false;
}

int mr_hal_spawn_cmdline(struct mr_buf *b, char *const *argv, char *const *env, const char *cwd)
{
	struct mr_buf in = MR_BUF_INIT, others = MR_BUF_INIT;
	int rc = mr_buf_puts(&in, "echo " MR_HAL_PGID_MARKER "$$; ");
	bool exported = false, inline_sh;

	/* meshrun's own variables by one `export` (no exec of env(1) per rank); any
	 * other name through env, which sets what a shell may refuse (bash's
	 * readonly PPID or UID, a name that is no identifier) */
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');

		if (!eq || !export_safe(env[i], eq)) {
			rc |= mr_shquote(&others, env[i]);
			rc |= mr_buf_putc(&others, ' ');
			continue;
		}
		rc |= mr_buf_puts(&in, exported ? " " : "export ");
		rc |= mr_buf_append(&in, env[i], (size_t)(eq + 1 - env[i]));
		rc |= mr_shquote(&in, eq + 1);
		exported = true;
	}
	if (exported)
		rc |= mr_buf_puts(&in, "; ");
	/* a /bin/sh -c SCRIPT (the launch's setup) runs in this /bin/sh, its
	 * arguments ours: one exec of sh fewer per command */
	inline_sh = !others.len && argv[0] && !strcmp(argv[0], MR_SH_PATH) && argv[1] &&
		    !strcmp(argv[1], "-c") && argv[2];
	if (cwd) {
		rc |= mr_buf_puts(&in, "cd ");
		rc |= mr_shquote(&in, cwd);
		rc |= mr_buf_puts(&in, inline_sh ? " || exit\n" : " && ");
	}
	if (inline_sh) {
		rc |= mr_buf_puts(&in, "\n");
		rc |= mr_buf_puts(&in, argv[2]);
	} else {
		rc |= mr_buf_puts(&in, "exec ");
		if (others.len) {
			rc |= mr_buf_puts(&in, "env ");
			rc |= mr_buf_append(&in, others.p, others.len);
		}
		rc |= mr_shquote_argv(&in, argv);
	}
	if (rc == 0)
		rc = mr_shquote_sh_c(b, mr_buf_cstr(&in), inline_sh && argv[3] ? &argv[3] : NULL);
	mr_buf_release(&others);
	mr_buf_release(&in);
	return rc ? -1 : 0;
}

int mr_hal_watchdog_cmdline(struct mr_buf *b, const char *tmp_name)
{
	char t[256];
	char *const args[] = { "meshrun-watchdog", tmp_name ? t : NULL, NULL };

	if (tmp_name && snprintf(t, sizeof(t), "M%s", tmp_name) >= (int)sizeof(t)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return mr_shquote_sh_c(b, mr_hal_watchdog_script, args);
}

int mr_hal_spare_cmdline(struct mr_buf *b, const char *token)
{
	char *const args[] = { "meshrun-spare", (char *)token, NULL };

	return mr_shquote_sh_c(b, mr_hal_spare_script, args);
}

int mr_hal_spare_line(struct mr_buf *b, const char *cmdline)
{
	size_t n = strlen(MR_SH_EXEC_C);

	/* mr_shquote_sh_c's form: the same words after the function's name */
	if (!strncmp(cmdline, MR_SH_EXEC_C, n))
		return mr_buf_puts(b, MR_HAL_SPARE_SH_C " ") < 0 ? -1 : mr_buf_puts(b, cmdline + n);
	return mr_buf_puts(b, cmdline);
}

int mr_hal_kill_cmdline(struct mr_buf *b, const char *signame, long pgid)
{
	char num[24];
	char *const args[] = { "meshrun-kill", (char *)signame, num, NULL };

	if (!signame || pgid <= 0) {
		errno = EINVAL;
		return -1;
	}
	snprintf(num, sizeof(num), "%ld", pgid);
	return mr_shquote_sh_c(b, mr_hal_kill_script, args);
}

/* --- the spawn line's pgid marker --- */

long mr_hal_marker_feed(struct mr_hal_marker *m, const char *data, size_t len, mr_hal_sink_fn out,
			void *ctx)
{
	const size_t mlen = strlen(MR_HAL_PGID_MARKER);
	const char *pre, *at, *nl, *digits;
	long pgid = 0;

	if (!m->want) {
		if (len)
			out(ctx, data, len);
		return 0;
	}
	mr_buf_append(&m->pre, data, len);
	pre = mr_buf_cstr(&m->pre);
	at = memmem(pre, m->pre.len, MR_HAL_PGID_MARKER, mlen);
	nl = at ? memchr(at, '\n', m->pre.len - (size_t)(at - pre)) : NULL;
	if (!nl) {
		if (m->pre.len > MR_HAL_PGID_SCAN_MAX)
			mr_hal_marker_flush(m, out, ctx);
		return 0;
	}
	for (digits = at + mlen; digits < nl && *digits >= '0' && *digits <= '9'; digits++)
		if (pgid < 100000000)
			pgid = pgid * 10 + (*digits - '0');
	m->want = false;
	if (at > pre)
		out(ctx, pre, (size_t)(at - pre));
	if (m->pre.len > (size_t)(nl + 1 - pre))
		out(ctx, nl + 1, m->pre.len - (size_t)(nl + 1 - pre));
	mr_buf_release(&m->pre);
	return digits == nl && pgid > 1 ? pgid : 0;
}

void mr_hal_marker_flush(struct mr_hal_marker *m, mr_hal_sink_fn out, void *ctx)
{
	if (!m->want)
		return;
	m->want = false;
	if (m->pre.len)
		out(ctx, mr_buf_cstr(&m->pre), m->pre.len);
	mr_buf_release(&m->pre);
}

/* --- signal names (sshd's and kill's) --- */

static const struct {
	int sig;
	const char *name;
} sig_names[] = {
	{ SIGHUP, "HUP" },     { SIGINT, "INT" },       { SIGQUIT, "QUIT" }, { SIGILL, "ILL" },
	{ SIGTRAP, "TRAP" },   { SIGABRT, "ABRT" },     { SIGBUS, "BUS" },   { SIGFPE, "FPE" },
	{ SIGKILL, "KILL" },   { SIGUSR1, "USR1" },     { SIGSEGV, "SEGV" }, { SIGUSR2, "USR2" },
	{ SIGPIPE, "PIPE" },   { SIGALRM, "ALRM" },     { SIGTERM, "TERM" }, { SIGCHLD, "CHLD" },
	{ SIGCONT, "CONT" },   { SIGSTOP, "STOP" },     { SIGTSTP, "TSTP" }, { SIGTTIN, "TTIN" },
	{ SIGTTOU, "TTOU" },   { SIGURG, "URG" },       { SIGXCPU, "XCPU" }, { SIGXFSZ, "XFSZ" },
	{ SIGVTALRM, "VTALRM" }, { SIGPROF, "PROF" },   { SIGWINCH, "WINCH" }, { SIGIO, "IO" },
	{ SIGSYS, "SYS" },
};

const char *mr_sh_sig_name(int sig)
{
	for (size_t i = 0; i < ARRAY_SIZE(sig_names); i++)
		if (sig_names[i].sig == sig)
			return sig_names[i].name;
	return NULL;
}

int mr_sh_sig_from_name(const char *name)
{
	if (!strncmp(name, "SIG", 3))
		name += 3;
	for (size_t i = 0; i < ARRAY_SIZE(sig_names); i++)
		if (!strcmp(sig_names[i].name, name))
			return sig_names[i].sig;
	return 0;
}
