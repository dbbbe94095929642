/*
 * test_sim_live.c - meshsim's live discovery (sim/live.h): system_profiler
 * rendered from the fixture and the cables as they are, checked by reading the
 * result back through src/topo as meshconfig does.
 */
#include "common/compat.h"

#include <setjmp.h>
#include <stdarg.h>
#include <cmocka.h>

#include "common/buf.h"
#include "common/json.h"
#include "common/xalloc.h"
#include "sim/live.h"
#include "sim/model.h"
#include "sim/net.h"
#include "fixture/fixture.h"
#include "topo/topo.h"

static char tmpdir[64];

static int setup_tmp(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/mst-live.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
	(void)state;
	return mr_sim_rm_rf(tmpdir);
}

/* A generated cluster (through meshsim's own loader); the genset backs its texts. */
static struct mr_sim_cluster *gen_cluster(const char *spec, struct mr_fixture_set **g)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_sim_cluster *c = NULL;
	char *dir = xasprintf("%s/%s", tmpdir, spec);

	for (char *p = dir + strlen(tmpdir); *p; p++)
		if (*p == ':' || *p == ',' || *p == '=')
			*p = '_';
	assert_int_equal(mr_fixture_gen(spec, g, &err), 0);
	assert_int_equal(mr_fixture_gen_write(*g, dir, &err), 0);
	assert_int_equal(mr_sim_cluster_load(dir, &c, NULL, &err), 0);
	free(dir);
	return c;
}

static struct mr_buf *render(const struct mr_sim_cluster *c, const bool *plugged, bool *changed)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_buf *out = xcalloc(c->nhosts, sizeof(*out));
	int rc = mr_sim_live_render(c, plugged, out, changed, &err);

	if (rc < 0)
		fail_msg("render: %s", err.msg);
	return out;
}

static void release(struct mr_buf *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		mr_buf_release(&out[i]);
	free(out);
}

/* What meshconfig makes of the rendered outputs. */
static struct mr_topo_cluster *discover(const struct mr_sim_cluster *c, const struct mr_buf *out)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_topo_cluster *tc = mr_topo_cluster_new();

	for (size_t i = 0; i < c->nhosts; i++)
		if (mr_topo_cluster_add_host(tc, c->hosts[i].name, out[i].p, out[i].len,
					     c->hosts[i].hwports, NULL, &err) < 0)
			fail_msg("discover %s: %s", c->hosts[i].name, err.msg);
	if (mr_topo_cluster_finish(tc, &err) < 0)
		fail_msg("finish: %s", err.msg);
	return tc;
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;

	for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

/* The cable of c between hosts a and b (first found). */
static size_t cable_between(const struct mr_sim_cluster *c, size_t a, size_t b)
{
	for (size_t k = 0; k < c->ncables; k++)
		if ((c->cables[k].a == a && c->cables[k].b == b) ||
		    (c->cables[k].a == b && c->cables[k].b == a))
			return k;
	fail_msg("no cable between %zu and %zu", a, b);
	return 0;
}

static void test_plugged(void **state)
{
	struct mr_fixture_set *g = NULL;
	struct mr_sim_cluster *c = gen_cluster("ring:4", &g);
	struct mr_strvec faults = MR_STRVEC_INIT;
	size_t k = cable_between(c, 0, 1);
	const struct mr_sim_cable *cb = &c->cables[k];
	bool plugged[4];

	(void)state;
	assert_int_equal(c->ncables, 4);
	/* the b side names the cable too; junk and other faults change nothing */
	mr_strvec_pushf(&faults, "unplug %s:%s", c->hosts[cb->b].name, cb->b_if);
	mr_strvec_push(&faults, "latency h3:en2 5ms");
	mr_strvec_push(&faults, "unplug nohost:en2");
	mr_strvec_push(&faults, "unplug h3");
	mr_strvec_push(&faults, "unplug h3:en9");
	mr_strvec_push(&faults, "unplug h3:averyveryverylonginterfacename");
	mr_sim_live_plugged(c, &faults, plugged);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(plugged[i], i != k);
	mr_sim_live_plugged(c, NULL, plugged);
	for (size_t i = 0; i < 4; i++)
		assert_true(plugged[i]);
	mr_strvec_release(&faults);
	mr_sim_cluster_free(c);
	mr_fixture_set_free(g);
}

static void test_unchanged(void **state)
{
	struct mr_fixture_set *g = NULL;
	struct mr_sim_cluster *c = gen_cluster("ring:4", &g);
	bool changed[4] = { true, true, true, true };
	struct mr_buf *out = render(c, NULL, changed);

	(void)state;
	for (size_t i = 0; i < c->nhosts; i++) {
		assert_false(changed[i]);
		/* byte for byte the recorded output */
		assert_int_equal(out[i].len, c->hosts[i].sp_len);
		assert_memory_equal(out[i].p, c->hosts[i].sp_json, out[i].len);
	}
	release(out, c->nhosts);
	mr_sim_cluster_free(c);
	mr_fixture_set_free(g);
}

