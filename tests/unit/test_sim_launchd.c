/*
 * test_sim_launchd.c - the simulated hosts' launchd (sim/launchd.h) and its
 * plist reader (sim/plist.h): what launchd accepts and refuses, each refusal
 * naming the line, key or file; meshconfig's own LaunchDaemon (config/boot.h)
 * passes every rule. The process side (bootstrap, boot, bootout) runs in
 * tests/integration/sim/sim_launchd.sh (root).
 */
#include "common/compat.h"

#include <setjmp.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/xalloc.h"
#include "config/boot.h"
#include "sim/launchd.h"
#include "sim/plist.h"

#define HEAD "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" \
	     "<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n" \
	     "<plist version=\"1.0\">\n"

static int parse(const char *text, struct mr_plist **p, struct meshrun_err *e)
{
	mr_err_clear(e);
	return mr_plist_parse(text, strlen(text), p, e);
}

static void test_plist_values(void **state)
{
	static const char text[] =
		"\xEF\xBB\xBF" HEAD
		"<!-- a comment -->\n"
		"<dict>\n"
		"  <key>s</key><string>a &amp; b &lt;c&gt; &#65;&#x42; <![CDATA[<raw>]]></string>\n"
		"  <key>e</key><string/>\n"
		"  <key>i</key><integer>-42</integer>\n"
		"  <key>h</key><integer>0x1F</integer>\n"
		"  <key>t</key><true/>\n"
		"  <key>f</key><false></false>\n"
		"  <key>a</key><array><string>x</string><integer>1</integer><dict/></array>\n"
		"  <key>r</key><real>1.5</real>\n"
		"</dict>\n"
		"</plist>\n<!-- trailing -->\n";
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_plist *p = NULL;
	const struct mr_plist *v;

	(void)state;
	if (parse(text, &p, &e) < 0)
		fail_msg("%s", e.msg);
	assert_int_equal(p->type, MR_PLIST_DICT);
	assert_int_equal(p->nkids, 8);
	assert_string_equal(mr_plist_get(p, "s")->text, "a & b <c> AB <raw>");
	assert_string_equal(mr_plist_get(p, "e")->text, "");
	assert_int_equal(mr_plist_get(p, "i")->num, -42);
	assert_int_equal(mr_plist_get(p, "h")->num, 31);
	assert_true(mr_plist_get(p, "t")->b);
	assert_int_equal(mr_plist_get(p, "f")->type, MR_PLIST_BOOL);
	assert_false(mr_plist_get(p, "f")->b);
	v = mr_plist_get(p, "a");
	assert_int_equal(v->type, MR_PLIST_ARRAY);
	assert_int_equal(v->nkids, 3);
	assert_int_equal(v->kids[2].type, MR_PLIST_DICT);
	assert_string_equal(mr_plist_get(p, "r")->text, "1.5");
	assert_null(mr_plist_get(p, "nope"));
	assert_null(mr_plist_get(v, "x")); /* not a dict */
	mr_plist_free(p);
	mr_plist_free(NULL);
}

static void test_plist_refused(void **state)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "bplist00\x01\x02", "binary property list" },
		{ "", "expected an element" },
		{ "not xml", "expected an element" },
		{ HEAD "<dict>", "not closed" },
		{ HEAD "<dict></dict>", "<plist> not closed" },
		{ HEAD "<dict></dict><dict/></plist>", "one value, then </plist>" },
		{ HEAD "<dict></dict></plist>junk", "text after </plist>" },
		{ HEAD "<dict><key>a</key><foo/></dict></plist>", "<foo> is not a property list element" },
		{ HEAD "<dict a=\"b\"></dict></plist>", "attributes are not allowed" },
		{ HEAD "<dict><key>a</key><true/><key>a</key><false/></dict></plist>", "key 'a' twice" },
		{ HEAD "<dict><string>x</string></dict></plist>", "expected <key> in <dict>" },
		{ HEAD "<dict><key>a</key></dict></plist>", "expected a value" },
		{ HEAD "<integer>12x</integer></plist>", "not an integer" },
		{ HEAD "<integer>99999999999999999999</integer></plist>", "not an integer" },
		{ HEAD "<string>a &bogus; b</string></plist>", "unknown entity" },
		{ HEAD "<string>&#233;</string></plist>", "ASCII only" },
		{ HEAD "<string>a<b/>c</string></plist>", "unexpected element" },
		{ HEAD "<array></dict></plist>", "</dict> closes <array>" },
		{ HEAD "<true>x</true></plist>", "must be empty" },
		{ HEAD "<!-- open", "comment not closed" },
		{ "<dict></dict>", "expected <plist>" },
	};
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct meshrun_err e = MESHRUN_ERR_INIT;
		struct mr_plist *p = (struct mr_plist *)&e; /* must be reset to NULL */

		if (parse(cases[i].text, &p, &e) == 0)
			fail_msg("case %zu: parsed, want '%s'", i, cases[i].want);
		assert_null(p);
		assert_int_equal(e.code, MESHRUN_E_PARSE);
		if (!strstr(e.msg, cases[i].want))
			fail_msg("case %zu: '%s', want '%s'", i, e.msg, cases[i].want);
	}
	{
		/* nesting is bounded */
		struct mr_buf b = MR_BUF_INIT;
		struct meshrun_err e = MESHRUN_ERR_INIT;
		struct mr_plist *p = NULL;

		mr_buf_puts(&b, HEAD);
		for (int i = 0; i < 40; i++)
			mr_buf_puts(&b, "<array>");
		for (int i = 0; i < 40; i++)
			mr_buf_puts(&b, "</array>");
		mr_buf_puts(&b, "</plist>");
		assert_true(mr_plist_parse(b.p, b.len, &p, &e) < 0);
		assert_non_null(strstr(e.msg, "nested more than"));
		mr_buf_release(&b);
	}
}

