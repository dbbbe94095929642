/*
 * Unit tests for src/common: opt, num, shquote (through real /bin/sh and bash),
 * buf, strvec, err, fdio, log.
 */
#include "common/compat.h"
#include "common/array.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/num.h"
#include "common/opt.h"
#include "common/shquote.h"
#include "common/strvec.h"

#include <setjmp.h>
#include <cmocka.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- opt ---- */

struct opts {
	bool verbose, dry;
	int count, n;
	const char *hosts, *hostfile, *backend;
	int64_t timeout;
	struct mr_strvec env;
	int cb_calls;
	const char *cb_arg;
};

static int opt_cb(const struct mr_opt *opt, const char *arg, void *ctx, struct meshrun_err *err)
{
	struct opts *o = ctx;

	(void)opt;
	o->cb_calls++;
	o->cb_arg = arg;
	if (arg && !strcmp(arg, "bad"))
		return mr_err_set(err, MESHRUN_E_USAGE, "callback refused '%s'", arg);
	return 0;
}

static struct opts o;

static const struct mr_opt table[] = {
	MR_OPT_GROUP("Hosts"),
	MR_OPT_STRING(0, "hosts", &o.hosts, "LIST", "hosts"),
	MR_OPT_STRING(0, "hostfile", &o.hostfile, "FILE", "hostfile"),
	MR_OPT_INT('n', "repeat-hosts", &o.n, "N", 1, 4096, "ranks per host"),
	MR_OPT_GROUP("Other"),
	MR_OPT_BOOL('v', "verbose", &o.verbose, "verbose"),
	MR_OPT_BOOL(0, "dry-run", &o.dry, "dry"),
	MR_OPT_COUNT('q', "quiet", &o.count, "quieter"),
	MR_OPT_CHOICE(0, "backend", &o.backend, "ring|jaccl|jaccl-ring", "backend"),
	MR_OPT_DURATION(0, "timeout", &o.timeout, "SECS", "timeout"),
	MR_OPT_LIST('e', "env", &o.env, "K=V", "env"),
	MR_OPT_CALLBACK(0, "hook", "X", opt_cb, "hook"),
	MR_OPT_CALLBACK(0, "flag-hook", NULL, opt_cb, "hook without value"),
	MR_OPT_END(),
};

static int run_opts(unsigned flags, struct mr_strvec *rest, struct meshrun_err *err, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;

	mr_strvec_release(&o.env);
	memset(&o, 0, sizeof(o));
	argv[argc++] = (char *)"tool";
	va_start(ap, err);
	for (char *a; (a = va_arg(ap, char *));)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	return mr_opt_parse(table, argc, argv, flags, &o, rest, err);
}

#define OPTS(flags, rest, err, ...) run_opts(flags, rest, err, __VA_ARGS__, (char *)NULL)

static void test_opt_basic(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec rest = MR_STRVEC_INIT;

	(void)state;
	assert_int_equal(OPTS(0, &rest, &err, "--hosts", "a,b", "--hostfile=h.json", "-n", "4",
			      "-v", "pos1", "--backend", "jaccl", "-e", "A=1", "--env=B=2",
			      "--timeout", "1.5s", "pos2"), MR_OPT_OK);
	assert_string_equal(o.hosts, "a,b");
	assert_string_equal(o.hostfile, "h.json");
	assert_int_equal(o.n, 4);
	assert_true(o.verbose);
	assert_string_equal(o.backend, "jaccl");
	assert_int_equal(o.env.nr, 2);
	assert_string_equal(o.env.v[1], "B=2");
	assert_int_equal(o.timeout, 1500);
	assert_int_equal(rest.nr, 2);
	assert_string_equal(rest.v[0], "pos1");
	assert_string_equal(rest.v[1], "pos2");
	mr_strvec_release(&rest);

	/* Short value attached, bundled flags, a flag bundle ending in a valued option. */
	assert_int_equal(OPTS(0, NULL, &err, "-n8", "-qqv", "-vqn", "3"), MR_OPT_OK);
	assert_int_equal(o.n, 3);
	assert_int_equal(o.count, 3);
	assert_true(o.verbose);
	assert_int_equal(OPTS(0, NULL, &err, "-qn16"), MR_OPT_OK);
	assert_int_equal(o.n, 16);
	assert_int_equal(o.count, 1);

	/* Unique prefixes, exact match beats a prefix ("--hosts" vs "--hostfile"). */
	assert_int_equal(OPTS(0, NULL, &err, "--hosts", "x", "--hostf", "f", "--verb", "--dry"),
			 MR_OPT_OK);
	assert_string_equal(o.hosts, "x");
	assert_string_equal(o.hostfile, "f");
	assert_true(o.verbose);
	assert_true(o.dry);

	/* Values that look like options are taken as values. */
	assert_int_equal(OPTS(0, NULL, &err, "--hosts", "-weird", "-e", "--x"), MR_OPT_OK);
	assert_string_equal(o.hosts, "-weird");
	assert_string_equal(o.env.v[0], "--x");

	/* Callbacks, with and without a value. */
	assert_int_equal(OPTS(0, NULL, &err, "--hook", "val", "--flag-hook"), MR_OPT_OK);
	assert_int_equal(o.cb_calls, 2);
	assert_null(o.cb_arg);
	assert_int_equal(OPTS(0, NULL, &err, "--hook=bad"), MESHRUN_E_USAGE);
	assert_string_equal(err.msg, "callback refused 'bad'");
	mr_strvec_release(&o.env);
}

