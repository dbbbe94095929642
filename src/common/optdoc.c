/*
 * optdoc.c - option tables rendered as roff, Markdown, bash and zsh completion (see
 * optdoc.h). Output goes through stdio; the first failed write makes the
 * renderer return -1 (checked once at the end with ferror()).
 */
#include "common/compat.h"
#include "common/optdoc.h"
#include "common/buf.h"
#include "common/fdio.h"
#include "common/strvec.h"

#include <ctype.h>
#include <unistd.h>

/* Mirrors opt.c: BOOL and COUNT never take a value even with an argh. */
static bool takes_value(const struct mr_opt *o)
{
	return o->argh != NULL && o->kind != MR_OPTK_BOOL && o->kind != MR_OPTK_COUNT;
}

/* The built-in options every table has (opt.c handles them). */
static const struct mr_opt builtin_opts[] = {
	MR_OPT_BOOL('h', "help", NULL, "show the help and exit"),
	MR_OPT_BOOL(0, "version", NULL, "show the version and exit"),
	MR_OPT_END(),
};

/* ---- capture of a subcommand's --help ----------------------------------------- */

/* Run cmd->run_help(name, "--help") with stdout going to a temporary file. */
static int capture_help(const struct mr_optdoc_cmd *cmd, struct mr_buf *out)
{
	char *argv[] = { (char *)cmd->name, (char *)"--help", NULL };
	FILE *tmp = tmpfile();
	int saved, rc = -1;

	if (!tmp)
		return -1;
	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	if (saved < 0)
		goto out_close_tmp;
	if (dup2(fileno(tmp), STDOUT_FILENO) < 0)
		goto out_close_saved;
	cmd->run_help(2, argv);
	fflush(stdout);
	if (dup2(saved, STDOUT_FILENO) < 0)
		goto out_close_saved;
	if (lseek(fileno(tmp), 0, SEEK_SET) < 0)
		goto out_close_saved;
	for (;;) {
		char chunk[4096];
		ssize_t n = mr_read_full(fileno(tmp), chunk, sizeof(chunk));

		if (n < 0)
			goto out_close_saved;
		if (n > 0 && mr_buf_append(out, chunk, (size_t)n) < 0)
			goto out_close_saved;
		if ((size_t)n < sizeof(chunk))
			break;
	}
	rc = 0;
out_close_saved:
	close(saved);
out_close_tmp:
	fclose(tmp);
	return rc;
}

/* ---- trailer blocks ------------------------------------------------------------ */

/*
 * Split text into blocks at blank lines. For each block, cb gets the heading
 * (the first line without its ':' when it is a heading, else NULL) and the
 * lines of the body.
 */
typedef void (*block_cb)(FILE *f, const char *heading, const struct mr_strvec *lines, void *ctx);

static void for_each_block(FILE *f, const char *text, block_cb cb, void *ctx)
{
	struct mr_strvec all = MR_STRVEC_INIT, block = MR_STRVEC_INIT;

	if (!text)
		return;
	if (mr_strvec_split(&all, text, '\n', false) < 0)
		return;
	for (size_t i = 0; i <= all.nr; i++) {
		const char *l = i < all.nr ? all.v[i] : "";

		if (*l) {
			mr_strvec_push(&block, l);
			continue;
		}
		if (!block.nr)
			continue;
		const char *first = block.v[0];
		size_t n = strlen(first);
		if (!isspace((unsigned char)first[0]) && first[n - 1] == ':') {
			char heading[128];
			struct mr_strvec body = MR_STRVEC_INIT;

			snprintf(heading, sizeof(heading), "%.*s", (int)(n - 1), first);
			mr_strvec_pushv(&body, block.v + 1);
			cb(f, heading, &body, ctx);
			mr_strvec_release(&body);
		} else {
			cb(f, NULL, &block, ctx);
		}
		mr_strvec_release(&block);
	}
	mr_strvec_release(&block);
	mr_strvec_release(&all);
}

/* ---- roff ---------------------------------------------------------------------- */

