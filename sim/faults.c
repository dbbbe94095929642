/*
 * faults.c - see faults.h: the arguments of the cable faults.
 */
#include "common/compat.h"
#include "sim/faults.h"

#include <ctype.h>
#include <strings.h>

#include "common/err.h"
#include "common/num.h"
#include "common/shquote.h"
#include "common/xalloc.h"

static bool is_off(const char *s)
{
	return !strcmp(s, "off") || !strcmp(s, "0");
}

/*
 * Digits with at most `frac` decimals into an integer scaled by 10^frac;
 * *end at the first character after the number. -1: not such a number, or
 * above max.
 */
static int parse_fixed(const char *s, int frac, uint64_t max, uint64_t *out, const char **end)
{
	uint64_t v = 0;
	int nd = 0, nf = -1;

	for (; *s; s++) {
		if (*s == '.' && nf < 0 && nd) {
			nf = 0;
			continue;
		}
		if (!isdigit((unsigned char)*s))
			break;
		if (nf >= 0 && ++nf > frac)
			return -1;
		if (v > (max - (uint64_t)(*s - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
		nd++;
	}
	if (!nd || nf == 0)
		return -1;
	for (int i = nf < 0 ? 0 : nf; i < frac; i++) {
		if (v > max / 10)
			return -1;
		v *= 10;
	}
	*out = v;
	*end = s;
	return 0;
}

int mr_sim_parse_rate(const char *s, uint64_t *bps, struct meshrun_err *err)
{
	static const struct { const char *unit; uint64_t mul; } units[] = {
		{ "bit", 1 }, { "kbit", 1000 }, { "mbit", 1000000 }, { "gbit", 1000000000 },
		{ "tbit", 1000000000000ULL },
	};
	const uint64_t max = 10000000000000ULL; /* 10 tbit/s */
	const char *end = NULL;
	uint64_t v, mul = 0;

	if (is_off(s)) {
		*bps = 0;
		return 0;
	}
	/* three decimals at most: "2.5gbit", "1.544mbit" */
	if (parse_fixed(s, 3, max * 1000, &v, &end) < 0 || !*end)
		goto bad;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcasecmp(end, units[i].unit))
			mul = units[i].mul;
	if (!mul || v > max * 1000 / mul || v * mul % 1000)
		goto bad;
	v = v * mul / 1000;
	if (v < 1000 || v > max)
		goto bad;
	*bps = v;
	return 0;
bad:
	return mr_err_set(err, MESHRUN_E_USAGE,
			  "'%s': expected a rate from 1kbit to 10tbit like 40gbit or 100mbit, or off",
			  s);
}

int mr_sim_parse_pct(const char *s, unsigned *hundredths, struct meshrun_err *err)
{
	const char *end = NULL;
	uint64_t v;

	if (parse_fixed(s, 2, 10000, &v, &end) < 0 || (*end && strcmp(end, "%")) || v > 10000)
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "'%s': expected a percentage from 0 to 100 like 5 or 0.5%%", s);
	*hundredths = (unsigned)v;
	return 0;
}

int mr_sim_parse_period(const char *s, int64_t *ms, struct meshrun_err *err)
{
	int64_t v;

	if (is_off(s)) {
		*ms = 0;
		return 0;
	}
	if (mr_parse_duration_ms(s, 3600000, &v) < 0 || v < 100)
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "'%s': expected a period from 100ms to 1h like 2s, or off", s);
	*ms = v;
	return 0;
}

static bool in_vec(const struct mr_strvec *v, const char *s)
{
	for (size_t i = 0; i < v->nr; i++)
		if (!strcmp(v->v[i], s))
			return true;
	return false;
}

int mr_sim_parse_partition(const char *s, struct mr_strvec *a, struct mr_strvec *b,
			   struct meshrun_err *err)
{
	const char *bar = strchr(s, '|');
	struct mr_strvec part = MR_STRVEC_INIT;
	char *side[2];
	int rc = 0;

	if (!bar || strchr(bar + 1, '|'))
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "'%s': expected two groups of hosts like h1,h2|h3,h4", s);
	side[0] = xstrndup(s, (size_t)(bar - s));
	side[1] = xstrdup(bar + 1);
	for (int g = 0; g < 2 && rc == 0; g++) {
		struct mr_strvec *out = g ? b : a;
		mr_strvec_split(&part, side[g], ',', false);
		if (!side[g][0])
			rc = mr_err_set(err, MESHRUN_E_USAGE, "'%s': the %s group is empty", s,
					g ? "second" : "first");
		for (size_t i = 0; i < part.nr && rc == 0; i++) {
			const char *h = part.v[i];
			if (!mr_is_hostname(h) || strlen(h) > 63)
				rc = mr_err_set(err, MESHRUN_E_USAGE, "'%s': '%s' is not a host name",
						s, h);
			else if (in_vec(a, h) || in_vec(b, h))
				rc = mr_err_set(err, MESHRUN_E_USAGE, "'%s': host '%s' is named twice",
						s, h);
			else
				mr_strvec_push(out, h);
		}
		mr_strvec_release(&part);
	}
	free(side[0]);
	free(side[1]);
	return rc;
}

void mr_sim_fmt_rate(uint64_t bps, char *out, size_t len)
{
	static const char *const unit[] = { "bit", "kbit", "mbit", "gbit", "tbit" };
	int u = 0;

	while (u < 4 && bps && bps % 1000 == 0) {
		bps /= 1000;
		u++;
	}
	snprintf(out, len, "%llu%s", (unsigned long long)bps, unit[u]);
}

void mr_sim_fmt_pct(unsigned hundredths, char *out, size_t len)
{
	if (hundredths % 100 == 0)
		snprintf(out, len, "%u%%", hundredths / 100);
	else if (hundredths % 10 == 0)
		snprintf(out, len, "%u.%u%%", hundredths / 100, hundredths / 10 % 10);
	else
		snprintf(out, len, "%u.%02u%%", hundredths / 100, hundredths % 100);
}
