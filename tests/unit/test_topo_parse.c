/*
 * test_topo_parse.c - bad input gives errors naming host and field; hostile names
 * are refused at parse time; netstat routes; the ring search on hard graphs.
 */
#include "common/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "common/err.h"
#include "fixture/fixture.h"
#include "topo/topo.h"

static const char HW[] =
	"Hardware Port: Ethernet\nDevice: en0\nEthernet Address: 02:00:00:00:00:01\n\n"
	"Hardware Port: Thunderbolt Bridge\nDevice: bridge0\n\n"
	"Hardware Port: Thunderbolt 1\nDevice: en2\n\n"
	"Hardware Port: Thunderbolt 2\nDevice: en10\n\n"
	"VLAN Configurations\n===================\n";

static const char SP_OK[] =
	"{\"SPThunderboltDataType\": ["
	" {\"_name\": \"thunderboltusb4_bus_0\", \"device_name_key\": \"Mac Studio\","
	"  \"domain_uuid_key\": \"AAAA-1\", \"receptacle_1_tag\": {\"receptacle_id_key\": \"1\","
	"  \"current_speed_key\": \"80 Gb/s\"}, \"_items\": [{\"_name\": \"Mac\", \"domain_uuid_key\": \"BBBB-1\"}]},"
	" {\"_name\": \"thunderboltusb4_bus_1\", \"domain_uuid_key\": \"AAAA-2\","
	"  \"receptacle_1_tag\": {\"receptacle_id_key\": \"2\"}},"
	" {\"_name\": \"thunderboltusb4_bus_2\", \"receptacle_1_tag\": {\"receptacle_id_key\": 3}}"
	"]}";

static void expect_host_error(const char *name, const char *sp, const char *hw, const char *ibv,
			      const char *want)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_topo_host h = { 0 };
	int rc = mr_topo_parse_host(name, sp, strlen(sp), hw, ibv, &h, &err);

	if (rc == 0)
		fail_msg("accepted; wanted error '%s'", want);
	if (!strstr(err.msg, want))
		fail_msg("error '%s' lacks '%s'", err.msg, want);
	assert_null(h.ports);
}

static void test_parse_ok(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_topo_host h = { 0 };

	(void)state;
	assert_int_equal(mr_topo_parse_host("h1", SP_OK, strlen(SP_OK), HW, NULL, &h, &err), 0);
	/* bus 2 has no domain_uuid_key: skipped (even with a bad receptacle id) */
	assert_int_equal(h.nports, 2);
	/* sorted by interface name as strings, as MLX does: en10 before en2 */
	assert_string_equal(h.ports[0].ifname, "en10");
	assert_string_equal(h.ports[1].ifname, "en2");
	assert_string_equal(h.ports[1].peer_uuid, "BBBB-1");
	assert_int_equal(h.ports[1].speed_gbps, 80);
	assert_null(h.ports[0].peer_uuid);
	assert_string_equal(h.model, "Mac Studio");
	assert_false(h.ibv_known);
	mr_topo_host_release(&h);
}

