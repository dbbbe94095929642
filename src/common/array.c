#include "common/compat.h"
#include "common/array.h"

void *mr_array_grow(void *v, size_t need, size_t *alloc, size_t size)
{
	size_t a = *alloc ? *alloc : 8;
	void *p;

	if (need <= *alloc)
		return v;
	while (a < need) {
		if (a > SIZE_MAX / 2) {
			errno = ENOMEM;
			return NULL;
		}
		a *= 2;
	}
	p = reallocarray(v, a, size);
	if (!p)
		return NULL;
	*alloc = a;
	return p;
}
