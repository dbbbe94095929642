/*
 * compat.h - the prelude: included first by every .c file of the project.
 *
 * Standard headers every module uses, small macros, and banned.h so that the
 * unsafe string and number calls cannot creep back in.
 *
 * src/common is a set of small modules with no project dependencies, one
 * header each (its contract): err (errors with messages), log and progress
 * (what the tools print), opt and optdoc (the option tables, --help and the
 * docs), num (checked number parsing), buf, strvec, array and xalloc (memory),
 * fdio (fd I/O), json (cJSON with paths in errors), shquote (shell quoting and
 * the /bin/sh wrapper for remote scripts), timeutil, envmap (the MLX
 * environment contract), port (Linux and macOS behind one set of calls) and
 * spawn (the one fork/exec and PATH search).
 */
#ifndef MR_COMPAT_H
#define MR_COMPAT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MR_MAX(a, b) ((a) > (b) ? (a) : (b))
/* Free and forget: the pointer cannot be used or freed twice. */
#define MR_FREE(p) do { free(p); (p) = NULL; } while (0)

#define MR_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define MR_UNUSED __attribute__((unused))

/* static, unless unit tests need to reach the function (curl's UNITTEST). */
#ifdef MESHRUN_UNIT_TESTS
#define MR_TESTABLE
#else
#define MR_TESTABLE static
#endif

#include "common/banned.h"

#endif
