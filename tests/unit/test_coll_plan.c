/* Unit tests for src/coll/ring_plan.c: segment, channel and packet arithmetic of the ring. */
#include "common/compat.h"
#include "coll/ring.h"

#include <setjmp.h>
#include <cmocka.h>

/* Every element of [0, total) is in exactly one packet; packets fit the receive buffer. */
static void check_cover(int n, size_t total, size_t seg, size_t esz, int maxchan)
{
	struct mr_ring_layout l;
	unsigned char *seen = calloc(total + 1, 1);

	assert_non_null(seen);
	mr_ring_layout_init(&l, n, total, seg, esz, maxchan);
	assert_true(l.nchan >= 1 && l.nchan <= maxchan);
	assert_true(l.pk * esz <= MR_RING_PKT_MAX);
	for (int k = 0; k < n; k++)
		for (int c = 0; c < l.nchan; c++)
			for (size_t j = 0; j < l.npk; j++) {
				size_t off, len;
				mr_ring_packet(&l, k, c, j, &off, &len);
				assert_true(len <= l.pk);
				if (len == 0)
					continue;
				assert_true(off + len <= total);
				/* a packet never leaves its segment */
				assert_true(off >= (size_t)k * l.seg && off + len <= (size_t)(k + 1) * l.seg);
				for (size_t i = off; i < off + len; i++) {
					assert_int_equal(seen[i], 0);
					seen[i] = 1;
				}
			}
	for (size_t i = 0; i < total; i++)
		assert_int_equal(seen[i], 1);
	free(seen);
}

static void test_cover(void **state)
{
	static const int ns[] = { 1, 2, 3, 5, 8 };
	static const size_t esz[] = { 1, 2, 4, 8 };

	(void)state;
	for (size_t a = 0; a < ARRAY_SIZE(ns); a++) {
		int n = ns[a];
		size_t totals[] = { 1, (size_t)n - 1, (size_t)n, (size_t)n + 1, 1000, 12345,
				    (3u << 20) + 7 };
		for (size_t b = 0; b < ARRAY_SIZE(totals); b++)
			for (size_t e = 0; e < ARRAY_SIZE(esz); e++)
				for (int ch = 2; ch <= 4; ch += 2)
					if (totals[b])
						check_cover(n, totals[b], 0, esz[e], ch);
	}
	/* sum_scatter / all_gather: exact blocks */
	check_cover(4, 4 * 1000, 1000, 4, 4);
	check_cover(3, 3 * 777777, 777777, 2, 2);
}

static void test_small_limit(void **state)
{
	(void)state;
	assert_int_equal(mr_ring_small_limit(1), 0);
	assert_int_equal(mr_ring_small_limit(2), MR_RING_SMALL_RECV);
	assert_int_equal(mr_ring_small_limit(3), MR_RING_SMALL_RECV / 2);
	assert_int_equal(mr_ring_small_limit(4), MR_RING_SMALL_FOUR); /* the swaps */
	assert_int_equal(mr_ring_small_limit(5), MR_RING_SMALL_RECV / 4);
	/* many ranks: never below the plain limit */
	assert_int_equal(mr_ring_small_limit(64), MR_RING_SMALL_BYTES);
	for (int n = 2; n < 200; n++) {
		size_t lim = mr_ring_small_limit(n);
		assert_true(lim >= MR_RING_SMALL_BYTES);
		/* what a gathering rank holds (n buffers) fits the 2 MiB scratch buffer */
		assert_true((size_t)n * lim <= (size_t)2 * MR_RING_PKT_MAX || n > 64);
	}
}

