/*
 * test_topo.c - src/topo on every shipped fixture (fixtures/<cluster>/): the
 * connectivity, verdict, backend, ring, IP plan and hostfile must equal the
 * expectations in its cluster.json; DOT must render with `dot` when installed.
 */
#include "common/compat.h"

#include <dirent.h>
#include <setjmp.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/json.h"
#include "fixture/fixture.h"
#include "topo/topo.h"

static const cJSON *expect_of(const struct mr_fixture *f, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(mr_json_member(f->json, "expect"), key);
}

static void check_strlist(const char *what, const char *fx, const cJSON *want,
			  const struct mr_strvec *got)
{
	size_t i = 0;
	const cJSON *it;

	if (!want)
		return;
	if ((size_t)cJSON_GetArraySize(want) != got->nr)
		fail_msg("%s: %s: expected %d names, got %zu", fx, what, cJSON_GetArraySize(want), got->nr);
	cJSON_ArrayForEach(it, want)
		assert_string_equal(it->valuestring, got->v[i++]);
}

static void check_fixture(const char *dir, const char *fx)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_fixture *f = NULL;
	struct mr_topo_choice ch;
	struct mr_topo_plan plan;
	struct mr_strvec *ips;
	struct mr_hostfile *hf = NULL;
	struct mr_buf b = MR_BUF_INIT;
	const cJSON *conn, *row, *cell, *v;
	const struct mr_topo_cluster *c;
	size_t i, j;
	int rc;

	rc = mr_fixture_load(dir, &f, &err);
	if (rc < 0)
		fail_msg("%s: %s", fx, err.msg);
	c = f->cluster;

	/* connectivity */
	conn = expect_of(f, "connectivity");
	assert_non_null(conn);
	assert_int_equal(cJSON_GetArraySize(conn), c->nhosts);
	i = 0;
	cJSON_ArrayForEach(row, conn) {
		j = 0;
		cJSON_ArrayForEach(cell, row) {
			if ((unsigned)cell->valueint != mr_topo_conn(c, i, j))
				fail_msg("%s: conn[%zu][%zu] = %u, expected %d", fx, i, j,
					 mr_topo_conn(c, i, j), cell->valueint);
			j++;
		}
		i++;
	}
	v = expect_of(f, "onesided");
	if (v)
		assert_int_equal(c->nonesided, v->valueint);

	/* verdict and backend */
	rc = mr_topo_choose(c, MR_TOPO_BACKEND_AUTO, &ch, &err);
	v = expect_of(f, "backend");
	assert_non_null(v);
	if (cJSON_IsNull(v)) {
		const cJSON *e = expect_of(f, "error");

		if (rc == 0)
			fail_msg("%s: expected no backend, got %s", fx, mr_topo_backend_name(ch.backend));
		assert_int_equal(rc, MESHRUN_E_NOTFOUND);
		assert_non_null(strstr(err.msg, "--dot"));
		if (e && !strstr(err.msg, e->valuestring))
			fail_msg("%s: error '%s' lacks '%s'", fx, err.msg, e->valuestring);
		/* a forced backend fails too */
		mr_err_clear(&err);
		assert_int_equal(mr_topo_choose(c, MR_TOPO_BACKEND_RING, &ch, &err),
				 MESHRUN_E_NOTFOUND);
		mr_fixture_free(f);
		return;
	}
	if (rc < 0)
		fail_msg("%s: %s", fx, err.msg);
	assert_string_equal(mr_topo_backend_name(ch.backend), v->valuestring);
	v = expect_of(f, "verdict");
	assert_string_equal(ch.mesh ? "mesh" : ch.has_ring ? "ring" : "neither", v->valuestring);
	check_strlist("no_rdma", fx, expect_of(f, "no_rdma"), &ch.no_rdma);
	check_strlist("tb4", fx, expect_of(f, "tb4"), &ch.tb4);
	v = expect_of(f, "ring");
	if (v) {
		assert_true(ch.has_ring);
		assert_int_equal(ch.ring.n, cJSON_GetArraySize(v));
		i = 0;
		cJSON_ArrayForEach(cell, v)
			assert_string_equal(cell->valuestring, c->hosts[ch.ring.order[i++]].name);
		assert_int_equal(ch.ring.cables, expect_of(f, "ring_cables")->valueint);
	}

	/* IP plan: one /30 per cable, in MLX's order */
	if (mr_topo_plan_build(c, NULL, &plan, &err) < 0)
		fail_msg("%s: %s", fx, err.msg);
	v = expect_of(f, "links");
	assert_int_equal(plan.nlinks, cJSON_GetArraySize(v));
	i = 0;
	cJSON_ArrayForEach(row, v) {
		const struct mr_topo_link *l = &plan.links[i++];

		assert_string_equal(cJSON_GetArrayItem(row, 0)->valuestring, c->hosts[l->host[0]].name);
		assert_string_equal(cJSON_GetArrayItem(row, 1)->valuestring, l->ifname[0]);
		assert_string_equal(cJSON_GetArrayItem(row, 2)->valuestring, l->ip[0]);
		assert_string_equal(cJSON_GetArrayItem(row, 3)->valuestring, c->hosts[l->host[1]].name);
		assert_string_equal(cJSON_GetArrayItem(row, 4)->valuestring, l->ifname[1]);
		assert_string_equal(cJSON_GetArrayItem(row, 5)->valuestring, l->ip[1]);
	}
	/* commands: bridge0 down first, then two per cable end */
	for (i = 0; i < c->nhosts; i++) {
		size_t ends = 0;

		for (j = 0; j < plan.nlinks; j++)
			ends += (plan.links[j].host[0] == i) + (plan.links[j].host[1] == i);
		assert_int_equal(plan.cmds[i].nr, 1 + 2 * ends);
		assert_string_equal(plan.cmds[i].v[0].argv.v[1], "bridge0");
	}

	/* hostfile, with the en0 addresses of cluster.json as MLX's add_ips finds them */
	ips = calloc(c->nhosts, sizeof(*ips));
	assert_non_null(ips);
	for (i = 0; i < c->nhosts; i++)
		if (f->hosts[i].en0)
			assert_int_equal(mr_strvec_push(&ips[i], f->hosts[i].en0), 0);
	if (mr_topo_hostfile(c, &plan, &ch, ips, NULL, &hf, &err) < 0)
		fail_msg("%s: %s", fx, err.msg);
	assert_int_equal(mr_hostfile_emit(hf, &b, &err), 0);
	{
		cJSON *got = cJSON_Parse(mr_buf_cstr(&b)), *h;
		int nmesh = 0;

		assert_non_null(got);
		/* MLX's hostfile plus meshrun's "mesh_ips" exactly on a full mesh */
		if (ch.mesh && mr_hostfile_check_mesh(hf, &err) < 0)
			fail_msg("%s: %s", fx, err.msg);
		cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(got, "hosts"))
			if (cJSON_GetObjectItemCaseSensitive(h, "mesh_ips")) {
				nmesh++;
				cJSON_DeleteItemFromObjectCaseSensitive(h, "mesh_ips");
			}
		assert_int_equal(nmesh, ch.mesh ? (int)c->nhosts : 0);
		if (!cJSON_Compare(expect_of(f, "hostfile"), got, true))
			fail_msg("%s: hostfile differs:\n%s", fx, mr_buf_cstr(&b));
		cJSON_Delete(got);
	}
	if (ch.backend != MR_TOPO_BACKEND_RING &&
	    mr_hostfile_check_rdma(hf, ch.backend == MR_TOPO_BACKEND_JACCL, &err) < 0)
		fail_msg("%s: %s", fx, err.msg);

	/* DOT */
	mr_buf_reset(&b);
	assert_int_equal(mr_topo_dot(c, &b, &err), 0);
	assert_non_null(strstr(mr_buf_cstr(&b), "graph G {"));
	if (system("command -v dot >/dev/null 2>&1") == 0) {
		char path[] = "/tmp/test_topo_dot_XXXXXX", cmd[128];
		int fd = mkstemp(path);
		FILE *fp;

		assert_true(fd >= 0);
		fp = fdopen(fd, "w");
		fputs(mr_buf_cstr(&b), fp);
		fclose(fp);
		snprintf(cmd, sizeof(cmd), "dot -Tpng -o /dev/null %s 2>/dev/null", path);
		if (system(cmd) != 0)
			fail_msg("%s: dot rejects:\n%s", fx, mr_buf_cstr(&b));
		unlink(path);
	}

	mr_buf_release(&b);
	mr_hostfile_free(hf);
	for (i = 0; i < c->nhosts; i++)
		mr_strvec_release(&ips[i]);
	free(ips);
	mr_topo_plan_release(&plan);
	mr_topo_choice_release(&ch);
	mr_fixture_free(f);
}