/* Escape for roff text: backslash, minus, and a leading '.' or '\''. */
static void roff(FILE *f, const char *s, bool line_start)
{
	if (line_start && (*s == '.' || *s == '\''))
		fputs("\\&", f);
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\e", f);
		else if (*s == '-')
			fputs("\\-", f);
		else
			fputc(*s, f);
	}
}

static void man_opt(FILE *f, const struct mr_opt *o)
{
	fputs(".TP\n", f);
	if (o->short_name)
		fprintf(f, "\\fB\\-%c\\fR%s", o->short_name, o->long_name ? ", " : "");
	if (o->long_name) {
		fputs("\\fB\\-\\-", f);
		roff(f, o->long_name, false);
		fputs("\\fR", f);
	}
	if (o->kind == MR_OPTK_CHOICE) {
		fputs(" {", f);
		roff(f, o->choices, false);
		fputs("}", f);
	} else if (takes_value(o)) {
		fputs(" \\fI", f);
		roff(f, o->argh, false);
		fputs("\\fR", f);
	}
	fputc('\n', f);
	roff(f, o->help ? o->help : "", true);
	if (o->defval) {
		fputs(" (default: ", f);
		roff(f, o->defval, false);
		fputc(')', f);
	}
	fputc('\n', f);
}

static void man_table(FILE *f, const struct mr_opt *opts, const char *sub_macro, bool builtins)
{
	for (const struct mr_opt *o = opts; o && o->kind != MR_OPTK_END; o++) {
		if (o->kind == MR_OPTK_GROUP) {
			fprintf(f, "%s ", sub_macro);
			roff(f, o->help, false);
			fputc('\n', f);
			continue;
		}
		man_opt(f, o);
	}
	if (!builtins)
		return;
	for (const struct mr_opt *o = builtin_opts; o->kind != MR_OPTK_END; o++)
		man_opt(f, o);
}

static void man_verbatim(FILE *f, const struct mr_strvec *lines)
{
	fputs(".PP\n.nf\n", f);
	for (size_t i = 0; i < lines->nr; i++) {
		roff(f, lines->v[i], true);
		fputc('\n', f);
	}
	fputs(".fi\n", f);
}

struct man_ctx {
	const char *head_macro; /* ".SH" for the tool's trailer, ".SS" for a subcommand's */
	bool in_notes;
};

static void man_block(FILE *f, const char *heading, const struct mr_strvec *lines, void *vctx)
{
	struct man_ctx *ctx = vctx;

	if (heading) {
		bool sh = !strcmp(ctx->head_macro, ".SH");

		fprintf(f, "%s ", ctx->head_macro);
		for (const char *p = heading; *p; p++)
			fputc(sh ? toupper((unsigned char)*p) : *p, f);
		fputc('\n', f);
		ctx->in_notes = false;
		man_verbatim(f, lines);
		return;
	}
	if (!ctx->in_notes && !strcmp(ctx->head_macro, ".SH"))
		fputs(".SH NOTES\n", f);
	ctx->in_notes = true;
	fputs(".PP\n", f);
	for (size_t i = 0; i < lines->nr; i++) {
		const char *l = lines->v[i];

		while (*l == ' ')
			l++;
		roff(f, l, true);
		fputc('\n', f);
	}
}

static void man_usage(FILE *f, const char *usage)
{
	const char *sp = strchr(usage, ' ');
	size_t n = sp ? (size_t)(sp - usage) : strlen(usage);

	fprintf(f, ".B %.*s\n", (int)n, usage);
	if (sp) {
		roff(f, sp + 1, true);
		fputc('\n', f);
	}
}

