/*
 * dtype.h - element types and the element-wise reductions of libmeshrun.
 *
 * mr_reduce(op, dt, acc, in, n): acc[i] = op(acc[i], in[i]) for n elements;
 * acc and in must not overlap.
 * float16 and bfloat16 are converted to float, combined, and rounded back to
 * nearest-even: for a sum this equals the correctly rounded sum, because float
 * has at least 2p+2 significand bits for both (p = 11 and 8; Figueroa's
 * double-rounding bound), so no double-rounding error can occur.
 * bool: sum and max are logical or, min is logical and (any non-zero byte is true).
 */
#ifndef MR_COLL_DTYPE_H
#define MR_COLL_DTYPE_H

#include "common/compat.h"
#include "meshrun/meshrun.h"

enum mr_op { MR_OP_SUM = 0, MR_OP_MAX, MR_OP_MIN };

bool mr_dtype_valid(int dt);
size_t mr_dtype_size(int dt);
const char *mr_op_name(enum mr_op op);
void mr_reduce(enum mr_op op, enum meshrun_dtype dt, void *acc, const void *in, size_t n);

/*
 * Which float16/bfloat16 code mr_reduce may use, so that a test can
 * compare them all on one machine: MR_VEC_NONE the scalar loops,
 * MR_VEC_BASE what every processor of the architecture has (SSE2, NEON),
 * MR_VEC_BEST (the default) also what this processor was found to have at
 * run time (x86-64: F16C, AVX2). Process-wide; set it before reducing.
 */
enum mr_vec { MR_VEC_NONE = 0, MR_VEC_BASE, MR_VEC_BEST };
void mr_dtype_set_vec(enum mr_vec level);

float mr_f16_to_f32(uint16_t h);
uint16_t mr_f32_to_f16(float f);
float mr_bf16_to_f32(uint16_t h);
uint16_t mr_f32_to_bf16(float f);

#endif
