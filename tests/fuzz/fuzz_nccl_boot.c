/*
 * fuzz_nccl_boot.c - the nccl backend's id exchange (coll/nccl_boot.c): a
 * request as rank 0 reads it on NCCL_PORT (decoded in the pieces serve_conn()
 * asks for) and judged, and the 12-byte answer header a fetching rank reads.
 * Input: 2 bytes (world size, ranks served), the request, and the last 12
 * bytes of the input as an answer header.
 */
#include "fuzz.h"
#include "coll/nccl_boot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mr_nccl_boot b;
	bool served[256];
	const unsigned char *token = NULL;
	size_t need = MR_NCCL_BOOT_REQ_FIXED, token_len = 0;
	int rank = -1, wsize = -1, rc;

	if (size < 2 + MR_NCCL_BOOT_REPLY_FIXED)
		return 0;
	memset(&b, 0, sizeof(b));
	b.size = data[0] + 1;
	for (int r = 0; r < b.size; r++)
		served[r] = r < 8 && (data[1] >> r) & 1;
	memcpy(b.token, "0123456789abcdef", 16);
	b.token_len = 16;

	unsigned status = 0;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	rc = mr_nccl_boot_reply_decode(data + size - MR_NCCL_BOOT_REPLY_FIXED, &status, &err);
	fuzz_check_err(rc, &err, "mr_nccl_boot_reply_decode");

	const unsigned char *req = data + 2;
	size_t len = size - 2;
	for (;;) {
		struct meshrun_err e = MESHRUN_ERR_INIT;
		if (len < need)
			return 0; /* the connection stalls: serve_conn() times out */
		rc = mr_nccl_boot_req_decode(req, need, &rank, &wsize, &token, &token_len, &e);
		fuzz_check_err(rc, &e, "mr_nccl_boot_req_decode");
		if (rc <= 0)
			break;
		/* serve_conn() reads into a fixed buffer of this size */
		FUZZ_ASSERT((size_t)rc > need && (size_t)rc <= MR_NCCL_BOOT_REQ_FIXED + MR_NCCL_BOOT_TOKEN_MAX);
		need = (size_t)rc;
	}
	if (rc < 0)
		return 0;
	FUZZ_ASSERT(token == req + MR_NCCL_BOOT_REQ_FIXED && token_len <= MR_NCCL_BOOT_TOKEN_MAX);
	status = mr_nccl_boot_judge(&b, served, rank, wsize, token, token_len);
	if (status == MR_NCCL_BOOT_OK)
		FUZZ_ASSERT(rank >= 1 && rank < b.size && !served[rank] && token_len == b.token_len);
	return 0;
}
