/*
 * hal.h - the host-abstraction layer: everything meshconfig and meshrun do to a
 * host goes through one of these backends, chosen once per run.
 *
 *   local   fork/exec on this machine (127.0.0.1, localhost, meshrun -n)
 *   ssh     libssh2, one connection per host reused for every command, many hosts
 *           driven in parallel from one poll loop
 *   openssh the OpenSSH client binary, one control master per host and every
 *           command multiplexed over it (openssh/), for configurations libssh2
 *           cannot follow (ProxyCommand, ...); same rules as ssh
 *   persist libssh2 through a per-user daemon on this machine that keeps the
 *           connections open between runs (persist/; --persist)
 *   replay  commands answered from fixture files and scripted results (unit tests,
 *           meshconfig --simulate)
 *   auto    the mux (mux.c): local for this machine, ssh/openssh/persist for the rest
 *
 * Protocol:
 *   mr_hal_new_<backend>(&hal, &opts, &err)
 *   -> mr_hal_run(hal, cmds, n, &err)          batch of short commands, in parallel
 *      (mr_hal_run_cb: the same, with a callback as each command finishes)
 *   -> mr_hal_spawn(hal, &spawn, &proc, &err)  long-running processes (ranks)
 *      then loop: mr_hal_poll(hal, timeout_ms, &err) delivers output and exit
 *      events through the callbacks given in the spawn options
 *   -> mr_hal_free(hal)                        kills and reaps what is still running
 *
 * Commands are argv vectors. Remote backends turn them into one shell command line
 * (sh.h: the /bin/sh protocol): the remote sshd hands it to the user's login
 * shell (zsh on a Mac), which only sees `exec /bin/sh -c '...'`; everything else
 * runs under /bin/sh. argv[0] may be MR_SH_PATH "-c" "..." for a real shell
 * snippet (POSIX sh, BSD userland: no setsid, timeout or GNU long options).
 * Nothing is ever pasted unquoted.
 *
 * Exit status is explicit: a command either exited (status 0..255), was killed by
 * a signal (signal > 0), or the backend failed (hal_rc < 0 with the error in err):
 * "no exit status received" is MESHRUN_E_NOEXIT, never status 0.
 *
 * Ownership: mr_hal_run() copies nothing out of cmds except into the result fields,
 * which it allocates (out, errout) and the caller frees with mr_hal_cmd_release().
 * mr_hal_spawn() copies argv, env and cwd. A struct mr_proc belongs to the hal and
 * stays valid until mr_proc_release() or mr_hal_free().
 */
#ifndef MR_HAL_H
#define MR_HAL_H

#include "common/compat.h"
#include "common/buf.h"
#include "common/strvec.h"
#include "meshrun/err.h"

struct mr_hal;  /* opaque: one backend instance */
struct mr_proc; /* opaque: one spawned process */

/* One short command for mr_hal_run(); fill the inputs, read the outputs. */
struct mr_hal_cmd {
	/* inputs */
	const char *host;         /* host name as the user wrote it (ssh alias, IP, ...) */
	char *const *argv;        /* NULL-terminated */
	const void *stdin_data;   /* may be NULL: stdin is then empty (EOF at once) */
	size_t stdin_len;
	int timeout_ms;           /* <= 0: the hal's default run timeout */
	/* outputs */
	int hal_rc;               /* 0 when the command ran to an end; else MESHRUN_E_* */
	int status;               /* exit status 0..255 when hal_rc == 0 && signal == 0 */
	int signal;               /* signal number that killed it, or 0 */
	struct mr_buf out;        /* stdout (capped by the hal's max_output) */
	struct mr_buf errout;     /* stderr (capped likewise) */
	struct meshrun_err err;   /* set when hal_rc < 0; names the host */
	int64_t elapsed_ms;
};

/* Free the result buffers of a command (inputs are the caller's). */
void mr_hal_cmd_release(struct mr_hal_cmd *cmd);
/* True when the command exited 0. */
bool mr_hal_cmd_ok(const struct mr_hal_cmd *cmd);
/* "exit status 3", "killed by signal 9 (Killed)", or the hal error; static buffer per cmd. */
const char *mr_hal_cmd_describe(const struct mr_hal_cmd *cmd, char *buf, size_t n);

/* Events from spawned processes, delivered from mr_hal_poll(). */
struct mr_proc_events {
	void *ctx;
	/* A chunk of stdout/stderr: arbitrary boundaries, never split by the hal's own
	 * buffering in a way that reorders bytes. */
	void (*on_stdout)(struct mr_proc *p, const char *data, size_t len, void *ctx);
	void (*on_stderr)(struct mr_proc *p, const char *data, size_t len, void *ctx);
	/* Called exactly once: hal_rc 0 with status/signal, or hal_rc < 0 with err
	 * (connection lost, no exit status). */
	void (*on_exit)(struct mr_proc *p, int hal_rc, int status, int signal,
			const struct meshrun_err *err, void *ctx);
};

