/*
 * fuzz_ring_wire.c - what a ring rank reads from a connection to its
 * listening port before and after authentication (coll/tcp/wire.c): the hello,
 * fed in the pieces ring_conn.c's read_hello() asks for, checked as the
 * accepting side checks it, then control-lane frame headers.
 * Input: 4 bytes (group size, nconn, the rank expected), the hello stream,
 * then 24-byte frame headers.
 */
#include "fuzz.h"
#include "coll/tcp/wire.h"

static const char token[] = "0123456789abcdef0123456789abcdef";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char in[MR_HELLO_MAX];
	size_t inoff = 0, off = 4;
	struct mr_hello h;
	int rc;

	if (size < 4)
		return 0;
	uint32_t gsize = (uint32_t)data[0] + 1, nconn = (uint32_t)(data[1] % 8) + 1;
	uint32_t want = data[2] % gsize;
	size_t chunk = (size_t)(data[3] % 32) + 1;	/* bytes per recv() */

	memset(&h, 0x5a, sizeof(h));
	for (;;) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		rc = mr_hello_decode(in, inoff, &h, &err);
		fuzz_check_err(rc, &err, "mr_hello_decode");
		if (rc <= 0)
			break;
		/* what read_hello() then asks for must fit its buffer */
		FUZZ_ASSERT((size_t)rc > inoff && (size_t)rc <= MR_HELLO_MAX);
		size_t n = MR_MIN((size_t)rc - inoff, MR_MIN(chunk, size - off));
		if (n == 0)
			return 0; /* the peer stopped sending: the connection times out */
		memcpy(in + inoff, data + off, n);
		inoff += n;
		off += n;
	}
	if (rc < 0)
		return 0;
	FUZZ_ASSERT(h.token_len <= MR_TOKEN_MAX);
	struct meshrun_err err = MESHRUN_ERR_INIT;
	rc = mr_hello_check(&h, want, gsize, nconn, token, sizeof(token) - 1, &err);
	fuzz_check_err(rc, &err, "mr_hello_check");
	if (rc == 0) {
		FUZZ_ASSERT(h.token_len == sizeof(token) - 1);
		FUZZ_ASSERT(h.lane == MR_LANE_P2P || h.lane < nconn);
		/* what ring_conn.c indexes with it: have_in[lane or nconn] */
		FUZZ_ASSERT(h.rank == want && h.size == gsize);
	}
	while (size - off >= MR_FRAME_HDR) {
		struct mr_frame_hdr f;
		struct meshrun_err e = MESHRUN_ERR_INIT;
		rc = mr_frame_decode(data + off, gsize, &f, &e);
		fuzz_check_err(rc, &e, "mr_frame_decode");
		if (rc == 0) {
			FUZZ_ASSERT(f.src < gsize && f.dst < gsize);
			FUZZ_ASSERT(f.type >= MR_FRAME_HB && f.type <= MR_FRAME_ABORT);
			FUZZ_ASSERT(f.type != MR_FRAME_ABORT || f.len <= MR_FRAME_MAX_ABORT);
		}
		off += MR_FRAME_HDR;
	}
	return 0;
}
