#include "common/compat.h"
#include "coll/dtype.h"

#include <math.h>
#include <stdatomic.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif

/* The float16/bfloat16 code mr_reduce may use (mr_dtype_set_vec, for tests). */
static atomic_int vec_level = MR_VEC_BEST;

void mr_dtype_set_vec(enum mr_vec level)
{
	atomic_store(&vec_level, (int)level);
}

static bool vec_at_least(enum mr_vec level)
{
	return atomic_load_explicit(&vec_level, memory_order_relaxed) >= (int)level;
}

static const struct {
	const char *name;
	size_t size;
} dtypes[MESHRUN_DTYPE_COUNT] = {
	[MESHRUN_BOOL] = { "bool", 1 },	      [MESHRUN_INT8] = { "int8", 1 },
	[MESHRUN_INT16] = { "int16", 2 },     [MESHRUN_INT32] = { "int32", 4 },
	[MESHRUN_INT64] = { "int64", 8 },     [MESHRUN_UINT8] = { "uint8", 1 },
	[MESHRUN_UINT16] = { "uint16", 2 },   [MESHRUN_UINT32] = { "uint32", 4 },
	[MESHRUN_UINT64] = { "uint64", 8 },   [MESHRUN_FLOAT16] = { "float16", 2 },
	[MESHRUN_BFLOAT16] = { "bfloat16", 2 }, [MESHRUN_FLOAT32] = { "float32", 4 },
	[MESHRUN_FLOAT64] = { "float64", 8 },
};

bool mr_dtype_valid(int dt)
{
	return dt >= 0 && dt < MESHRUN_DTYPE_COUNT;
}

size_t mr_dtype_size(int dt)
{
	return mr_dtype_valid(dt) ? dtypes[dt].size : 0;
}

size_t meshrun_dtype_size(enum meshrun_dtype dt)
{
	return mr_dtype_size((int)dt);
}

const char *meshrun_dtype_name(enum meshrun_dtype dt)
{
	return mr_dtype_valid((int)dt) ? dtypes[dt].name : "invalid";
}

const char *mr_op_name(enum mr_op op)
{
	switch (op) {
	case MR_OP_SUM: return "all_sum";
	case MR_OP_MAX: return "all_max";
	case MR_OP_MIN: return "all_min";
	}
	return "?";
}

static uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

float mr_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;

	if (exp == 0x1f) /* inf / nan */
		return bits_f32(sign | 0x7f800000u | (man << 13));
	if (exp == 0) { /* zero / subnormal: man * 2^-24 exactly */
		float v = (float)man * 0x1p-24f;
		return sign ? -v : v;
	}
	return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t mr_f32_to_f16(float f)
{
	uint32_t u = f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t exp = (u >> 23) & 0xffu;
	uint32_t man = u & 0x7fffffu;

	if (exp == 0xff) /* inf stays inf; nan stays a quiet nan */
		return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
	int e = (int)exp - 127 + 15;
	if (e >= 0x1f)
		return (uint16_t)(sign | 0x7c00u);
	if (e <= 0) {
		/* subnormal (or zero) half: value = m * 2^-24, m = round(full * 2^(e-1-13)) */
		if (e < -10)
			return sign; /* below half of the smallest subnormal */
		uint32_t full = man | 0x800000u;
		unsigned shift = (unsigned)(14 - e);
		uint32_t m = full >> shift;
		uint32_t rem = full & ((1u << shift) - 1);
		uint32_t half = 1u << (shift - 1);
		if (rem > half || (rem == half && (m & 1)))
			m++;
		return (uint16_t)(sign | m); /* m may carry into the exponent: still right */
	}
	uint32_t m = man >> 13;
	uint32_t rem = man & 0x1fffu;
	uint32_t r = ((uint32_t)e << 10) | m;
	if (rem > 0x1000u || (rem == 0x1000u && (m & 1)))
		r++; /* a carry rolls into the exponent, up to inf */
	return (uint16_t)(sign | r);
}

float mr_bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

uint16_t mr_f32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u) /* nan: keep it a quiet nan */
		return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

/*
 * The sums of float32 and float64 are the hot path of every all-reduce: they
 * are written with GCC/Clang vector extensions (16-byte vectors: SSE2 on
 * x86-64, NEON on arm64), because GCC 12 at -O2 vectorises no loop whose trip
 * count is unknown (its "very cheap" cost model). Four vectors per iteration,
 * each its own variable: held in an array, GCC 12 kept them on the stack and
 * went through memory for every add (~9.6 GB/s of a 1 MiB packet in cache on
 * the bench machine, against ~20 GB/s this way and ~4 GB/s for a scalar
 * loop). Loads and stores go through memcpy: no alignment is assumed. The
 * element-wise result is the same IEEE addition, so the bits do not change.
 * acc and in must not overlap (restrict), as for every mr_reduce caller.
 */
