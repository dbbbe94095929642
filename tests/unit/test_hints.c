/*
 * test_hints.c - every flag a hint names exists in the tool that prints it:
 * the hal's hints (hal.h, mr_hal_hints: meshrun and meshconfig both print them)
 * against both option tables, meshrun's own (launch/hints.h) against meshrun's,
 * meshconfig's own (config_impl.h) against meshconfig's, a flag inside a
 * quoted 'meshconfig ...' or 'meshrun ...' command against that tool's. Also: which hint fits which failure (a changed key is never
 * "accept it"), and the shared ssh options are in both tables.
 */
#include "common/compat.h"
#include "common/optdoc.h"
#include "config/config.h"
#include "config/config_impl.h"
#include "hal/hal.h"
#include "launch/hints.h"
#include "launch/launch.h"

#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static const struct mr_opt *meshrun_table(void)
{
	return mr_launch_doc_cmd()->opts;
}

static const struct mr_opt *meshconfig_table(void)
{
	return mr_config_doc()->cmds[0].opts;
}

static bool has_flag(const struct mr_opt *t, const char *name, size_t n)
{
	if ((n == 4 && !strncmp(name, "help", 4)) || (n == 7 && !strncmp(name, "version", 7)))
		return true; /* built into the parser */
	for (; t->kind != MR_OPTK_END; t++)
		if (t->long_name && strlen(t->long_name) == n && !strncmp(t->long_name, name, n))
			return true;
	return false;
}

/*
 * Check every "--name" of text against tool's table, or, inside a quoted
 * command 'meshconfig ...' / 'meshrun ...', that tool's. Returns the number of
 * flags missing (each printed, naming the hint); *checked counts them all.
 */
static int check_hint(const char *text, const struct mr_opt *tool, const char *tool_name, int *checked)
{
	const struct mr_opt *in_quote = NULL;
	int missing = 0;

	for (const char *p = text; *p; p++) {
		if (*p == '\'') {
			if (in_quote) {
				in_quote = NULL;
				continue;
			}
			if (!strncmp(p + 1, "meshconfig ", 11))
				in_quote = meshconfig_table();
			else if (!strncmp(p + 1, "meshrun ", 8))
				in_quote = meshrun_table();
			continue;
		}
		if (p[0] == '-' && p[1] == '-' && (p == text || !isalnum((unsigned char)p[-1])) &&
		    isalpha((unsigned char)p[2])) {
			const char *name = p + 2;
			size_t len = 0;
			const struct mr_opt *t = in_quote ? in_quote : tool;

			while (isalnum((unsigned char)name[len]) || name[len] == '-')
				len++;
			if (!has_flag(t, name, len)) {
				print_message("hint printed by %s names --%.*s, which %s does not have: \"%s\"\n",
					      tool_name, (int)len, name,
					      in_quote ? "the quoted command's tool" : tool_name, text);
				missing++;
			}
			(*checked)++;
			p = name + len - 1;
		}
	}
	return missing;
}

static void test_hal_hints_name_flags_of_both_tools(void **state)
{
	int flags = 0;

	(void)state;
	for (size_t i = 0; mr_hal_hints[i]; i++) {
		assert_int_equal(check_hint(mr_hal_hints[i], meshrun_table(), "meshrun", &flags), 0);
		assert_int_equal(check_hint(mr_hal_hints[i], meshconfig_table(), "meshconfig", &flags), 0);
	}
	assert_true(flags >= 6); /* the host-key hints name --accept-new-hostkeys, --known-hosts */
}

static void test_launch_hints_name_meshrun_flags(void **state)
{
	static const char *const hints[] = {
#define HINT(text) text,
		MR_LAUNCH_HINTS(HINT)
#undef HINT
	};
	int flags = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(hints); i++)
		assert_int_equal(check_hint(hints[i], meshrun_table(), "meshrun", &flags), 0);
	assert_true(flags >= 8);
}

static void test_config_hints_name_meshconfig_flags(void **state)
{
	int flags = 0;

	(void)state;
	assert_int_equal(check_hint(MR_CONFIG_HINT_NOT_A_MAC, meshconfig_table(), "meshconfig", &flags), 0);
	assert_int_equal(flags, 2);
}

/* The checker itself: a flag that does not exist is caught, quotes switch tools. */
static void test_checker_catches_a_missing_flag(void **state)
{
	int flags = 0;

	(void)state;
	assert_int_equal(check_hint("run 'meshconfig --over thunderbolt', then --hostfile", meshrun_table(),
				    "meshrun", &flags), 0);
	assert_int_equal(flags, 2);
	assert_int_equal(check_hint("use --no-such-flag", meshrun_table(), "meshrun", &flags), 1);
	/* --over is meshconfig's: outside a quoted meshconfig command it is not meshrun's */
	assert_int_equal(check_hint("use --over thunderbolt", meshrun_table(), "meshrun", &flags), 1);
}

static void test_shared_ssh_options_in_both_tables(void **state)
{
	static const char *const shared[] = { "ssh-config", "ssh", "persist", "known-hosts",
					      "accept-new-hostkeys" };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(shared); i++) {
		assert_true(has_flag(meshrun_table(), shared[i], strlen(shared[i])));
		assert_true(has_flag(meshconfig_table(), shared[i], strlen(shared[i])));
	}
}

static void test_hint_fits_the_failure(void **state)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	const char *h;

	(void)state;
	e.code = MESHRUN_E_HOSTKEY;
	snprintf(e.msg, sizeof(e.msg), "ssh to 'h1' (10.0.0.1:22): host key is unknown: ED25519 key SHA256:x is not in '/k'");
	h = mr_hal_err_hint(&e);
	assert_non_null(h);
	assert_non_null(strstr(h, "--accept-new-hostkeys record"));
	e.sys_errno = MR_HAL_WHY_HOSTKEY_CHANGED; /* the reason the backend records */
	snprintf(e.msg, sizeof(e.msg), "ssh to 'h1' (10.0.0.1:22): host key has changed: the server's ED25519 key ...");
	h = mr_hal_err_hint(&e);
	assert_non_null(h);
	assert_non_null(strstr(h, "ssh-keygen -R"));
	assert_non_null(strstr(h, "never accepts a changed key"));
	snprintf(e.msg, sizeof(e.msg), "ssh to 'h1' (OpenSSH): host key has changed: Host key verification failed.");
	assert_ptr_equal(mr_hal_err_hint(&e), h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hal_hints_name_flags_of_both_tools),
		cmocka_unit_test(test_launch_hints_name_meshrun_flags),
		cmocka_unit_test(test_config_hints_name_meshconfig_flags),
		cmocka_unit_test(test_checker_catches_a_missing_flag),
		cmocka_unit_test(test_shared_ssh_options_in_both_tables),
		cmocka_unit_test(test_hint_fits_the_failure),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
