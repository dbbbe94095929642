/*
 * bench_topo.c - time src/topo on generated clusters: parsing every host's
 * output, the ring search, the IP plan and the hostfile, for mesh:N and ring:N.
 * Usage: bench-topo [SPEC...]   (default: mesh:12 mesh:64 ring:64 ring:128)
 */
#include "common/compat.h"

#include <time.h>

#include "fixture/fixture.h"
#include "topo/topo.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int bench(const char *spec)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_fixture_set *g = NULL;
	struct mr_topo_cluster *c = NULL;
	struct mr_topo_choice ch = { 0 };
	struct mr_topo_plan plan = { 0 };
	struct mr_hostfile *hf = NULL;
	double t0, t1, t2, t3, t4;
	int rc = 1;

	if (mr_fixture_gen(spec, &g, &err) < 0)
		goto out;
	c = mr_topo_cluster_new();
	t0 = now_ms();
	for (size_t i = 0; i < g->nhosts; i++)
		if (mr_topo_cluster_add_host(c, g->hosts[i].name, g->hosts[i].sp_json,
					     strlen(g->hosts[i].sp_json), g->hosts[i].hwports,
					     g->hosts[i].ibv, &err) < 0)
			goto out;
	if (mr_topo_cluster_finish(c, &err) < 0)
		goto out;
	t1 = now_ms();
	if (mr_topo_choose(c, MR_TOPO_BACKEND_AUTO, &ch, &err) < 0)
		goto out;
	t2 = now_ms();
	if (mr_topo_plan_build(c, NULL, &plan, &err) < 0)
		goto out;
	t3 = now_ms();
	if (mr_topo_hostfile(c, &plan, &ch, NULL, NULL, &hf, &err) < 0)
		goto out;
	t4 = now_ms();
	printf("%-12s hosts %3zu cables %5zu  parse %8.2f ms  choose(ring search) %8.2f ms  plan %6.2f ms  hostfile %6.2f ms  total %8.2f ms  -> %s\n",
	       spec, c->nhosts, c->ncables, t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0,
	       mr_topo_backend_name(ch.backend));
	rc = 0;
out:
	if (rc)
		fprintf(stderr, "bench-topo: %s: %s\n", spec, err.msg);
	mr_hostfile_free(hf);
	mr_topo_plan_release(&plan);
	mr_topo_choice_release(&ch);
	mr_topo_cluster_free(c);
	mr_fixture_set_free(g);
	return rc;
}

int main(int argc, char **argv)
{
	static const char *const def[] = { "mesh:12", "mesh:64", "ring:64", "ring:128" };
	int rc = 0;

	if (argc > 1)
		for (int i = 1; i < argc; i++)
			rc |= bench(argv[i]);
	else
		for (size_t i = 0; i < ARRAY_SIZE(def); i++)
			rc |= bench(def[i]);
	return rc;
}