static void test_opt_rest(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec rest = MR_STRVEC_INIT;

	(void)state;
	/* "--" ends the options. */
	assert_int_equal(OPTS(0, &rest, &err, "-v", "--", "-n", "--hosts", "--"), MR_OPT_OK);
	assert_true(o.verbose);
	assert_int_equal(rest.nr, 3);
	assert_string_equal(rest.v[0], "-n");
	assert_string_equal(rest.v[2], "--");
	mr_strvec_release(&rest);

	/* STOP_AT_NONOPT: the command and its own options are left alone. */
	assert_int_equal(OPTS(MR_OPT_STOP_AT_NONOPT, &rest, &err, "-n", "2", "python", "-v",
			      "--hosts", "x"), MR_OPT_OK);
	assert_false(o.verbose);
	assert_null(o.hosts);
	assert_int_equal(rest.nr, 4);
	assert_string_equal(rest.v[0], "python");
	assert_string_equal(rest.v[3], "x");
	mr_strvec_release(&rest);

	/* Without STOP_AT_NONOPT options after positionals are parsed; "-" is positional. */
	assert_int_equal(OPTS(0, &rest, &err, "a", "-v", "-", "b"), MR_OPT_OK);
	assert_true(o.verbose);
	assert_int_equal(rest.nr, 3);
	assert_string_equal(rest.v[1], "-");
	mr_strvec_release(&rest);

	/* No rest vector: a positional argument is an error. */
	assert_int_equal(OPTS(0, NULL, &err, "stray"), MESHRUN_E_USAGE);
	assert_string_equal(err.msg, "unexpected argument 'stray'");
}

static void test_opt_help_version(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	assert_int_equal(OPTS(0, NULL, &err, "--help"), MR_OPT_HELP);
	assert_int_equal(OPTS(0, NULL, &err, "-h"), MR_OPT_HELP);
	assert_int_equal(OPTS(0, NULL, &err, "-vh"), MR_OPT_HELP);
	assert_int_equal(OPTS(0, NULL, &err, "--version"), MR_OPT_VERSION);
	assert_int_equal(OPTS(0, NULL, &err, "-n", "3", "--version", "--bogus"), MR_OPT_VERSION);
	assert_int_equal(err.code, 0);

	/* A tool that uses -h for something else still has --help. */
	static const char *hosts = NULL;
	static const struct mr_opt h_table[] = {
		MR_OPT_STRING('h', "hosts", &hosts, "LIST", "hosts"),
		MR_OPT_END(),
	};
	char *argv1[] = { (char *)"t", (char *)"--help", NULL };
	assert_int_equal(mr_opt_parse(h_table, 2, argv1, 0, NULL, NULL, &err), MR_OPT_HELP);
	assert_int_equal(err.code, 0);
	char *argv2[] = { (char *)"t", (char *)"-h", (char *)"m1,m2", NULL };
	assert_int_equal(mr_opt_parse(h_table, 3, argv2, 0, NULL, NULL, &err), MR_OPT_OK);
	assert_string_equal(hosts, "m1,m2");
}