static void write_man(FILE *f, const struct mr_optdoc *d)
{
	const struct mr_optdoc_cmd *top = &d->cmds[0];

	fputs(".\\\" Generated from the option tables by '", f);
	fprintf(f, "%s --help-man'; do not edit.\n", d->tool);
	fputs(".TH ", f);
	for (const char *p = d->tool; *p; p++)
		fputc(toupper((unsigned char)*p), f);
	fprintf(f, " 1 \"\" \"meshrun %s\" \"User Commands\"\n", d->version);
	fputs(".SH NAME\n", f);
	fprintf(f, "%s \\- ", d->tool);
	roff(f, d->summary, false);
	fputs("\n.SH SYNOPSIS\n", f);
	for (size_t i = 0; i < d->ncmds; i++) {
		if (i)
			fputs(".br\n", f);
		man_usage(f, d->cmds[i].usage);
	}
	fputs(".\\\" @PROSE@\n", f);
	if (top->opts) {
		fputs(".SH OPTIONS\n", f);
		man_table(f, top->opts, ".SS", true);
	}
	if (d->ncmds > 1) {
		fputs(".SH COMMANDS\n", f);
		for (size_t i = 1; i < d->ncmds; i++) {
			const struct mr_optdoc_cmd *c = &d->cmds[i];
			struct man_ctx sub = { ".SS", true };

			fprintf(f, ".SS %s %s\n", d->tool, c->name);
			if (c->summary) {
				fputs(".PP\n", f);
				roff(f, c->summary, true);
				fputc('\n', f);
			}
			if (c->opts) {
				man_table(f, c->opts, ".SS", false);
				for_each_block(f, c->trailer, man_block, &sub);
			} else if (c->run_help) {
				struct mr_buf b = MR_BUF_INIT;
				struct mr_strvec lines = MR_STRVEC_INIT;

				if (capture_help(c, &b) == 0 &&
				    mr_strvec_split(&lines, mr_buf_cstr(&b), '\n', false) == 0) {
					while (lines.nr && !*lines.v[lines.nr - 1]) {
						free(lines.v[--lines.nr]);
						lines.v[lines.nr] = NULL;
					}
					man_verbatim(f, &lines);
				}
				mr_strvec_release(&lines);
				mr_buf_release(&b);
			}
		}
	}
	struct man_ctx top_ctx = { ".SH", false };
	for_each_block(f, top->trailer, man_block, &top_ctx);
}

/* ---- Markdown ------------------------------------------------------------------ */

static void md(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (strchr("\\`*_<>[]|", *s))
			fputc('\\', f);
		fputc(*s, f);
	}
}

static void md_opt(FILE *f, const struct mr_opt *o)
{
	fputs("- ", f);
	if (o->short_name)
		fprintf(f, "`-%c`%s", o->short_name, o->long_name ? ", " : "");
	if (o->long_name) {
		fprintf(f, "`--%s", o->long_name);
		if (o->kind == MR_OPTK_CHOICE)
			fprintf(f, " {%s}", o->choices);
		else if (takes_value(o))
			fprintf(f, " %s", o->argh);
		fputc('`', f);
	}
	fputs(": ", f);
	md(f, o->help ? o->help : "");
	if (o->defval)
		fprintf(f, " (default: `%s`)", o->defval);
	fputc('\n', f);
}

static void md_table(FILE *f, const struct mr_opt *opts, const char *hashes, bool builtins)
{
	bool listing = false;

	for (const struct mr_opt *o = opts; o && o->kind != MR_OPTK_END; o++) {
		if (o->kind == MR_OPTK_GROUP) {
			fprintf(f, "%s%s", listing ? "\n" : "", hashes);
			md(f, o->help);
			fputs("\n\n", f);
			listing = false;
			continue;
		}
		md_opt(f, o);
		listing = true;
	}
	if (!builtins)
		return;
	fprintf(f, "%s%sGeneral\n\n", listing ? "\n" : "", hashes);
	for (const struct mr_opt *o = builtin_opts; o->kind != MR_OPTK_END; o++)
		md_opt(f, o);
}

static void md_block(FILE *f, const char *heading, const struct mr_strvec *lines, void *ctx)
{
	const char *hashes = ctx;

	fputc('\n', f);
	if (heading) {
		fprintf(f, "%s", hashes);
		md(f, heading);
		fputs("\n\n```text\n", f);
		for (size_t i = 0; i < lines->nr; i++)
			fprintf(f, "%s\n", lines->v[i]);
		fputs("```\n", f);
		return;
	}
	for (size_t i = 0; i < lines->nr; i++) {
		const char *l = lines->v[i];

		while (*l == ' ')
			l++;
		md(f, l);
		fputc('\n', f);
	}
}

