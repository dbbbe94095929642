/* Unit tests for src/coll/accept.c: the accept gate's slot choice, deadline and token check. */
#include "common/compat.h"
#include "coll/accept.h"
#include "coll/tcp/wire.h"

#include <setjmp.h>
#include <cmocka.h>

struct table {
	enum mr_accept_use use[4];
	struct mr_accept_stamp st[4];
};

static enum mr_accept_use table_use(void *ctx, size_t i, const struct mr_accept_stamp **st)
{
	struct table *t = ctx;

	*st = &t->st[i];
	return t->use[i];
}

static void test_pick(void **state)
{
	static const struct {
		enum mr_accept_use use[4];
		uint64_t seq[4];
		size_t want;
		bool evict;
	} cases[] = {
		{ { MR_ACCEPT_PENDING, MR_ACCEPT_FREE, MR_ACCEPT_FREE, MR_ACCEPT_BUSY }, { 1, 0, 0, 2 }, 1, false },
		{ { MR_ACCEPT_PENDING, MR_ACCEPT_PENDING, MR_ACCEPT_PENDING, MR_ACCEPT_PENDING }, { 7, 3, 9, 5 }, 1, true },
		/* the oldest of all is past its hello: the oldest pending goes */
		{ { MR_ACCEPT_BUSY, MR_ACCEPT_PENDING, MR_ACCEPT_BUSY, MR_ACCEPT_PENDING }, { 1, 8, 2, 6 }, 3, true },
		{ { MR_ACCEPT_BUSY, MR_ACCEPT_BUSY, MR_ACCEPT_BUSY, MR_ACCEPT_BUSY }, { 1, 2, 3, 4 }, 4, false },
	};
	(void)state;
	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		struct table t;
		bool evict = !cases[c].evict;
		for (size_t i = 0; i < 4; i++) {
			t.use[i] = cases[c].use[i];
			t.st[i] = (struct mr_accept_stamp){ 0, cases[c].seq[i] };
		}
		assert_int_equal(mr_accept_pick(4, table_use, &t, &evict), cases[c].want);
		assert_int_equal(evict, cases[c].evict);
	}
}

static void test_admit_and_deadline(void **state)
{
	struct mr_accept_gate g = { 0 };
	struct mr_accept_stamp a, b;

	(void)state;
	mr_accept_admit(&g, &a, 1000);
	mr_accept_admit(&g, &b, 1500);
	assert_true(a.seq < b.seq);
	assert_int_equal(a.since, 1000);
	assert_false(mr_accept_expired(&a, 1000 + MR_ACCEPT_WAIT_MS - 1));
	assert_true(mr_accept_expired(&a, 1000 + MR_ACCEPT_WAIT_MS));
	assert_int_equal(mr_accept_poll_ms(&a, 1000, 60000), MR_ACCEPT_WAIT_MS);
	assert_int_equal(mr_accept_poll_ms(&a, 1000, 5), 5);
	assert_int_equal(mr_accept_poll_ms(&a, 1000 + 3 * MR_ACCEPT_WAIT_MS, 60000), 0);
}

static void test_token_equal(void **state)
{
	(void)state;
	assert_true(mr_accept_token_equal((const unsigned char *)"tok", 3, "tok", 3));
	assert_true(mr_accept_token_equal((const unsigned char *)"", 0, "", 0));
	assert_false(mr_accept_token_equal((const unsigned char *)"tok", 3, "tok2", 4));
	assert_false(mr_accept_token_equal((const unsigned char *)"tok2", 4, "tok", 3));
	assert_false(mr_accept_token_equal((const unsigned char *)"tok", 3, "toK", 3));
	assert_false(mr_accept_token_equal((const unsigned char *)"", 0, "t", 1));
}

static void test_hello(void **state)
{
	unsigned char buf[MR_HELLO_MAX];
	struct mr_hello h;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	size_t len = mr_accept_hello(buf, 3, 4, MR_LANE_P2P, 2, "tok-123", 7);

	(void)state;
	assert_int_equal(len, MR_HELLO_FIXED + 7);
	assert_int_equal(mr_hello_decode(buf, len, &h, &err), 0);
	assert_int_equal(mr_hello_check(&h, 3, 4, 2, "tok-123", 7, &err), 0);
	assert_int_equal(h.lane, MR_LANE_P2P);
	assert_int_equal(mr_hello_check(&h, 3, 4, 2, "tok-124", 7, &err), MESHRUN_E_AUTH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pick),
		cmocka_unit_test(test_admit_and_deadline),
		cmocka_unit_test(test_token_equal),
		cmocka_unit_test(test_hello),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