static void test_opt_errors(void **state)
{
	static const struct {
		const char *a, *b;
		const char *msg;
	} cases[] = {
		{ "--nope", NULL, "unknown option '--nope'" },
		{ "-x", NULL, "unknown option '-x'" },
		{ "-vx", NULL, "unknown option '-x'" },
		{ "--host", "a", "ambiguous option '--host': could be --hosts, --hostfile" },
		{ "--hosts", NULL, "option '--hosts' requires a value (LIST)" },
		{ "-n", NULL, "option '-n' requires a value (N)" },
		{ "-vn", NULL, "option '-n' requires a value (N)" },
		{ "--verbose=1", NULL, "option '--verbose' takes no value" },
		{ "-n", "0", "invalid value '0' for '--repeat-hosts': expected an integer from 1 to 4096" },
		{ "-n", "4097", "invalid value '4097' for '--repeat-hosts': expected an integer from 1 to 4096" },
		{ "-n", "4x", "invalid value '4x' for '--repeat-hosts': expected an integer from 1 to 4096" },
		{ "-n", "", "invalid value '' for '--repeat-hosts': expected an integer from 1 to 4096" },
		{ "-n", "99999999999999999999", "invalid value '99999999999999999999' for '--repeat-hosts': expected an integer from 1 to 4096" },
		{ "--backend", "mpi", "invalid value 'mpi' for '--backend': expected one of ring|jaccl|jaccl-ring" },
		{ "--backend", "jacc", "invalid value 'jacc' for '--backend': expected one of ring|jaccl|jaccl-ring" },
		{ "--backend", "", "invalid value '' for '--backend': expected one of ring|jaccl|jaccl-ring" },
		{ "--timeout", "5h", "invalid value '5h' for '--timeout': expected a duration such as 30, 1.5s or 200ms" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		int rc = cases[i].b ? OPTS(0, NULL, &err, (char *)cases[i].a, (char *)cases[i].b)
				    : OPTS(0, NULL, &err, (char *)cases[i].a);
		if (rc != MESHRUN_E_USAGE || strcmp(err.msg, cases[i].msg))
			fail_msg("case %zu: rc %d msg \"%s\", want \"%s\"", i, rc, err.msg,
				 cases[i].msg);
	}
	/* Edge values accepted. */
	struct meshrun_err err = MESHRUN_ERR_INIT;
	assert_int_equal(OPTS(0, NULL, &err, "-n", "1"), 0);
	assert_int_equal(o.n, 1);
	assert_int_equal(OPTS(0, NULL, &err, "-n4096", "--backend=jaccl-ring"), 0);
	assert_int_equal(o.n, 4096);
	assert_string_equal(o.backend, "jaccl-ring");
}

static void test_opt_usage(void **state)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	assert_non_null(f);
	mr_opt_usage(f, "tool [options] -- command", table, "trailer text\n");
	fclose(f);
	assert_non_null(strstr(text, "usage: tool [options] -- command\n"));
	assert_non_null(strstr(text, "\nHosts:\n"));
	assert_non_null(strstr(text, "--hosts LIST"));
	assert_non_null(strstr(text, "-n, --repeat-hosts N"));
	assert_non_null(strstr(text, "--backend {ring|jaccl|jaccl-ring}"));
	assert_non_null(strstr(text, "-h, --help"));
	assert_non_null(strstr(text, "--version"));
	assert_non_null(strstr(text, "\ntrailer text\n"));
	free(text);
}

/* ---- num ---- */

static void test_num_ints(void **state)
{
	uint64_t u = 77;
	int64_t s = 77;
	int i = 77;

	(void)state;
	assert_int_equal(mr_parse_u64("0", 0, 10, &u), 0);
	assert_int_equal(u, 0);
	assert_int_equal(mr_parse_u64("010", 0, 10, &u), 0);
	assert_int_equal(u, 10);
	assert_int_equal(mr_parse_u64("18446744073709551615", 0, UINT64_MAX, &u), 0);
	assert_true(u == UINT64_MAX);
	u = 77;
	static const char *bad_u[] = { "", " 1", "1 ", "+1", "-1", "1x", "x1", "0x10",
				       "18446744073709551616", "99999999999999999999999", "1.0" };
	for (size_t k = 0; k < ARRAY_SIZE(bad_u); k++)
		assert_int_equal(mr_parse_u64(bad_u[k], 0, UINT64_MAX, &u), -1);
	assert_int_equal(mr_parse_u64(NULL, 0, 1, &u), -1);
	assert_int_equal(mr_parse_u64("11", 0, 10, &u), -1);
	assert_int_equal(mr_parse_u64("4", 5, 10, &u), -1);
	assert_int_equal(u, 77); /* untouched on failure */

	assert_int_equal(mr_parse_i64("-9223372036854775808", INT64_MIN, INT64_MAX, &s), 0);
	assert_true(s == INT64_MIN);
	assert_int_equal(mr_parse_i64("9223372036854775807", INT64_MIN, INT64_MAX, &s), 0);
	assert_true(s == INT64_MAX);
	assert_int_equal(mr_parse_i64("-0", -1, 1, &s), 0);
	assert_int_equal(s, 0);
	static const char *bad_s[] = { "", "-", "--1", "+1", "- 1", "9223372036854775808",
				       "-9223372036854775809", "1-" };
	for (size_t k = 0; k < ARRAY_SIZE(bad_s); k++)
		assert_int_equal(mr_parse_i64(bad_s[k], INT64_MIN, INT64_MAX, &s), -1);
	assert_int_equal(mr_parse_i64("-5", -4, 4, &s), -1);

	assert_int_equal(mr_parse_int("-2147483648", INT32_MIN, INT32_MAX, &i), 0);
	assert_int_equal(i, INT32_MIN);
	assert_int_equal(mr_parse_int("2147483648", INT32_MIN, INT32_MAX, &i), -1);
	assert_int_equal(mr_parse_int("32323", 1, 65535, &i), 0);
	assert_int_equal(i, 32323);
	assert_int_equal(mr_parse_int("65536", 1, 65535, &i), -1);
}

