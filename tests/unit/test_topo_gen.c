/*
 * test_topo_gen.c - generated topologies (src/topo/gen.c) from 2 to 64 hosts go
 * through the whole pipeline and agree with the cluster.json the generator
 * wrote; plus the ring search on big rings and meshes.
 */
#include "common/compat.h"

#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/err.h"
#include "common/json.h"
#include "fixture/fixture.h"
#include "topo/topo.h"

static struct mr_topo_cluster *cluster_of(const struct mr_fixture_set *g)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_topo_cluster *c = mr_topo_cluster_new();

	assert_non_null(c);
	for (size_t i = 0; i < g->nhosts; i++) {
		const struct mr_fixture_host *h = &g->hosts[i];

		if (mr_topo_cluster_add_host(c, h->name, h->sp_json, strlen(h->sp_json), h->hwports,
					     h->ibv, &err) < 0)
			fail_msg("%s: %s", g->spec, err.msg);
	}
	if (mr_topo_cluster_finish(c, &err) < 0)
		fail_msg("%s: %s", g->spec, err.msg);
	return c;
}

static void check_spec(const char *spec)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_fixture_set *g = NULL;
	struct mr_topo_cluster *c;
	struct mr_topo_choice ch;
	struct mr_topo_plan plan;
	struct mr_hostfile *hf = NULL;
	cJSON *cj = NULL;
	const cJSON *exp, *v, *row, *cell;
	size_t i, j;
	int rc;

	if (mr_fixture_gen(spec, &g, &err) < 0)
		fail_msg("%s: %s", spec, err.msg);
	assert_int_equal(mr_json_parse(g->cluster_json, strlen(g->cluster_json), spec, &cj, &err), 0);
	exp = mr_json_member(cj, "expect");
	c = cluster_of(g);
	assert_int_equal(c->nonesided, 0);
	assert_int_equal(c->notes.nr, 0);

	/* unique interface names per host, all valid */
	for (i = 0; i < c->nhosts; i++)
		for (j = 1; j < c->hosts[i].nports; j++)
			assert_true(strcmp(c->hosts[i].ports[j - 1].ifname, c->hosts[i].ports[j].ifname) < 0);

	i = 0;
	cJSON_ArrayForEach(row, mr_json_member(exp, "connectivity")) {
		j = 0;
		cJSON_ArrayForEach(cell, row) {
			if ((unsigned)cell->valueint != mr_topo_conn(c, i, j))
				fail_msg("%s: conn[%zu][%zu]", spec, i, j);
			j++;
		}
		i++;
	}
	assert_int_equal(i, c->nhosts);
	/* the cables the generator laid, with both ends' interface names */
	v = mr_json_member(exp, "cables");
	assert_int_equal(cJSON_GetArraySize(v), c->ncables);
	cJSON_ArrayForEach(row, v) {
		bool found = false;

		for (size_t k = 0; k < c->ncables && !found; k++) {
			const struct mr_topo_cable *cb = &c->cables[k];

			found = !strcmp(c->hosts[cb->host[0]].name, cJSON_GetArrayItem(row, 0)->valuestring) &&
				!strcmp(c->hosts[cb->host[0]].ports[cb->port[0]].ifname,
					cJSON_GetArrayItem(row, 1)->valuestring) &&
				!strcmp(c->hosts[cb->host[1]].name, cJSON_GetArrayItem(row, 2)->valuestring) &&
				!strcmp(c->hosts[cb->host[1]].ports[cb->port[1]].ifname,
					cJSON_GetArrayItem(row, 3)->valuestring);
		}
		assert_true(found);
	}

	rc = mr_topo_choose(c, MR_TOPO_BACKEND_AUTO, &ch, &err);
	v = mr_json_member(exp, "backend");
	if (v && cJSON_IsNull(v)) {
		assert_int_equal(rc, MESHRUN_E_NOTFOUND);
		goto out_gen;
	}
	if (rc < 0)
		fail_msg("%s: %s", spec, err.msg);
	if (v)
		assert_string_equal(mr_topo_backend_name(ch.backend), v->valuestring);
	v = mr_json_member(exp, "verdict");
	if (v)
		assert_string_equal(ch.mesh ? "mesh" : ch.has_ring ? "ring" : "neither", v->valuestring);
	v = mr_json_member(exp, "ring");
	if (v) {
		i = 0;
		cJSON_ArrayForEach(cell, v)
			assert_string_equal(cell->valuestring, c->hosts[ch.ring.order[i++]].name);
		assert_int_equal(ch.ring.cables, mr_json_member(exp, "ring_cables")->valueint);
	}
	/* whatever ring was found is a real ring */
	if (ch.has_ring)
		for (i = 0; i < ch.ring.n; i++)
			assert_true(mr_topo_conn(c, ch.ring.order[i], ch.ring.order[(i + 1) % ch.ring.n]) > 0);

	assert_int_equal(mr_topo_plan_build(c, NULL, &plan, &err), 0);
	assert_int_equal(plan.nlinks, c->ncables);
	for (i = 0; i < plan.nlinks; i++) {
		/* MLX's counter: cable k -> 192.168.(k/64).(4*(k%64)) /30 */
		char want[32];

		snprintf(want, sizeof(want), "192.168.%zu.%zu", i / 64, 4 * (i % 64) + 1);
		assert_string_equal(plan.links[i].ip[0], want);
	}
	assert_int_equal(mr_topo_hostfile(c, &plan, &ch, NULL, NULL, &hf, &err), 0);
	assert_int_equal(hf->nhosts, c->nhosts);
	if (ch.backend != MR_TOPO_BACKEND_RING)
		assert_int_equal(mr_hostfile_check_rdma(hf, ch.backend == MR_TOPO_BACKEND_JACCL, &err), 0);
	else
		for (i = 0; i < hf->nhosts; i++)
			assert_int_equal(hf->hosts[i].ips.nr, ch.ring.cables);
	mr_hostfile_free(hf);
	mr_topo_plan_release(&plan);
	mr_topo_choice_release(&ch);