struct mr_spawn {
	const char *host;
	char *const *argv;            /* NULL-terminated; copied */
	char *const *env;             /* "K=V" strings added to the environment; copied; may be NULL */
	const char *cwd;              /* may be NULL */
	struct mr_proc_events events;
	void *user;                   /* returned by mr_proc_user() */
};

/* Which ssh remote hosts get (mr_hal_opts.ssh; --ssh, $MESHRUN_SSH). */
enum mr_hal_ssh {
	MR_HAL_SSH_AUTO = 0,  /* libssh2, unless the host's configuration needs OpenSSH */
	MR_HAL_SSH_LIBSSH2,   /* libssh2 for every host */
	MR_HAL_SSH_OPENSSH    /* the OpenSSH client for every host */
};

/* Options shared by every backend; zero means the default shown. */
struct mr_hal_opts {
	int connect_timeout_ms;       /* 10000 */
	int run_timeout_ms;           /* 30000: default deadline of mr_hal_run commands */
	size_t max_output;            /* 16 MiB per stream of a run command */
	int max_parallel;             /* 64: connections or processes started at once */
	/* ssh backend */
	const char *ssh_config;       /* ssh_config file; NULL: $MESHRUN_SSH_CONFIG, else ~/.ssh/config */
	const char *known_hosts;      /* NULL: ~/.ssh/known_hosts */
	const char *identity;         /* extra IdentityFile to try; NULL: config + defaults */
	const char *user;             /* NULL: config, else $USER */
	bool accept_new_hostkeys;     /* add unknown keys to known_hosts instead of failing */
	bool batch;                   /* never prompt (always true today: no passwords) */
	enum mr_hal_ssh ssh;          /* auto hal: which ssh remote hosts get */
	int64_t persist_ms;           /* > 0: libssh2 hosts through the persist daemon,
				       * which keeps connections this long idle
				       * (--persist, $MESHRUN_SSH_PERSIST); 0: direct */
	int ssh_spares;               /* ssh backend: shells kept started on each
				       * connected host (the "spare" command line
				       * below), which the next commands there take
				       * instead of a new channel and login shell;
				       * 0: none (the persist daemon keeps some, and
				       * sets it to 0 while it has clients: > 0 at
				       * creation allows spares, later changes say
				       * whether new ones open) */
};

/* Backends. On failure *out is NULL and err says why. */
int mr_hal_new_local(struct mr_hal **out, const struct mr_hal_opts *opts, struct meshrun_err *err);
int mr_hal_new_ssh(struct mr_hal **out, const struct mr_hal_opts *opts, struct meshrun_err *err);
/* The OpenSSH client backend: MESHRUN_E_BACKEND when no `ssh` is on PATH; its
 * control sockets go to a private 0700 directory under $XDG_RUNTIME_DIR (else
 * $TMPDIR or /tmp), refused when that is not ours. */
int mr_hal_new_openssh(struct mr_hal **out, const struct mr_hal_opts *opts, struct meshrun_err *err);
/*
 * Does host dest need the OpenSSH client? ssh_g is `ssh -G DEST`'s output
 * (OpenSSH's effective options); true when ssh_config.c finds something libssh2
 * cannot do (its libssh2_gaps: PKCS11Provider, a FIDO key, ...), the first of
 * them in why ("PKCS11Provider /x.so: libssh2 has no PKCS#11 support").
 */
bool mr_hal_openssh_needed(const char *dest, const char *ssh_g, char *why, size_t n);
/* End the daemon that opts would use: 1 when one was running (it is gone, its
 * socket removed), 0 when none was, < 0 with err. */
int mr_hal_persist_stop(const struct mr_hal_opts *opts, struct meshrun_err *err);

struct mr_replay; /* src/hal/replay.h: the scripted answers */
/* The hal takes ownership of rp (freed by mr_hal_free, or at once on failure). */
int mr_hal_new_replay(struct mr_hal **out, struct mr_replay *rp, const struct mr_hal_opts *opts,
		      struct meshrun_err *err);

/*
 * The routing backend ("auto", src/hal/mux.c) that the tools use: commands and
 * processes for this machine (mr_hal_host_is_local) go to a local backend, every
 * other host to an ssh backend: libssh2, or the OpenSSH client as opts.ssh says;
 * with MR_HAL_SSH_AUTO, a host whose options libssh2 cannot follow (ssh_config.h's
 * libssh2_gaps, as mr_hal_openssh_needed) gets the OpenSSH client, said in one
 * info line per batch. The choice and the libssh2 backend read one shared
 * ssh_config, so each host costs one `ssh -G` (all of a batch in parallel). Each inner
 * backend is made on first use (a local
 * job never reads ssh_config; a bad ssh_config fails the first remote command or
 * spawn, naming the file), both get opts. One mr_hal_poll() waits on both
 * (through their poll_prepare hooks, hal_impl.h). mr_hal_run() and
 * mr_hal_connect() hand each backend its share of the batch, the local share
 * first, then the remote one (the local commands are short: the remote hosts
 * still run in parallel among themselves).
 */