static void test_num_double_duration_size(void **state)
{
	double d = 0;
	int64_t ms = 7;
	uint64_t sz = 7;

	(void)state;
	assert_int_equal(mr_parse_double("1.5", 0, 10, &d), 0);
	assert_true(d == 1.5);
	assert_int_equal(mr_parse_double("1e3", 0, 1e4, &d), 0);
	assert_true(d == 1000);
	assert_int_equal(mr_parse_double("-2", -3, 0, &d), 0);
	static const char *bad_d[] = { "", " 1", "1 ", "nan", "inf", "1e999", "abc", "1,5",
				       "0x10", "0x1p3" };
	for (size_t k = 0; k < ARRAY_SIZE(bad_d); k++)
		if (mr_parse_double(bad_d[k], -1e308, 1e308, &d) != -1)
			fail_msg("mr_parse_double accepted '%s'", bad_d[k]);
	assert_int_equal(mr_parse_double("11", 0, 10, &d), -1);

	static const struct {
		const char *in;
		int64_t ms;
	} good[] = { { "30", 30000 }, { "1.5", 1500 }, { "1.5s", 1500 }, { "200ms", 200 },
		     { "2m", 120000 }, { "0", 0 }, { ".5s", 500 } };
	for (size_t k = 0; k < ARRAY_SIZE(good); k++) {
		assert_int_equal(mr_parse_duration_ms(good[k].in, INT64_C(1) << 40, &ms), 0);
		assert_int_equal(ms, good[k].ms);
	}
	ms = 7;
	static const char *bad_t[] = { "", "s", "-1", "+1", "1h", "1 s", "1.5.1", "1S", "ms",
				       "1e3" };
	for (size_t k = 0; k < ARRAY_SIZE(bad_t); k++)
		if (mr_parse_duration_ms(bad_t[k], INT64_C(1) << 40, &ms) != -1)
			fail_msg("mr_parse_duration_ms accepted '%s'", bad_t[k]);
	assert_int_equal(mr_parse_duration_ms("61", 60000, &ms), -1);
	assert_int_equal(ms, 7);

	assert_int_equal(mr_parse_size("16", UINT64_MAX, &sz), 0);
	assert_int_equal(sz, 16);
	assert_int_equal(mr_parse_size("4K", UINT64_MAX, &sz), 0);
	assert_int_equal(sz, 4096);
	assert_int_equal(mr_parse_size("16MiB", UINT64_MAX, &sz), 0);
	assert_int_equal(sz, 16u << 20);
	assert_int_equal(mr_parse_size("2G", UINT64_MAX, &sz), 0);
	assert_true(sz == (UINT64_C(2) << 30));
	static const char *bad_z[] = { "", "K", "1.5K", "-1", "4k", "4KB", "4 K", "1T",
				       "18446744073709551616" };
	for (size_t k = 0; k < ARRAY_SIZE(bad_z); k++)
		if (mr_parse_size(bad_z[k], UINT64_MAX, &sz) != -1)
			fail_msg("mr_parse_size accepted '%s'", bad_z[k]);
	assert_int_equal(mr_parse_size("17179869184G", UINT64_MAX, &sz), -1); /* overflow */
	assert_int_equal(mr_parse_size("2M", 1u << 20, &sz), -1);
	assert_int_equal(mr_parse_size("1M", 1u << 20, &sz), 0);
}

/* ---- shquote: the quoted words must come back byte for byte through a real shell ---- */

static const char *const tricky[] = {
	"plain",
	"with space",
	"  leading and trailing  ",
	"",
	"it's",
	"'",
	"''",
	"\"double\"",
	"$HOME",
	"${HOME}",
	"$(id)",
	"`id`",
	"back\\slash\\",
	"\\",
	"line1\nline2",
	"\n",
	"tab\there",
	"*",
	"?",
	"[a-z]*",
	"~",
	"~root",
	"a=b",
	"=x",
	"-n",
	"--flag=$x",
	"#comment",
	";",
	"a;b|c&d>e<f",
	"!",
	"!!",
	"{a,b}",
	"%",
	"caf\xc3\xa9",
	"\x01\x7f\xff",
	"x'\"'\"y",
	NULL,
};

