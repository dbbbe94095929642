#include "common/compat.h"
#include "common/array.h"
#include "common/strvec.h"

static int strvec_push_owned(struct mr_strvec *sv, char *s)
{
	if (!s)
		return -1;
	char **v = mr_array_grow(sv->v, sv->nr + 2, &sv->alloc, sizeof(*v)); /* + the NULL */

	if (!v) {
		free(s);
		return -1;
	}
	sv->v = v;
	sv->v[sv->nr++] = s;
	sv->v[sv->nr] = NULL;
	return 0;
}

int mr_strvec_push(struct mr_strvec *sv, const char *s)
{
	return strvec_push_owned(sv, strdup(s));
}

int mr_strvec_pushf(struct mr_strvec *sv, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	return strvec_push_owned(sv, s);
}

int mr_strvec_pushv(struct mr_strvec *sv, char *const *v)
{
	for (; v && *v; v++)
		if (mr_strvec_push(sv, *v) < 0)
			return -1;
	return 0;
}

int mr_strvec_split(struct mr_strvec *sv, const char *s, char sep, bool skip_empty)
{
	const char *p = s;

	for (;;) {
		const char *e = strchr(p, sep);
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n || !skip_empty)
			if (strvec_push_owned(sv, strndup(p, n)) < 0)
				return -1;
		if (!e)
			return 0;
		p = e + 1;
	}
}

static ssize_t strvec_env_index(const struct mr_strvec *sv, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < sv->nr; i++)
		if (!strncmp(sv->v[i], name, n) && sv->v[i][n] == '=')
			return (ssize_t)i;
	return -1;
}

int mr_strvec_setenv(struct mr_strvec *sv, const char *name, const char *value)
{
	ssize_t i = strvec_env_index(sv, name);
	char *s = NULL;

	if (asprintf(&s, "%s=%s", name, value) < 0)
		return -1;
	if (i < 0)
		return strvec_push_owned(sv, s);
	free(sv->v[i]);
	sv->v[i] = s;
	return 0;
}

const char *mr_strvec_getenv(const struct mr_strvec *sv, const char *name)
{
	ssize_t i = strvec_env_index(sv, name);

	return i < 0 ? NULL : sv->v[i] + strlen(name) + 1;
}

void mr_strvec_release(struct mr_strvec *sv)
{
	for (size_t i = 0; i < sv->nr; i++)
		free(sv->v[i]);
	MR_FREE(sv->v);
	sv->nr = sv->alloc = 0;
}
