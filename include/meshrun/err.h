/*
 * meshrun/err.h - error codes and the error sink shared by libmeshrun and the tools.
 *
 * Every fallible call returns 0 on success or a negative MESHRUN_E_* code, and
 * fills a caller-owned struct meshrun_err with a one-line message that names what
 * failed (host, file, field, system call): the first message recorded wins, so the
 * innermost, most specific cause is kept. Passing NULL for the sink is allowed.
 *
 *	struct meshrun_err err = MESHRUN_ERR_INIT;
 *	if (meshrun_init(&g, MESHRUN_BACKEND_ANY, 0, &err) < 0)
 *		fprintf(stderr, "error: %s\n", err.msg);
 */
#ifndef MESHRUN_ERR_H
#define MESHRUN_ERR_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(MESHRUN_BUILDING)
#define MESHRUN_API __attribute__((visibility("default")))
#else
#define MESHRUN_API
#endif

/* X(name, value, text): one table for code, name and text. */
#define MESHRUN_ERRNO_MAP(X)                                                   \
	X(OK, 0, "success")                                                    \
	X(SYS, -1, "system call failed")                                       \
	X(NOMEM, -2, "out of memory")                                          \
	X(INVAL, -3, "invalid argument")                                       \
	X(PARSE, -4, "malformed input")                                        \
	X(TIMEOUT, -5, "timed out")                                            \
	X(PEER, -6, "peer failed or closed the connection")                    \
	X(PROTO, -7, "protocol error")                                         \
	X(NOTFOUND, -8, "not found")                                           \
	X(UNSUPPORTED, -9, "not supported")                                    \
	X(AUTH, -10, "authentication failed")                                  \
	X(HOSTKEY, -11, "host key verification failed")                        \
	X(CONNECT, -12, "connection failed")                                   \
	X(NOEXIT, -13, "no exit status received")                              \
	X(EXEC, -14, "could not execute program")                              \
	X(BACKEND, -15, "backend unavailable")                                 \
	X(USAGE, -16, "usage error")                                           \
	X(CANCELED, -17, "canceled")

enum meshrun_errcode {
#define MESHRUN_ERR_ENUM(name, value, text) MESHRUN_E_##name = (value),
	MESHRUN_ERRNO_MAP(MESHRUN_ERR_ENUM)
#undef MESHRUN_ERR_ENUM
};

#define MESHRUN_ERR_MSG_MAX 1024

struct meshrun_err {
	int code;                      /* MESHRUN_E_*: negative; 0 means no error */
	int sys_errno;                 /* errno of the failing call, or 0 (inside the tools, the
	                                  host layer also keeps a negative reason here: hal.h) */
	char msg[MESHRUN_ERR_MSG_MAX]; /* "connect to 'node3:22': Connection refused" */
};

#define MESHRUN_ERR_INIT { 0, 0, { 0 } }

/* Static text for a code ("timed out"); never NULL. */
MESHRUN_API const char *meshrun_strerror(int code);
/* Static name for a code ("TIMEOUT"); never NULL. */
MESHRUN_API const char *meshrun_errname(int code);

#ifdef __cplusplus
}
#endif
#endif