int mr_hal_new_auto(struct mr_hal **out, const struct mr_hal_opts *opts, struct meshrun_err *err);

/* The inner constructors of a routing backend (tests inject replay ones); ctx is
 * passed to both. NULL new_local/new_remote: mr_hal_new_local / mr_hal_new_ssh. */
struct mr_hal_mux_ctors {
	int (*new_local)(struct mr_hal **out, const struct mr_hal_opts *opts, void *ctx,
			 struct meshrun_err *err);
	int (*new_remote)(struct mr_hal **out, const struct mr_hal_opts *opts, void *ctx,
			  struct meshrun_err *err);
	void *ctx;
};
int mr_hal_new_mux(struct mr_hal **out, const struct mr_hal_opts *opts,
		   const struct mr_hal_mux_ctors *ctors, struct meshrun_err *err);
/* This machine: NULL or "", 127.0.0.1, localhost, ::1, or our hostname
 * (gethostname(), compared without case). */
bool mr_hal_host_is_local(const char *host);
/* The inner backend that serves host, or NULL when it is not made yet. */
struct mr_hal *mr_hal_mux_inner(struct mr_hal *hal, const char *host);

void mr_hal_free(struct mr_hal *hal);
const char *mr_hal_name(const struct mr_hal *hal);

/*
 * Run n commands (on any mix of hosts) in parallel and wait for all of them or
 * their deadlines. Returns 0 when every command got a result (check each one's
 * hal_rc/status), or a negative code for a failure of the hal itself.
 */
int mr_hal_run(struct mr_hal *hal, struct mr_hal_cmd *cmds, size_t n, struct meshrun_err *err);

/*
 * mr_hal_run() that also reports each command as it finishes (progress lines:
 * "hosts done / total"). on_done (may be NULL: plain mr_hal_run) is called
 * exactly once per command of cmds, from inside this call, as soon as that
 * command's result is final (hal_rc/status/signal/out/errout/err/elapsed_ms as
 * they will be on return), in the order the commands finish; commands that
 * failed validation or never started are reported too, at the latest just
 * before the return. on_done may read the command and update the caller's own
 * state; it must not call back into this hal (run, spawn, poll, free), with
 * one exception: mr_hal_remove_at_exit() for the command's host, which there
 * only queues the line for a watchdog that host already has (a directory a
 * command has just made is known to it at once, not when the slowest host is
 * done), and fails instead of connecting.
 */
int mr_hal_run_cb(struct mr_hal *hal, struct mr_hal_cmd *cmds, size_t n,
		  void (*on_done)(struct mr_hal_cmd *cmd, void *ctx), void *ctx,
		  struct meshrun_err *err);

/*
 * Connect to every host ahead of time (ssh: in parallel; others: no-op) so that a
 * host that cannot be reached is reported once, by name: errs[i] for hosts[i].
 * Returns the number of hosts that failed (0: all reachable).
 */
int mr_hal_connect(struct mr_hal *hal, const char *const *hosts, size_t n,
		   struct meshrun_err *errs);

/*
 * Why a connection failed where no errno says it: the backends put these into
 * the error's sys_errno (negative, so never taken for an errno; the persist
 * daemon's frames carry it). Otherwise a connection's sys_errno is its
 * connect()'s errno (ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, ...), or 0.
 */
enum mr_hal_why {
	MR_HAL_WHY_RESOLVE = -1001,         /* MESHRUN_E_CONNECT: the name does not resolve */
	MR_HAL_WHY_HOSTKEY_CHANGED = -1002, /* MESHRUN_E_HOSTKEY: another key is recorded */
};

/*
 * What to check for a failed connection, from its error (mr_hal_connect's errs,
 * a command's err): a static one-line hint that fits the failure, or NULL.
 *   name does not resolve | no answer within the timeout | nothing listens on
 *   the port (sshd off: Remote Login on a Mac) | no route | authentication
 *   refused (key not in authorized_keys, wrong user) | host key unknown | host
 *   key changed (never "accept it"). Every flag a hint names is one that both
 *   meshrun and meshconfig take (tests/unit/test_hints.c checks the table).
 * Decided on e->code and e->sys_errno (enum mr_hal_why), never on the text.
 */