out_gen:
	cJSON_Delete(cj);
	mr_topo_cluster_free(c);
	mr_fixture_set_free(g);
}

static void test_generated(void **state)
{
	static const char *const specs[] = {
		"mesh:2", "ring:2", "mesh:3", "ring:3", "mesh:4", "ring:4", "mesh:5", "ring:5",
		"mesh:8", "ring:8", "ring:8,cables=2", "mesh:4,cables=2", "mesh:12", "ring:16",
		"mesh:4,missing=h1-h3", "mesh:6,missing=h1-h3,missing=h2-h5", "ring:4,nordma=h2",
		"ring:6,nordma=h2,nordma=h5", "mesh:4,nordma=h4", "ring:6,missing=h3-h4",
		"mesh:3,missing=h1-h2", "ring:5,speed=40", "mesh:4,speed=120", "ring:32",
		"mesh:32", "ring:64", "mesh:64", "ring:64,cables=2",
		"rings:2x2", "rings:3x4", "rings:4x3,cables=2", "rings:16x16", "rings:3x5,missing=h1-h5",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(specs); i++)
		check_spec(specs[i]);
}

static void test_generated_expectations(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_fixture_set *g = NULL;
	struct mr_topo_cluster *c;
	struct mr_topo_choice ch;

	(void)state;
	/* mesh:4 minus h1-h3 still has the ring h1-h2-h3-h4 */
	assert_int_equal(mr_fixture_gen("mesh:4,missing=h1-h3", &g, &err), 0);
	c = cluster_of(g);
	assert_int_equal(mr_topo_choose(c, MR_TOPO_BACKEND_AUTO, &ch, &err), 0);
	assert_false(ch.mesh);
	assert_int_equal(ch.backend, MR_TOPO_BACKEND_JACCL_RING);
	mr_topo_choice_release(&ch);
	mr_topo_cluster_free(c);
	mr_fixture_set_free(g);

	/* rings:3x4: h1-h2-h3-h4-h1, h5..h8, h9..h12, joined h4-h5, h8-h9, h12-h1 */
	assert_int_equal(mr_fixture_gen("rings:3x4", &g, &err), 0);
	c = cluster_of(g);
	assert_int_equal(c->nhosts, 12);
	assert_int_equal(c->ncables, 15);
	assert_true(mr_topo_conn(c, 0, 3) > 0);
	assert_true(mr_topo_conn(c, 3, 4) > 0);
	assert_true(mr_topo_conn(c, 4, 7) > 0);
	assert_true(mr_topo_conn(c, 11, 0) > 0);
	assert_int_equal(mr_topo_conn(c, 0, 4), 0);
	assert_int_equal(mr_topo_conn(c, 3, 8), 0);
	assert_int_equal(mr_topo_choose(c, MR_TOPO_BACKEND_AUTO, &ch, &err), 0);
	assert_false(ch.mesh);
	assert_true(ch.has_ring);
	assert_int_equal(ch.backend, MR_TOPO_BACKEND_JACCL_RING);
	mr_topo_choice_release(&ch);
	mr_topo_cluster_free(c);
	mr_fixture_set_free(g);

	/* ring with a host without RDMA -> plain ring, the host named */
	assert_int_equal(mr_fixture_gen("ring:4,nordma=h2", &g, &err), 0);
	c = cluster_of(g);
	assert_int_equal(mr_topo_choose(c, MR_TOPO_BACKEND_AUTO, &ch, &err), 0);
	assert_int_equal(ch.backend, MR_TOPO_BACKEND_RING);
	assert_int_equal(ch.no_rdma.nr, 1);
	assert_string_equal(ch.no_rdma.v[0], "h2");
	mr_topo_choice_release(&ch);
	mr_topo_cluster_free(c);
	mr_fixture_set_free(g);

	/* a ring missing one of its cables: two dead ends, named */
	assert_int_equal(mr_fixture_gen("ring:6,missing=h3-h4", &g, &err), 0);
	c = cluster_of(g);
	assert_int_equal(mr_topo_choose(c, MR_TOPO_BACKEND_AUTO, &ch, &err), MESHRUN_E_NOTFOUND);
	assert_non_null(strstr(err.msg, "fewer than 2 cabled neighbours: h3, h4"));
	assert_non_null(strstr(err.msg, "--dot"));
	mr_topo_cluster_free(c);
	mr_fixture_set_free(g);
}