#if defined(__GNUC__) || defined(__clang__)
#define VSUM_FN(NAME, T)                                                        \
	static void NAME(T *restrict a, const T *restrict b, size_t n)          \
	{                                                                       \
		typedef T v_t __attribute__((vector_size(16)));                 \
		enum { W = 16 / sizeof(T) };                                    \
		size_t i = 0;                                                   \
		for (; i + 4 * W <= n; i += 4 * W) {                            \
			v_t x0, x1, x2, x3, y0, y1, y2, y3;                     \
			memcpy(&x0, a + i, 16);                                 \
			memcpy(&x1, a + i + W, 16);                             \
			memcpy(&x2, a + i + 2 * W, 16);                         \
			memcpy(&x3, a + i + 3 * W, 16);                         \
			memcpy(&y0, b + i, 16);                                 \
			memcpy(&y1, b + i + W, 16);                             \
			memcpy(&y2, b + i + 2 * W, 16);                         \
			memcpy(&y3, b + i + 3 * W, 16);                         \
			x0 += y0;                                               \
			x1 += y1;                                               \
			x2 += y2;                                               \
			x3 += y3;                                               \
			memcpy(a + i, &x0, 16);                                 \
			memcpy(a + i + W, &x1, 16);                             \
			memcpy(a + i + 2 * W, &x2, 16);                         \
			memcpy(a + i + 3 * W, &x3, 16);                         \
		}                                                               \
		for (; i < n; i++)                                              \
			a[i] += b[i];                                           \
	}
#else
#define VSUM_FN(NAME, T)                                                        \
	static void NAME(T *restrict a, const T *restrict b, size_t n)          \
	{                                                                       \
		for (size_t i = 0; i < n; i++)                                  \
			a[i] += b[i];                                           \
	}
#endif
VSUM_FN(sum_f32, float)
VSUM_FN(sum_f64, double)

/* max/min of every float type: a NaN on either side wins (x first), so the
 * result does not depend on which rank's buffer is the accumulator. */
#define FLOAT_MINMAX(op, x, y)                                                          \
	(isnan(x) ? (x) : isnan(y) ? (y) : (op) == MR_OP_MAX ? ((x) > (y) ? (x) : (y))  \
						      : ((x) < (y) ? (x) : (y)))

/*
 * max/min of float32/float64, two vectors a step: x where x is NaN or x wins,
 * else y (an ordered comparison with a NaN y is false, so a NaN y is chosen),
 * which is FLOAT_MINMAX; a choice, not arithmetic, so the bits are the
 * scalar loop's, NaN payloads and signed zeros included. ~4.5 -> ~18 GB/s
 * for float32 on the bench machine.
 */
#if defined(__GNUC__) || defined(__clang__)
#define MR_MINMAX_VEC 1
#define VMINMAX_FN(NAME, T, U)                                                          \
	static void NAME(enum mr_op op, T *restrict a, const T *restrict b, size_t n)   \
	{                                                                               \
		typedef T v_t __attribute__((vector_size(16)));                         \
		typedef U m_t __attribute__((vector_size(16)));                         \
		enum { W = 16 / sizeof(T) };                                            \
		size_t i = 0;                                                           \
		for (; i + 2 * W <= n; i += 2 * W) {                                    \
			v_t x0, x1, y0, y1;                                             \
			memcpy(&x0, a + i, 16);                                         \
			memcpy(&x1, a + i + W, 16);                                     \
			memcpy(&y0, b + i, 16);                                         \
			memcpy(&y1, b + i + W, 16);                                     \
			m_t t0 = (m_t)(x0 != x0) | (m_t)(op == MR_OP_MAX ? x0 > y0 : x0 < y0); \
			m_t t1 = (m_t)(x1 != x1) | (m_t)(op == MR_OP_MAX ? x1 > y1 : x1 < y1); \
			x0 = (v_t)(((m_t)x0 & t0) | ((m_t)y0 & ~t0));                  \
			x1 = (v_t)(((m_t)x1 & t1) | ((m_t)y1 & ~t1));                  \
			memcpy(a + i, &x0, 16);                                         \
			memcpy(a + i + W, &x1, 16);                                     \
		}                                                                       \
		for (; i < n; i++)                                                      \
			a[i] = FLOAT_MINMAX(op, a[i], b[i]);                            \
	}
