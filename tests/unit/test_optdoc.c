/* Unit tests for src/common/optdoc.c: one table as roff, Markdown and bash. */
#include "common/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "common/optdoc.h"

static const char *s_val;
static bool b_val;
static int i_val;

static const struct mr_opt opts[] = {
	MR_OPT_GROUP("Hosts"),
	MR_OPT_STRING_D(0, "host-list", &s_val, "LIST", "127.0.0.1", "hosts, e.g. a\\b"),
	MR_OPT_STRING(0, "hostfile", &s_val, "FILE", "the *hostfile* [JSON]"),
	MR_OPT_INT('n', "repeat", &i_val, "N", 1, 9, ".starts with a dot"),
	MR_OPT_CHOICE(0, "backend", &s_val, "ring|jaccl", "which backend"),
	MR_OPT_BOOL(0, "dry-run", &b_val, "do nothing"),
	MR_OPT_END(),
};

static const char trailer[] =
	"A paragraph\n  that goes on.\n\nExit status:\n  0  fine\n  2  usage\n";

static const struct mr_optdoc_cmd cmds[] = {
	{ NULL, "tool [options] FILE", NULL, opts, trailer, NULL },
};
static const struct mr_optdoc doc = { "tool", "9.9", "does things", cmds, 1, true };

static char *render(enum mr_optdoc_format fmt)
{
	FILE *f = tmpfile();
	long n;
	char *s;

	assert_non_null(f);
	assert_int_equal(mr_optdoc_write(f, &doc, fmt), 0);
	n = ftell(f);
	s = calloc(1, (size_t)n + 1);
	assert_non_null(s);
	rewind(f);
	assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	return s;
}

static void test_man(void **state)
{
	char *s = render(MR_OPTDOC_MAN);

	(void)state;
	assert_non_null(strstr(s, ".TH TOOL 1 \"\" \"meshrun 9.9\""));
	assert_non_null(strstr(s, ".SH NAME\ntool \\- does things\n"));
	assert_non_null(strstr(s, ".\\\" @PROSE@\n"));
	assert_non_null(strstr(s, ".SS Hosts\n"));
	assert_non_null(strstr(s, "\\fB\\-\\-host\\-list\\fR \\fILIST\\fR\n"));
	assert_non_null(strstr(s, "hosts, e.g. a\\eb (default: 127.0.0.1)\n"));
	assert_non_null(strstr(s, "\\fB\\-n\\fR, \\fB\\-\\-repeat\\fR \\fIN\\fR\n\\&.starts"));
	assert_non_null(strstr(s, "\\fB\\-\\-backend\\fR {ring|jaccl}\n"));
	assert_non_null(strstr(s, "\\fB\\-\\-version\\fR\n"));
	assert_non_null(strstr(s, ".SH NOTES\n.PP\nA paragraph\nthat goes on.\n"));
	assert_non_null(strstr(s, ".SH EXIT STATUS\n.PP\n.nf\n  0  fine\n  2  usage\n.fi\n"));
	free(s);
}

static void test_markdown(void **state)
{
	char *s = render(MR_OPTDOC_MARKDOWN);

	(void)state;
	assert_non_null(strstr(s, "# tool\n"));
	assert_null(strstr(s, "9.9")); /* no version: the committed copy must not churn */
	assert_non_null(strstr(s, "### Hosts\n\n- `--host-list LIST`: hosts, e.g. a\\\\b (default: `127.0.0.1`)\n"));
	assert_non_null(strstr(s, "- `--hostfile FILE`: the \\*hostfile\\* \\[JSON\\]\n"));
	assert_non_null(strstr(s, "- `-n`, `--repeat N`: .starts with a dot\n"));
	assert_non_null(strstr(s, "- `--backend {ring|jaccl}`: which backend\n"));
	assert_non_null(strstr(s, "- `--dry-run`: do nothing\n"));
	assert_non_null(strstr(s, "## Exit status\n\n```text\n  0  fine\n  2  usage\n```\n"));
	free(s);
}

static void test_bash(void **state)
{
	char *s = render(MR_OPTDOC_BASH);

	(void)state;
	assert_non_null(strstr(s, "--backend) COMPREPLY=($(compgen -W \"ring jaccl\" -- \"$cur\")); return ;;"));
	assert_non_null(strstr(s, "--hostfile) return ;;"));
	assert_non_null(strstr(s, "--repeat|-n) COMPREPLY=()"));
	assert_non_null(strstr(s, " --host-list --hostfile --repeat -n --backend --dry-run --help -h --version"));
	assert_non_null(strstr(s, "complete -o bashdefault -o default -F _tool tool\n"));
	assert_null(strstr(s, "--dry-run)")); /* a flag takes no value */
	free(s);
}

static void test_main_ignores_other_argv(void **state)
{
	char *a1[] = { (char *)"tool", (char *)"--help", NULL };
	char *a2[] = { (char *)"tool", (char *)"--help-man", (char *)"x", NULL };

	(void)state;
	assert_int_equal(mr_optdoc_main(2, a1, &doc), -1);
	assert_int_equal(mr_optdoc_main(3, a2, &doc), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_man),
		cmocka_unit_test(test_markdown),
		cmocka_unit_test(test_bash),
		cmocka_unit_test(test_main_ignores_other_argv),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
