/*
 * optdoc.h - the option tables as documentation: man page (roff), Markdown
 * reference page, bash and zsh completion (a Mac's shell is zsh), so that
 * --help, `man TOOL`, docs/reference/TOOL.md and tab completion all come from
 * one table.
 *
 * A tool describes itself once:
 *
 *	static const struct mr_optdoc_cmd cmds[] = {
 *		{ NULL, "meshrun [options] [--] COMMAND [ARGS...]", NULL, opts, trailer, NULL },
 *	};
 *	const struct mr_optdoc doc = { "meshrun", MESHRUN_VERSION, "launch ...", cmds, 1, true };
 *	if ((rc = mr_optdoc_main(argc, argv, &doc)) >= 0)
 *		return rc;       (argv was "--help-man", "--help-markdown", "--help-bash" or "--help-zsh")
 *
 * cmds[0] with name NULL is the tool's own table; entries with a name are
 * subcommands ("meshsim up"). A subcommand may give its table (opts) or, when
 * its table lives inside its function, a run_help that prints its --help on
 * stdout (the output is captured and shown verbatim; its "--flag" words feed
 * the completion).
 *
 * The trailer is the --help trailer (plain text): blocks separated by blank
 * lines; a block whose first line ends in ':' ("Exit status:") becomes a
 * subsection with the rest kept as preformatted text, other blocks become
 * paragraphs.
 *
 * Man output carries the line `.\" @PROSE@` after SYNOPSIS: the build replaces
 * it with the hand-written sections (docs/man/TOOL.1.in). The Markdown page has
 * no version in it, so the committed copy changes only when a table changes.
 * Nothing here allocates memory the caller must free; output errors are -1.
 */
#ifndef MR_OPTDOC_H
#define MR_OPTDOC_H

#include "common/compat.h"
#include "common/opt.h"

struct mr_optdoc_cmd {
	const char *name;           /* subcommand name, NULL for the tool itself */
	const char *usage;          /* "meshsim up FIXTURE_DIR|TOPOLOGY [--name NAME]" */
	const char *summary;        /* one line, or NULL */
	const struct mr_opt *opts;  /* the table, or NULL */
	const char *trailer;        /* --help trailer, or NULL */
	int (*run_help)(int argc, char **argv); /* when opts is NULL: prints --help */
};

struct mr_optdoc {
	const char *tool;           /* "meshrun" */
	const char *version;        /* PROJECT_VERSION */
	const char *summary;        /* the NAME line: "launch a program on every rank" */
	const struct mr_optdoc_cmd *cmds;
	size_t ncmds;
	bool complete_commands;     /* completion offers commands after the options (meshrun) */
};

enum mr_optdoc_format { MR_OPTDOC_MAN, MR_OPTDOC_MARKDOWN, MR_OPTDOC_BASH, MR_OPTDOC_ZSH };

/* Write the document; 0, or -1 when writing to f failed. */
int mr_optdoc_write(FILE *f, const struct mr_optdoc *d, enum mr_optdoc_format fmt);

/*
 * When argv is exactly "TOOL --help-man|--help-markdown|--help-bash|--help-zsh", write
 * that document to stdout and return the exit code (0, or 1 on a write
 * error); otherwise return -1 and do nothing. These flags are hidden: they
 * are for the build, not for users.
 */
int mr_optdoc_main(int argc, char **argv, const struct mr_optdoc *d);

#endif
