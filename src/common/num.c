#include "common/compat.h"
#include "common/num.h"

#include <ctype.h>
#include <math.h>
#include <strings.h>

int mr_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int mr_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	uint64_t mag;
	int neg = 0;

	if (!s)
		return -1;
	if (*s == '-') {
		neg = 1;
		s++;
	}
	if (mr_parse_u64(s, 0, neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, &mag) < 0)
		return -1;
	int64_t v = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag)
			: (int64_t)mag;
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int mr_parse_int(const char *s, int min, int max, int *out)
{
	int64_t v;

	if (mr_parse_i64(s, min, max, &v) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

int mr_parse_double(const char *s, double min, double max, double *out)
{
	char *end = NULL;
	double v;

	if (!s || !*s || isspace((unsigned char)*s))
		return -1;
	/* Decimal only: strtod would also take hex ("0x10"), "inf" and "nan". */
	if (s[strspn(s, "0123456789.eE+-")])
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* Split "12.5ms" into the number and the unit; the number part must be non-empty. */
static int split_unit(const char *s, char *num, size_t numsz, const char **unit)
{
	size_t n = 0;

	if (!s || !*s)
		return -1;
	while (s[n] && (isdigit((unsigned char)s[n]) || s[n] == '.'))
		n++;
	if (n == 0 || n >= numsz)
		return -1;
	memcpy(num, s, n);
	num[n] = '\0';
	*unit = s + n;
	return 0;
}

int mr_parse_duration_ms(const char *s, int64_t max_ms, int64_t *out_ms)
{
	char num[64];
	const char *unit;
	double v, scale;

	if (split_unit(s, num, sizeof(num), &unit) < 0)
		return -1;
	if (!*unit || !strcmp(unit, "s"))
		scale = 1000;
	else if (!strcmp(unit, "ms"))
		scale = 1;
	else if (!strcmp(unit, "m"))
		scale = 60000;
	else
		return -1;
	if (mr_parse_double(num, 0, 1e15, &v) < 0)
		return -1;
	v *= scale;
	if (v > (double)max_ms)
		return -1;
	*out_ms = (int64_t)llround(v);
	return 0;
}

int mr_parse_size(const char *s, uint64_t max, uint64_t *out)
{
	static const struct { const char *unit; uint64_t scale; } units[] = {
		{ "", 1 }, { "K", 1ULL << 10 }, { "KiB", 1ULL << 10 }, { "M", 1ULL << 20 },
		{ "MiB", 1ULL << 20 }, { "G", 1ULL << 30 }, { "GiB", 1ULL << 30 },
	};
	char num[64];
	const char *unit;
	uint64_t v;

	if (split_unit(s, num, sizeof(num), &unit) < 0)
		return -1;
	if (mr_parse_u64(num, 0, UINT64_MAX, &v) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
		if (strcmp(unit, units[i].unit))
			continue;
		if (v > max / units[i].scale)
			return -1;
		*out = v * units[i].scale;
		return 0;
	}
	return -1;
}
