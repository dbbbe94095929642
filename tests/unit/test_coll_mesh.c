/* Unit tests for the mesh: the shared schedule (src/coll/mesh_plan.c) and the
 * TCP mesh's address matrix (src/coll/mesh/tcpmesh_cfg.c). */
#include "common/compat.h"
#include "coll/mesh_plan.h"
#include "coll/mesh/tcpmesh.h"

#include <setjmp.h>
#include <cmocka.h>

/* Every pair exchanges exactly one block each way, and both sides agree on it. */
static void test_blocks_pairs(void **state)
{
	struct mr_mesh_xfer x[8][8];

	(void)state;
	for (int n = 2; n <= 8; n++)
		for (int reduce = 0; reduce < 2; reduce++) {
			for (int r = 0; r < n; r++)
				assert_int_equal(mr_mesh_blocks(r, n, reduce, x[r]), n - 1);
			for (int r = 0; r < n; r++) {
				int prev = -1;
				for (int i = 0; i < n - 1; i++) {
					int p = x[r][i].peer;
					assert_true(p > prev && p != r && p < n); /* ascending, no self */
					prev = p;
					/* what r sends p is what p receives from r */
					int ip = r < p ? r : r - 1;
					assert_int_equal(x[p][ip].peer, r);
					assert_int_equal(x[r][i].sblk, x[p][ip].rblk);
					if (reduce) { /* reduce-scatter: block p to p, own block back */
						assert_int_equal(x[r][i].sblk, p);
						assert_int_equal(x[r][i].rblk, r);
					} else { /* all-gather: own block out, block p in */
						assert_int_equal(x[r][i].sblk, r);
						assert_int_equal(x[r][i].rblk, p);
					}
				}
			}
		}
}

/* Blocks cover [0, count) once, near-equal, in order. */
static void test_split(void **state)
{
	(void)state;
	for (size_t count = 0; count < 40; count++)
		for (size_t parts = 1; parts <= 9; parts++) {
			size_t next = 0;
			for (size_t i = 0; i < parts; i++) {
				size_t off, n;
				mr_mesh_split(count, parts, i, &off, &n);
				assert_int_equal(off, next);
				assert_true(n == count / parts || n == count / parts + 1);
				next += n;
			}
			assert_int_equal(next, count);
		}
	assert_true(mr_mesh_direct(100, 4, 4));          /* small: direct */
	assert_true(mr_mesh_direct(3, 65536, 4));        /* fewer elements than ranks */
	assert_false(mr_mesh_direct(1u << 20, 4, 4));
}

static void test_matrix_ok(void **state)
{
	const char *t = "[[null, \"10.0.0.1:5000\", [\"10.0.1.1:5000\", \"10.0.2.1:5000\"]],"
			" [[\"10.0.0.2:5001\"], null, \"10.0.3.1:5001\"],"
			" [[\"10.0.1.2:5002\", \"10.0.2.2:5002\"], \"10.0.3.2:5002\", null]]";
	struct mr_mesh_hosts h;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	assert_int_equal(mr_mesh_hosts_parse(t, strlen(t), "m.json", &h, &err), 0);
	assert_int_equal(h.size, 3);
	assert_int_equal(MR_MESH_NCAB(&h, 0, 0), 0);
	assert_int_equal(MR_MESH_NCAB(&h, 0, 2), 2);
	assert_int_equal(MR_MESH_NCAB(&h, 2, 0), 2);
	assert_int_equal(MR_MESH_NCAB(&h, 1, 2), 1);
	assert_string_equal(MR_MESH_ADDR(&h, 0, 2, 1)->text, "10.0.2.1:5000");
	assert_string_equal(MR_MESH_ADDR(&h, 2, 1, 0)->text, "10.0.3.2:5002");
	mr_mesh_hosts_free(&h);
	assert_null(h.cell);
}

static void expect_error(const char *t, const char *want)
{
	struct mr_mesh_hosts h;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	assert_true(mr_mesh_hosts_parse(t, strlen(t), "m.json", &h, &err) < 0);
	if (!strstr(err.msg, want))
		fail_msg("'%s': got '%s', want '%s'", t, err.msg, want);
}

static void test_matrix_errors(void **state)
{
	(void)state;
	expect_error("{}", "m.json: expected a non-empty list of rows");
	expect_error("[[null, \"1.2.3.4:1\"]]", "m.json: [0]: expected a list of 1 cells");
	expect_error("[[\"1.2.3.4:1\"]]", "m.json: [0][0]: the diagonal must be null");
	expect_error("[[null, null], [\"1.2.3.4:1\", null]]", "m.json: [0][1]: expected \"ip:port\"");
	expect_error("[[null, \"1.2.3.4\"], [\"1.2.3.5:1\", null]]", "m.json: [0][1][0]: bad address '1.2.3.4'");
	expect_error("[[null, [\"1.2.3.4:1\", \"1.2.3.4:2\"]], [\"1.2.3.5:1\", null]]",
		     "m.json: [0][1] lists 2 cables but [1][0] lists 1");
	expect_error("[[null, []], [\"1.2.3.5:1\", null]]", "m.json: [0][1]: 0 addresses, expected 1 to 16");
	expect_error("[[null, [7]], [\"1.2.3.5:1\", null]]", "m.json: [0][1][0]: expected an \"ip:port\" string");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocks_pairs),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_matrix_ok),
		cmocka_unit_test(test_matrix_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
