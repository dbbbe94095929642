#include "common/compat.h"
#include "common/array.h"

void *mr_array_grow(void *v, size_t need, size_t *alloc, size_t size)
{
	size_t a = *alloc ? *alloc : 8;
	void *p;

	if (need <= *alloc)
		return v;
	while (a < need) {
		if (a > SIZE_MAX / 2)
			goto nomem;
		a *= 2;
	}
	/* checked here, not left to reallocarray: sanitizers abort on its overflow */
	if (size && a > SIZE_MAX / size)
		goto nomem;
	p = realloc(v, a * size);
	if (!p)
		return NULL;
	*alloc = a;
	return p;
nomem:
	errno = ENOMEM;
	return NULL;
}
