/*
 * array.h - making room in a plain C array that its owner keeps as a pointer,
 * a count and an allocated size (git's ALLOC_GROW, without the exit).
 *
 *	struct foo *v = mr_array_grow(s->foos, s->nfoos + 1, &s->alloc, sizeof(*v));
 *	if (!v)
 *		return MESHRUN_E_NOMEM;	 (s->foos is untouched and still owned)
 *	s->foos = v;
 *
 * The array doubles (from at least 8 elements) so n pushes cost O(n).
 */
#ifndef MR_ARRAY_H
#define MR_ARRAY_H

#include "common/compat.h"

/*
 * Returns an array of at least `need` elements of `size` bytes holding v's
 * contents (v itself when *alloc already suffices; then possibly NULL for
 * need 0), updating *alloc; NULL with errno ENOMEM on failure, v unchanged.
 */
void *mr_array_grow(void *v, size_t need, size_t *alloc, size_t size);

#endif
