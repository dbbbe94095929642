/*
 * plist.c - see plist.h: a strict reader of XML property lists.
 *
 * A recursive descent over the text with a line counter for messages. Depth is
 * bounded (MAX_DEPTH) so that a hostile file cannot exhaust the stack.
 */
#include "common/compat.h"
#include "sim/plist.h"

#include <ctype.h>

#include "common/buf.h"
#include "common/err.h"

#define MAX_DEPTH 32

struct rd {
	const char *start, *p, *end;
	struct meshrun_err *err;
};

static int line_of(const struct rd *r)
{
	int line = 1;

	for (const char *s = r->start; s < r->p; s++)
		line += *s == '\n';
	return line;
}

/* The error at the reader's position; returns MESHRUN_E_PARSE. */
static int MR_PRINTF(2, 3) bad(struct rd *r, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	if (r->err && r->err->code)
		return MESHRUN_E_PARSE;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return mr_err_set(r->err, MESHRUN_E_PARSE, "line %d: %s", line_of(r), msg);
}

static bool starts(const struct rd *r, const char *s)
{
	size_t n = strlen(s);

	return (size_t)(r->end - r->p) >= n && !memcmp(r->p, s, n);
}

static void skip_blank(struct rd *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\r' || *r->p == '\n'))
		r->p++;
}

/* Skip up to and past `close`; -1 when the text ends first. */
static int skip_past(struct rd *r, const char *close)
{
	size_t n = strlen(close);

	for (; (size_t)(r->end - r->p) >= n; r->p++)
		if (!memcmp(r->p, close, n)) {
			r->p += n;
			return 0;
		}
	return -1;
}

/* Blanks and comments (and, before the root, the declaration and DOCTYPE). */
static int skip_misc(struct rd *r, bool prolog)
{
	for (;;) {
		skip_blank(r);
		if (starts(r, "<!--")) {
			if (skip_past(r, "-->") < 0)
				return bad(r, "comment not closed");
		} else if (prolog && starts(r, "<?xml")) {
			if (skip_past(r, "?>") < 0)
				return bad(r, "<?xml declaration not closed");
		} else if (prolog && starts(r, "<!DOCTYPE")) {
			if (skip_past(r, ">") < 0)
				return bad(r, "<!DOCTYPE not closed");
		} else {
			return 0;
		}
	}
}

/*
 * A tag at r->p: "<name>", "<name/>" or "</name>" (attributes only where
 * allowed). name gets the name; *closing and *empty say which form.
 */
static int read_tag(struct rd *r, char *name, size_t n, bool *closing, bool *empty, bool attrs_ok)
{
	size_t len = 0;

	if (r->p >= r->end || *r->p != '<')
		return bad(r, "expected an element");
	r->p++;
	*closing = r->p < r->end && *r->p == '/';
	if (*closing)
		r->p++;
	while (r->p < r->end && isalpha((unsigned char)*r->p)) {
		if (len + 1 >= n)
			return bad(r, "element name too long");
		name[len++] = *r->p++;
	}
	name[len] = '\0';
	if (!len)
		return bad(r, "expected an element name");
	*empty = false;
	skip_blank(r);
	if (!*closing && attrs_ok) {
		/* version="1.0": attributes of <plist>, skipped */
		while (r->p < r->end && *r->p != '>' && *r->p != '/') {
			const char *q = r->p;
			while (r->p < r->end && (isalnum((unsigned char)*r->p) || *r->p == '-' || *r->p == ':'))
				r->p++;
			if (r->p == q || r->p >= r->end || *r->p != '=' || ++r->p >= r->end ||
			    (*r->p != '"' && *r->p != '\''))
				return bad(r, "malformed attribute in <%s>", name);
			{
				char quote = *r->p++;
				while (r->p < r->end && *r->p != quote)
					r->p++;
				if (r->p >= r->end)
					return bad(r, "attribute value not closed in <%s>", name);
				r->p++;
			}
			skip_blank(r);
		}
	}
	if (!*closing && r->p < r->end && *r->p == '/') {
		*empty = true;
		r->p++;
	}
	if (r->p >= r->end || *r->p != '>')
		return bad(r, "<%s%s>: %s", *closing ? "/" : "", name,
			   attrs_ok || *closing ? "malformed tag" : "attributes are not allowed here");
	r->p++;
	return 0;
}

