#include "common/compat.h"
#include "common/opt.h"
#include "common/err.h"
#include "common/num.h"

static const char *opt_name(const struct mr_opt *o, char *buf, size_t n)
{
	if (o->long_name)
		snprintf(buf, n, "--%s", o->long_name);
	else
		snprintf(buf, n, "-%c", o->short_name);
	return buf;
}

static bool choice_ok(const char *choices, const char *arg)
{
	size_t n = strlen(arg);

	for (const char *p = choices; *p;) {
		const char *e = strchr(p, '|');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && !strncmp(p, arg, n))
			return true;
		if (!e)
			break;
		p = e + 1;
	}
	return false;
}

/* Store arg (NULL for options without a value) into the option's target. */
static int opt_apply(const struct mr_opt *o, const char *arg, void *ctx, struct meshrun_err *err)
{
	char name[128];
	int v;
	int64_t ms;

	opt_name(o, name, sizeof(name));
	switch (o->kind) {
	case MR_OPTK_BOOL:
		*(bool *)o->value = o->ival != 0;
		return 0;
	case MR_OPTK_COUNT:
		++*(int *)o->value;
		return 0;
	case MR_OPTK_STRING:
		*(const char **)o->value = arg;
		return 0;
	case MR_OPTK_INT:
		if (mr_parse_int(arg, (int)o->min, (int)o->max, &v) < 0)
			return mr_err_set(err, MESHRUN_E_USAGE,
					  "invalid value '%s' for '%s': expected an integer from %lld to %lld",
					  arg, name, o->min, o->max);
		*(int *)o->value = v;
		return 0;
	case MR_OPTK_DURATION:
		if (mr_parse_duration_ms(arg, INT64_C(1) << 40, &ms) < 0)
			return mr_err_set(err, MESHRUN_E_USAGE,
					  "invalid value '%s' for '%s': expected a duration such as 30, 1.5s or 200ms",
					  arg, name);
		*(int64_t *)o->value = ms;
		return 0;
	case MR_OPTK_LIST:
		if (mr_strvec_push(o->value, arg) < 0)
			return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
		return 0;
	case MR_OPTK_CHOICE:
		if (!choice_ok(o->choices, arg))
			return mr_err_set(err, MESHRUN_E_USAGE,
					  "invalid value '%s' for '%s': expected one of %s",
					  arg, name, o->choices);
		*(const char **)o->value = arg;
		return 0;
	case MR_OPTK_CALLBACK:
		return o->cb(o, arg, ctx, err);
	case MR_OPTK_END:
	case MR_OPTK_GROUP:
		break;
	}
	return mr_err_set(err, MESHRUN_E_INVAL, "option table entry '%s' has no kind", name);
}

static bool takes_value(const struct mr_opt *o)
{
	return o->argh != NULL && o->kind != MR_OPTK_BOOL && o->kind != MR_OPTK_COUNT;
}

/* Exact long name first, then a unique prefix. */
static int find_long(const struct mr_opt *opts, const char *name, size_t n,
		     const struct mr_opt **out, struct meshrun_err *err)
{
	const struct mr_opt *found = NULL;
	char cands[512] = "";
	int nfound = 0;

	for (const struct mr_opt *o = opts; o->kind != MR_OPTK_END; o++) {
		if (!o->long_name)
			continue;
		if (strlen(o->long_name) == n && !strncmp(o->long_name, name, n)) {
			*out = o;
			return 0;
		}
	}
	for (const struct mr_opt *o = opts; o->kind != MR_OPTK_END; o++) {
		if (!o->long_name || strncmp(o->long_name, name, n))
			continue;
		nfound++;
		found = o;
		size_t len = strlen(cands);
		snprintf(cands + len, sizeof(cands) - len, "%s--%s", len ? ", " : "", o->long_name);
	}
	if (nfound == 1) {
		*out = found;
		return 0;
	}
	if (nfound > 1)
		return mr_err_set(err, MESHRUN_E_USAGE, "ambiguous option '--%.*s': could be %s",
				  (int)n, name, cands);
	return mr_err_set(err, MESHRUN_E_USAGE, "unknown option '--%.*s'", (int)n, name);
}

static const struct mr_opt *find_long_exact(const struct mr_opt *opts, const char *name)
{
	for (const struct mr_opt *o = opts; o->kind != MR_OPTK_END; o++)
		if (o->long_name && !strcmp(o->long_name, name))
			return o;
	return NULL;
}

static const struct mr_opt *find_short(const struct mr_opt *opts, int c)
{
	for (const struct mr_opt *o = opts; o->kind != MR_OPTK_END; o++)
		if (o->kind != MR_OPTK_GROUP && o->short_name == c)
			return o;
	return NULL;
}

