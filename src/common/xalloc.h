/*
 * xalloc.h - allocation for the tools (meshrun, meshconfig, meshsim) only:
 * print and exit(1) on out-of-memory, as redis and dropbear do. Never used in
 * src/coll: a collectives library lives inside someone else's process and
 * returns MESHRUN_E_NOMEM instead.
 */
#ifndef MR_XALLOC_H
#define MR_XALLOC_H

#include "common/compat.h"

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
void *xreallocarray(void *p, size_t nmemb, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) MR_PRINTF(1, 2);

#endif
