/*
 * fuzz_hostfile.c - the hostfile JSON (--hostfile, meshconfig's output) as
 * meshrun and meshconfig read it: parse, check the rdma matrix both ways, and
 * a hostfile that parsed and emits must parse again to the same emitted bytes.
 */
#include "fuzz.h"
#include "hostfile/hostfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hostfile *hf = NULL, *again = NULL;
	struct mr_buf out = MR_BUF_INIT, out2 = MR_BUF_INIT;
	int rc = mr_hostfile_parse((const char *)data, size, "fuzz.json", &hf, &err);

	fuzz_check_err(rc, &err, "mr_hostfile_parse");
	if (rc < 0)
		return 0;
	for (int mesh = 0; mesh < 2; mesh++) {
		struct meshrun_err e = MESHRUN_ERR_INIT;
		fuzz_check_err(mr_hostfile_check_rdma(hf, mesh, &e), &e, "mr_hostfile_check_rdma");
	}
	struct meshrun_err e = MESHRUN_ERR_INIT;
	rc = mr_hostfile_emit(hf, &out, &e);
	fuzz_check_err(rc, &e, "mr_hostfile_emit");
	if (rc == 0) {
		struct meshrun_err e2 = MESHRUN_ERR_INIT;
		rc = mr_hostfile_parse(out.p, out.len, "emitted.json", &again, &e2);
		if (rc < 0) {
			fprintf(stderr, "emitted hostfile does not parse: %s\n%.*s\n", e2.msg, (int)out.len, out.p);
			abort();
		}
		FUZZ_ASSERT(mr_hostfile_emit(again, &out2, &e2) == 0);
		FUZZ_ASSERT(out.len == out2.len && memcmp(out.p, out2.p, out.len) == 0);
	}
	mr_buf_release(&out);
	mr_buf_release(&out2);
	mr_hostfile_free(again);
	mr_hostfile_free(hf);
	return 0;
}