static void test_channels_split_large_only(void **state)
{
	struct mr_ring_layout l;

	(void)state;
	mr_ring_layout_init(&l, 4, 100, 0, 4, 4);
	assert_int_equal(l.nchan, 1); /* small: one channel */
	assert_int_equal(l.seg, 25);
	mr_ring_layout_init(&l, 4, 16u << 20, 0, 4, 4); /* 64 MiB */
	assert_int_equal(l.nchan, 4);
	mr_ring_layout_init(&l, 4, 16u << 20, 0, 4, 1000);
	assert_true(l.nchan <= MR_RING_MAX_CHAN);
	mr_ring_layout_init(&l, 3, 2, 0, 8, 2); /* count < size: empty segment */
	assert_int_equal(l.seg, 1);
	size_t off, len;
	mr_ring_packet(&l, 2, 0, 0, &off, &len);
	assert_int_equal(len, 0);
}

/* Two ranks: each direction's channels use one connection, the same one on
 * both ranks (one opened it, the other accepted it), and the two directions
 * use different ones; packets are smaller than for more ranks. */
static void test_pair(void **state)
{
	struct mr_ring_layout l;

	(void)state;
	for (int d = -1; d <= 1; d += 2)
		assert_true(mr_ring_pair_opened(0, d) != mr_ring_pair_opened(1, d));
	for (int r = 0; r < 2; r++)
		assert_true(mr_ring_pair_opened(r, 1) != mr_ring_pair_opened(r, -1));
	/* 1 MiB of float32: one channel, 128K packets (4 per step) */
	mr_ring_layout_init(&l, 2, 1u << 18, 0, 4, 2);
	assert_int_equal(l.nchan, 1);
	assert_int_equal(l.pk * 4, MR_RING_PAIR_PKT_MIN);
	assert_int_equal(l.npk, 4);
	/* 16 MiB: both directions, 8 packets of 512K per slice */
	mr_ring_layout_init(&l, 2, 1u << 22, 0, 4, 2);
	assert_int_equal(l.nchan, 2);
	assert_int_equal(l.pk * 4, 512u << 10);
	assert_int_equal(l.npk, 8);
	/* 256 MiB: packets stop at the receive buffer's size */
	mr_ring_layout_init(&l, 2, 1u << 26, 0, 4, 2);
	assert_int_equal(l.pk * 4, MR_RING_PKT_MAX);
	/* more ranks keep the larger packets */
	mr_ring_layout_init(&l, 4, 1u << 18, 0, 4, 2);
	assert_int_equal(l.pk * 4, 256u << 10); /* the whole 256K slice */
	mr_ring_layout_init(&l, 4, 1u << 22, 0, 4, 2);
	assert_int_equal(l.pk * 4, MR_RING_PKT_MIN);
	/* uneven 2-rank sizes still cover every element once */
	check_cover(2, (1u << 18) - 12345, 0, 4, 2);
	check_cover(2, (3u << 20) + 1, 0, 1, 4);
}

/* The schedule: what a rank receives at step s is what its neighbour sends at
 * step s, it sends at s+1 what it received at s, and after the reduce-scatter
 * rank r holds segment r; the all-gather's first send is segment r. */
static void test_schedule(void **state)
{
	(void)state;
	for (int n = 2; n <= 9; n++)
		for (int r = 0; r < n; r++)
			for (int d = -1; d <= 1; d += 2) {
				int from = ((r + d) % n + n) % n;
				for (int s = 0; s < 2 * (n - 1); s++) {
					assert_int_equal(mr_ring_seg(r, n, d, s, true),
							 mr_ring_seg(from, n, d, s, false));
					assert_int_equal(mr_ring_seg(r, n, d, s + 1, false),
							 mr_ring_seg(r, n, d, s, true));
				}
				assert_int_equal(mr_ring_seg(r, n, d, n - 2, true), r);
				assert_int_equal(mr_ring_seg(r, n, d, n - 1, false), r);
				/* the reduce-scatter visits every segment but r's own first */
				unsigned long mask = 0;
				for (int s = 0; s < n - 1; s++)
					mask |= 1ul << mr_ring_seg(r, n, d, s, false);
				assert_int_equal(__builtin_popcountl(mask), n - 1);
			}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cover),
		cmocka_unit_test(test_small_limit),
		cmocka_unit_test(test_channels_split_large_only),
		cmocka_unit_test(test_schedule),
		cmocka_unit_test(test_pair),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