VMINMAX_FN(minmax_f32, float, uint32_t)
VMINMAX_FN(minmax_f64, double, uint64_t)
#endif

/* The scalar float16/bfloat16 operation, in float. */
static float half_op(enum mr_op op, float x, float y)
{
	return op == MR_OP_SUM ? x + y : FLOAT_MINMAX(op, x, y);
}

/*
 * float16 and bfloat16 sum, max and min, eight or more elements at a time.
 * The scalar conversions above branch on every element: a 1 MiB packet
 * summed at ~0.2 GB/s (float16) and ~0.8 GB/s (bfloat16) on the bench
 * machine, far below what the links bring in, and these are the dtypes MLX
 * models train in. Every path gives the scalar loop's bits (half_op in
 * float, rounded to nearest even; a NaN result quiet), except which NaN a
 * NaN sum is (any quiet NaN: the addition picks the operand). float16 values
 * never make a float subnormal (the smallest half is 2^-24), so flush-to-zero
 * modes change nothing there. max/min choose x where x is NaN or x wins,
 * else y (an ordered comparison with a NaN y is false, so a NaN y is chosen).
 *
 * float16: the processor's conversions, four or eight per instruction (F16C
 * on x86-64, checked at run time; NEON on arm64, always there). Done with
 * integer operations instead, a half costs ~20 of them (measured: 0.9 GB/s),
 * so other processors keep the scalar loop.
 */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MR_F16_VEC 1
/* The conversions written out: clang 14 turns _mm256_cvtph_ps and
 * _mm256_cvtps_ph into one conversion per element (measured: 2 GB/s for
 * a sum, against 10 with GCC). Immediate 0: round to nearest even. */
__attribute__((target("avx,f16c"))) static inline __m256 f16x8_to_f32(const uint16_t *p)
{
	__m256 r;

	__asm__("vcvtph2ps %1, %0" : "=x"(r) : "m"(*(const __m128i_u *)(const void *)p));
	return r;
}

__attribute__((target("avx,f16c"))) static inline void f32_to_f16x8(uint16_t *p, __m256 f)
{
	__asm__("vcvtps2ph $0, %1, %0" : "=m"(*(__m128i_u *)(void *)p) : "x"(f));
}

__attribute__((target("avx,f16c"))) static void f16_vec(enum mr_op op, uint16_t *restrict a,
							  const uint16_t *restrict b, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 x = f16x8_to_f32(a + i);
		__m256 y = f16x8_to_f32(b + i);
		__m256 r;
		if (op == MR_OP_SUM) {
			r = _mm256_add_ps(x, y);
		} else {
			__m256 win = op == MR_OP_MAX ? _mm256_cmp_ps(x, y, _CMP_GT_OQ)
						     : _mm256_cmp_ps(x, y, _CMP_LT_OQ);
			/* and/andnot/or, not blendv: GCC 12 turns a blendv on a
			 * comparison into a branch per element */
			__m256 take = _mm256_or_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), win);
			r = _mm256_or_ps(_mm256_and_ps(take, x), _mm256_andnot_ps(take, y));
		}
		f32_to_f16x8(a + i, r);
	}
	for (; i < n; i++)
		a[i] = mr_f32_to_f16(half_op(op, mr_f16_to_f32(a[i]), mr_f16_to_f32(b[i])));
}

/* What the processor offers: AVX with the OS saving its registers (XCR0
 * bits 1 and 2), then F16C and AVX2 on top. Bits of CPU_*. */
enum { CPU_F16C = 1, CPU_AVX2 = 2 };

static int cpu_probe(void)
{
	unsigned int eax, ebx, ecx, edx, lo, hi;
	const unsigned int avx = bit_AVX | bit_OSXSAVE;
	int f = 0;

	if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || (ecx & avx) != avx)
		return 0;
	__asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	(void)hi;
	if ((lo & 6u) != 6u)
		return 0;
	if (ecx & bit_F16C)
		f |= CPU_F16C;
	if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx & bit_AVX2))
		f |= CPU_AVX2;
	return f;
}

/* The CPU_* bits, asked once; none below MR_VEC_BEST. */
static int cpu_has(int bits)
{
	static atomic_int have = -1; /* not yet asked */
	int h = atomic_load_explicit(&have, memory_order_relaxed);

	if (h < 0) {
		h = cpu_probe();
		atomic_store_explicit(&have, h, memory_order_relaxed);
	}
	return vec_at_least(MR_VEC_BEST) ? h & bits : 0;
}

static bool have_f16_vec(void)
{
	return cpu_has(CPU_F16C);
}

