/*
 * buf.h - a growable byte buffer, always NUL-terminated, with an optional cap.
 *
 * struct mr_buf b = MR_BUF_INIT; the caller owns the struct, the buffer owns
 * b.p. mr_buf_release() frees it and leaves an empty buffer; mr_buf_detach()
 * hands b.p to the caller (who frees it) and leaves an empty buffer. b.p is
 * NULL until the first append; mr_buf_cstr() returns "" then.
 * Appends fail with -1 (errno ENOMEM, or E2BIG past the cap) and leave the
 * buffer as it was.
 */
#ifndef MR_BUF_H
#define MR_BUF_H

#include "common/compat.h"

struct mr_buf {
	char *p;
	size_t len;   /* bytes in use, not counting the NUL */
	size_t alloc; /* bytes allocated */
	size_t max;   /* 0: no cap; else len never exceeds max */
};

#define MR_BUF_INIT { NULL, 0, 0, 0 }

int mr_buf_reserve(struct mr_buf *b, size_t extra);
int mr_buf_append(struct mr_buf *b, const void *data, size_t n);
int mr_buf_puts(struct mr_buf *b, const char *s);
int mr_buf_putc(struct mr_buf *b, char c);
int mr_buf_printf(struct mr_buf *b, const char *fmt, ...) MR_PRINTF(2, 3);
int mr_buf_vprintf(struct mr_buf *b, const char *fmt, va_list ap) MR_PRINTF(2, 0);
/* Drop the first n bytes (a consumed prefix). */
void mr_buf_consume(struct mr_buf *b, size_t n);
void mr_buf_reset(struct mr_buf *b); /* len = 0, keep memory */
void mr_buf_release(struct mr_buf *b);
char *mr_buf_detach(struct mr_buf *b, size_t *len);
const char *mr_buf_cstr(const struct mr_buf *b);

#endif
