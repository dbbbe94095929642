/*
 * strvec.h - a growable, NULL-terminated vector of owned strings (argv, envp).
 *
 * struct mr_strvec v = MR_STRVEC_INIT; v.v is NULL until the first push, then
 * always NULL-terminated; every string is a copy the vector owns and frees in
 * mr_strvec_release(). Pushes return 0, or -1 with errno ENOMEM.
 */
#ifndef MR_STRVEC_H
#define MR_STRVEC_H

#include "common/compat.h"

struct mr_strvec {
	char **v;
	size_t nr, alloc;
};

#define MR_STRVEC_INIT { NULL, 0, 0 }

int mr_strvec_push(struct mr_strvec *sv, const char *s);
int mr_strvec_pushf(struct mr_strvec *sv, const char *fmt, ...) MR_PRINTF(2, 3);
/* Push every string of a NULL-terminated array. */
int mr_strvec_pushv(struct mr_strvec *sv, char *const *v);
/* Split s at each sep (empty fields kept unless skip_empty). */
int mr_strvec_split(struct mr_strvec *sv, const char *s, char sep, bool skip_empty);
/* Set NAME=VALUE in an environment-style vector, replacing an earlier NAME. */
int mr_strvec_setenv(struct mr_strvec *sv, const char *name, const char *value);
/* The value of NAME in an environment-style vector, or NULL. */
const char *mr_strvec_getenv(const struct mr_strvec *sv, const char *name);
void mr_strvec_release(struct mr_strvec *sv);

#endif
