/*
 * err.h - filling a struct meshrun_err (include/meshrun/err.h).
 *
 * Messages follow git's rules: lower-case, no trailing period, the failure first,
 * the subject in single quotes: "open 'hosts.json': No such file or directory".
 * The first message recorded wins; later calls only return their code, so the
 * innermost cause survives and callers add context with mr_err_prefix().
 */
#ifndef MR_ERR_H
#define MR_ERR_H

#include "common/compat.h"
#include "meshrun/err.h"

/* Record (code, message) unless an error is already recorded; return code. */
int mr_err_set(struct meshrun_err *err, int code, const char *fmt, ...) MR_PRINTF(3, 4);
/* Same with code MESHRUN_E_SYS and ": strerror(errno)" appended (errno kept). */
int mr_err_sys(struct meshrun_err *err, const char *fmt, ...) MR_PRINTF(2, 3);
/* Same with an explicit errno value (for getaddrinfo-style or saved errors). */
int mr_err_errno(struct meshrun_err *err, int errnum, int code, const char *fmt, ...)
	MR_PRINTF(4, 5);
/* Put "<prefix>: " in front of the recorded message (context from the caller). */
void mr_err_prefix(struct meshrun_err *err, const char *fmt, ...) MR_PRINTF(2, 3);
/* Forget the recorded error. */
void mr_err_clear(struct meshrun_err *err);

#endif
