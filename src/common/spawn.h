/*
 * spawn.h - start a program: the one fork/exec and the one PATH search of the
 * tree (modelled on libuv's uv_spawn and git's start_command).
 *
 * mr_spawn_child() resolves the program on PATH (mr_which), forks with every
 * signal blocked, and in the child: resets every signal disposition to the
 * default and the mask to empty, optionally starts a process group or a
 * session, puts opts->fds on 0, 1 and 2, optionally closes everything above,
 * changes directory and execs. The child calls only async-signal-safe
 * functions. A failed dup/chdir/exec is reported through a close-on-exec pipe
 * and comes back as MESHRUN_E_EXEC naming the program (the child is reaped),
 * never as an exit status 127.
 *
 * Ownership: the caller keeps argv, envp and the fds (the child gets copies);
 * on success *pid is the caller's to wait for.
 */
#ifndef MR_SPAWN_H
#define MR_SPAWN_H

#include "common/compat.h"
#include "meshrun/err.h"

#include <sys/types.h>

enum {
	MR_SPAWN_SETPGID = 1 << 0,  /* the child leads a process group of its own */
	MR_SPAWN_SETSID = 1 << 1,   /* ... and a session (no controlling terminal) */
	MR_SPAWN_CLOSE_FDS = 1 << 2 /* close every fd above 2 (for daemons such as sshd) */
};

struct mr_spawn_opts {
	const char *file;    /* the program; NULL: argv[0], searched on path_var */
	char *const *argv;   /* NULL-terminated */
	char *const *envp;   /* NULL: this process's environment */
	const char *path_var; /* PATH to search; NULL: envp's PATH, else ours */
	const char *cwd;     /* NULL: ours */
	const char *what;    /* for messages ("'dot' on '127.0.0.1'"); NULL: argv[0] */
	int fds[3];          /* become 0, 1, 2; -1: /dev/null */
	unsigned flags;      /* MR_SPAWN_* */
};

int mr_spawn_child(const struct mr_spawn_opts *opts, pid_t *pid, struct meshrun_err *err);

/*
 * mr_spawn_child() with the child's stdio made here (opts->fds are ignored):
 * stdin a socketpair when want_stdin (write with mr_send_nosig: no SIGPIPE, no
 * change of signal dispositions) else empty (a pipe without writer: EOF at once,
 * not depending on /dev/null being intact), stdout and stderr pipes. On success
 * *pid is the caller's to wait for and fds[0..2] hold the parent's ends, all
 * non-blocking and close-on-exec (fds[0] is -1 without stdin); the caller
 * closes them. On failure nothing is left open or running, fds are all -1.
 */
int mr_spawn_piped(const struct mr_spawn_opts *opts, bool want_stdin, pid_t *pid, int fds[3],
		   struct meshrun_err *err);

/*
 * The file execvp() would run for name: name itself when it holds a '/', else
 * the first regular executable file in path's directories (an empty entry is
 * the current directory; NULL path: $PATH, else /usr/local/bin:/usr/bin:/bin).
 * Malloc'd; NULL with errno ENOENT (none), EACCES (found, not executable) or
 * ENOMEM.
 */
char *mr_which(const char *name, const char *path);

#endif