static void test_parse_errors(void **state)
{
	(void)state;
	expect_host_error("h2", "{\"SPThunderboltDataType\": [", HW, NULL,
			  "h2: system_profiler:");
	expect_host_error("h2", "{\"SPThunderboltDataType\": [{}, {\"domain_uuid_key\": \"AB\", "
			  "\"receptacle_1_tag\": {\"receptacle_id_key\": 2}}]}", HW, NULL,
			  "h2: system_profiler: SPThunderboltDataType[1].receptacle_1_tag.receptacle_id_key: expected a string, got number");
	expect_host_error("h2", "{\"SPThunderboltDataType\": [{\"domain_uuid_key\": \"AB\"}]}", HW, NULL,
			  "h2: system_profiler: SPThunderboltDataType[0]: missing key 'receptacle_1_tag'");
	expect_host_error("h2", "{\"SPThunderboltDataType\": {}}", HW, NULL,
			  "h2: system_profiler: SPThunderboltDataType: expected an array");
	expect_host_error("h2", "[]", HW, NULL, "h2: system_profiler: top level: expected an object");
	expect_host_error("h2", "{\"SPThunderboltDataType\": [{\"domain_uuid_key\": \"AB\", "
			  "\"receptacle_1_tag\": {\"receptacle_id_key\": \"1\"}, \"_items\": "
			  "[{\"domain_uuid_key\": 7}]}]}", HW, NULL,
			  "SPThunderboltDataType[0]._items[0].domain_uuid_key: expected a string");
	expect_host_error("h2", "{\"SPThunderboltDataType\": [{\"domain_uuid_key\": \"$(reboot)\", "
			  "\"receptacle_1_tag\": {\"receptacle_id_key\": \"1\"}}]}", HW, NULL,
			  "invalid UUID");
	expect_host_error("h2", "{\"SPThunderboltDataType\": [{\"domain_uuid_key\": \"AB\", "
			  "\"receptacle_1_tag\": {\"receptacle_id_key\": \"1; ls\"}}]}", HW, NULL,
			  "receptacle_id_key: invalid receptacle id");
	/* networksetup lacks the port */
	expect_host_error("h3", "{\"SPThunderboltDataType\": [{\"domain_uuid_key\": \"AB\", "
			  "\"receptacle_1_tag\": {\"receptacle_id_key\": \"2\"}}]}",
			  "Hardware Port: Thunderbolt 1\nDevice: en2\n", NULL,
			  "h3: networksetup: no 'Thunderbolt 2' port for receptacle 2");
	/* hostile interface names */
	expect_host_error("h1", SP_OK, "Hardware Port: Thunderbolt 1\nDevice: en0; rm -rf /\n", NULL,
			  "h1: networksetup: 'Thunderbolt 1': invalid interface name 'en0; rm -rf /'");
	expect_host_error("h1", SP_OK, "Hardware Port: Thunderbolt 1\nDevice: -en2\n", NULL,
			  "invalid interface name '-en2'");
	expect_host_error("h1", SP_OK, "Hardware Port: Thunderbolt 1\nDevice: $(id)\n", NULL,
			  "invalid interface name");
	expect_host_error("h1", SP_OK, HW, "rdma_en2`id`\n", "h1: ibv_devices: invalid device name");
	/* two receptacles on one interface */
	expect_host_error("h4", SP_OK, "Hardware Port: Thunderbolt 1\nDevice: en2\n"
			  "Hardware Port: Thunderbolt 2\nDevice: en2\n", NULL, "both map to 'en2'");
}

static void test_ibv_forms(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec v = MR_STRVEC_INIT;

	(void)state;
	assert_int_equal(mr_topo_parse_ibv_devices("h", "    device          \t   node GUID\n"
				"    ------          \t----------------\n", &v, &err), 0);
	assert_int_equal(v.nr, 0);
	assert_int_equal(mr_topo_parse_ibv_devices("h", "No IB devices found\n", &v, &err), 0);
	assert_int_equal(v.nr, 0);
	assert_int_equal(mr_topo_parse_ibv_devices("h", "", &v, &err), 0);
	assert_int_equal(v.nr, 0);
	assert_int_equal(mr_topo_parse_ibv_devices("h", "    device   node GUID\n    ------ ---\n"
				"    rdma_en2\t0000000000000001\n    mlx5_0\t01\n    rdma_en3\t02\n",
				&v, &err), 0);
	assert_int_equal(v.nr, 2);
	assert_string_equal(v.v[0], "rdma_en2");
	assert_string_equal(v.v[1], "rdma_en3");
	mr_strvec_release(&v);
}