static void test_all_fixtures(void **state)
{
	const char *root = MESHRUN_SOURCE_DIR "/fixtures";
	DIR *d = opendir(root);
	struct dirent *e;
	size_t seen = 0;

	(void)state;
	assert_non_null(d);
	while ((e = readdir(d))) {
		char dir[4096], cj[4200];
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", root, e->d_name);
		snprintf(cj, sizeof(cj), "%s/cluster.json", dir);
		if (stat(cj, &st) < 0)
			continue;
		check_fixture(dir, e->d_name);
		seen++;
	}
	closedir(d);
	assert_true(seen >= 10);
}

/* The specific cases the issue names, beyond "matches cluster.json". */
static void test_fixture_details(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_fixture *f = NULL;
	struct mr_topo_choice ch;
	const struct mr_topo_cluster *c;
	bool found = false;

	(void)state;
	/* upstream capture: idle bus 0 and the dock/TB3 enclosure are not ports' peers */
	assert_int_equal(mr_fixture_load(MESHRUN_SOURCE_DIR "/fixtures/two-mbp-one-cable", &f, &err), 0);
	c = f->cluster;
	assert_int_equal(c->ncables, 1);
	assert_string_equal(c->hosts[0].ports[c->cables[0].port[0]].ifname, "en6");
	assert_int_equal(c->cables[0].speed_gbps, 80);
	assert_true(c->hosts[0].ibv_known);
	assert_int_equal(c->hosts[0].rdma_devs.nr, 0);
	assert_int_equal(c->hosts[1].rdma_devs.nr, 3);
	assert_int_equal(mr_topo_choose(c, MR_TOPO_BACKEND_JACCL, &ch, &err), MESHRUN_E_NOTFOUND);
	assert_non_null(strstr(err.msg, "RDMA is not enabled on mbp1"));
	mr_fixture_free(f);

	/* peer behind a hub: found, noted */
	mr_err_clear(&err);
	assert_int_equal(mr_fixture_load(MESHRUN_SOURCE_DIR "/fixtures/hub-peer", &f, &err), 0);
	for (size_t i = 0; i < f->cluster->notes.nr; i++)
		found |= strstr(f->cluster->notes.v[i], "behind a hub") != NULL;
	assert_true(found);
	mr_fixture_free(f);

	/* one-sided cable flagged by name */
	assert_int_equal(mr_fixture_load(MESHRUN_SOURCE_DIR "/fixtures/onesided", &f, &err), 0);
	assert_int_equal(f->cluster->nonesided, 1);
	found = false;
	for (size_t i = 0; i < f->cluster->notes.nr; i++)
		found |= strstr(f->cluster->notes.v[i], "cable o1 en3 -> o3 en2 is reported by o1 only") != NULL;
	if (!found)
		fail_msg("no one-sided note: %s", f->cluster->notes.nr ? f->cluster->notes.v[0] : "(none)");
	{
		/* the DOT label names both ends as the note does (not "en3/?") */
		struct mr_buf dot = MR_BUF_INIT;

		assert_int_equal(mr_topo_dot(f->cluster, &dot, &err), 0);
		assert_non_null(strstr(mr_buf_cstr(&dot), "[label=\"en3/en2\\nreported by o1 only\", style=dashed"));
		mr_buf_release(&dot);
	}
	mr_fixture_free(f);

	/* Thunderbolt 4: told that RDMA is impossible, not to enable it */
	assert_int_equal(mr_fixture_load(MESHRUN_SOURCE_DIR "/fixtures/tb4-ring3", &f, &err), 0);
	assert_int_equal(mr_topo_choose(f->cluster, MR_TOPO_BACKEND_AUTO, &ch, &err), 0);
	assert_int_equal(ch.backend, MR_TOPO_BACKEND_RING);
	mr_topo_choice_release(&ch);
	assert_int_equal(mr_topo_choose(f->cluster, MR_TOPO_BACKEND_JACCL, &ch, &err),
			 MESHRUN_E_NOTFOUND);
	assert_non_null(strstr(err.msg, "Thunderbolt 4"));
	assert_non_null(strstr(err.msg, "use ring"));
	assert_null(strstr(err.msg, "not enabled"));
	mr_fixture_free(f);

	/* dock and monitor: only the two Mac cables of d1 */
	mr_err_clear(&err);
	assert_int_equal(mr_fixture_load(MESHRUN_SOURCE_DIR "/fixtures/dock-monitor", &f, &err), 0);
	assert_int_equal(f->cluster->ncables, 3);
	assert_int_equal(f->cluster->notes.nr, 0);
	mr_fixture_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_fixtures),
		cmocka_unit_test(test_fixture_details),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
