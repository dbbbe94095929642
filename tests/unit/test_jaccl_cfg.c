/* Unit tests for src/coll/jaccl_cfg.c: the MLX_IBV_DEVICES matrix, mesh/ring validity, env, frames. */
#include "common/compat.h"
#include "coll/jaccl_types.h"
#include "common/err.h"
#include "meshrun/err.h"

#include <setjmp.h>
#include <cmocka.h>

/* Parse text and classify it; returns the topology or the error code, err filled. */
static int classify(const char *text, bool ring, int *ncables, struct meshrun_err *err)
{
	struct mr_jaccl_matrix m = { 0, NULL };
	int rc = mr_jaccl_matrix_parse(text, strlen(text), "devs.json", &m, err);

	if (rc == 0)
		rc = mr_jaccl_matrix_topology(&m, ring, ncables, "devs.json", err);
	mr_jaccl_matrix_free(&m);
	return rc;
}

static void test_mesh_and_cells(void **state)
{
	struct mr_jaccl_matrix m = { 0, NULL };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	/* MLX's 4-Mac M3 Ultra example: names, and one cell as a list */
	const char *t = "[[null, \"rdma_en2\", \"rdma_en3\", [\"rdma_en4\"]],"
			" [\"rdma_en2\", null, \"rdma_en3\", \"rdma_en4\"],"
			" [\"rdma_en2\", \"rdma_en3\", null, \"rdma_en4\"],"
			" [\"rdma_en2\", \"rdma_en3\", \"rdma_en4\", null]]";
	int nc = 0;

	(void)state;
	assert_int_equal(mr_jaccl_matrix_parse(t, strlen(t), "devs.json", &m, &err), 0);
	assert_int_equal(m.size, 4);
	assert_int_equal(MR_JACCL_CELL(&m, 0, 0)->n, 0);
	assert_int_equal(MR_JACCL_CELL(&m, 0, 3)->n, 1);
	assert_string_equal(MR_JACCL_CELL(&m, 0, 3)->names[0], "rdma_en4");
	assert_string_equal(MR_JACCL_CELL(&m, 2, 1)->names[0], "rdma_en3");
	assert_int_equal(mr_jaccl_matrix_topology(&m, false, &nc, "devs.json", &err), MR_JACCL_MESH);
	assert_int_equal(nc, 1);
	/* a mesh is also a ring (left/right cells have one device): MLX_JACCL_RING wins */
	assert_int_equal(mr_jaccl_matrix_topology(&m, true, &nc, "devs.json", &err), MR_JACCL_RING);
	assert_int_equal(nc, 1);
	mr_jaccl_matrix_free(&m);
	assert_null(m.cells);
}

static void test_rings(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int nc = 0;
	/* 4-rank ring, 2 cables per neighbour (rank 0 <-> 2 not cabled) */
	const char *two = "[[null, [\"a\",\"b\"], null, [\"c\",\"d\"]],"
			  " [[\"a\",\"b\"], null, [\"c\",\"d\"], null],"
			  " [null, [\"a\",\"b\"], null, [\"c\",\"d\"]],"
			  " [[\"a\",\"b\"], null, [\"c\",\"d\"], null]]";
	const char *one = "[[null, \"a\", null, \"b\"], [\"a\", null, \"b\", null],"
			  " [null, \"a\", null, \"b\"], [\"a\", null, \"b\", null]]";
	const char *two_ranks = "[[null, [\"x\",\"y\",\"z\"]], [[\"x\",\"y\",\"z\"], null]]";

	(void)state;
	assert_int_equal(classify(two, false, &nc, &err), MR_JACCL_RING);
	assert_int_equal(nc, 2);
	assert_int_equal(classify(one, true, &nc, &err), MR_JACCL_RING);
	assert_int_equal(nc, 1);
	/* 2 ranks with 3 cables: a mesh (first name used) unless the ring is asked for */
	assert_int_equal(classify(two_ranks, false, &nc, &err), MR_JACCL_MESH);
	assert_int_equal(nc, 1);
	assert_int_equal(classify(two_ranks, true, &nc, &err), MR_JACCL_RING);
	assert_int_equal(nc, 3);
	assert_int_equal(err.code, 0);
}

