/* Unit tests for src/common/progress.c: the terminal line and the log lines. */
#include "common/compat.h"

#include <setjmp.h>
#include <cmocka.h>

#include "common/log.h"
#include "common/progress.h"

static char *slurp(FILE *f)
{
	long n;
	char *s;

	fflush(f);
	n = ftell(f);
	assert_true(n >= 0);
	s = calloc(1, (size_t)n + 1);
	assert_non_null(s);
	rewind(f);
	assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
	return s;
}

static void test_tty_one_line(void **state)
{
	FILE *f = tmpfile();
	struct mr_progress p;
	char *s;

	(void)state;
	assert_non_null(f);
	mr_progress_init(&p, f, "t", 2, 1);
	mr_progress_step(&p, "discovery", 4);
	mr_progress_update(&p, 2, "h1 h3");
	mr_progress_step_done(&p);
	mr_progress_step(&p, "plan", 0);
	mr_progress_clear(&p);
	mr_progress_finish(&p);
	s = slurp(f);
	assert_non_null(strstr(s, "\r\033[K[1/2] discovery: 0/4 hosts"));
	assert_non_null(strstr(s, "\r\033[K[1/2] discovery: 2/4 hosts (h1 h3)"));
	assert_non_null(strstr(s, "[1/2] discovery: 4/4 hosts done ("));
	assert_non_null(strstr(s, "\r\033[K[2/2] plan"));
	assert_null(strchr(s, '\n')); /* one line, rewritten; cleared at the end */
	free(s);
	fclose(f);
}

static void test_not_tty_log_lines(void **state)
{
	FILE *f = tmpfile(), *log = tmpfile();
	struct mr_progress p;
	char *s, *l;

	(void)state;
	assert_non_null(f);
	assert_non_null(log);
	mr_log_set_stream(log);
	mr_log_set_color(0);
	mr_log_level = MR_LOG_INFO;
	mr_progress_init(&p, f, "meshsim up", 3, 0);
	mr_progress_step(&p, "sshd", 8);
	mr_progress_update(&p, 5, "h5"); /* silent in a log */
	mr_progress_step_done(&p);
	mr_progress_finish(&p);
	mr_log_set_stream(stderr);
	s = slurp(f);
	l = slurp(log);
	assert_string_equal(s, "");
	assert_null(strstr(l, "0/8")); /* the start is silent in a log */
	assert_non_null(strstr(l, "[INFO] meshsim up: [1/3] sshd: 8/8 hosts done ("));
	assert_null(strstr(l, "5/8"));
	assert_null(strchr(l, '\r'));
	free(s);
	free(l);
	fclose(f);
	fclose(log);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tty_one_line),
		cmocka_unit_test(test_not_tty_log_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