/* Text up to "</name>", entities decoded, CDATA kept as is; into out. */
static int read_text(struct rd *r, const char *name, struct mr_buf *out)
{
	char close[32];

	snprintf(close, sizeof(close), "</%s>", name);
	while (r->p < r->end) {
		if (starts(r, close)) {
			r->p += strlen(close);
			return 0;
		}
		if (starts(r, "<![CDATA[")) {
			const char *s = r->p + 9;
			r->p = s;
			if (skip_past(r, "]]>") < 0)
				return bad(r, "CDATA not closed");
			if (mr_buf_append(out, s, (size_t)(r->p - 3 - s)) < 0)
				return bad(r, "out of memory");
			continue;
		}
		if (*r->p == '<')
			return bad(r, "unexpected element inside <%s>", name);
		if (*r->p == '&') {
			static const struct { const char *ent; char c; } ents[] = {
				{ "&lt;", '<' }, { "&gt;", '>' }, { "&amp;", '&' },
				{ "&quot;", '"' }, { "&apos;", '\'' },
			};
			bool done = false;

			for (size_t i = 0; i < ARRAY_SIZE(ents) && !done; i++)
				if (starts(r, ents[i].ent)) {
					if (mr_buf_putc(out, ents[i].c) < 0)
						return bad(r, "out of memory");
					r->p += strlen(ents[i].ent);
					done = true;
				}
			if (!done && starts(r, "&#")) {
				const char *s = r->p + 2, *e = memchr(s, ';', (size_t)(r->end - s));
				bool hex = s < r->end && (*s == 'x' || *s == 'X');
				unsigned long v = 0;

				if (!e || e - s - hex <= 0 || e - s - hex > 8)
					return bad(r, "malformed character reference");
				for (const char *d = s + hex; d < e; d++) {
					int x = isdigit((unsigned char)*d) ? *d - '0'
					      : hex && isxdigit((unsigned char)*d) ? tolower((unsigned char)*d) - 'a' + 10 : -1;
					if (x < 0)
						return bad(r, "malformed character reference");
					v = v * (hex ? 16 : 10) + (unsigned long)x;
				}
				/* ASCII only: what launchd's keys and paths need */
				if (v < 1 || v > 127)
					return bad(r, "character reference '%.*s' is not simulated (ASCII only)",
						   (int)(e - r->p + 1), r->p);
				if (mr_buf_putc(out, (char)v) < 0)
					return bad(r, "out of memory");
				r->p = e + 1;
				done = true;
			}
			if (!done)
				return bad(r, "unknown entity");
			continue;
		}
		if (mr_buf_putc(out, *r->p++) < 0)
			return bad(r, "out of memory");
	}
	return bad(r, "<%s> not closed", name);
}

static int parse_value(struct rd *r, struct mr_plist *v, int depth);

/* [+-]digits or [+-]0x hex digits (CoreFoundation takes both), no blanks. */
static int parse_integer(const char *s, long long *out)
{
	bool neg = *s == '-';
	unsigned base = 10;
	uint64_t v = 0;

	s += neg || *s == '+';
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	if (!*s)
		return -1;
	for (; *s; s++) {
		unsigned d = isdigit((unsigned char)*s) ? (unsigned)(*s - '0')
			   : base == 16 && isxdigit((unsigned char)*s) ? (unsigned)(tolower((unsigned char)*s) - 'a' + 10)
								      : 99;
		if (d >= base || v > ((uint64_t)INT64_MAX - d) / base)
			return -1;
		v = v * base + d;
	}
	*out = neg ? -(long long)v : (long long)v;
	return 0;
}

/* Children of <dict> or <array> up to their closing tag. */
static int parse_kids(struct rd *r, struct mr_plist *v, const char *name, int depth)
{
	for (;;) {
		char tag[32];
		bool closing, empty;
		const char *at;
		char *key = NULL;
		struct mr_plist *nk;
		int rc;

		if ((rc = skip_misc(r, false)) < 0)
			return rc;
		if (r->p >= r->end)
			return bad(r, "<%s> not closed", name);
		at = r->p;
		if ((rc = read_tag(r, tag, sizeof(tag), &closing, &empty, false)) < 0)
			return rc;
		if (closing) {
			if (strcmp(tag, name))
				return bad(r, "</%s> closes <%s>", tag, name);
			return 0;
		}
		if (v->type == MR_PLIST_DICT) {
			struct mr_buf kb = MR_BUF_INIT;

			if (strcmp(tag, "key") || empty) {
				r->p = at;
				return bad(r, "expected <key> in <dict>, got <%s%s>", tag, empty ? "/" : "");
			}
			if ((rc = read_text(r, "key", &kb)) < 0) {
				mr_buf_release(&kb);
				return rc;
			}
			key = mr_buf_detach(&kb, NULL);
			if (!key)
				return bad(r, "out of memory");
			if (mr_plist_get(v, key)) {
				rc = bad(r, "key '%.64s' twice in one <dict>", key);
				free(key);
				return rc;
			}
			if ((rc = skip_misc(r, false)) < 0) {
				free(key);
				return rc;
			}
			at = r->p;
		}
		nk = realloc(v->kids, (v->nkids + 1) * sizeof(*nk));
		if (!nk) {
			free(key);
			return bad(r, "out of memory");
		}
		v->kids = nk;
		memset(&v->kids[v->nkids], 0, sizeof(*nk));
		v->kids[v->nkids].key = key;
		v->nkids++;
		r->p = at;
		if ((rc = parse_value(r, &v->kids[v->nkids - 1], depth + 1)) < 0)
			return rc;
	}
}

