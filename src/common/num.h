/*
 * num.h - checked number parsing (never atoi or strtoul(..., NULL, ...)).
 *
 * Each parser rejects empty input, leading/trailing junk or space, a sign where
 * none is allowed, overflow and values outside [min, max]; *out is written only
 * on success. Base 10 only, so "010" is ten, not eight.
 */
#ifndef MR_NUM_H
#define MR_NUM_H

#include "common/compat.h"

int mr_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int mr_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
int mr_parse_int(const char *s, int min, int max, int *out);
/* A finite decimal number ("1.5", "2", "1e3"). */
int mr_parse_double(const char *s, double min, double max, double *out);
/* A duration: a number with an optional unit ms, s (default), m; "1.5" = 1500 ms. */
int mr_parse_duration_ms(const char *s, int64_t max_ms, int64_t *out_ms);
/* A size: a number with an optional K/M/G (powers of 1024) or KiB/MiB/GiB suffix. */
int mr_parse_size(const char *s, uint64_t max, uint64_t *out);

#endif