#elif defined(__aarch64__) && defined(__ARM_NEON) && defined(__ARM_FP16_FORMAT_IEEE)
#define MR_F16_VEC 1
static inline float32x4_t neon_op(enum mr_op op, float32x4_t x, float32x4_t y)
{
	if (op == MR_OP_SUM)
		return vaddq_f32(x, y);
	uint32x4_t win = op == MR_OP_MAX ? vcgtq_f32(x, y) : vcltq_f32(x, y);
	return vbslq_f32(vorrq_u32(vmvnq_u32(vceqq_f32(x, x)), win), x, y);
}

static void f16_vec(enum mr_op op, uint16_t *restrict a, const uint16_t *restrict b, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		float16x8_t x = vreinterpretq_f16_u16(vld1q_u16(a + i));
		float16x8_t y = vreinterpretq_f16_u16(vld1q_u16(b + i));
		float32x4_t lo = neon_op(op, vcvt_f32_f16(vget_low_f16(x)), vcvt_f32_f16(vget_low_f16(y)));
		float32x4_t hi = neon_op(op, vcvt_high_f32_f16(x), vcvt_high_f32_f16(y));
		vst1q_u16(a + i, vreinterpretq_u16_f16(vcvt_high_f16_f32(vcvt_f16_f32(lo), hi)));
	}
	for (; i < n; i++)
		a[i] = mr_f32_to_f16(half_op(op, mr_f16_to_f32(a[i]), mr_f16_to_f32(b[i])));
}

static bool have_f16_vec(void)
{
	return vec_at_least(MR_VEC_BASE);
}
#endif

/*
 * bfloat16: a bfloat16 is the top half of a float, so GCC/Clang vector
 * extensions do it on any processor: 16-byte vectors (SSE2, NEON), and on
 * x86-64 with AVX2 32-byte ones, checked at run time (measured on a 1 MiB
 * packet: ~4.5 and ~10 GB/s). A vector of 32-bit lanes holds two elements
 * per lane: the low halves are shifted up into floats, the high ones masked,
 * and each result's top half goes back where its element came from, so the
 * byte order does not matter. A sum rounds: + 0x7fff + lsb carries when the
 * low 16 bits round up. It needs no NaN case: both addends have zero low 16
 * bits, so a NaN sum (an addend quieted, or the default NaN) has too, and
 * rounding leaves it as the scalar path does. max/min only choose, and
 * quiet a NaN they chose.
 */
#if defined(__GNUC__) || defined(__clang__)
#define MR_BF16_VEC 1
/* R = the float bits, result in the top half, of op on the float lanes X, Y */
#define BF16_LANES(R, X, Y)                                                                 \
	do {                                                                                \
		vf_t fx_ = (vf_t)(X), fy_ = (vf_t)(Y);                                      \
		if (op == MR_OP_SUM) {                                                      \
			vu_t s_ = (vu_t)(fx_ + fy_);                                        \
			R = s_ + 0x7fffu + ((s_ >> 16) & 1u);                               \
		} else {                                                                    \
			vu_t win_ = (vu_t)(op == MR_OP_MAX ? fx_ > fy_ : fx_ < fy_);        \
			vu_t take_ = (vu_t)(fx_ != fx_) | win_;                             \
			R = (take_ & (X)) | (~take_ & (Y));                                 \
			R |= (vu_t)((vf_t)R != (vf_t)R) & 0x400000u;                        \
		}                                                                           \
	} while (0)
#define BF16_FN(NAME, VS, ATTR)                                                             \
	ATTR static void NAME(enum mr_op op, uint16_t *restrict a, const uint16_t *restrict b, \
			      size_t n)                                                     \
	{                                                                                   \
		typedef uint32_t vu_t __attribute__((vector_size(VS)));                     \
		typedef float vf_t __attribute__((vector_size(VS)));                        \
		enum { E = VS / 2 }; /* elements per vector */                              \
		size_t i = 0;                                                               \
		for (; i + E <= n; i += E) {                                                \
			vu_t x, y, lo, hi;                                                  \
			memcpy(&x, a + i, sizeof(x));                                       \
			memcpy(&y, b + i, sizeof(y));                                       \
			BF16_LANES(lo, x << 16, y << 16);                                   \
			BF16_LANES(hi, x & 0xffff0000u, y & 0xffff0000u);                   \
			x = (lo >> 16) | (hi & 0xffff0000u);                                \
			memcpy(a + i, &x, sizeof(x));                                       \
		}                                                                           \
		for (; i < n; i++)                                                          \
			a[i] = mr_f32_to_bf16(half_op(op, mr_bf16_to_f32(a[i]),              \
						      mr_bf16_to_f32(b[i])));                \
	}
