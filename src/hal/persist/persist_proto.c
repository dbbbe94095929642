/*
 * persist_proto.c - frames of the persist daemon's socket (persist_proto.h).
 * Pure: no I/O, so tests/unit/test_hal_persist.c checks every bound.
 */
#include "common/compat.h"
#include "hal/persist/persist_proto.h"

#include <stdint.h>

static void be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

int mr_pf_begin(struct mr_buf *b, uint8_t type, uint32_t id, size_t *start)
{
	unsigned char h[MR_PF_HEADER];

	be32(h, 0);
	h[4] = type;
	be32(h + 5, id);
	*start = b->len;
	return mr_buf_append(b, h, sizeof(h));
}

int mr_pf_put_u32(struct mr_buf *b, uint32_t v)
{
	unsigned char p[4];

	be32(p, v);
	return mr_buf_append(b, p, 4);
}

int mr_pf_put_i32(struct mr_buf *b, int32_t v)
{
	return mr_pf_put_u32(b, (uint32_t)v);
}

int mr_pf_put_bytes(struct mr_buf *b, const void *data, size_t len)
{
	if (len >= MR_PF_FRAME_MAX)
		return -1;
	if (mr_pf_put_u32(b, (uint32_t)len) < 0)
		return -1;
	return len ? mr_buf_append(b, data, len) : 0;
}

int mr_pf_put_str(struct mr_buf *b, const char *s)
{
	if (!s)
		return mr_pf_put_u32(b, UINT32_MAX);
	return mr_pf_put_bytes(b, s, strlen(s));
}

int mr_pf_put_strv(struct mr_buf *b, char *const *v)
{
	uint32_t n = 0;

	while (v && v[n])
		n++;
	if (mr_pf_put_u32(b, n) < 0)
		return -1;
	for (uint32_t i = 0; i < n; i++)
		if (mr_pf_put_str(b, v[i]) < 0)
			return -1;
	return 0;
}

int mr_pf_put_err(struct mr_buf *b, const struct meshrun_err *e)
{
	if (mr_pf_put_i32(b, e ? e->code : 0) < 0 || mr_pf_put_i32(b, e ? e->sys_errno : 0) < 0)
		return -1;
	return mr_pf_put_str(b, e && e->code ? e->msg : NULL);
}

int mr_pf_end(struct mr_buf *b, size_t start)
{
	size_t len = b->len - start - 4;

	if (b->len < start + MR_PF_HEADER || len > MR_PF_FRAME_MAX)
		return -1;
	be32((unsigned char *)b->p + start, (uint32_t)len);
	return 0;
}

int mr_pf_next(const struct mr_buf *in, size_t *off, struct mr_pf_frame *f)
{
	const unsigned char *p = (const unsigned char *)in->p + *off;
	size_t avail = in->len - *off;
	uint32_t len;

	if (avail < 4)
		return 0;
	len = get_be32(p);
	if (len < MR_PF_HEADER - 4 || len > MR_PF_FRAME_MAX)
		return -1;
	if (avail - 4 < len)
		return 0;
	f->type = p[4];
	f->id = get_be32(p + 5);
	f->body = p + MR_PF_HEADER;
	f->len = len - (MR_PF_HEADER - 4);
	*off += 4 + (size_t)len;
	return 1;
}

void mr_pf_reader_init(struct mr_pf_reader *r, const struct mr_pf_frame *f)
{
	r->p = f->body;
	r->left = f->len;
	r->bad = false;
}

uint32_t mr_pf_get_u32(struct mr_pf_reader *r)
{
	uint32_t v;

	if (r->bad || r->left < 4) {
		r->bad = true;
		return 0;
	}
	v = get_be32(r->p);
	r->p += 4;
	r->left -= 4;
	return v;
}

int32_t mr_pf_get_i32(struct mr_pf_reader *r)
{
	uint32_t u = mr_pf_get_u32(r);
	int32_t v;

	memcpy(&v, &u, sizeof(v)); /* two's complement, without implementation-defined casts */
	return v;
}

void mr_pf_get_bytes(struct mr_pf_reader *r, const char **data, size_t *len)
{
	uint32_t n = mr_pf_get_u32(r);

	*data = NULL;
	*len = 0;
	if (r->bad || n == UINT32_MAX)
		return;
	if (n > r->left) {
		r->bad = true;
		return;
	}
	*data = (const char *)r->p;
	*len = n;
	r->p += n;
	r->left -= n;
}

int mr_pf_get_str(struct mr_pf_reader *r, char **out)
{
	const char *d;
	size_t n;

	*out = NULL;
	mr_pf_get_bytes(r, &d, &n);
	if (r->bad)
		return -1;
	if (!d)
		return 0;
	if (memchr(d, '\0', n)) {
		r->bad = true;
		return -1;
	}
	*out = malloc(n + 1);
	if (!*out) {
		r->bad = true;
		return -1;
	}
	memcpy(*out, d, n);
	(*out)[n] = '\0';
	return 0;
}

void mr_pf_get_err(struct mr_pf_reader *r, struct meshrun_err *e)
{
	const char *d;
	size_t n;

	e->code = mr_pf_get_i32(r);
	e->sys_errno = mr_pf_get_i32(r);
	mr_pf_get_bytes(r, &d, &n);
	if (n >= sizeof(e->msg))
		n = sizeof(e->msg) - 1;
	if (d)
		memcpy(e->msg, d, n);
	e->msg[n] = '\0';
	if (e->code > 0) /* codes are negative: anything else is a broken peer */
		r->bad = true;
}

int mr_pf_get_strv(struct mr_pf_reader *r, struct mr_strvec *sv)
{
	uint32_t n = mr_pf_get_u32(r);

	/* each string takes 4 bytes at least: a count beyond that is a lie */
	if (r->bad || n > r->left / 4) {
		r->bad = true;
		return -1;
	}
	for (uint32_t i = 0; i < n; i++) {
		char *s;

		if (mr_pf_get_str(r, &s) < 0 || !s || mr_strvec_push(sv, s) < 0) {
			free(s);
			r->bad = true;
			return -1;
		}
		free(s);
	}
	return 0;
}
