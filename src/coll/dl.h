/*
 * dl.h - load an optional library of libmeshrun (libmpi, the CUDA runtime,
 * libnccl) by the first of several names that loads. Never closed here:
 * the caller owns the handle.
 */
#ifndef MR_COLL_DL_H
#define MR_COLL_DL_H

#include "common/compat.h"

#include <dlfcn.h>

/*
 * dlopen(names[i], flags) for i = 0, 1, ... until one loads; *name (may be
 * NULL) gets the name that loaded. Else NULL, *name = names[0], and why gets
 * the first name's dlerror (the one that matters: the others are fallbacks).
 */
static inline void *mr_dl_open_first(const char *const *names, size_t n, int flags,
				     const char **name, char *why, size_t cap)
{
	for (size_t i = 0; i < n; i++) {
		void *h = dlopen(names[i], flags);
		if (h) {
			if (name)
				*name = names[i];
			return h;
		}
		const char *e = dlerror();
		if (i == 0)
			snprintf(why, cap, "%s", e ? e : "unknown error");
	}
	if (name)
		*name = names[0];
	return NULL;
}

#endif