static int job_of(const char *dict, struct mr_launchd_job *job, struct meshrun_err *e)
{
	char *text = xasprintf(HEAD "<dict>%s</dict></plist>", dict);
	struct mr_plist *p = NULL;
	int rc;

	mr_err_clear(e);
	assert_int_equal(mr_plist_parse(text, strlen(text), &p, e), 0);
	rc = mr_launchd_job_from_plist(p, job, e);
	mr_plist_free(p);
	free(text);
	return rc;
}

static void test_job_rules(void **state)
{
	static const struct {
		const char *dict, *want;
	} bad[] = {
		{ "", "no Label" },
		{ "<key>Label</key><integer>1</integer><key>Program</key><string>/bin/true</string>",
		  "Label: expected a string" },
		{ "<key>Label</key><string>x y</string><key>Program</key><string>/bin/true</string>",
		  "labels of [A-Za-z0-9._-]" },
		{ "<key>Label</key><string>a</string>", "neither Program nor ProgramArguments" },
		{ "<key>Label</key><string>a</string><key>ProgramArguments</key><array/>",
		  "neither Program nor ProgramArguments" },
		{ "<key>Label</key><string>a</string><key>ProgramArguments</key><array><integer>1</integer></array>",
		  "ProgramArguments[0]: expected a string" },
		{ "<key>Label</key><string>a</string><key>ProgramArguments</key><string>/bin/sh</string>",
		  "ProgramArguments: expected a array" },
		{ "<key>Label</key><string>a</string><key>Program</key><string>/bin/true</string>"
		  "<key>RunAtLoad</key><string>yes</string>", "RunAtLoad: expected a boolean" },
		{ "<key>Label</key><string>a</string><key>Program</key><string>/bin/true</string>"
		  "<key>StartInterval</key><integer>0</integer>", "StartInterval: 0 is not" },
		{ "<key>Label</key><string>a</string><key>Program</key><string>/bin/true</string>"
		  "<key>KeepAlive</key><true/>", "key 'KeepAlive' is not simulated" },
		{ "<key>Label</key><string>a</string><key>Program</key><string>/bin/true</string>"
		  "<key>UserName</key><string>nobody</string>", "UserName: only \"root\"" },
		{ "<key>Label</key><string>a</string><key>Program</key><string>/bin/true</string>"
		  "<key>EnvironmentVariables</key><dict><key>A</key><integer>1</integer></dict>",
		  "EnvironmentVariables: 'A'" },
		{ "<key>Label</key><string>a</string><key>Program</key><string></string>", "Program: empty" },
	};
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_launchd_job job;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		if (job_of(bad[i].dict, &job, &e) == 0)
			fail_msg("case %zu: accepted, want '%s'", i, bad[i].want);
		if (!strstr(e.msg, bad[i].want))
			fail_msg("case %zu: '%s', want '%s'", i, e.msg, bad[i].want);
		assert_null(job.label);
	}
	/* Program alone is argv[0]; ProgramArguments[0] is the program without it */
	assert_int_equal(job_of("<key>Label</key><string>a.b-c_d</string><key>Program</key><string>/bin/true</string>"
				"<key>EnvironmentVariables</key><dict><key>X</key><string>1</string></dict>"
				"<key>UserName</key><string>root</string>", &job, &e), 0);
	assert_string_equal(job.program, "/bin/true");
	assert_int_equal(job.argv.nr, 1);
	assert_string_equal(job.env.v[0], "X=1");
	assert_false(job.run_at_load);
	assert_int_equal(job.start_interval, 0);
	assert_int_equal(job.exit_timeout, 20);
	mr_launchd_job_release(&job);
	assert_int_equal(job_of("<key>Label</key><string>a</string><key>ProgramArguments</key>"
				"<array><string>sh</string><string>-c</string><string>x</string></array>"
				"<key>Disabled</key><true/>", &job, &e), 0);
	assert_string_equal(job.program, "sh");
	assert_int_equal(job.argv.nr, 3);
	assert_true(job.disabled);
	mr_launchd_job_release(&job);
}