static int push_rest(struct mr_strvec *rest, const char *arg, struct meshrun_err *err)
{
	if (!rest)
		return mr_err_set(err, MESHRUN_E_USAGE, "unexpected argument '%s'", arg);
	if (mr_strvec_push(rest, arg) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	return 0;
}

static int parse_long(const struct mr_opt *opts, int argc, char **argv, int *i, void *ctx,
		      struct meshrun_err *err)
{
	const char *arg = argv[*i] + 2;
	const char *eq = strchr(arg, '=');
	size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
	const struct mr_opt *o = NULL;
	char name[128];
	int rc;

	/* --help is built in even when the tool uses -h for something else. */
	if (n == 4 && !strncmp(arg, "help", 4) && !find_long_exact(opts, "help"))
		return MR_OPT_HELP;
	if (n == 7 && !strncmp(arg, "version", 7))
		return MR_OPT_VERSION;
	rc = find_long(opts, arg, n, &o, err);
	if (rc < 0)
		return rc;
	opt_name(o, name, sizeof(name));
	if (!takes_value(o)) {
		if (eq)
			return mr_err_set(err, MESHRUN_E_USAGE, "option '%s' takes no value", name);
		return opt_apply(o, NULL, ctx, err);
	}
	if (eq)
		return opt_apply(o, eq + 1, ctx, err);
	/* "--cwd -- prog": "--" ends the options, it is no value (as argparse) */
	if (*i + 1 >= argc || !strcmp(argv[*i + 1], "--"))
		return mr_err_set(err, MESHRUN_E_USAGE, "option '%s' requires a value (%s)", name,
				  o->argh);
	return opt_apply(o, argv[++*i], ctx, err);
}

static int parse_short(const struct mr_opt *opts, int argc, char **argv, int *i, void *ctx,
		       struct meshrun_err *err)
{
	for (const char *p = argv[*i] + 1; *p; p++) {
		const struct mr_opt *o = find_short(opts, (unsigned char)*p);
		if (!o && *p == 'h')
			return MR_OPT_HELP;
		if (!o)
			return mr_err_set(err, MESHRUN_E_USAGE, "unknown option '-%c'", *p);
		if (!takes_value(o)) {
			int rc = opt_apply(o, NULL, ctx, err);
			if (rc)
				return rc;
			continue;
		}
		if (p[1])
			return opt_apply(o, p + 1, ctx, err);
		if (*i + 1 >= argc || !strcmp(argv[*i + 1], "--"))
			return mr_err_set(err, MESHRUN_E_USAGE, "option '-%c' requires a value (%s)",
					  *p, o->argh);
		return opt_apply(o, argv[++*i], ctx, err);
	}
	return 0;
}

int mr_opt_parse(const struct mr_opt *opts, int argc, char **argv, unsigned flags,
		 void *cb_ctx, struct mr_strvec *rest, struct meshrun_err *err)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int rc;

		if (!strcmp(a, "--")) {
			for (i++; i < argc; i++)
				if ((rc = push_rest(rest, argv[i], err)) < 0)
					return rc;
			return MR_OPT_OK;
		}
		if (a[0] != '-' || a[1] == '\0') {
			if ((rc = push_rest(rest, a, err)) < 0)
				return rc;
			if (flags & MR_OPT_STOP_AT_NONOPT) {
				for (i++; i < argc; i++)
					if ((rc = push_rest(rest, argv[i], err)) < 0)
						return rc;
				return MR_OPT_OK;
			}
			continue;
		}
		rc = a[1] == '-' ? parse_long(opts, argc, argv, &i, cb_ctx, err)
				 : parse_short(opts, argc, argv, &i, cb_ctx, err);
		if (rc)
			return rc;
	}
	return MR_OPT_OK;
}

/* --help's layout: the flag column, then the help text wrapped at USAGE_WIDTH. */
#define USAGE_COL 30
#define USAGE_WIDTH 80

/*
 * Write text from column USAGE_COL (the cursor is there), wrapped at spaces to
 * USAGE_WIDTH; a word longer than a line stands alone. No continuation line
 * starts with '-', so that only the flag column begins with a flag (the docs
 * tests find the flags that way).
 */
static void usage_wrapped(FILE *f, const char *text)
{
	const size_t room = USAGE_WIDTH - USAGE_COL;
	const char *p = text;

	while (*p) {
		size_t len = strlen(p), cut = len;

		if (len > room) {
			cut = 0;
			for (size_t i = 1; i <= room; i++)
				if (p[i] == ' ' && p[i + 1] != '-')
					cut = i;
			if (!cut) /* no break in range: the first possible one after it */
				for (cut = room; p[cut] && !(p[cut] == ' ' && p[cut + 1] != '-'); cut++)
					;
		}
		fprintf(f, "%.*s\n", (int)cut, p);
		p += cut;
		while (*p == ' ')
			p++;
		if (*p)
			fprintf(f, "%*s", USAGE_COL, "");
	}
}

void mr_opt_usage(FILE *f, const char *usage, const struct mr_opt *opts, const char *trailer)
{
	fprintf(f, "usage: %s\n", usage);
	for (const struct mr_opt *o = opts; o->kind != MR_OPTK_END; o++) {
		char left[160], text[2048];
		int n;

		if (o->kind == MR_OPTK_GROUP) {
			fprintf(f, "\n%s:\n", o->help);
			continue;
		}
		/* "  -n, --name ARG" or "      --name ARG": the long names line up */
		if (o->short_name)
			n = snprintf(left, sizeof(left), "  -%c, ", o->short_name);
		else
			n = snprintf(left, sizeof(left), "      ");
		if (o->kind == MR_OPTK_CHOICE)
			snprintf(left + n, sizeof(left) - (size_t)n, "--%s {%s}", o->long_name, o->choices);
		else
			snprintf(left + n, sizeof(left) - (size_t)n, "--%s%s%s", o->long_name,
				 takes_value(o) ? " " : "", takes_value(o) ? o->argh : "");
		n = (int)strlen(left);
		if (n >= USAGE_COL - 1)
			fprintf(f, "%s\n%*s", left, USAGE_COL, "");
		else
			fprintf(f, "%-*s", USAGE_COL, left);
		snprintf(text, sizeof(text), "%s%s%s%s", o->help ? o->help : "",
			 o->defval ? " (default: " : "", o->defval ? o->defval : "", o->defval ? ")" : "");
		usage_wrapped(f, text);
	}
	fprintf(f, "%-*s%s\n%-*s%s\n", USAGE_COL, "  -h, --help", "show this help and exit",
		USAGE_COL, "      --version", "show the version and exit");
	if (trailer)
		fprintf(f, "\n%s", trailer);
}