static void write_markdown(FILE *f, const struct mr_optdoc *d)
{
	const struct mr_optdoc_cmd *top = &d->cmds[0];

	fprintf(f, "# %s\n\n", d->tool);
	fprintf(f, "<!-- Generated from the option tables by `%s --help-markdown`; do not edit.\n"
		   "     The build writes it to <build>/docs/reference/; a test checks that this\n"
		   "     committed copy is the same (cmake --build BUILD --target update-docs). -->\n\n",
		d->tool);
	md(f, d->summary);
	fputs("\n\n## Synopsis\n\n```text\n", f);
	for (size_t i = 0; i < d->ncmds; i++)
		fprintf(f, "%s\n", d->cmds[i].usage);
	fputs("```\n", f);
	if (top->opts) {
		fputs("\n## Options\n\n", f);
		md_table(f, top->opts, "### ", true);
	}
	if (d->ncmds > 1) {
		fputs("\n## Commands\n", f);
		for (size_t i = 1; i < d->ncmds; i++) {
			const struct mr_optdoc_cmd *c = &d->cmds[i];

			fprintf(f, "\n### %s %s\n\n", d->tool, c->name);
			if (c->summary) {
				md(f, c->summary);
				fputs("\n\n", f);
			}
			if (c->opts) {
				md_table(f, c->opts, "#### ", false);
				for_each_block(f, c->trailer, md_block, (void *)"#### ");
			} else if (c->run_help) {
				struct mr_buf b = MR_BUF_INIT;
				const char *s;
				size_t n;

				if (capture_help(c, &b) == 0) {
					s = mr_buf_cstr(&b);
					n = strlen(s);
					while (n && s[n - 1] == '\n')
						n--;
					fprintf(f, "```text\n%.*s\n```\n", (int)n, s);
				}
				mr_buf_release(&b);
			}
		}
	}
	for_each_block(f, top->trailer, md_block, (void *)"## ");
}

/* ---- bash completion ----------------------------------------------------------- */

/* Options whose value is a path: the shell's own file completion fits. */
static bool is_path_arg(const char *argh)
{
	return argh && (!strcmp(argh, "FILE") || !strcmp(argh, "DIR") || !strcmp(argh, "PATH"));
}

/* The subcommands' names (cmds[0] is the tool itself), sep between them. */
static void put_cmd_names(FILE *f, const struct mr_optdoc *d, const char *sep)
{
	for (size_t i = 1; i < d->ncmds; i++)
		fprintf(f, "%s%s", i > 1 ? sep : "", d->cmds[i].name);
}

static void bash_words(FILE *f, const struct mr_opt *opts)
{
	for (const struct mr_opt *o = opts; o && o->kind != MR_OPTK_END; o++) {
		if (o->kind == MR_OPTK_GROUP)
			continue;
		if (o->long_name)
			fprintf(f, " --%s", o->long_name);
		if (o->short_name)
			fprintf(f, " -%c", o->short_name);
	}
}

/* case arms for the value after an option. */
static void bash_value_arms(FILE *f, const struct mr_opt *opts)
{
	for (const struct mr_opt *o = opts; o && o->kind != MR_OPTK_END; o++) {
		if (o->kind == MR_OPTK_GROUP || !takes_value(o))
			continue;
		fputs("\t\t", f);
		if (o->long_name)
			fprintf(f, "--%s", o->long_name);
		if (o->short_name)
			fprintf(f, "%s-%c", o->long_name ? "|" : "", o->short_name);
		if (o->kind == MR_OPTK_CHOICE) {
			fputs(") COMPREPLY=($(compgen -W \"", f);
			for (const char *p = o->choices; *p; p++)
				fputc(*p == '|' ? ' ' : *p, f);
			fputs("\" -- \"$cur\")); return ;;\n", f);
		} else if (is_path_arg(o->argh)) {
			fputs(") return ;; # files (complete -o default)\n", f);
		} else {
			fputs(") COMPREPLY=(); compopt +o default 2>/dev/null; return ;;\n", f);
		}
	}
}

/* The "--flag" and "-x" words at the start of the option lines of a --help
 * text (but -h/--help), appended to out; -1 when out of memory. */