/* meshconfig's LaunchDaemon (config/boot.h) is one the simulated launchd runs as written. */
static void test_meshconfig_plist_accepted(void **state)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_launchd_job job;
	struct mr_plist *p = NULL;

	(void)state;
	assert_int_equal(mr_plist_parse(cfg_boot_plist, strlen(cfg_boot_plist), &p, &e), 0);
	assert_int_equal(mr_launchd_job_from_plist(p, &job, &e), 0);
	assert_string_equal(job.label, CFG_BOOT_LABEL);
	assert_string_equal(job.program, "/bin/sh");
	assert_int_equal(job.argv.nr, 2);
	assert_string_equal(job.argv.v[1], CFG_BOOT_SCRIPT);
	assert_true(job.run_at_load);
	assert_int_equal(job.start_interval, CFG_BOOT_INTERVAL);
	assert_string_equal(job.stdout_path, CFG_BOOT_LOG);
	assert_string_equal(job.stderr_path, CFG_BOOT_LOG);
	mr_launchd_job_release(&job);
	mr_plist_free(p);
}

/* Root-owned and not group/world writable, a regular file (needs root to chown). */
static void test_file_ownership(void **state)
{
	char dir[] = "/tmp/mr-launchd.XXXXXX";
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_launchd_job job;
	char *f, *l;

	(void)state;
	assert_non_null(mkdtemp(dir));
	f = xasprintf("%s/a.plist", dir);
	l = xasprintf("%s/l.plist", dir);
	assert_int_equal(mr_write_file(f, "x", 1, 0644, NULL), 0);
	assert_int_equal(chmod(f, 0644), 0);
	assert_int_equal(symlink(f, l), 0);
	if (geteuid() == 0) {
		assert_int_equal(chown(f, 0, 0), 0);
		assert_int_equal(mr_launchd_check_file(f, &e), 0);
		assert_int_equal(chmod(f, 0664), 0);
		assert_true(mr_launchd_check_file(f, &e) < 0);
		assert_non_null(strstr(e.msg, "Path had bad ownership/permissions"));
		assert_non_null(strstr(e.msg, "mode 0664"));
		assert_int_equal(chmod(f, 0644), 0);
		assert_int_equal(chown(f, 1, 0), 0);
		mr_err_clear(&e);
		assert_true(mr_launchd_check_file(f, &e) < 0);
		assert_non_null(strstr(e.msg, "owner 1:0"));
		assert_int_equal(chown(f, 0, 1), 0);
		mr_err_clear(&e);
		assert_true(mr_launchd_check_file(f, &e) < 0); /* group not wheel */
	} else {
		assert_true(mr_launchd_check_file(f, &e) < 0);
		assert_non_null(strstr(e.msg, "bad ownership"));
	}
	mr_err_clear(&e);
	assert_true(mr_launchd_check_file(l, &e) < 0);
	assert_non_null(strstr(e.msg, "not a regular file"));
	mr_err_clear(&e);
	assert_true(mr_launchd_load_file("/nonexistent/x.plist", &job, &e) < 0);
	assert_non_null(strstr(e.msg, "/nonexistent/x.plist"));
	unlink(l);
	unlink(f);
	rmdir(dir);
	free(l);
	free(f);
}

static void test_shim_text(void **state)
{
	struct mr_buf b = MR_BUF_INIT;

	(void)state;
	assert_int_equal(mr_launchd_render_shim("h1", "/tmp/s/h1", "/x/meshsim-launchd", &b), 0);
	assert_non_null(strstr(b.p, "exec '/x/meshsim-launchd' launchctl '/tmp/s/h1' \"$@\"\n"));
	mr_buf_reset(&b);
	assert_int_equal(mr_launchd_render_shim("h1", "/tmp/s'x", "/x/l", &b), -1);
	mr_buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plist_values),
		cmocka_unit_test(test_plist_refused),
		cmocka_unit_test(test_job_rules),
		cmocka_unit_test(test_meshconfig_plist_accepted),
		cmocka_unit_test(test_file_ownership),
		cmocka_unit_test(test_shim_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
