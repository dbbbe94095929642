#include "common/compat.h"
#include "common/json.h"
#include "common/err.h"

const char *mr_json_type_name(const cJSON *item)
{
	if (!item)
		return "nothing";
	if (cJSON_IsString(item))
		return "string";
	if (cJSON_IsNumber(item))
		return "number";
	if (cJSON_IsObject(item))
		return "object";
	if (cJSON_IsArray(item))
		return "array";
	if (cJSON_IsNull(item))
		return "null";
	if (cJSON_IsBool(item))
		return "bool";
	return "invalid";
}

/* Append text to the path; past the buffer the tail becomes "...". */
static void path_append(struct mr_json_path *p, const char *s, size_t n)
{
	size_t room = sizeof(p->buf) - 1 - p->len;

	if (n > room) {
		n = room;
		if (room >= 3) {
			memcpy(p->buf + p->len, s, room - 3);
			memcpy(p->buf + p->len + room - 3, "...", 3);
			p->len += room;
			p->buf[p->len] = '\0';
			return;
		}
	}
	memcpy(p->buf + p->len, s, n);
	p->len += n;
	p->buf[p->len] = '\0';
}

static void path_push_mark(struct mr_json_path *p)
{
	if (p->depth < MR_JSON_PATH_DEPTH)
		p->mark[p->depth] = p->len;
	p->depth++;
}

void mr_json_path_key(struct mr_json_path *p, const char *key)
{
	path_push_mark(p);
	if (p->len)
		path_append(p, ".", 1);
	path_append(p, key, strlen(key));
}

void mr_json_path_index(struct mr_json_path *p, size_t i)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "[%zu]", i);

	path_push_mark(p);
	path_append(p, tmp, (size_t)n);
}

void mr_json_path_pop(struct mr_json_path *p)
{
	if (!p->depth)
		return;
	p->depth--;
	if (p->depth < MR_JSON_PATH_DEPTH) {
		p->len = p->mark[p->depth];
		p->buf[p->len] = '\0';
	}
}

const char *mr_json_path_str(const struct mr_json_path *p)
{
	return p && p->len ? p->buf : "top level";
}

int mr_json_err(struct meshrun_err *err, const char *name, const struct mr_json_path *p,
		const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return mr_err_set(err, MESHRUN_E_PARSE, "%s: %s: %s", name, mr_json_path_str(p), msg);
}

static const char *with_article(const char *type)
{
	return (type[0] == 'a' || type[0] == 'o') ? "an" : "a";
}

static int want(const cJSON *item, bool ok, const char *type, const char *name,
		const struct mr_json_path *p, struct meshrun_err *err)
{
	if (ok)
		return 0;
	if (!item)
		return mr_json_err(err, name, p, "expected %s %s, got nothing", with_article(type),
				   type);
	return mr_json_err(err, name, p, "expected %s %s, got %s", with_article(type), type,
			   mr_json_type_name(item));
}

int mr_json_want_string(const cJSON *item, const char *name, const struct mr_json_path *p,
			const char **out, struct meshrun_err *err)
{
	int rc = want(item, cJSON_IsString(item) && item->valuestring, "string", name, p, err);

	if (!rc && out)
		*out = item->valuestring;
	return rc;
}

int mr_json_want_array(const cJSON *item, const char *name, const struct mr_json_path *p,
		       struct meshrun_err *err)
{
	return want(item, cJSON_IsArray(item), "array", name, p, err);
}

int mr_json_want_object(const cJSON *item, const char *name, const struct mr_json_path *p,
			struct meshrun_err *err)
{
	return want(item, cJSON_IsObject(item), "object", name, p, err);
}

int mr_json_want_int(const cJSON *item, const char *name, const struct mr_json_path *p,
		     long long min, long long max, long long *out, struct meshrun_err *err)
{
	int rc = want(item, cJSON_IsNumber(item), "number", name, p, err);
	double d;

	if (rc)
		return rc;
	d = item->valuedouble;
	/* The comparisons are false for NaN, so it is rejected too. */
	if (!(d >= (double)min && d <= (double)max) || d != (double)(long long)d)
		return mr_json_err(err, name, p, "expected an integer in [%lld, %lld], got %.17g",
				   min, max, d);
	if (out)
		*out = (long long)d;
	return 0;
}