static int flags_from_help(const char *text, struct mr_strvec *out)
{
	struct mr_strvec lines = MR_STRVEC_INIT;
	int rc = mr_strvec_split(&lines, text, '\n', true);

	for (size_t i = 0; rc == 0 && i < lines.nr; i++) {
		const char *l = lines.v[i];

		if (strncmp(l, "  -", 3))
			continue;
		for (const char *p = l + 2; rc == 0 && *p == '-';) {
			size_t n = strspn(p, "-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
			char *w = strndup(p, n);

			if (!w || (strcmp(w, "--help") && strcmp(w, "-h") && mr_strvec_push(out, w) < 0))
				rc = -1;
			free(w);
			p += n;
			p += strspn(p, ", ");
		}
	}
	mr_strvec_release(&lines);
	return rc;
}

/* " --flag -x" for a subcommand that has no table: the flags of its --help. */
static void bash_words_from_help(FILE *f, const char *text)
{
	struct mr_strvec flags = MR_STRVEC_INIT;

	if (flags_from_help(text, &flags) == 0)
		for (size_t i = 0; i < flags.nr; i++)
			fprintf(f, " %s", flags.v[i]);
	mr_strvec_release(&flags);
}

static void write_bash(FILE *f, const struct mr_optdoc *d)
{
	const struct mr_optdoc_cmd *top = &d->cmds[0];
	char fn[64];

	snprintf(fn, sizeof(fn), "_%s", d->tool);
	fprintf(f, "# bash completion for %s, generated from its option tables by\n"
		   "# '%s --help-bash'; do not edit.\n", d->tool, d->tool);
	fprintf(f, "%s()\n{\n\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n",
		fn);
	if (d->ncmds > 1) {
		/* the first word naming a subcommand (not an option's value); before
		 * it, the tool's own options (meshconfig has both) or a subcommand */
		fputs("\tlocal i sub=\n", f);
		fputs("\tfor ((i = 1; i < COMP_CWORD; i++)); do\n\t\tcase ${COMP_WORDS[i]} in ", f);
		put_cmd_names(f, d, "|");
		fputs(") sub=${COMP_WORDS[i]}; break ;; esac\n", f);
		fputs("\tdone\n\tif [[ -z $sub ]]; then\n\t\tcase $prev in\n", f);
		bash_value_arms(f, top->opts);
		fputs("\t\tesac\n\t\tif [[ $cur == -* ]]; then\n\t\t\tCOMPREPLY=($(compgen -W \"", f);
		bash_words(f, top->opts);
		bash_words(f, builtin_opts);
		fputs("\" -- \"$cur\"))\n\t\telse\n\t\t\tCOMPREPLY=($(compgen -W \"", f);
		put_cmd_names(f, d, " ");
		fputs("\" -- \"$cur\"))\n\t\tfi\n\t\treturn\n\tfi\n", f);
		fputs("\tcase $sub in\n", f);
		for (size_t i = 1; i < d->ncmds; i++) {
			const struct mr_optdoc_cmd *c = &d->cmds[i];

			fprintf(f, "\t%s)\n\t\tcase $prev in\n", c->name);
			if (c->opts)
				bash_value_arms(f, c->opts);
			fputs("\t\tesac\n\t\t[[ $cur == -* ]] && COMPREPLY=($(compgen -W \"--help", f);
			if (c->opts) {
				bash_words(f, c->opts);
			} else if (c->run_help) {
				struct mr_buf b = MR_BUF_INIT;

				if (capture_help(c, &b) == 0)
					bash_words_from_help(f, mr_buf_cstr(&b));
				mr_buf_release(&b);
			}
			fputs("\" -- \"$cur\"))\n\t\t;;\n", f);
		}
		fputs("\tesac\n}\n", f);
	} else {
		fputs("\tlocal i\n", f);
		if (d->complete_commands) {
			/* After the first word that is not an option (or its value), or
			 * after "--", the words belong to the command being launched. */
			fputs("\tfor ((i = 1; i < COMP_CWORD; i++)); do\n", f);
			fputs("\t\tif [[ ${COMP_WORDS[i]} == -- ]]; then\n", f);
			fputs("\t\t\t_command_offset $((i + 1)) 2>/dev/null || COMPREPLY=($(compgen -c -- \"$cur\"))\n", f);
			fputs("\t\t\treturn\n\t\tfi\n\tdone\n", f);
		}
		fputs("\tcase $prev in\n", f);
		bash_value_arms(f, top->opts);
		fputs("\tesac\n\tif [[ $cur == -* ]]; then\n\t\tCOMPREPLY=($(compgen -W \"", f);
		bash_words(f, top->opts);
		bash_words(f, builtin_opts);
		fputs("\" -- \"$cur\"))\n", f);
		if (d->complete_commands)
			fputs("\telse\n\t\tCOMPREPLY=($(compgen -c -- \"$cur\"))\n", f);
		fputs("\tfi\n}\n", f);
	}
	fprintf(f, "complete -o bashdefault -o default -F %s %s\n", fn, d->tool);
}

/* ---- zsh completion ------------------------------------------------------------ */

/*
 * The help's first clause (up to " (" or ";", at most 70 bytes) as an
 * _arguments explanation inside a single-quoted word: no quote, no brackets,
 * no backslash, no colon.
 */
static void zsh_desc(FILE *f, const char *help)
{
	size_t n = strcspn(help ? help : "", ";");
	const char *paren = help ? strstr(help, " (") : NULL;

	if (paren && (size_t)(paren - help) < n)
		n = (size_t)(paren - help);
	if (n > 70) { /* at a word's end */
		n = 70;
		while (n > 40 && help[n] != ' ')
			n--;
	}
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		char c = help[i];

		if (c == '\'' || c == '\\')
			continue;
		fputc(c == '[' ? '(' : c == ']' ? ')' : c == ':' ? ',' : c, f);
	}
	fputc(']', f);
}

