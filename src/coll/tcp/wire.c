#include "common/compat.h"
#include "coll/le.h"
#include "coll/tcp/wire.h"
#include "common/err.h"

size_t mr_hello_encode(const struct mr_hello *h, unsigned char *buf)
{
	size_t tl = MR_MIN(h->token_len, (size_t)MR_TOKEN_MAX);

	memcpy(buf, MR_WIRE_MAGIC, 4);
	mr_put_le16(buf + 4, h->version);
	mr_put_le16(buf + 6, h->lane);
	mr_put_le32(buf + 8, h->rank);
	mr_put_le32(buf + 12, h->size);
	mr_put_le32(buf + 16, h->nconn);
	mr_put_le16(buf + 20, (unsigned)tl);
	mr_put_le16(buf + 22, 0);
	memcpy(buf + MR_HELLO_FIXED, h->token, tl);
	return MR_HELLO_FIXED + tl;
}

int mr_hello_decode(const unsigned char *buf, size_t len, struct mr_hello *h,
		    struct meshrun_err *err)
{
	size_t m = MR_MIN(len, (size_t)4);

	if (memcmp(buf, MR_WIRE_MAGIC, m) != 0)
		return mr_err_set(err, MESHRUN_E_PROTO, "not a meshrun ring connection (bad magic)");
	if (len < MR_HELLO_FIXED)
		return MR_HELLO_FIXED;
	unsigned version = mr_get_le16(buf + 4);
	if (version != MR_WIRE_VERSION)
		return mr_err_set(err, MESHRUN_E_PROTO, "protocol version %u, this library speaks %u", version, MR_WIRE_VERSION);
	size_t tl = mr_get_le16(buf + 20);
	if (tl > MR_TOKEN_MAX || mr_get_le16(buf + 22) != 0)
		return mr_err_set(err, MESHRUN_E_PROTO, "malformed hello (token length %zu)", tl);
	if (len < MR_HELLO_FIXED + tl)
		return (int)(MR_HELLO_FIXED + tl);
	h->version = version;
	h->lane = mr_get_le16(buf + 6);
	h->rank = mr_get_le32(buf + 8);
	h->size = mr_get_le32(buf + 12);
	h->nconn = mr_get_le32(buf + 16);
	h->token_len = tl;
	memcpy(h->token, buf + MR_HELLO_FIXED, tl);
	return 0;
}

int mr_hello_check(const struct mr_hello *h, uint32_t want_rank, uint32_t size, uint32_t nconn,
		   const char *token, size_t token_len, struct meshrun_err *err)
{
	if (h->token_len != token_len || memcmp(h->token, token, token_len) != 0)
		return mr_err_set(err, MESHRUN_E_AUTH, "job token does not match (a connection from another job?)");
	if (h->size != size)
		return mr_err_set(err, MESHRUN_E_PROTO, "peer says group size %u, ours is %u", h->size, size);
	if (h->nconn != nconn)
		return mr_err_set(err, MESHRUN_E_PROTO, "peer says %u connections per neighbour, ours is %u", h->nconn, nconn);
	if (h->rank != want_rank)
		return mr_err_set(err, MESHRUN_E_PROTO, "peer says it is rank %u, expected rank %u", h->rank, want_rank);
	if (h->lane != MR_LANE_P2P && h->lane >= nconn)
		return mr_err_set(err, MESHRUN_E_PROTO, "lane %u out of range (nconn %u)", h->lane, nconn);
	return 0;
}

void mr_frame_encode(const struct mr_frame_hdr *f, unsigned char *buf)
{
	memset(buf, 0, MR_FRAME_HDR);
	buf[0] = (unsigned char)f->type;
	mr_put_le32(buf + 4, f->src);
	mr_put_le32(buf + 8, f->dst);
	mr_put_le64(buf + 16, f->len);
}

int mr_frame_decode(const unsigned char *buf, uint32_t size, struct mr_frame_hdr *f,
		    struct meshrun_err *err)
{
	f->type = buf[0];
	f->src = mr_get_le32(buf + 4);
	f->dst = mr_get_le32(buf + 8);
	f->len = mr_get_le64(buf + 16);
	if (f->type < MR_FRAME_HB || f->type > MR_FRAME_ABORT)
		return mr_err_set(err, MESHRUN_E_PROTO, "unknown frame type %u", f->type);
	if (f->src >= size || f->dst >= size)
		return mr_err_set(err, MESHRUN_E_PROTO, "frame names rank %u -> %u outside the group of %u", f->src, f->dst, size);
	if (f->type == MR_FRAME_HB && f->len != 0)
		return mr_err_set(err, MESHRUN_E_PROTO, "heartbeat with %llu payload bytes", (unsigned long long)f->len);
	if (f->type == MR_FRAME_ABORT && f->len > MR_FRAME_MAX_ABORT)
		return mr_err_set(err, MESHRUN_E_PROTO, "abort message of %llu bytes", (unsigned long long)f->len);
	if (f->len > ((uint64_t)1 << 40))
		return mr_err_set(err, MESHRUN_E_PROTO, "message of %llu bytes is too large", (unsigned long long)f->len);
	return 0;
}