const cJSON *mr_json_member(const cJSON *obj, const char *key)
{
	if (!cJSON_IsObject(obj))
		return NULL;
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

int mr_json_missing(struct meshrun_err *err, const char *name, const struct mr_json_path *p,
		    const char *key)
{
	return mr_json_err(err, name, p, "missing key '%s'", key);
}

/* Reject an object holding one key twice, anywhere in the tree. */
static int check_duplicates(const cJSON *item, const char *name, struct mr_json_path *p,
			    struct meshrun_err *err)
{
	size_t i = 0;

	for (const cJSON *c = item->child; c; c = c->next, i++) {
		if (cJSON_IsObject(item)) {
			for (const cJSON *d = item->child; d != c; d = d->next)
				if (c->string && d->string && !strcmp(c->string, d->string))
					return mr_json_err(err, name, p, "duplicate key '%s'",
							   c->string);
			mr_json_path_key(p, c->string ? c->string : "?");
		} else {
			mr_json_path_index(p, i);
		}
		int rc = check_duplicates(c, name, p, err);
		mr_json_path_pop(p);
		if (rc)
			return rc;
	}
	return 0;
}

/* "near '...'": a short, printable excerpt of the text at the error position. */
static void excerpt(const char *s, size_t n, char *out, size_t outsz)
{
	size_t j = 0;

	for (size_t i = 0; i < n && i < 20 && j + 1 < outsz; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\n' || c == '\r')
			break;
		out[j++] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
	}
	out[j] = '\0';
}

static int parse_error(const char *text, size_t len, size_t pos, const char *name,
		       const char *what, struct meshrun_err *err)
{
	size_t line = 1, col = 1;
	char near[32];

	if (pos > len)
		pos = len;
	for (size_t i = 0; i < pos; i++) {
		if (text[i] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	excerpt(text + pos, len - pos, near, sizeof(near));
	if (near[0])
		return mr_err_set(err, MESHRUN_E_PARSE, "%s:%zu:%zu: %s (near '%s')", name, line,
				  col, what, near);
	return mr_err_set(err, MESHRUN_E_PARSE, "%s:%zu:%zu: %s (at end of input)", name, line,
			  col, what);
}

int mr_json_parse(const char *text, size_t len, const char *name, cJSON **out,
		  struct meshrun_err *err)
{
	struct mr_json_path p = MR_JSON_PATH_INIT;
	const char *end = NULL;
	cJSON *root = NULL;
	char *copy = NULL;
	size_t pos;
	int rc;

	/*
	 * cJSON reports an error at the end of its input as "the last byte", which
	 * cannot be told from an error at that byte. Parse a copy with one byte
	 * (0x01) appended that no JSON text may contain: a truncated document then
	 * fails exactly at len.
	 */
	if (len > SIZE_MAX - 2 || !(copy = malloc(len + 2)))
		return mr_err_set(err, MESHRUN_E_NOMEM, "%s: out of memory parsing JSON", name);
	memcpy(copy, text, len);
	copy[len] = '\x01';
	copy[len + 1] = '\0';
	root = cJSON_ParseWithLengthOpts(copy, len + 1, &end, 0);
	if (!root) {
		/* cJSON leaves end at the failing byte (or NULL when out of memory). */
		if (!end) {
			rc = mr_err_set(err, MESHRUN_E_NOMEM, "%s: out of memory parsing JSON",
					name);
			goto out;
		}
		pos = (size_t)(end - copy);
		/* cJSON may stop just past the offending token, on white space. */
		while (pos > 0 && pos < len && strchr(" \t\r\n", text[pos]))
			pos--;
		rc = parse_error(text, len, pos, name, "malformed JSON", err);
		goto out;
	}
	pos = end ? (size_t)(end - copy) : len;
	while (pos < len && strchr(" \t\r\n", text[pos]) && text[pos])
		pos++;
	if (pos < len) {
		rc = parse_error(text, len, pos, name,
				 "malformed JSON: extra data after the document", err);
		goto out;
	}
	rc = check_duplicates(root, name, &p, err);
	if (rc)
		goto out;
	*out = root;
	root = NULL;
out:
	cJSON_Delete(root);
	free(copy);
	return rc;
}

/* Decode one UTF-8 sequence at s; returns its length, or 0 if invalid. */
static size_t utf8_decode(const unsigned char *s, uint32_t *cp)
{
	uint32_t c;
	size_t n;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	} else if ((s[0] & 0xe0) == 0xc0) {
		c = s[0] & 0x1f;
		n = 2;
	} else if ((s[0] & 0xf0) == 0xe0) {
		c = s[0] & 0x0f;
		n = 3;
	} else if ((s[0] & 0xf8) == 0xf0) {
		c = s[0] & 0x07;
		n = 4;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and values past U+10FFFF are not UTF-8. */
	if ((n == 2 && c < 0x80) || (n == 3 && c < 0x800) || (n == 4 && c < 0x10000) ||
	    (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		return 0;
	*cp = c;
	return n;
}

int mr_json_quote(struct mr_buf *out, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t start = out->len;
	uint32_t cp;
	int rc = mr_buf_putc(out, '"');

	while (!rc && *u) {
		size_t n = utf8_decode(u, &cp);
		if (!n) {
			out->len = start;
			if (out->p)
				out->p[start] = '\0';
			errno = EILSEQ;
			return -1;
		}
		u += n;
		switch (cp) {
		case '"': rc = mr_buf_puts(out, "\\\""); break;
		case '\\': rc = mr_buf_puts(out, "\\\\"); break;
		case '\n': rc = mr_buf_puts(out, "\\n"); break;
		case '\r': rc = mr_buf_puts(out, "\\r"); break;
		case '\t': rc = mr_buf_puts(out, "\\t"); break;
		case '\b': rc = mr_buf_puts(out, "\\b"); break;
		case '\f': rc = mr_buf_puts(out, "\\f"); break;
		default:
			if (cp < 0x20 || (cp > 0x7f && cp < 0x10000)) {
				rc = mr_buf_printf(out, "\\u%04x", (unsigned)cp);
			} else if (cp >= 0x10000) {
				cp -= 0x10000;
				rc = mr_buf_printf(out, "\\u%04x\\u%04x", 0xd800u + (cp >> 10),
						   0xdc00u + (cp & 0x3ff));
			} else {
				rc = mr_buf_putc(out, (char)cp);
			}
		}
	}
	if (!rc)
		rc = mr_buf_putc(out, '"');
	if (rc) {
		int saved = errno;
		out->len = start;
		if (out->p)
			out->p[start] = '\0';
		errno = saved;
	}
	return rc;
}