const char *mr_hal_err_hint(const struct meshrun_err *e);
/* Every text mr_hal_err_hint() can return; NULL-terminated. */
extern const char *const mr_hal_hints[];

/* Start a long-running process; events arrive from mr_hal_poll(). */
int mr_hal_spawn(struct mr_hal *hal, const struct mr_spawn *sp, struct mr_proc **out,
		 struct meshrun_err *err);
/* Queue bytes for the process's stdin (copied); len 0 does nothing. */
int mr_proc_write(struct mr_proc *p, const void *data, size_t len, struct meshrun_err *err);
/* Close its stdin once the queued bytes are written. */
int mr_proc_close_stdin(struct mr_proc *p, struct meshrun_err *err);
/* Send a signal to the process's whole process group, on its host. */
int mr_proc_signal(struct mr_proc *p, int sig, struct meshrun_err *err);
bool mr_proc_exited(const struct mr_proc *p);
void *mr_proc_user(const struct mr_proc *p);
const char *mr_proc_host(const struct mr_proc *p);
/* Forget an exited process (a running one is killed first: TERM, a short grace,
 * KILL, to its whole group; no callbacks). Called from inside a callback, the
 * release happens when mr_hal_poll() returns. */
void mr_proc_release(struct mr_proc *p);

/*
 * Wait up to timeout_ms (-1: until something happens) for I/O on every spawned
 * process and deliver events. Returns the number of processes still running, or
 * a negative code. Signals interrupt the wait and return early (not an error).
 * With nothing to wait for (no running process, no watched fd) it returns at
 * once, even for -1. Callbacks must not call mr_hal_poll() or mr_hal_free();
 * mr_hal_run() does not deliver spawn events (it waits for its own commands).
 */
int mr_hal_poll(struct mr_hal *hal, int timeout_ms, struct meshrun_err *err);

/*
 * Have host's watchdog remove dir (rm -rf) when this hal goes away, by
 * mr_hal_free() or because this process died (SIGKILL included), after the
 * processes it spawned there are killed. For a job directory that must not
 * outlive its launcher; removing it earlier yourself is fine. dir must be
 * absolute, or a file name (no '/'): that name in the host's ${TMPDIR:-/tmp};
 * free of newlines (MESHRUN_E_INVAL). Register a name *before* the command that
 * creates it (the ssh backend sends the first one with the watchdog's own
 * command, ahead of any later channel): then no instant exists when the
 * directory is there and no watchdog knows it. A name is a directory: the
 * ssh backends' watchdog makes it at once (mkdir -m 700) and writes its mark
 * there (MR_HAL_WATCHDOG_MARK), so the command that creates it must take one
 * that is already there, owned by the user and no link. Until an absolute dir is
 * registered after it (the creating command is over), a watchdog left alone
 * waits a second before it removes, for a creation still under way. The local and ssh backends
 * keep one watchdog per host (a shell reading a pipe or channel: EOF means we
 * are gone), which also kills our still registered process groups; the replay
 * backend ignores this call.
 */
int mr_hal_remove_at_exit(struct mr_hal *hal, const char *host, const char *dir,
			  struct meshrun_err *err);
/*
 * True when the backend itself removes every directory given to
 * mr_hal_remove_at_exit() for host when the hal is freed (the persist backend:
 * its daemon does, in the background, also when we are killed): the caller
 * need not run an `rm` of its own at the end.
 */
bool mr_hal_removes_at_free(struct mr_hal *hal, const char *host);
/*
 * True when host's watchdog makes and marks a name given to
 * mr_hal_remove_at_exit() itself (the ssh, openssh and persist backends: "M"
 * names, sh.h), so that the command creating it can wait for the mark and
 * never write into a directory a stopped host would keep unmarked; false for
 * the local backend (it marks after the command) and replay.
 */
bool mr_hal_makes_dirs(struct mr_hal *hal, const char *host);

/* The liveness mark a watchdog writes into each directory it removes at exit
 * (sh.h: "D" and "M" names): one line "HOST PID"; a later job's setup sweeps a
 * directory whose mark names this host and a pid that is no watchdog any more. */
#define MR_HAL_WATCHDOG_MARK ".meshrun-watchdog"
/* sh: VAR = this host's name as marks carry it (uname -n; from /proc without
 * an exec where Linux has it): the watchdog that writes a mark and the setup
 * that sweeps by it must agree */
#define MR_HAL_SH_HOSTNAME(var) \
	"{ read -r " var " </proc/sys/kernel/hostname; } 2>/dev/null || " var "=$(uname -n)"

/* Add an fd (say, our own stdin) to the poll set: cb runs when it is readable. */
int mr_hal_watch_fd(struct mr_hal *hal, int fd, void (*cb)(int fd, void *ctx), void *ctx);
void mr_hal_unwatch_fd(struct mr_hal *hal, int fd);

#endif