static void test_cluster_errors(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_topo_cluster *c = mr_topo_cluster_new();

	(void)state;
	assert_int_equal(mr_topo_cluster_add_host(c, "h1", SP_OK, strlen(SP_OK), HW, NULL, &err), 0);
	assert_int_equal(mr_topo_cluster_add_host(c, "h1", SP_OK, strlen(SP_OK), HW, NULL, &err),
			 MESHRUN_E_INVAL);
	assert_non_null(strstr(err.msg, "'h1' is given twice"));
	mr_err_clear(&err);
	/* the same UUIDs on another host */
	assert_int_equal(mr_topo_cluster_add_host(c, "h2", SP_OK, strlen(SP_OK), HW, NULL, &err), 0);
	assert_int_equal(mr_topo_cluster_finish(c, &err), MESHRUN_E_PARSE);
	assert_non_null(strstr(err.msg, "is claimed by h1 (en2) and h2 (en2)"));
	mr_topo_cluster_free(c);
	mr_err_clear(&err);
	assert_int_equal(mr_topo_cluster_add_host(c = mr_topo_cluster_new(), "bad name;", SP_OK,
						  strlen(SP_OK), HW, NULL, &err), MESHRUN_E_INVAL);
	mr_topo_cluster_free(c);
}

static void test_routes(void **state)
{
	static const char netstat[] =
		"Routing tables\n\nInternet:\n"
		"Destination        Gateway            Flags               Netif Expire\n"
		"default            192.168.0.1        UGScg                 en0\n"
		"127                127.0.0.1          UCS                   lo0\n"
		"169.254            link#6             UCS                   en0      !\n"
		"192.168.0          link#6             UCS                   en0      !\n"
		"192.168.1.4/30     link#9             UCS                   utun3\n"
		"192.168.2.1        link#12            UHLWIi                en2\n"
		"10.8/16            link#9             UCS                   utun3\n"
		"\nInternet6:\n"
		"default            fe80::%utun0       UGcIg               utun0\n";
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_topo_routes r = { NULL, 0 };
	struct mr_topo_routes *all;
	struct mr_fixture_set *g = NULL;
	struct mr_topo_cluster *c = mr_topo_cluster_new();
	struct mr_topo_plan plan;

	(void)state;
	assert_int_equal(mr_topo_parse_routes("h1", netstat, &r, &err), 0);
	assert_int_equal(r.nr, 7);
	assert_int_equal(r.v[0].len, 0);
	assert_int_equal(r.v[1].net, 0x7f000000u);
	assert_int_equal(r.v[1].len, 8);
	assert_int_equal(r.v[3].net, 0xc0a80000u);
	assert_int_equal(r.v[3].len, 24);
	assert_int_equal(r.v[4].len, 30);
	assert_int_equal(r.v[5].len, 32);
	assert_int_equal(r.v[6].net, 0x0a080000u);
	assert_int_equal(r.v[6].len, 16);
	assert_string_equal(r.v[4].ifname, "utun3");

	/* plan for mesh:4 with those routes on h2: 192.168.0.0/24 and
	 * 192.168.1.4/30 are taken; the host route on en2 (a cable of h2) is ours */
	assert_int_equal(mr_fixture_gen("mesh:4", &g, &err), 0);
	for (size_t i = 0; i < g->nhosts; i++)
		assert_int_equal(mr_topo_cluster_add_host(c, g->hosts[i].name, g->hosts[i].sp_json,
							  strlen(g->hosts[i].sp_json),
							  g->hosts[i].hwports, g->hosts[i].ibv, &err), 0);
	assert_int_equal(mr_topo_cluster_finish(c, &err), 0);
	all = calloc(4, sizeof(*all));
	all[1] = r;
	assert_int_equal(mr_topo_plan_build(c, all, &plan, &err), 0);
	assert_int_equal(plan.nlinks, 6);
	assert_string_equal(plan.links[0].subnet, "192.168.1.0/30");
	assert_string_equal(plan.links[1].subnet, "192.168.1.8/30");
	assert_string_equal(plan.links[1].ip[1], "192.168.1.10");
	assert_int_equal(plan.nskipped, 65);
	/* argv form, MLX's commands */
	assert_string_equal(plan.cmds[0].v[1].argv.v[0], "ifconfig");
	assert_string_equal(plan.cmds[0].v[1].argv.v[3], "192.168.1.1");
	assert_string_equal(plan.cmds[0].v[1].argv.v[5], "255.255.255.252");
	assert_string_equal(plan.cmds[0].v[2].argv.v[0], "route");
	assert_string_equal(plan.cmds[0].v[2].argv.v[2], "192.168.1.2");
	assert_string_equal(plan.cmds[0].v[2].argv.v[3], "-interface");
	mr_topo_plan_release(&plan);
	/* without routes: MLX's addresses */
	assert_int_equal(mr_topo_plan_build(c, NULL, &plan, &err), 0);
	assert_string_equal(plan.links[0].subnet, "192.168.0.0/30");
	assert_string_equal(plan.links[5].ip[1], "192.168.0.22");
	mr_topo_plan_release(&plan);
	mr_topo_routes_release(&all[1]);
	free(all);
	mr_topo_cluster_free(c);
	mr_fixture_set_free(g);

	/* hostile netstat interface */
	assert_int_equal(mr_topo_parse_routes("h9", "10/8 link#1 UCS en0;reboot\n", &r, &err),
			 MESHRUN_E_PARSE);
	assert_non_null(strstr(err.msg, "h9: netstat: invalid interface name"));
}