static int parse_value(struct rd *r, struct mr_plist *v, int depth)
{
	static const struct { const char *name; enum mr_plist_type t; } text_types[] = {
		{ "string", MR_PLIST_STRING }, { "integer", MR_PLIST_INTEGER },
		{ "real", MR_PLIST_REAL }, { "date", MR_PLIST_DATE }, { "data", MR_PLIST_DATA },
	};
	char tag[32];
	bool closing, empty;
	int rc;

	if (depth > MAX_DEPTH)
		return bad(r, "nested more than %d deep", MAX_DEPTH);
	if ((rc = skip_misc(r, false)) < 0)
		return rc;
	if ((rc = read_tag(r, tag, sizeof(tag), &closing, &empty, false)) < 0)
		return rc;
	if (closing)
		return bad(r, "expected a value, got </%s>", tag);
	if (!strcmp(tag, "true") || !strcmp(tag, "false")) {
		v->type = MR_PLIST_BOOL;
		v->b = tag[0] == 't';
		if (!empty) {
			/* <true></true> */
			skip_blank(r);
			if (r->p >= r->end || *r->p != '<')
				return bad(r, "<%s> must be empty", v->b ? "true" : "false");
			if ((rc = read_tag(r, tag, sizeof(tag), &closing, &empty, false)) < 0)
				return rc;
			if (!closing || strcmp(tag, v->b ? "true" : "false"))
				return bad(r, "<%s> must be empty", v->b ? "true" : "false");
		}
		return 0;
	}
	if (!strcmp(tag, "dict") || !strcmp(tag, "array")) {
		v->type = tag[0] == 'd' ? MR_PLIST_DICT : MR_PLIST_ARRAY;
		return empty ? 0 : parse_kids(r, v, tag, depth);
	}
	for (size_t i = 0; i < ARRAY_SIZE(text_types); i++) {
		struct mr_buf b = MR_BUF_INIT;

		if (strcmp(tag, text_types[i].name))
			continue;
		v->type = text_types[i].t;
		if (!empty && (rc = read_text(r, tag, &b)) < 0) {
			mr_buf_release(&b);
			return rc;
		}
		v->text = mr_buf_detach(&b, NULL);
		if (!v->text)
			return bad(r, "out of memory");
		if (v->type == MR_PLIST_INTEGER && parse_integer(v->text, &v->num) < 0)
			return bad(r, "<integer>%.32s</integer>: not an integer", v->text);
		return 0;
	}
	return bad(r, "<%s> is not a property list element", tag);
}

static const char *skip_bom(const char *s, const char *end)
{
	return end - s >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3) ? s + 3 : s;
}

int mr_plist_parse(const char *text, size_t len, struct mr_plist **out, struct meshrun_err *err)
{
	struct rd r = { text, text, text + len, err };
	struct mr_plist *root = calloc(1, sizeof(*root));
	char tag[32];
	bool closing, empty;
	int rc;

	*out = NULL;
	if (!root)
		return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	if (len >= 6 && !memcmp(text, "bplist", 6)) {
		rc = mr_err_set(err, MESHRUN_E_PARSE,
				"a binary property list (meshsim's launchd reads XML ones only)");
		goto fail;
	}
	r.p = skip_bom(text, r.end);
	if ((rc = skip_misc(&r, true)) < 0)
		goto fail;
	if ((rc = read_tag(&r, tag, sizeof(tag), &closing, &empty, true)) < 0)
		goto fail;
	if (closing || empty || strcmp(tag, "plist")) {
		rc = bad(&r, "expected <plist>, got <%s%s>", closing ? "/" : "", tag);
		goto fail;
	}
	if ((rc = parse_value(&r, root, 0)) < 0)
		goto fail;
	if ((rc = skip_misc(&r, false)) < 0)
		goto fail;
	if (r.p >= r.end) {
		rc = bad(&r, "<plist> not closed");
		goto fail;
	}
	if ((rc = read_tag(&r, tag, sizeof(tag), &closing, &empty, false)) < 0)
		goto fail;
	if (!closing || strcmp(tag, "plist")) {
		rc = bad(&r, "<plist> holds one value, then </plist>");
		goto fail;
	}
	if ((rc = skip_misc(&r, false)) < 0)
		goto fail;
	if (r.p != r.end) {
		rc = bad(&r, "text after </plist>");
		goto fail;
	}
	*out = root;
	return 0;
fail:
	mr_plist_free(root);
	return rc;
}

static void release(struct mr_plist *p)
{
	for (size_t i = 0; i < p->nkids; i++)
		release(&p->kids[i]);
	free(p->kids);
	free(p->key);
	free(p->text);
}

void mr_plist_free(struct mr_plist *p)
{
	if (!p)
		return;
	release(p);
	free(p);
}

const struct mr_plist *mr_plist_get(const struct mr_plist *d, const char *key)
{
	if (!d || d->type != MR_PLIST_DICT)
		return NULL;
	for (size_t i = 0; i < d->nkids; i++)
		if (d->kids[i].key && !strcmp(d->kids[i].key, key))
			return &d->kids[i];
	return NULL;
}

const char *mr_plist_type_name(enum mr_plist_type t)
{
	static const char *const names[] = { "dictionary", "array", "string", "integer",
					     "real", "boolean", "date", "data" };

	return (size_t)t < ARRAY_SIZE(names) ? names[t] : "?";
}