/* The verdict and the note MLX prints for a generated spec. */
static void mesh_verdict(const char *spec, bool mesh, size_t a, size_t b, const char *note)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_fixture_set *g = NULL;
	struct mr_topo_cluster *c;
	struct mr_topo_choice ch;
	size_t ma = SIZE_MAX, mb = SIZE_MAX;
	const char *got = NULL;

	if (mr_fixture_gen(spec, &g, &err) < 0)
		fail_msg("%s: %s", spec, err.msg);
	c = cluster_of(g);
	if (mr_topo_is_mesh(c, &ma, &mb) != mesh)
		fail_msg("%s: mr_topo_is_mesh says %s", spec, mesh ? "not a mesh" : "mesh");
	if (!mesh && (ma != a || mb != b))
		fail_msg("%s: names the pair %zu-%zu, want %zu-%zu", spec, ma, mb, a, b);
	if (mr_topo_choose(c, MR_TOPO_BACKEND_AUTO, &ch, &err) < 0)
		fail_msg("%s: %s", spec, err.msg);
	if (ch.mesh != mesh)
		fail_msg("%s: choice says mesh=%d", spec, ch.mesh);
	for (size_t k = 0; k < ch.notes.nr; k++)
		if (!strncmp(ch.notes.v[k], "not a full mesh", 15))
			got = ch.notes.v[k];
	if (note ? !got || strcmp(got, note) : got != NULL)
		fail_msg("%s: note '%s', want '%s'", spec, got ? got : "(none)", note ? note : "(none)");
	mr_topo_choice_release(&ch);
	mr_topo_cluster_free(c);
	mr_fixture_set_free(g);
}