/* A cluster with the given cabling, made directly as parsed hosts. */
static struct mr_topo_cluster *graph(size_t n, const size_t (*edges)[2], size_t nedges)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_topo_cluster *c = mr_topo_cluster_new();

	for (size_t i = 0; i < n; i++) {
		struct mr_topo_host h = { 0 };

		assert_int_equal(asprintf(&h.name, "g%zu", i + 1) > 0, 1);
		h.ports = calloc(nedges + 1, sizeof(*h.ports));
		for (size_t e = 0; e < nedges; e++) {
			for (int s = 0; s < 2; s++) {
				struct mr_topo_port *p;

				if (edges[e][s] != i)
					continue;
				p = &h.ports[h.nports++];
				assert_true(asprintf(&p->ifname, "en%zu", e + 2) > 0);
				assert_true(asprintf(&p->uuid, "%zu-%zu", e, i) > 0);
				assert_true(asprintf(&p->peer_uuid, "%zu-%zu", e, edges[e][1 - s]) > 0);
				assert_true(asprintf(&p->receptacle, "%zu", e) > 0);
			}
		}
		assert_int_equal(mr_topo_cluster_take_host(c, &h, &err), 0);
	}
	assert_int_equal(mr_topo_cluster_finish(c, &err), 0);
	return c;
}

static void test_ring_search_hard(void **state)
{
	/* Petersen graph: 3-regular, connected, no Hamiltonian cycle */
	static const size_t petersen[][2] = {
		{ 0, 1 }, { 1, 2 }, { 2, 3 }, { 3, 4 }, { 4, 0 },
		{ 0, 5 }, { 1, 6 }, { 2, 7 }, { 3, 8 }, { 4, 9 },
		{ 5, 7 }, { 7, 9 }, { 9, 6 }, { 6, 8 }, { 8, 5 },
	};
	/* two triangles joined by one cable */
	static const size_t split[][2] = {
		{ 0, 1 }, { 1, 2 }, { 2, 0 }, { 3, 4 }, { 4, 5 }, { 5, 3 }, { 2, 3 },
	};
	static const size_t apart[][2] = {
		{ 0, 1 }, { 1, 2 }, { 2, 0 }, { 3, 4 }, { 4, 5 }, { 5, 3 },
	};
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_topo_ring r;
	struct mr_topo_cluster *c;

	(void)state;
	c = graph(10, petersen, ARRAY_SIZE(petersen));
	assert_int_equal(mr_topo_find_ring(c, 0, &r, &err), MESHRUN_E_NOTFOUND);
	assert_non_null(strstr(err.msg, "no ring found through all 10 hosts"));
	mr_err_clear(&err);
	/* a tiny work bound stops the search with its own message */
	assert_int_equal(mr_topo_find_ring(c, 3, &r, &err), MESHRUN_E_NOTFOUND);
	assert_non_null(strstr(err.msg, "search stopped after 3 steps"));
	mr_topo_cluster_free(c);

	mr_err_clear(&err);
	c = graph(6, split, ARRAY_SIZE(split));
	assert_int_equal(mr_topo_find_ring(c, 0, &r, &err), MESHRUN_E_NOTFOUND);
	mr_topo_cluster_free(c);

	mr_err_clear(&err);
	c = graph(6, apart, ARRAY_SIZE(apart));
	assert_int_equal(mr_topo_find_ring(c, 0, &r, &err), MESHRUN_E_NOTFOUND);
	assert_non_null(strstr(err.msg, "g1, g2, g3 | g4, g5, g6"));
	mr_topo_cluster_free(c);
}

