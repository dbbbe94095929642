#include "common/compat.h"
#include "bench_meshrun.h"
#include "bench_common.h"
#include "common/opt.h"

struct ctx {
	struct meshrun_group *g;
	struct meshrun_err *err;
	enum meshrun_dtype dt;
};

static int m_barrier(void *arg)
{
	struct ctx *c = arg;

	return meshrun_barrier(c->g, c->err);
}

static int m_sum(void *arg, void *buf, size_t count)
{
	struct ctx *c = arg;

	return meshrun_all_sum(c->g, buf, buf, count, c->dt, c->err);
}

int bench_meshrun_main(int argc, char **argv, const char *prog, enum meshrun_backend backend,
		       const char *label, const char *usage)
{
	struct bench_opts o = { BENCH_DEFAULT_SIZES, label, 5, NULL, BENCH_FLOAT32 };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct meshrun_group *g = NULL;
	struct bench_sizes sz;
	void *buf = NULL;
	int rc = bench_opts_parse(argc, argv, usage, &o, &sz, &err);

	if (rc == MR_OPT_HELP)
		return 0;
	if (rc != MR_OPT_OK) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		return 2;
	}
	if (o.backend && strcmp(o.backend, "any") == 0) {
		backend = MESHRUN_BACKEND_ANY;
	} else if (o.backend) {
		fprintf(stderr, "%s: --backend: 'any' or nothing (the program's own), got '%s'\n", prog, o.backend);
		return 2;
	}
	if (meshrun_init(&g, backend, MESHRUN_STRICT, &err) < 0) {
		fprintf(stderr, "%s: %s\n", prog, err.msg);
		return 1;
	}
	if (meshrun_rank(g) == 0) /* which backend the rows are of */
		fprintf(stderr, "%s: backend %s, %d ranks\n", prog, meshrun_backend_name(g), meshrun_size(g));
	static const enum meshrun_dtype dts[] = { [BENCH_FLOAT32] = MESHRUN_FLOAT32,
						  [BENCH_FLOAT16] = MESHRUN_FLOAT16,
						  [BENCH_BFLOAT16] = MESHRUN_BFLOAT16 };
	struct ctx c = { g, &err, dts[o.dtype] };
	struct bench_peer peer = { meshrun_rank(g), meshrun_size(g), m_barrier, m_sum, &c };
	size_t maxb = bench_max_bytes(&sz);
	buf = malloc(maxb);
	rc = 0;
	if (!buf) {
		fprintf(stderr, "%s: out of memory for %zu bytes\n", prog, maxb);
		rc = 1;
	}
	for (size_t i = 0; buf && i < sz.n && rc == 0; i++) {
		rc = bench_run_size(&peer, &o, sz.bytes[i], buf);
		if (rc < 0)
			fprintf(stderr, "%s: rank %d: %s\n", prog, peer.rank, err.msg);
	}
	free(buf);
	meshrun_free(g);
	return rc ? 1 : 0;
}