/* ":MESSAGE:ACTION" for an option's value. */
static void zsh_value(FILE *f, const struct mr_opt *o)
{
	fputc(':', f);
	for (const char *p = o->argh; *p; p++)
		if (*p != ':' && *p != '\'')
			fputc(*p, f);
	if (o->kind == MR_OPTK_CHOICE) {
		fputs(":(", f);
		for (const char *p = o->choices; *p; p++)
			fputc(*p == '|' ? ' ' : *p, f);
		fputc(')', f);
	} else if (o->argh && !strcmp(o->argh, "DIR")) {
		fputs(":_files -/", f);
	} else if (is_path_arg(o->argh)) {
		fputs(":_files", f);
	} else {
		fputs(": ", f); /* a value of the user's: nothing to offer */
	}
}

/* One _arguments spec per option, each on its own continued line. */
static void zsh_specs(FILE *f, const struct mr_opt *opts, const char *indent)
{
	for (const struct mr_opt *o = opts; o && o->kind != MR_OPTK_END; o++) {
		bool v = takes_value(o);

		/* a repeatable option may come again ("*"); the others once */
		const char *rep = o->kind == MR_OPTK_LIST ? "*" : "";

		if (o->kind == MR_OPTK_GROUP)
			continue;
		fprintf(f, " \\\n%s", indent);
		if (o->short_name && o->long_name)
			fprintf(f, "'%s(-%c --%s)'{-%c%s,--%s%s}'", rep, o->short_name, o->long_name,
				o->short_name, v ? "+" : "", o->long_name, v ? "=" : "");
		else if (o->long_name)
			fprintf(f, "'%s--%s%s", rep, o->long_name, v ? "=" : "");
		else
			fprintf(f, "'%s-%c%s", rep, o->short_name, v ? "+" : "");
		zsh_desc(f, o->help);
		if (v)
			zsh_value(f, o);
		fputc('\'', f);
	}
}

/* A subcommand without a table: the flags of its --help, each as a bare option. */
static void zsh_specs_from_help(FILE *f, const char *text, const char *indent)
{
	struct mr_strvec flags = MR_STRVEC_INIT;

	if (flags_from_help(text, &flags) == 0)
		for (size_t i = 0; i < flags.nr; i++)
			fprintf(f, " \\\n%s'%s'", indent, flags.v[i]);
	mr_strvec_release(&flags);
}

