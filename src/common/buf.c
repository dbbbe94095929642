#include "common/compat.h"
#include "common/buf.h"

int mr_buf_reserve(struct mr_buf *b, size_t extra)
{
	size_t need;

	if (extra > SIZE_MAX - b->len - 1) {
		errno = ENOMEM;
		return -1;
	}
	need = b->len + extra + 1;
	if (b->max && b->len + extra > b->max) {
		errno = E2BIG;
		return -1;
	}
	if (need <= b->alloc)
		return 0;
	size_t alloc = b->alloc ? b->alloc : 64;
	while (alloc < need)
		alloc = alloc > SIZE_MAX / 2 ? need : alloc * 2;
	char *p = realloc(b->p, alloc);
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	b->p = p;
	b->alloc = alloc;
	return 0;
}

int mr_buf_append(struct mr_buf *b, const void *data, size_t n)
{
	if (mr_buf_reserve(b, n) < 0)
		return -1;
	if (n)
		memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

int mr_buf_puts(struct mr_buf *b, const char *s)
{
	return mr_buf_append(b, s, strlen(s));
}

int mr_buf_putc(struct mr_buf *b, char c)
{
	return mr_buf_append(b, &c, 1);
}

int mr_buf_vprintf(struct mr_buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	va_copy(cp, ap);
	n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0)
		return -1;
	if (mr_buf_reserve(b, (size_t)n) < 0)
		return -1;
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int mr_buf_printf(struct mr_buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = mr_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

void mr_buf_consume(struct mr_buf *b, size_t n)
{
	if (n >= b->len) {
		mr_buf_reset(b);
		return;
	}
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
	b->p[b->len] = '\0';
}

void mr_buf_reset(struct mr_buf *b)
{
	b->len = 0;
	if (b->p)
		b->p[0] = '\0';
}

void mr_buf_release(struct mr_buf *b)
{
	MR_FREE(b->p);
	b->len = b->alloc = 0;
}

char *mr_buf_detach(struct mr_buf *b, size_t *len)
{
	char *p = b->p;

	if (!p)
		p = calloc(1, 1);
	if (len)
		*len = b->len;
	b->p = NULL;
	b->len = b->alloc = 0;
	return p;
}

const char *mr_buf_cstr(const struct mr_buf *b)
{
	return b->p ? b->p : "";
}