static void test_unplug(void **state)
{
	struct mr_fixture_set *g = NULL;
	struct mr_sim_cluster *c = gen_cluster("ring:4", &g);
	size_t k = cable_between(c, 0, 1);
	bool plugged[4] = { true, true, true, true }, changed[4];
	struct mr_topo_cluster *tc;
	struct mr_buf *out;
	cJSON *root = NULL;

	(void)state;
	plugged[k] = false;
	out = render(c, plugged, changed);
	assert_true(changed[0] && changed[1]);
	assert_false(changed[2] || changed[3]);
	/* both ends: an empty receptacle as macOS shows one (the idle one and this) */
	for (size_t i = 0; i < 2; i++) {
		const char *s = mr_buf_cstr(&out[i]);
		assert_int_equal(count(s, "\"receptacle_status_key\": \"receptacle_no_devices_connected\""), 2);
		assert_int_equal(count(s, "\"current_speed_key\": \"Up to 120 Gb/s\""), 2);
		assert_int_equal(count(s, "\"link_status_key\": \"0x100\""), 2);
		assert_int_equal(count(s, "\"_items\""), 1);
		assert_int_equal(mr_json_parse(out[i].p, out[i].len, "out", &root, NULL), 0);
		cJSON_Delete(root);
		/* the layout of the fixture: one space per level */
		assert_memory_equal(s, "{\n \"SPThunderboltDataType\": [\n  {\n   \"_", 38);
	}
	tc = discover(c, out);
	assert_int_equal(tc->ncables, 3);
	assert_int_equal(tc->nonesided, 0);
	assert_int_equal(mr_topo_conn(tc, 0, 1), 0);
	assert_false(mr_topo_is_mesh(tc, NULL, NULL));
	mr_topo_cluster_free(tc);
	release(out, c->nhosts);
	mr_sim_cluster_free(c);
	mr_fixture_set_free(g);
}

static void test_recable(void **state)
{
	struct mr_fixture_set *g = NULL;
	struct mr_sim_cluster *c = gen_cluster("ring:4", &g);
	struct mr_strvec ports = MR_STRVEC_INIT;
	size_t k = cable_between(c, 0, 1);
	bool changed[4];
	struct mr_topo_cluster *tc;
	struct mr_buf *out;
	const char *idle;

	(void)state;
	/* the third receptacle of a generated host is the idle one, without a UUID */
	assert_int_equal(mr_sim_live_ports(&c->hosts[0], &ports, NULL), 0);
	assert_int_equal(ports.nr, 3);
	idle = "en4";
	assert_int_equal(mr_sim_cluster_find_cable(c, 0, idle, NULL), -1);
	mr_strvec_release(&ports);

	/* h1-h2 taken out, a new cable h1:en4 <-> h3:en4 */
	memmove(&c->cables[k], &c->cables[k + 1], (c->ncables - k - 1) * sizeof(*c->cables));
	c->ncables--;
	mr_sim_cluster_add_cable(c, 0, idle, 2, idle);
	out = render(c, NULL, changed);
	assert_true(changed[0] && changed[1] && changed[2]);
	assert_false(changed[3]);
	assert_non_null(strstr(mr_buf_cstr(&out[0]), "-5E00-4000-8000-")); /* the UUID it got */
	tc = discover(c, out);
	assert_int_equal(tc->ncables, 4);
	assert_int_equal(tc->nonesided, 0);
	assert_int_equal(mr_topo_conn(tc, 0, 1), 0);
	assert_int_equal(mr_topo_conn(tc, 0, 2), 1);
	for (size_t i = 0; i < tc->ncables; i++) {
		const struct mr_topo_cable *cb = &tc->cables[i];
		if (cb->host[0] == 0 && cb->host[1] == 2) {
			assert_string_equal(tc->hosts[0].ports[cb->port[0]].ifname, "en4");
			assert_string_equal(tc->hosts[2].ports[cb->port[1]].ifname, "en4");
			assert_int_equal(cb->speed_gbps, 80);
		}
	}
	mr_topo_cluster_free(tc);
	release(out, c->nhosts);
	mr_sim_cluster_free(c);
	mr_fixture_set_free(g);
}

/* A recorded fixture: the rest of the file keeps its layout; a moved cable copies
 * how the fixture shows that Mac (model, services). */
static void test_recorded(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_sim_cluster *c = NULL;
	bool plugged[6], changed[4];
	struct mr_topo_cluster *tc;
	struct mr_buf *out;
	ssize_t k;

	(void)state;
	if (mr_sim_cluster_load(MESHRUN_SOURCE_DIR "/fixtures/mesh4-m3ultra", &c, NULL, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(c->ncables, 6);
	k = mr_sim_cluster_find_cable(c, 0, "en2", NULL);
	assert_true(k >= 0);
	for (size_t i = 0; i < 6; i++)
		plugged[i] = i != (size_t)k;
	out = render(c, plugged, changed);
	assert_true(changed[0]);
	/* everything before m1's first bus with a cable is the fixture's text */
	assert_true(out[0].len < c->hosts[0].sp_len);
	assert_memory_equal(out[0].p, c->hosts[0].sp_json, 300);
	tc = discover(c, out);
	assert_int_equal(tc->ncables, 5);
	assert_false(mr_topo_is_mesh(tc, NULL, NULL));
	mr_topo_cluster_free(tc);
	release(out, c->nhosts);

	/* plugged in again: the recorded bytes; plus a second cable m1:en6 <-> m2:en7 */
	mr_sim_cluster_add_cable(c, 0, "en6", 1, "en7");
	out = render(c, NULL, changed);
	assert_true(changed[0] && changed[1]);
	assert_false(changed[2] || changed[3]);
	assert_non_null(strstr(mr_buf_cstr(&out[0]), "\"device_name_key\": \"Mac15,14\""));
	tc = discover(c, out);
	assert_int_equal(tc->ncables, 7);
	assert_int_equal(mr_topo_conn(tc, 0, 1), 2);
	assert_true(mr_topo_is_mesh(tc, NULL, NULL));
	mr_topo_cluster_free(tc);
	release(out, c->nhosts);
	mr_sim_cluster_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plugged),
		cmocka_unit_test(test_unchanged),
		cmocka_unit_test(test_unplug),
		cmocka_unit_test(test_recable),
		cmocka_unit_test(test_recorded),
	};
	return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
