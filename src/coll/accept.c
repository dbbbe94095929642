/*
 * accept.c - the accept gate of libmeshrun's TCP listeners (accept.h).
 */
#include "common/compat.h"
#include "coll/accept.h"
#include "coll/tcp/wire.h"

size_t mr_accept_pick(size_t n, mr_accept_use_fn *use, void *ctx, bool *evict)
{
	size_t oldest = n;
	uint64_t oldest_seq = 0;

	*evict = false;
	for (size_t i = 0; i < n; i++) {
		const struct mr_accept_stamp *st = NULL;
		enum mr_accept_use u = use(ctx, i, &st);
		if (u == MR_ACCEPT_FREE)
			return i;
		if (u == MR_ACCEPT_PENDING && (oldest == n || st->seq < oldest_seq)) {
			oldest = i;
			oldest_seq = st->seq;
		}
	}
	*evict = oldest < n;
	return oldest;
}

void mr_accept_admit(struct mr_accept_gate *g, struct mr_accept_stamp *st, int64_t now)
{
	st->since = now;
	st->seq = ++g->accepted;
}

bool mr_accept_expired(const struct mr_accept_stamp *st, int64_t now)
{
	return now - st->since >= MR_ACCEPT_WAIT_MS;
}

int mr_accept_poll_ms(const struct mr_accept_stamp *st, int64_t now, int timeout_ms)
{
	return (int)MR_MIN((int64_t)timeout_ms, MR_MAX(st->since + MR_ACCEPT_WAIT_MS - now, (int64_t)0));
}

bool mr_accept_token_equal(const unsigned char *a, size_t alen, const char *b, size_t blen)
{
	unsigned char diff = alen != blen;

	for (size_t i = 0; i < alen && i < blen; i++)
		diff |= (unsigned char)(a[i] ^ (unsigned char)b[i]);
	return diff == 0;
}

size_t mr_accept_hello(unsigned char *buf, int rank, int size, unsigned lane, uint32_t nconn,
		       const char *token, size_t token_len)
{
	struct mr_hello h;

	memset(&h, 0, sizeof(h));
	h.version = MR_WIRE_VERSION;
	h.lane = lane;
	h.rank = (uint32_t)rank;
	h.size = (uint32_t)size;
	h.nconn = nconn;
	h.token_len = token_len;
	memcpy(h.token, token, token_len);
	return mr_hello_encode(&h, buf);
}