static void write_zsh(FILE *f, const struct mr_optdoc *d)
{
	const struct mr_optdoc_cmd *top = &d->cmds[0];
	static const char help_specs[] =
		" \\\n\t\t'(- *)'{-h,--help}'[show the help and exit]'"
		" \\\n\t\t'(- *)--version[show the version and exit]'";

	fprintf(f, "#compdef %s\n# zsh completion for %s, generated from its option tables by\n"
		   "# '%s --help-zsh'; do not edit. Install as _%s in a folder of $fpath.\n",
		d->tool, d->tool, d->tool, d->tool);
	fprintf(f, "_%s()\n{\n", d->tool);
	if (d->ncmds > 1) {
		fputs("\tlocal curcontext=$curcontext state line\n\ttypeset -A opt_args\n", f);
		fputs("\t_arguments -C", f);
		if (top->opts) /* the tool's own options too (meshconfig has both) */
			zsh_specs(f, top->opts, "\t\t");
		fputs(help_specs, f);
		fputs(" \\\n\t\t'1:command:(", f);
		put_cmd_names(f, d, " ");
		fputs(")' \\\n\t\t'*::argument:->args'\n", f);
		fputs("\t[[ $state == args ]] || return\n\tcase $words[1] in\n", f);
		for (size_t i = 1; i < d->ncmds; i++) {
			const struct mr_optdoc_cmd *c = &d->cmds[i];

			fprintf(f, "\t%s)\n\t\t_arguments -s -S", c->name);
			fputs(" \\\n\t\t\t'(- *)'{-h,--help}'[show the help and exit]'", f);
			if (c->opts) {
				zsh_specs(f, c->opts, "\t\t\t");
			} else if (c->run_help) {
				struct mr_buf b = MR_BUF_INIT;

				if (capture_help(c, &b) == 0)
					zsh_specs_from_help(f, mr_buf_cstr(&b), "\t\t\t");
				mr_buf_release(&b);
			}
			fputs(" \\\n\t\t\t'*:argument:_files'\n\t\t;;\n", f);
		}
		fputs("\tesac\n", f);
	} else {
		fputs("\t_arguments -s -S", f);
		zsh_specs(f, top->opts, "\t\t");
		fputs(help_specs, f);
		if (d->complete_commands) /* the command being launched, and its own words */
			fputs(" \\\n\t\t'(-):command: _command_names -e' \\\n\t\t'*::arguments: _normal'", f);
		fputc('\n', f);
	}
	fprintf(f, "}\n_%s \"$@\"\n", d->tool);
}

int mr_optdoc_write(FILE *f, const struct mr_optdoc *d, enum mr_optdoc_format fmt)
{
	switch (fmt) {
	case MR_OPTDOC_MAN:
		write_man(f, d);
		break;
	case MR_OPTDOC_MARKDOWN:
		write_markdown(f, d);
		break;
	case MR_OPTDOC_BASH:
		write_bash(f, d);
		break;
	case MR_OPTDOC_ZSH:
		write_zsh(f, d);
		break;
	}
	if (fflush(f) != 0 || ferror(f))
		return -1;
	return 0;
}

int mr_optdoc_main(int argc, char **argv, const struct mr_optdoc *d)
{
	static const struct {
		const char *flag;
		enum mr_optdoc_format fmt;
	} flags[] = {
		{ "--help-man", MR_OPTDOC_MAN },
		{ "--help-markdown", MR_OPTDOC_MARKDOWN },
		{ "--help-bash", MR_OPTDOC_BASH },
		{ "--help-zsh", MR_OPTDOC_ZSH },
	};

	if (argc != 2)
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
		if (strcmp(argv[1], flags[i].flag))
			continue;
		if (mr_optdoc_write(stdout, d, flags[i].fmt) < 0) {
			fprintf(stderr, "%s: writing %s to stdout: %s\n", d->tool, flags[i].flag,
				strerror(errno));
			return 1;
		}
		return 0;
	}
	return -1;
}