BF16_FN(bf16_vec16, 16, )
#if defined(__x86_64__)
BF16_FN(bf16_vec32, 32, __attribute__((target("avx2"))))
#endif

static void bf16_vec(enum mr_op op, uint16_t *restrict a, const uint16_t *restrict b, size_t n)
{
#if defined(__x86_64__)
	if (cpu_has(CPU_AVX2)) {
		bf16_vec32(op, a, b, n);
		return;
	}
#endif
	bf16_vec16(op, a, b, n);
}
#endif

#define REDUCE_LOOP(T, EXPR)                                                    \
	do {                                                                    \
		T *restrict a_ = acc;                                           \
		const T *restrict b_ = in;                                      \
		for (size_t i_ = 0; i_ < n; i_++) {                             \
			T x = a_[i_], y = b_[i_];                               \
			a_[i_] = (EXPR);                                        \
		}                                                               \
	} while (0)

#define REDUCE_INT(T)                                                           \
	do {                                                                    \
		if (op == MR_OP_SUM)                                            \
			REDUCE_LOOP(T, (T)(x + y));                             \
		else if (op == MR_OP_MAX)                                       \
			REDUCE_LOOP(T, x > y ? x : y);                          \
		else                                                            \
			REDUCE_LOOP(T, x < y ? x : y);                          \
	} while (0)

/* Unsigned wrap-around for signed sums, so overflow is defined (two's complement). */
#define REDUCE_SINT(T, U)                                                       \
	do {                                                                    \
		if (op == MR_OP_SUM)                                            \
			REDUCE_LOOP(T, (T)(U)((U)x + (U)y));                    \
		else if (op == MR_OP_MAX)                                       \
			REDUCE_LOOP(T, x > y ? x : y);                          \
		else                                                            \
			REDUCE_LOOP(T, x < y ? x : y);                          \
	} while (0)

void mr_reduce(enum mr_op op, enum meshrun_dtype dt, void *acc, const void *in, size_t n)
{
	switch (dt) {
	case MESHRUN_BOOL:
		if (op == MR_OP_MIN)
			REDUCE_LOOP(uint8_t, (uint8_t)(x && y));
		else
			REDUCE_LOOP(uint8_t, (uint8_t)(x || y));
		break;
	case MESHRUN_INT8: REDUCE_SINT(int8_t, uint8_t); break;
	case MESHRUN_INT16: REDUCE_SINT(int16_t, uint16_t); break;
	case MESHRUN_INT32: REDUCE_SINT(int32_t, uint32_t); break;
	case MESHRUN_INT64: REDUCE_SINT(int64_t, uint64_t); break;
	case MESHRUN_UINT8: REDUCE_INT(uint8_t); break;
	case MESHRUN_UINT16: REDUCE_INT(uint16_t); break;
	case MESHRUN_UINT32: REDUCE_INT(uint32_t); break;
	case MESHRUN_UINT64: REDUCE_INT(uint64_t); break;
	case MESHRUN_FLOAT32:
		if (op == MR_OP_SUM) {
			sum_f32(acc, in, n);
			break;
		}
#ifdef MR_MINMAX_VEC
		minmax_f32(op, acc, in, n);
#else
		REDUCE_LOOP(float, FLOAT_MINMAX(op, x, y));
#endif
		break;
	case MESHRUN_FLOAT64:
		if (op == MR_OP_SUM) {
			sum_f64(acc, in, n);
			break;
		}
#ifdef MR_MINMAX_VEC
		minmax_f64(op, acc, in, n);
#else
		REDUCE_LOOP(double, FLOAT_MINMAX(op, x, y));
#endif
		break;
	case MESHRUN_FLOAT16:
#ifdef MR_F16_VEC
		if (have_f16_vec()) {
			f16_vec(op, acc, in, n);
			break;
		}
#endif
		REDUCE_LOOP(uint16_t, mr_f32_to_f16(half_op(op, mr_f16_to_f32(x), mr_f16_to_f32(y))));
		break;
	case MESHRUN_BFLOAT16:
#ifdef MR_BF16_VEC
		if (vec_at_least(MR_VEC_BASE)) {
			bf16_vec(op, acc, in, n);
			break;
		}
#endif
		REDUCE_LOOP(uint16_t,
			    mr_f32_to_bf16(half_op(op, mr_bf16_to_f32(x), mr_bf16_to_f32(y))));
		break;
	case MESHRUN_DTYPE_COUNT:
		break;
	}
}
