/*
 * common/hostfold.c - a failure on many hosts as whole lines, folded when long
 * (hostfold.h).
 */
#include "common/compat.h"
#include "common/hostfold.h"
#include "common/array.h"
#include "common/buf.h"

#include <ctype.h>

int mr_hostfold_add(struct mr_hostfold *f, const char *host, const char *why, const char *hint)
{
	struct mr_hostfold_item *v = mr_array_grow(f->items, f->n + 1, &f->alloc, sizeof(*v));

	if (!v)
		return -1;
	f->items = v;
	v[f->n].host = strdup(host);
	v[f->n].why = strdup(why);
	v[f->n].hint = hint;
	if (!v[f->n].host || !v[f->n].why) {
		free(v[f->n].host);
		free(v[f->n].why);
		return -1;
	}
	f->n++;
	return 0;
}

void mr_hostfold_release(struct mr_hostfold *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->items[i].host);
		free(f->items[i].why);
	}
	MR_FREE(f->items);
	f->n = f->alloc = 0;
}

static bool b64_char(char c)
{
	return isalnum((unsigned char)c) || c == '+' || c == '/' || c == '=';
}

/* Length of an IPv4 address "d.d.d.d" at s (0: none). */
static size_t ipv4_at(const char *s)
{
	size_t i = 0;

	for (int part = 0; part < 4; part++) {
		size_t d = 0;

		while (isdigit((unsigned char)s[i + d]) && d < 3)
			d++;
		if (!d)
			return 0;
		i += d;
		if (part < 3) {
			if (s[i] != '.')
				return 0;
			i++;
		}
	}
	return isdigit((unsigned char)s[i]) ? 0 : i;
}

/* why with host's name, IPv4 addresses and base64/hex runs of 20 or more masked. */
static int normalize(const char *host, const char *why, struct mr_buf *out)
{
	size_t hl = strlen(host);
	const char *p = why;

	mr_buf_reset(out);
	while (*p) {
		size_t n;

		if (hl && !strncmp(p, host, hl)) {
			n = hl;
		} else if ((p == why || !isalnum((unsigned char)p[-1])) && (n = ipv4_at(p))) {
			;
		} else {
			for (n = 0; b64_char(p[n]); n++)
				;
			if (n < 20) {
				if (mr_buf_putc(out, *p++) < 0)
					return -1;
				continue;
			}
		}
		if (mr_buf_putc(out, '\x01') < 0)
			return -1;
		p += n;
	}
	return 0;
}

bool mr_hostfold_same(const char *ha, const char *a, const char *hb, const char *b)
{
	struct mr_buf na = MR_BUF_INIT, nb = MR_BUF_INIT;
	bool same = normalize(ha, a, &na) == 0 && normalize(hb, b, &nb) == 0 &&
		    !strcmp(mr_buf_cstr(&na), mr_buf_cstr(&nb));

	mr_buf_release(&na);
	mr_buf_release(&nb);
	return same;
}

/* "(h2, h3, h4, ...)": the hosts of a group after its first, in about 60 columns. */
static int names_line(const struct mr_hostfold *f, const size_t *group, size_t first, size_t count,
		      const char *prefix, struct mr_strvec *out)
{
	struct mr_buf b = MR_BUF_INIT;
	size_t shown = 0;
	int rc;

	rc = mr_buf_printf(&b, "%sand %zu more host%s: same error (", prefix, count, count == 1 ? "" : "s");
	for (size_t i = first + 1; rc == 0 && i < f->n; i++) {
		if (group[i] != group[first])
			continue;
		if (shown && b.len + strlen(f->items[i].host) > 100) {
			rc = mr_buf_puts(&b, ", ...");
			break;
		}
		rc = mr_buf_printf(&b, "%s%s", shown++ ? ", " : "", f->items[i].host);
	}
	if (rc == 0 && mr_buf_putc(&b, ')') == 0)
		rc = mr_strvec_push(out, mr_buf_cstr(&b));
	else
		rc = -1;
	mr_buf_release(&b);
	return rc;
}

int mr_hostfold_render(const struct mr_hostfold *f, bool all, const char *all_hint,
		       const char *prefix, struct mr_strvec *out)
{
	size_t *group = calloc(f->n ? f->n : 1, sizeof(*group)), *size = calloc(f->n ? f->n : 1, sizeof(*size));
	size_t ngroups = 0, rest = 0;
	int rc = 0;

	if (!group || !size) {
		rc = -1;
		goto out;
	}
	/* group[i]: the first host with the same failure as host i */
	for (size_t i = 0; i < f->n; i++) {
		group[i] = i;
		for (size_t k = 0; !all && f->n > MR_HOSTFOLD_FULL && k < i; k++)
			if (group[k] == k && mr_hostfold_same(f->items[k].host, f->items[k].why,
							      f->items[i].host, f->items[i].why)) {
				group[i] = k;
				break;
			}
		size[group[i]]++;
	}
	for (size_t i = 0; rc == 0 && i < f->n; i++) {
		if (group[i] != i)
			continue;
		if (!all && ngroups++ >= MR_HOSTFOLD_FULL) {
			rest += size[i];
			continue;
		}
		rc = mr_strvec_pushf(out, "%s%s: %s", prefix, f->items[i].host, f->items[i].why);
		if (rc == 0 && size[i] > 1)
			rc = names_line(f, group, i, size[i] - 1, prefix, out);
	}
	if (rc == 0 && rest)
		rc = mr_strvec_pushf(out, "%sand %zu more host%s with other errors (%s lists every host)",
				     prefix, rest, rest == 1 ? "" : "s", all_hint);
	/* each hint once, in the order first seen */
	for (size_t i = 0; rc == 0 && i < f->n; i++) {
		bool seen = !f->items[i].hint;

		for (size_t k = 0; !seen && k < i; k++)
			seen = f->items[k].hint == f->items[i].hint;
		if (!seen)
			rc = mr_strvec_pushf(out, "hint: %s", f->items[i].hint);
	}
out:
	free(group);
	free(size);
	return rc < 0 ? -1 : 0;
}