/* Run `shell -c "printf '%s\0' <quoted args>"` and return its stdout. */
static void shell_trip(const char *shell, char *const *args, struct mr_buf *out)
{
	struct mr_buf cmd = MR_BUF_INIT;
	int fds[2];
	pid_t pid;
	int status;
	char chunk[4096];
	ssize_t r;

	assert_int_equal(mr_buf_puts(&cmd, "printf '%s\\0' "), 0);
	assert_int_equal(mr_shquote_argv(&cmd, args), 0);
	assert_int_equal(mr_pipe_cloexec(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		execl(shell, shell, "-c", cmd.p, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	while ((r = mr_read_some(fds[0], chunk, sizeof(chunk))) > 0)
		assert_int_equal(mr_buf_append(out, chunk, (size_t)r), 0);
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	mr_buf_release(&cmd);
}

static void test_shquote_shells(void **state)
{
	static const char *const shells[] = { "/bin/sh", "/bin/bash", "/bin/dash", "/usr/bin/zsh" };
	struct mr_buf want = MR_BUF_INIT;
	int ran = 0;

	(void)state;
	for (size_t i = 0; tricky[i]; i++)
		assert_int_equal(mr_buf_append(&want, tricky[i], strlen(tricky[i]) + 1), 0);
	for (size_t s = 0; s < ARRAY_SIZE(shells); s++) {
		struct mr_buf got = MR_BUF_INIT;
		if (access(shells[s], X_OK) < 0) {
			/* sh and bash are required; the others are tried when present. */
			assert_true(s >= 2);
			continue;
		}
		shell_trip(shells[s], (char *const *)tricky, &got);
		if (got.len != want.len || memcmp(got.p, want.p, want.len))
			fail_msg("%s changed the quoted arguments", shells[s]);
		ran++;
		/* Each argument alone, too (the quoting must not rely on its neighbours). */
		for (size_t i = 0; tricky[i]; i++) {
			char *one[] = { (char *)tricky[i], NULL };
			mr_buf_reset(&got);
			shell_trip(shells[s], one, &got);
			assert_int_equal(got.len, strlen(tricky[i]) + 1);
			assert_memory_equal(got.p, tricky[i], got.len);
		}
		mr_buf_release(&got);
	}
	assert_true(ran >= 2);
	mr_buf_release(&want);
}

static void test_shquote_forms(void **state)
{
	struct mr_buf b = MR_BUF_INIT;

	(void)state;
	assert_int_equal(mr_shquote(&b, "rdma_en2"), 0);
	assert_string_equal(mr_buf_cstr(&b), "rdma_en2");
	mr_buf_reset(&b);
	assert_int_equal(mr_shquote(&b, ""), 0);
	assert_string_equal(mr_buf_cstr(&b), "''");
	mr_buf_reset(&b);
	assert_int_equal(mr_shquote(&b, "it's"), 0);
	assert_string_equal(mr_buf_cstr(&b), "'it'\\''s'");
	mr_buf_reset(&b);
	char *argv[] = { (char *)"a", (char *)"b c", NULL };
	assert_int_equal(mr_shquote_argv(&b, argv), 0);
	assert_string_equal(mr_buf_cstr(&b), "a 'b c'");
	mr_buf_release(&b);

	assert_true(mr_is_shell_safe("10.0.0.1:32323"));
	assert_false(mr_is_shell_safe(""));
	assert_false(mr_is_shell_safe("a b"));
	assert_true(mr_is_ifname("en0"));
	assert_true(mr_is_ifname("bridge0"));
	assert_false(mr_is_ifname("a-very-long-ifname"));
	assert_false(mr_is_ifname(".."));
	assert_false(mr_is_ifname("en0;x"));
	assert_false(mr_is_ifname(""));
	assert_true(mr_is_hostname("mac1.local"));
	assert_false(mr_is_hostname("-oProxyCommand=x"));
	assert_false(mr_is_hostname("a b"));
	assert_false(mr_is_hostname(""));
	assert_true(mr_is_ipv4("192.168.0.1"));
	assert_false(mr_is_ipv4("192.168.0.256"));
	assert_false(mr_is_ipv4("::1"));
	assert_true(mr_is_ipv6("fe80::1"));
	assert_true(mr_is_ip("::ffff:10.0.0.1"));
	assert_false(mr_is_ip("m1"));
	assert_false(mr_is_ip(""));
	assert_true(mr_is_env_name("MLX_RANK"));
	assert_true(mr_is_env_name("_x1"));
	assert_false(mr_is_env_name("1X"));
	assert_false(mr_is_env_name("A-B"));
	assert_false(mr_is_env_name(""));
}

/* ---- buf, strvec ---- */

static void test_buf(void **state)
{
	struct mr_buf b = MR_BUF_INIT;
	size_t len = 9;
	char *p;

	(void)state;
	assert_string_equal(mr_buf_cstr(&b), "");
	assert_int_equal(mr_buf_puts(&b, "hello"), 0);
	assert_int_equal(mr_buf_putc(&b, ' '), 0);
	assert_int_equal(mr_buf_printf(&b, "%d-%s", 42, "x"), 0);
	assert_string_equal(mr_buf_cstr(&b), "hello 42-x");
	assert_int_equal(b.len, 10);
	mr_buf_consume(&b, 6);
	assert_string_equal(mr_buf_cstr(&b), "42-x");
	mr_buf_consume(&b, 100);
	assert_int_equal(b.len, 0);
	assert_string_equal(mr_buf_cstr(&b), "");
	/* Binary data with NULs, and growth past the first allocation. */
	for (int i = 0; i < 10000; i++)
		assert_int_equal(mr_buf_append(&b, "a\0b", 3), 0);
	assert_int_equal(b.len, 30000);
	assert_int_equal(b.p[30000], '\0');
	assert_int_equal(b.p[1], '\0');
	p = mr_buf_detach(&b, &len);
	assert_int_equal(len, 30000);
	assert_null(b.p);
	assert_int_equal(b.len, 0);
	free(p);
	p = mr_buf_detach(&b, &len); /* empty: "" the caller frees */
	assert_non_null(p);
	assert_string_equal(p, "");
	assert_int_equal(len, 0);
	free(p);

	/* Cap: appends past max fail with E2BIG and leave the buffer as it was. */
	b.max = 8;
	assert_int_equal(mr_buf_puts(&b, "12345678"), 0);
	errno = 0;
	assert_int_equal(mr_buf_putc(&b, '9'), -1);
	assert_int_equal(errno, E2BIG);
	assert_int_equal(mr_buf_printf(&b, "%s", "x"), -1);
	assert_string_equal(mr_buf_cstr(&b), "12345678");
	mr_buf_reset(&b);
	assert_int_equal(b.len, 0);
	assert_int_equal(mr_buf_printf(&b, "%s", "123456789"), -1);
	assert_int_equal(b.len, 0);
	mr_buf_release(&b);
	mr_buf_release(&b); /* twice is harmless */
}

static void test_strvec(void **state)
{
	struct mr_strvec v = MR_STRVEC_INIT;
	char *src[] = { (char *)"x", (char *)"y", NULL };

	(void)state;
	assert_int_equal(mr_strvec_push(&v, "a"), 0);
	assert_int_equal(mr_strvec_pushf(&v, "%s=%d", "N", 3), 0);
	assert_int_equal(mr_strvec_pushv(&v, src), 0);
	assert_int_equal(v.nr, 4);
	assert_string_equal(v.v[1], "N=3");
	assert_null(v.v[4]);
	for (int i = 0; i < 100; i++)
		assert_int_equal(mr_strvec_pushf(&v, "%d", i), 0);
	assert_int_equal(v.nr, 104);
	assert_string_equal(v.v[103], "99");
	assert_null(v.v[104]);
	mr_strvec_release(&v);
	assert_int_equal(v.nr, 0);
	assert_null(v.v);

	assert_int_equal(mr_strvec_split(&v, "a,,b,", ',', false), 0);
	assert_int_equal(v.nr, 4);
	assert_string_equal(v.v[1], "");
	assert_string_equal(v.v[3], "");
	mr_strvec_release(&v);
	assert_int_equal(mr_strvec_split(&v, ",a,,b,", ',', true), 0);
	assert_int_equal(v.nr, 2);
	assert_string_equal(v.v[0], "a");
	assert_string_equal(v.v[1], "b");
	mr_strvec_release(&v);
	assert_int_equal(mr_strvec_split(&v, "", ',', false), 0);
	assert_int_equal(v.nr, 1);
	mr_strvec_release(&v);

	/* Environment helpers: replace in place, prefixes are not names. */
	assert_int_equal(mr_strvec_setenv(&v, "MLX_RANK", "0"), 0);
	assert_int_equal(mr_strvec_setenv(&v, "MLX", "x"), 0);
	assert_int_equal(mr_strvec_setenv(&v, "EMPTY", ""), 0);
	assert_int_equal(mr_strvec_setenv(&v, "MLX_RANK", "3=4"), 0);
	assert_int_equal(v.nr, 3);
	assert_string_equal(v.v[0], "MLX_RANK=3=4");
	assert_string_equal(mr_strvec_getenv(&v, "MLX_RANK"), "3=4");
	assert_string_equal(mr_strvec_getenv(&v, "MLX"), "x");
	assert_string_equal(mr_strvec_getenv(&v, "EMPTY"), "");
	assert_null(mr_strvec_getenv(&v, "MLX_R"));
	assert_null(mr_strvec_getenv(&v, "NOPE"));
	mr_strvec_release(&v);
}

/* ---- err ---- */

static void test_array_grow(void **state)
{
	size_t alloc = 0, nr = 0;
	int *v = NULL;

	(void)state;
	/* push 1000 elements one by one: every value kept, room always enough,
	 * and doubling keeps the number of reallocations logarithmic */
	int moves = 0;
	for (int i = 0; i < 1000; i++) {
		size_t before = alloc;
		int *nv = mr_array_grow(v, nr + 1, &alloc, sizeof(*v));
		assert_non_null(nv);
		assert_true(alloc >= nr + 1);
		moves += alloc != before;
		v = nv;
		v[nr++] = i;
	}
	for (int i = 0; i < 1000; i++)
		assert_int_equal(v[i], i);
	assert_true(moves <= 8); /* 8, 16, ..., 1024 */
	/* room already there: the same pointer, alloc unchanged */
	size_t a = alloc;
	assert_ptr_equal(mr_array_grow(v, 10, &alloc, sizeof(*v)), v);
	assert_int_equal(alloc, a);
	/* a jump past twice the size goes straight there */
	int *big = mr_array_grow(v, 5000, &alloc, sizeof(*v));
	assert_non_null(big);
	assert_true(alloc >= 5000);
	assert_int_equal(big[999], 999);
	v = big;
	/* an impossible size fails with ENOMEM and leaves the array as it was */
	a = alloc;
	errno = 0;
	assert_null(mr_array_grow(v, SIZE_MAX / 2, &alloc, sizeof(*v)));
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(alloc, a);
	assert_int_equal(v[999], 999);
	free(v);
}

static void test_err(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	assert_int_equal(mr_err_set(&err, MESHRUN_E_PARSE, "bad '%s'", "x"), MESHRUN_E_PARSE);
	assert_int_equal(mr_err_set(&err, MESHRUN_E_TIMEOUT, "later"), MESHRUN_E_TIMEOUT);
	assert_int_equal(err.code, MESHRUN_E_PARSE);
	assert_string_equal(err.msg, "bad 'x'"); /* the first message wins */
	mr_err_prefix(&err, "host '%s'", "m1");
	assert_string_equal(err.msg, "host 'm1': bad 'x'");
	mr_err_clear(&err);
	assert_int_equal(err.code, 0);
	assert_string_equal(err.msg, "");
	mr_err_prefix(&err, "nothing to prefix");
	assert_string_equal(err.msg, "");

	errno = ENOENT;
	assert_int_equal(mr_err_sys(&err, "open '%s'", "hosts.json"), MESHRUN_E_SYS);
	assert_int_equal(errno, ENOENT); /* errno kept */
	assert_int_equal(err.sys_errno, ENOENT);
	assert_string_equal(err.msg, "open 'hosts.json': No such file or directory");
	mr_err_clear(&err);
	assert_int_equal(mr_err_errno(&err, ECONNREFUSED, MESHRUN_E_CONNECT, "connect to '%s'",
				      "m2:22"), MESHRUN_E_CONNECT);
	assert_string_equal(err.msg, "connect to 'm2:22': Connection refused");
	assert_int_equal(err.code, MESHRUN_E_CONNECT);

	/* NULL sink: only the code comes back. */
	assert_int_equal(mr_err_set(NULL, MESHRUN_E_INVAL, "x"), MESHRUN_E_INVAL);
	assert_int_equal(mr_err_sys(NULL, "x"), MESHRUN_E_SYS);
	mr_err_prefix(NULL, "x");
	mr_err_clear(NULL);

	/* Long messages and prefixes are cut, never overflow. */
	char big[3000];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	mr_err_clear(&err);
	mr_err_set(&err, MESHRUN_E_INVAL, "%s", big);
	assert_int_equal(strlen(err.msg), MESHRUN_ERR_MSG_MAX - 1);
	mr_err_prefix(&err, "%s", big);
	assert_true(strlen(err.msg) < MESHRUN_ERR_MSG_MAX);

	assert_string_equal(meshrun_strerror(MESHRUN_E_TIMEOUT), "timed out");
	assert_string_equal(meshrun_errname(MESHRUN_E_NOEXIT), "NOEXIT");
	assert_string_equal(meshrun_strerror(12345), "unknown error");
	assert_string_equal(meshrun_errname(0), "OK");
}

/* ---- fdio ---- */

static void test_fdio_files(void **state)
{
	char dir[] = "/tmp/test_common.XXXXXX";
	char path[256], want[512];
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_buf b = MR_BUF_INIT;
	struct stat st;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/f.json", dir);
	assert_int_equal(mr_write_file(path, "abc\0def", 7, 0600, &err), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(mr_read_file(path, 7, &b, &err), 0);
	assert_int_equal(b.len, 7);
	assert_memory_equal(b.p, "abc\0def", 7);
	/* Replacing: the new content, no temporary file left behind. */
	assert_int_equal(mr_write_file(path, "new", 3, 0644, &err), 0);
	mr_buf_reset(&b);
	assert_int_equal(mr_read_file(path, 100, &b, &err), 0);
	assert_string_equal(mr_buf_cstr(&b), "new");
	/* Over the cap: an error naming the file. */
	mr_buf_reset(&b);
	assert_int_equal(mr_read_file(path, 2, &b, &err), MESHRUN_E_INVAL);
	snprintf(want, sizeof(want), "'%s' is larger than 2 bytes", path);
	assert_string_equal(err.msg, want);
	/* A large file arrives whole (several reads). */
	char *big = malloc(300000);
	assert_non_null(big);
	for (size_t i = 0; i < 300000; i++)
		big[i] = (char)(i * 7);
	mr_err_clear(&err);
	assert_int_equal(mr_write_file(path, big, 300000, 0644, &err), 0);
	mr_buf_reset(&b);
	assert_int_equal(mr_read_file(path, 300000, &b, &err), 0);
	assert_int_equal(b.len, 300000);
	assert_memory_equal(b.p, big, 300000);
	free(big);

	/* A directory that does not exist: nothing written, the error names it. */
	snprintf(path, sizeof(path), "%s/missing/f", dir);
	mr_err_clear(&err);
	assert_int_equal(mr_write_file(path, "x", 1, 0644, &err), MESHRUN_E_SYS);
	assert_non_null(strstr(err.msg, "missing/f"));
	assert_non_null(strstr(err.msg, "No such file or directory"));
	mr_err_clear(&err);
	assert_int_equal(mr_read_file(path, 10, &b, &err), MESHRUN_E_SYS);
	snprintf(want, sizeof(want), "open '%s': No such file or directory", path);
	assert_string_equal(err.msg, want);

	snprintf(path, sizeof(path), "%s/f.json", dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0); /* fails if a temporary file was left */
	mr_buf_release(&b);
}

static void test_fdio_pipes(void **state)
{
	int fds[2], fd;
	char buf[16];

	(void)state;
	assert_int_equal(mr_pipe_cloexec(fds), 0);
	assert_true(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(fds[1], F_GETFD) & FD_CLOEXEC);
	assert_int_equal(mr_write_full(fds[1], "hello", 5), 0);
	mr_close(&fds[1]);
	assert_int_equal(fds[1], -1);
	mr_close(&fds[1]); /* no-op */
	assert_int_equal(mr_read_full(fds[0], buf, sizeof(buf)), 5); /* short only at EOF */
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(mr_read_full(fds[0], buf, sizeof(buf)), 0);
	assert_int_equal(mr_set_nonblock(fds[0], true), 0);
	assert_true(fcntl(fds[0], F_GETFL) & O_NONBLOCK);
	assert_int_equal(mr_set_nonblock(fds[0], false), 0);
	assert_false(fcntl(fds[0], F_GETFL) & O_NONBLOCK);
	mr_close(&fds[0]);

	assert_int_equal(mr_pipe_cloexec(fds), 0);
	assert_int_equal(mr_set_nonblock(fds[0], true), 0);
	errno = 0;
	assert_int_equal(mr_read_some(fds[0], buf, sizeof(buf)), -1);
	assert_int_equal(errno, EAGAIN);
	assert_int_equal(mr_write_some(fds[1], "x", 1), 1);
	assert_int_equal(mr_read_some(fds[0], buf, sizeof(buf)), 1);
	mr_close(&fds[0]);
	mr_close(&fds[1]);

	fd = open("/dev/null", O_RDONLY);
	assert_true(fd >= 0);
	assert_false(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(mr_set_cloexec(fd), 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	mr_close(&fd);
	errno = 0;
	assert_int_equal(mr_write_full(-1, "x", 1), -1);
	assert_int_equal(errno, EBADF);
}

/* ---- log ---- */

static void test_log(void **state)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int saved = mr_log_level;

	(void)state;
	assert_non_null(f);
	mr_log_set_stream(f);
	mr_log_set_color(0);
	mr_log_level = MR_LOG_WARN;
	errno = EPIPE;
	mr_error("boom %d", 1);
	mr_warn("careful");
	mr_info("hidden");
	assert_int_equal(errno, EPIPE);
	fflush(f);
	assert_non_null(strstr(text, "[ERROR] boom 1"));
	assert_non_null(strstr(text, "[WARN] careful"));
	assert_null(strstr(text, "hidden"));
	assert_null(strchr(text, '\033')); /* no colour when asked for none */
	mr_log_set_stream(stderr);
	mr_log_level = saved;
	fclose(f);
	free(text);
}

/* Writing to a FIFO must go through the FIFO, not replace it with a file (the
 * same path is what kept /dev/null a device when a tool wrote its output there). */
static void test_fdio_write_special(void **state)
{
	char dir[] = "/tmp/mr-test-fifo-XXXXXX";
	char path[128];
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct stat st;
	char got[16] = { 0 };
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/fifo", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	fd = open(path, O_RDONLY | O_NONBLOCK);
	assert_true(fd >= 0);
	assert_int_equal(mr_write_file(path, "hello", 5, 0644, &err), 0);
	assert_int_equal(read(fd, got, sizeof(got)), 5);
	assert_string_equal(got, "hello");
	close(fd);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	unlink(path);
	rmdir(dir);
}

/* A symlink (like /dev/stdout -> /proc/self/fd/1 -> a file) is written
 * through, never replaced: renaming a temporary file over /dev/stdout would
 * put a regular file into /dev. */
static void test_fdio_write_symlink(void **state)
{
	char dir[] = "/tmp/mr-test-link-XXXXXX";
	char target[128], link[128];
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_buf b = MR_BUF_INIT;
	struct stat st;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(target, sizeof(target), "%s/target", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	assert_int_equal(mr_write_file(target, "old content\n", 12, 0644, &err), 0);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(mr_write_file(link, "new\n", 4, 0644, &err), 0);
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(mr_read_file(target, 1024, &b, &err), 0);
	assert_int_equal(b.len, 4);
	assert_memory_equal(b.p, "new\n", 4);
	mr_buf_release(&b);
	unlink(link);
	unlink(target);
	assert_int_equal(rmdir(dir), 0); /* and no temporary file was left */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opt_basic),
		cmocka_unit_test(test_opt_rest),
		cmocka_unit_test(test_opt_help_version),
		cmocka_unit_test(test_opt_errors),
		cmocka_unit_test(test_opt_usage),
		cmocka_unit_test(test_num_ints),
		cmocka_unit_test(test_num_double_duration_size),
		cmocka_unit_test(test_shquote_shells),
		cmocka_unit_test(test_shquote_forms),
		cmocka_unit_test(test_buf),
		cmocka_unit_test(test_strvec),
		cmocka_unit_test(test_array_grow),
		cmocka_unit_test(test_err),
		cmocka_unit_test(test_fdio_files),
		cmocka_unit_test(test_fdio_pipes),
		cmocka_unit_test(test_fdio_write_special),
		cmocka_unit_test(test_fdio_write_symlink),
		cmocka_unit_test(test_log),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
