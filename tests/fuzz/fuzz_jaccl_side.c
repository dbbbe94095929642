/*
 * fuzz_jaccl_side.c - what rank 0 of a jaccl job reads on its coordinator
 * port (coll/jaccl_side.c): a hello, read as serve() reads it (24 bytes, then
 * the token) and checked by mr_jaccl_side_check_hello(); then frame headers
 * (mr_jaccl_frame_check) and an all-gather reply (mr_jaccl_blobs_decode).
 * Input: 2 bytes (group size, ranks already connected), the 24-byte hello and
 * its token, then 24-byte frame headers while the first byte of each is < 4,
 * then the all-gather reply.
 */
#include "fuzz.h"
#include "coll/jaccl_types.h"

static const char token[] = "fedcba9876543210fedcba9876543210";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mr_jaccl_side s;
	int fds[256];
	struct mr_hello h;
	size_t off = 2;
	int rc;

	if (size < 2 + MR_HELLO_FIXED)
		return 0;
	memset(&s, 0, sizeof(s));
	s.size = data[0] + 1;
	s.fd = fds;
	for (int r = 0; r < s.size; r++)
		fds[r] = (r < 8 && (data[1] >> r) & 1) ? 100 + r : -1;
	s.token_len = sizeof(token) - 1;
	memcpy(s.token, token, s.token_len);
	s.timeout_ms = 1000;

	/* hello: the fixed part, then as many more bytes as decode says */
	struct meshrun_err err = MESHRUN_ERR_INIT;
	rc = mr_hello_decode(data + off, MR_HELLO_FIXED, &h, &err);
	fuzz_check_err(rc, &err, "mr_hello_decode");
	if (rc > 0) {
		FUZZ_ASSERT((size_t)rc > MR_HELLO_FIXED && (size_t)rc <= MR_HELLO_MAX);
		if (size - off < (size_t)rc)
			return 0;
		rc = mr_hello_decode(data + off, (size_t)rc, &h, &err);
		fuzz_check_err(rc, &err, "mr_hello_decode");
		FUZZ_ASSERT(rc <= 0);
	}
	if (rc == 0) {
		off += MR_HELLO_FIXED + h.token_len;
		struct meshrun_err e = MESHRUN_ERR_INIT;
		rc = mr_jaccl_side_check_hello(&s, &h, &e);
		fuzz_check_err(rc, &e, "mr_jaccl_side_check_hello");
		if (rc == 0)
			FUZZ_ASSERT(h.rank >= 1 && h.rank < (uint32_t)s.size && fds[h.rank] < 0);
	} else {
		off += MR_HELLO_FIXED;
	}
	while (size - off >= MR_FRAME_HDR && data[off] < 4) {
		struct mr_frame_hdr f;
		struct meshrun_err e = MESHRUN_ERR_INIT;
		rc = mr_jaccl_frame_check(data + off, s.size, MR_JACCL_MAX_BLOB, &f, &e);
		fuzz_check_err(rc, &e, "mr_jaccl_frame_check");
		if (rc == 0)
			FUZZ_ASSERT(f.len <= MR_JACCL_MAX_BLOB && f.type != MR_FRAME_HB);
		off += MR_FRAME_HDR;
	}
	struct mr_jaccl_blob *b = NULL;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	rc = mr_jaccl_blobs_decode(data + off, size - off, s.size, &b, &e);
	fuzz_check_err(rc, &e, "mr_jaccl_blobs_decode");
	if (rc == 0) {
		size_t total = 0;
		for (int r = 0; r < s.size; r++)
			total += 4 + b[r].len;
		FUZZ_ASSERT(total == size - off);
		mr_jaccl_blobs_free(b, s.size);
	}
	return 0;
}