static void test_invalid(void **state)
{
	static const struct {
		const char *text;
		const char *want; /* substring of the message */
	} cases[] = {
		{ "[[null, \"a\"], [\"b\"]]", "rank 1: 1 cells, expected 2" },
		{ "[[null, \"a\", \"b\"], [\"a\", null, \"b\"]]", "rank 0: 3 cells, expected 2" },
		{ "[[\"self\", \"a\"], [\"b\", null]]", "rank 0, column 0: the diagonal must be null" },
		/* a missing cell in a 4-rank mesh that is no ring either */
		{ "[[null, \"a\", \"b\", \"c\"], [\"a\", null, \"b\", \"c\"], [\"a\", \"b\", null, \"c\"], [\"a\", \"b\", null, null]]",
		  "rank 3, column 2: no device" },
		/* ring with unequal cable counts */
		{ "[[null, [\"a\",\"b\"], null, [\"c\",\"d\"]], [[\"a\",\"b\"], null, \"c\", null],"
		  " [null, [\"a\",\"b\"], null, [\"c\",\"d\"]], [[\"a\",\"b\"], null, [\"c\",\"d\"], null]]",
		  "rank 1, column 2: 1 device(s) to its right neighbour, but a ring needs 2" },
		{ "{\"a\": 1}", "should start with a list" },
		{ "[[null, 5], [\"a\", null]]", "rank 0, column 1: expected null, a device name or a list" },
		{ "[[null, [\"a\", 3]], [\"a\", null]]", "rank 0, column 1: device names must be strings" },
		{ "[[null, \"\"], [\"a\", null]]", "is empty" },
		{ "[[null, \"a\"], [\"a\", null]", "malformed JSON" },
		{ "[]", "0 rows" },
		{ "[[null]]", "a mesh needs at least 2 ranks" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		int nc = 0;
		int rc = classify(cases[i].text, false, &nc, &err);
		if (rc >= 0 || !strstr(err.msg, cases[i].want))
			fail_msg("case %zu: rc %d msg '%s', want '%s'", i, rc, err.msg, cases[i].want);
		assert_non_null(strstr(err.msg, "devs.json"));
	}
}

static void test_env(void **state)
{
	struct mr_jaccl_env e;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	unsetenv("JACCL_IBV_DEVICES");
	unsetenv("JACCL_COORDINATOR");
	unsetenv("JACCL_RANK");
	unsetenv("JACCL_RING");
	unsetenv("MLX_JACCL_RING");
	unsetenv("MLX_IBV_DEVICES");
	unsetenv("MESHRUN_IB_GID_INDEX");
	unsetenv("MESHRUN_TIMEOUT");
	setenv("MLX_JACCL_COORDINATOR", "10.0.0.1:5000", 1);
	assert_int_equal(mr_jaccl_env_read(&e, &err), MESHRUN_E_BACKEND);
	assert_non_null(strstr(err.msg, "MLX_IBV_DEVICES"));

	setenv("MLX_IBV_DEVICES", "/tmp/mlx.json", 1);
	setenv("MLX_RANK", "2", 1);
	memset(&err, 0, sizeof(err));
	assert_int_equal(mr_jaccl_env_read(&e, &err), 0);
	assert_int_equal(e.rank, 2);
	assert_false(e.prefer_ring);
	assert_int_equal(e.gid_index, -1);
	assert_string_equal(e.devices_path, "/tmp/mlx.json");

	/* JACCL_* spellings win, as in MLX */
	setenv("JACCL_IBV_DEVICES", "/tmp/jaccl.json", 1);
	setenv("JACCL_COORDINATOR", "10.0.0.9:6000", 1);
	setenv("JACCL_RANK", "1", 1);
	setenv("MLX_JACCL_RING", "", 1); /* presence is enough */
	setenv("MESHRUN_IB_GID_INDEX", "3", 1);
	assert_int_equal(mr_jaccl_env_read(&e, &err), 0);
	assert_int_equal(e.rank, 1);
	assert_string_equal(e.which_rank, "JACCL_RANK");
	assert_string_equal(e.devices_path, "/tmp/jaccl.json");
	assert_string_equal(e.coordinator, "10.0.0.9:6000");
	assert_true(e.prefer_ring);
	assert_int_equal(e.gid_index, 3);
	assert_int_equal(e.qp, MR_JACCL_QP_AUTO);
	assert_int_equal(e.frame, MR_JACCL_FRAME_DEFAULT);

	/* queue-pair type and frame size */
	static const struct {
		const char *qp, *frame;
		int want_qp;
		uint32_t want_frame;
	} ok[] = {
		{ "uc", "4K", MR_JACCL_QP_UC, 4096 },
		{ "rc", "65536", MR_JACCL_QP_RC, 65536 },
		{ "auto", "512K", MR_JACCL_QP_AUTO, 524288 },
		{ "", "", MR_JACCL_QP_AUTO, 4096 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		setenv("MESHRUN_JACCL_QP", ok[i].qp, 1);
		setenv("MESHRUN_JACCL_FRAME", ok[i].frame, 1);
		assert_int_equal(mr_jaccl_env_read(&e, &err), 0);
		assert_int_equal(e.qp, ok[i].want_qp);
		assert_int_equal(e.frame, ok[i].want_frame);
	}
	static const char *const bad_frames[] = { "2K", "1M", "6K", "4097", "x", "-4K" };
	setenv("MESHRUN_JACCL_QP", "uc", 1);
	for (size_t i = 0; i < ARRAY_SIZE(bad_frames); i++) {
		setenv("MESHRUN_JACCL_FRAME", bad_frames[i], 1);
		mr_err_clear(&err);
		assert_int_equal(mr_jaccl_env_read(&e, &err), MESHRUN_E_PARSE);
		assert_non_null(strstr(err.msg, "MESHRUN_JACCL_FRAME"));
		assert_non_null(strstr(err.msg, bad_frames[i]));
	}
	unsetenv("MESHRUN_JACCL_FRAME");
	setenv("MESHRUN_JACCL_QP", "ud", 1);
	mr_err_clear(&err);
	assert_int_equal(mr_jaccl_env_read(&e, &err), MESHRUN_E_PARSE);
	assert_non_null(strstr(err.msg, "MESHRUN_JACCL_QP='ud'"));
	unsetenv("MESHRUN_JACCL_QP");
	mr_err_clear(&err);

	setenv("JACCL_RANK", "x1", 1);
	assert_int_equal(mr_jaccl_env_read(&e, &err), MESHRUN_E_PARSE);
	assert_non_null(strstr(err.msg, "JACCL_RANK='x1'"));
	unsetenv("JACCL_RANK");
	unsetenv("JACCL_IBV_DEVICES");
	unsetenv("JACCL_COORDINATOR");
	unsetenv("MLX_JACCL_RING");
	unsetenv("MESHRUN_IB_GID_INDEX");
}

static void test_frames(void **state)
{
	unsigned char p[MR_JACCL_HDR];
	struct mr_jaccl_fhdr h = { MR_JF_DATA, 0xfffffffeu, 77, 4080 }, g;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	/* payload: whole elements of every dtype, and room for the header */
	for (uint32_t f = MR_JACCL_FRAME_MIN; f <= MR_JACCL_FRAME_MAX; f *= 2) {
		assert_int_equal(mr_jaccl_payload(f), f - MR_JACCL_HDR);
		assert_int_equal(mr_jaccl_payload(f) % 16, 0);
		int d = mr_jaccl_depth(f);
		assert_true(d >= 4 && d <= 32);
	}
	assert_int_equal(mr_jaccl_depth(4096), 32);
	assert_int_equal(mr_jaccl_depth(524288), 4);
	assert_int_equal(mr_jaccl_nchunks(0, 4080), 0);
	assert_int_equal(mr_jaccl_nchunks(1, 4080), 1);
	assert_int_equal(mr_jaccl_nchunks(4080, 4080), 1);
	assert_int_equal(mr_jaccl_nchunks(4081, 4080), 2);
	/* the header round-trips, little-endian */
	mr_jaccl_fhdr_encode(&h, p);
	assert_int_equal(p[0], MR_JACCL_MAGIC);
	assert_int_equal(p[4], 0xfe);
	assert_int_equal(mr_jaccl_fhdr_decode(p, 4096, &g, &err), 0);
	assert_int_equal(g.type, MR_JF_DATA);
	assert_int_equal(g.seq, 0xfffffffeu);
	assert_int_equal(g.credit, 77);
	assert_int_equal(g.len, 4080);
	/* refused: too long for the frame, empty data, credit with payload, bad magic or type */
	static const struct mr_jaccl_fhdr bad[] = {
		{ MR_JF_DATA, 1, 1, 4081 }, { MR_JF_DATA, 1, 1, 0 }, { MR_JF_CREDIT, 1, 1, 8 }, { 7, 1, 1, 0 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		mr_jaccl_fhdr_encode(&bad[i], p);
		mr_err_clear(&err);
		assert_int_equal(mr_jaccl_fhdr_decode(p, 4096, &g, &err), MESHRUN_E_PROTO);
	}
	mr_jaccl_fhdr_encode(&h, p);
	p[0] = 0;
	assert_int_equal(mr_jaccl_fhdr_decode(p, 4096, &g, &err), MESHRUN_E_PROTO);
	h.len = 8192 - 16;
	mr_jaccl_fhdr_encode(&h, p);
	assert_int_equal(mr_jaccl_fhdr_decode(p, 8192, &g, &err), 0);
	/* split: pieces tile [0, count) in order, sizes differ by at most one */
	static const size_t counts[] = { 0, 1, 3, 4, 5, 7, 12345, 1u << 20 };
	static const size_t parts[] = { 1, 2, 3, 4, 5, 8, 64 };
	for (size_t i = 0; i < ARRAY_SIZE(counts); i++) {
		for (size_t j = 0; j < ARRAY_SIZE(parts); j++) {
			size_t next = 0, lo = SIZE_MAX, hi = 0;
			for (size_t q = 0; q < parts[j]; q++) {
				size_t off, n;
				mr_jaccl_split(counts[i], parts[j], q, &off, &n);
				assert_int_equal(off, next);
				next += n;
				lo = MR_MIN(lo, n);
				hi = MR_MAX(hi, n);
			}
			assert_int_equal(next, counts[i]);
			assert_true(hi - lo <= 1);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mesh_and_cells),
		cmocka_unit_test(test_rings),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_frames),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
