/*
 * probe.c - recognise a user op on 2-byte elements (MLX's float16 and bfloat16
 * sum/max/min, made by MPI_Op_create over a 2-byte contiguous type), so that
 * libmeshrun reduces it natively instead of gathering every rank's buffer.
 *
 * The op is run once on PROBE_N pairs of bit patterns that are finite,
 * normal and non-zero both as half and as bfloat16 (no NaN or signed zero,
 * where max/min implementations may differ), and its results are compared
 * with libmeshrun's own six candidates. Exactly one must match on every pair;
 * otherwise the user function is called on every reduction. Max and min are
 * the exception: half and bfloat16 are both sign-magnitude with monotonic
 * encodings, so they order every non-NaN bit pattern alike and both match;
 * bfloat16's comparison is then used: it is exact for bfloat16 data and for
 * half data without NaN (a half NaN would be a large bfloat16 number, but MLX's
 * std::max gives an order-dependent answer for NaN anyway).
 */
#include "common/compat.h"
#include "mpishim/mpishim.h"

#define PROBE_N 64

static bool normal_both(uint16_t v)
{
	unsigned eh = (v >> 10) & 0x1fu, eb = (v >> 7) & 0xffu;

	return eh != 0 && eh != 0x1f && eb != 0 && eb != 0xff;
}

static void fill(uint16_t *v, size_t n, uint32_t *seed)
{
	for (size_t i = 0; i < n;) {
		*seed = *seed * 1664525u + 1013904223u;
		uint16_t x = (uint16_t)(*seed >> 16);
		/* keep magnitudes where half sums do not overflow to inf */
		x = (uint16_t)((x & 0x83ffu) | ((uint16_t)(10 + (x >> 10) % 12) << 10));
		if (normal_both(x))
			v[i++] = x;
	}
}

void mrmpi_probe_op(struct mrmpi_op *op, void *type)
{
	/* bfloat16 first: its max/min wins a tie (above) */
	static const enum meshrun_dtype dts[] = { MESHRUN_BFLOAT16, MESHRUN_FLOAT16 };
	static const enum mr_op ops[] = { MR_OP_SUM, MR_OP_MAX, MR_OP_MIN };
	uint16_t in[PROBE_N], got[PROBE_N], want[PROBE_N], b[PROBE_N];
	uint32_t seed = 0x6d657368u;
	int len = PROBE_N, matches = 0;
	bool ordered[ARRAY_SIZE(ops)] = { false };

	op->probed = true;
	op->native_dt = -1;
	fill(in, PROBE_N, &seed);
	fill(b, PROBE_N, &seed);
	memcpy(got, b, sizeof(got));
	op->fn(in, got, &len, &type);
	for (size_t d = 0; d < ARRAY_SIZE(dts); d++)
		for (size_t o = 0; o < ARRAY_SIZE(ops); o++) {
			memcpy(want, b, sizeof(want));
			mr_reduce(ops[o], dts[d], want, in, PROBE_N);
			if (!memcmp(want, got, sizeof(got))) {
				if (ops[o] != MR_OP_SUM && ordered[o])
					continue; /* the same max/min in the other format */
				ordered[o] = true;
				matches++;
				op->native_dt = (int)dts[d];
				op->native_op = ops[o];
			}
		}
	if (matches != 1)
		op->native_dt = -1;
}
