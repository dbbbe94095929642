/*
 * opt.h - one option table drives parsing, --help and the generated docs.
 *
 *	static const struct mr_opt opts[] = {
 *		MR_OPT_GROUP("Hosts"),
 *		MR_OPT_STRING(0, "hosts", &o.hosts, "LIST", "comma-separated hosts"),
 *		MR_OPT_INT('n', "repeat-hosts", &o.repeat, "N", 1, 4096, "ranks per host"),
 *		MR_OPT_LIST(0, "env", &o.envs, "K=V", "set a variable on every rank"),
 *		MR_OPT_END(),
 *	};
 *	rc = mr_opt_parse(opts, argc, argv, MR_OPT_STOP_AT_NONOPT, NULL, &rest, &err);
 *
 * Long options take "--name value" or "--name=value"; a unique prefix of a long
 * name is accepted (as Python's argparse, so MLX's "--output" still works) and an
 * ambiguous one is an error listing the candidates. Short options take "-n 4" or
 * "-n4"; flags bundle ("-vq"). "--" ends the options. -h/--help and --version are
 * built in: the parser returns MR_OPT_HELP / MR_OPT_VERSION and the tool prints.
 * Values of STRING options point into argv (not copied). Every error is
 * MESHRUN_E_USAGE with a message naming the option and the value.
 */
#ifndef MR_OPT_H
#define MR_OPT_H

#include "common/compat.h"
#include "common/strvec.h"
#include "meshrun/err.h"

enum mr_opt_kind {
	MR_OPTK_END = 0,
	MR_OPTK_GROUP,    /* a heading in --help; not an option */
	MR_OPTK_BOOL,     /* no value: *(bool *)value = ival (true, or false for --no-x) */
	MR_OPTK_COUNT,    /* no value: ++*(int *)value (-v -v) */
	MR_OPTK_STRING,   /* *(const char **)value = arg */
	MR_OPTK_INT,      /* *(int *)value = arg, checked in [min, max] */
	MR_OPTK_DURATION, /* *(int64_t *)value = milliseconds ("5", "1.5s", "200ms") */
	MR_OPTK_LIST,     /* repeatable: arg appended to *(struct mr_strvec *)value */
	MR_OPTK_CHOICE,   /* *(const char **)value = arg, one of choices "a|b|c" */
	MR_OPTK_CALLBACK, /* cb(opt, arg, ctx, err); arg NULL when argh is NULL */
};

struct mr_opt;
typedef int (*mr_opt_cb)(const struct mr_opt *opt, const char *arg, void *ctx,
			 struct meshrun_err *err);

struct mr_opt {
	enum mr_opt_kind kind;
	int short_name;        /* 0: none */
	const char *long_name; /* NULL only for GROUP */
	void *value;
	const char *argh;      /* the value's name in --help ("FILE"); NULL: takes no value */
	const char *help;      /* one line */
	long long min, max;    /* INT bounds */
	const char *choices;   /* CHOICE: "ring|jaccl|jaccl-ring" */
	mr_opt_cb cb;          /* CALLBACK */
	int ival;              /* BOOL: the value stored */
	const char *defval;    /* shown as "(default: X)" in --help, or NULL */
};

#define MR_OPT_END() { MR_OPTK_END, 0, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL, 0, NULL }
#define MR_OPT_GROUP(title) { MR_OPTK_GROUP, 0, NULL, NULL, NULL, title, 0, 0, NULL, NULL, 0, NULL }
#define MR_OPT_BOOL(s, l, p, h) { MR_OPTK_BOOL, s, l, p, NULL, h, 0, 0, NULL, NULL, 1, NULL }
#define MR_OPT_SET_FALSE(s, l, p, h) { MR_OPTK_BOOL, s, l, p, NULL, h, 0, 0, NULL, NULL, 0, NULL }
#define MR_OPT_COUNT(s, l, p, h) { MR_OPTK_COUNT, s, l, p, NULL, h, 0, 0, NULL, NULL, 0, NULL }
#define MR_OPT_STRING(s, l, p, a, h) { MR_OPTK_STRING, s, l, p, a, h, 0, 0, NULL, NULL, 0, NULL }
#define MR_OPT_STRING_D(s, l, p, a, d, h) { MR_OPTK_STRING, s, l, p, a, h, 0, 0, NULL, NULL, 0, d }
#define MR_OPT_INT(s, l, p, a, lo, hi, h) { MR_OPTK_INT, s, l, p, a, h, lo, hi, NULL, NULL, 0, NULL }
#define MR_OPT_INT_D(s, l, p, a, lo, hi, d, h) { MR_OPTK_INT, s, l, p, a, h, lo, hi, NULL, NULL, 0, d }
#define MR_OPT_DURATION(s, l, p, a, h) { MR_OPTK_DURATION, s, l, p, a, h, 0, 0, NULL, NULL, 0, NULL }
#define MR_OPT_LIST(s, l, p, a, h) { MR_OPTK_LIST, s, l, p, a, h, 0, 0, NULL, NULL, 0, NULL }
#define MR_OPT_CHOICE(s, l, p, c, h) { MR_OPTK_CHOICE, s, l, p, "WHICH", h, 0, 0, c, NULL, 0, NULL }
#define MR_OPT_CALLBACK(s, l, a, cbf, h) { MR_OPTK_CALLBACK, s, l, NULL, a, h, 0, 0, NULL, cbf, 0, NULL }

enum {
	MR_OPT_STOP_AT_NONOPT = 1 << 0, /* the first non-option and all after it go to rest */
};

enum { MR_OPT_OK = 0, MR_OPT_HELP = 1, MR_OPT_VERSION = 2 };

/*
 * Parse argv[1..argc-1]. Non-option arguments (and all after "--") are copied
 * into rest, which the caller releases; rest may be NULL when the tool takes no
 * positional arguments (then one is an error). Returns MR_OPT_OK, MR_OPT_HELP,
 * MR_OPT_VERSION or MESHRUN_E_USAGE / MESHRUN_E_NOMEM.
 */
int mr_opt_parse(const struct mr_opt *opts, int argc, char **argv, unsigned flags,
		 void *cb_ctx, struct mr_strvec *rest, struct meshrun_err *err);

/* Print "usage: <usage>\n\n", the options by group, then the trailer (may be NULL). */
void mr_opt_usage(FILE *f, const char *usage, const struct mr_opt *opts, const char *trailer);

#endif