/*
 * The mesh check: a 4- and an 8-mesh with each one of their cables missing in
 * turn (first pair, neighbours, the last host...), the pair named; doubled
 * cables (more cables than a mesh needs, still one pair uncabled); two pairs
 * missing, both named. A check that counts cables or skips a row or column of
 * pairs fails here.
 */
static void test_mesh_check(void **state)
{
	static const char *const bases[] = { "mesh:4", "mesh:8", "mesh:4,cables=2" };
	char spec[64], note[96];

	(void)state;
	for (size_t m = 0; m < ARRAY_SIZE(bases); m++) {
		size_t n = bases[m][5] - '0';

		mesh_verdict(bases[m], true, 0, 0, NULL);
		for (size_t a = 0; a < n; a++)
			for (size_t b = a + 1; b < n; b++) {
				snprintf(spec, sizeof(spec), "%s,missing=h%zu-h%zu", bases[m], b + 1, a + 1);
				snprintf(note, sizeof(note), "not a full mesh: h%zu is not cabled to h%zu", a + 1, b + 1);
				mesh_verdict(spec, false, a, b, note);
			}
	}
	mesh_verdict("mesh:8,missing=h8-h7,missing=h2-h7", false, 1, 6,
		     "not a full mesh: h2 is not cabled to h7; h7 to h8");
	mesh_verdict("ring:4", false, 0, 2, "not a full mesh: h1 is not cabled to h3; h2 to h4");
}

static void test_gen_bad_specs(void **state)
{
	static const char *const bad[] = {
		"", "mesh", "mesh:", "mesh:1", "mesh:999", "star:4", "mesh:4,cables=0",
		"mesh:4,cables=9", "mesh:4,missing=h1-h9", "mesh:4,missing=h1-h1", "ring:4,nordma=x",
		"ring:4,foo=1", "ring:4,missing", "mesh:-3", "mesh:4x",
		"rings:4", "rings:1x4", "rings:4x1", "rings:17x16", "rings:4x", "rings:x4", "rings:4x4x4",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		struct mr_fixture_set *g = NULL;

		if (mr_fixture_gen(bad[i], &g, &err) == 0)
			fail_msg("spec '%s' accepted", bad[i]);
		assert_null(g);
		assert_non_null(strstr(err.msg, "topology '"));
	}
}

/* write a generated set to disk and load it back as a fixture */
static void test_gen_write_load(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_fixture_set *g = NULL;
	struct mr_fixture *f = NULL;
	char dir[] = "/tmp/test_topo_gen_XXXXXX", sub[256], cmd[300];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(sub, sizeof(sub), "%s/ring8", dir);
	assert_int_equal(mr_fixture_gen("ring:8,cables=2,nordma=h3", &g, &err), 0);
	if (mr_fixture_gen_write(g, sub, &err) < 0)
		fail_msg("%s", err.msg);
	if (mr_fixture_load(sub, &f, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(f->nhosts, 8);
	assert_string_equal(f->hosts[2].name, "h3");
	assert_non_null(f->hosts[2].en0);
	assert_int_equal(f->cluster->ncables, 16);
	assert_int_equal(f->cluster->hosts[2].rdma_devs.nr, 0);
	assert_int_equal(f->cluster->hosts[3].rdma_devs.nr, 5);
	mr_fixture_free(f);
	mr_fixture_set_free(g);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_generated),
		cmocka_unit_test(test_generated_expectations),
		cmocka_unit_test(test_mesh_check),
		cmocka_unit_test(test_gen_bad_specs),
		cmocka_unit_test(test_gen_write_load),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