/* A 64-host ring cabled in a scrambled order, with chords that tempt the DFS
 * into dead ends: the ring found must be a real one. */
static void test_ring_search_scrambled(void **state)
{
	size_t n = 64, perm[64], (*edges)[2] = calloc(2 * 64, sizeof(*edges)), ne = 0;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_topo_ring r;
	struct mr_topo_cluster *c;
	uint32_t seed = 12345;

	(void)state;
	for (size_t i = 0; i < n; i++)
		perm[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j, t;

		seed = seed * 1103515245u + 12345u;
		j = (seed >> 8) % (i + 1);
		t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (size_t i = 0; i < n; i++) {
		edges[ne][0] = perm[i];
		edges[ne++][1] = perm[(i + 1) % n];
	}
	for (size_t i = 0; i < n; i += 4) { /* chords */
		edges[ne][0] = perm[i];
		edges[ne++][1] = perm[(i + n / 2 + 1) % n];
	}
	c = graph(n, (const size_t(*)[2])edges, ne);
	if (mr_topo_find_ring(c, 0, &r, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(r.n, n);
	assert_int_equal(r.order[0], 0);
	for (size_t i = 0; i < n; i++)
		assert_true(mr_topo_conn(c, r.order[i], r.order[(i + 1) % n]) > 0);
	mr_topo_ring_release(&r);
	mr_topo_cluster_free(c);
	free(edges);
}

static void test_dot(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_fixture_set *g = NULL;
	struct mr_topo_cluster *c = mr_topo_cluster_new();
	struct mr_buf b = MR_BUF_INIT;

	(void)state;
	assert_int_equal(mr_fixture_gen("ring:3,speed=40", &g, &err), 0);
	for (size_t i = 0; i < g->nhosts; i++)
		assert_int_equal(mr_topo_cluster_add_host(c, g->hosts[i].name, g->hosts[i].sp_json,
							  strlen(g->hosts[i].sp_json),
							  g->hosts[i].hwports, g->hosts[i].ibv, &err), 0);
	assert_int_equal(mr_topo_cluster_finish(c, &err), 0);
	assert_int_equal(mr_topo_dot(c, &b, &err), 0);
	assert_non_null(strstr(mr_buf_cstr(&b), "n0 [label=\"h1\"];"));
	assert_non_null(strstr(mr_buf_cstr(&b), "n0 -- n1 [label=\"en2/en2\\n40 Gb/s\", color=\"darkorange\""));
	assert_non_null(strstr(mr_buf_cstr(&b), "n1 -- n2 [label=\"en3/en3"));
	mr_buf_release(&b);
	mr_topo_cluster_free(c);
	mr_fixture_set_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_ok),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_ibv_forms),
		cmocka_unit_test(test_cluster_errors),
		cmocka_unit_test(test_routes),
		cmocka_unit_test(test_ring_search_hard),
		cmocka_unit_test(test_ring_search_scrambled),
		cmocka_unit_test(test_dot),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
