/*
 * test_hostfold.c - common/hostfold: every host in full up to MR_HOSTFOLD_FULL,
 * a long list folded into whole lines ("and N more hosts: same error"), hints
 * once each, "the same" with names, addresses and fingerprints masked.
 */
#include "common/compat.h"
#include "common/hostfold.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#define HINT_KEY "host key not known yet: --accept-new-hostkeys"

/* "ssh to 'hN' (10.0.0.N:22): host key is unknown: ED25519 key SHA256:<43 chars> is not in '/k'" */
static void add_key_error(struct mr_hostfold *f, int i)
{
	char host[32], why[256], fp[44];

	snprintf(host, sizeof(host), "h%d", i);
	for (int k = 0; k < 43; k++)
		fp[k] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[(i * 7 + k * 13) % 64];
	fp[43] = '\0';
	snprintf(why, sizeof(why),
		 "ssh to '%s' (10.0.%d.%d:22): host key is unknown: ED25519 key SHA256:%s is not in '/root/.ssh/known_hosts'",
		 host, i / 256, i % 256, fp);
	assert_int_equal(mr_hostfold_add(f, host, why, HINT_KEY), 0);
}

static void test_few_hosts_in_full(void **state)
{
	struct mr_hostfold f = MR_HOSTFOLD_INIT;
	struct mr_strvec lines = MR_STRVEC_INIT;

	(void)state;
	for (int i = 1; i <= 4; i++)
		add_key_error(&f, i);
	assert_int_equal(mr_hostfold_render(&f, false, "--verbose", "", &lines), 0);
	assert_int_equal(lines.nr, 5); /* 4 hosts, each in full, then the hint once */
	for (int i = 0; i < 4; i++) {
		char want[32];

		snprintf(want, sizeof(want), "h%d: ssh to 'h%d'", i + 1, i + 1);
		assert_true(!strncmp(lines.v[i], want, strlen(want)));
		assert_non_null(strstr(lines.v[i], "is not in '/root/.ssh/known_hosts'"));
	}
	assert_string_equal(lines.v[4], "hint: " HINT_KEY);
	mr_strvec_release(&lines);
	mr_hostfold_release(&f);
}

static void test_many_hosts_fold(void **state)
{
	struct mr_hostfold f = MR_HOSTFOLD_INIT;
	struct mr_strvec lines = MR_STRVEC_INIT;

	(void)state;
	for (int i = 1; i <= 256; i++)
		add_key_error(&f, i);
	assert_int_equal(mr_hostfold_render(&f, false, "--verbose", "- ", &lines), 0);
	assert_int_equal(lines.nr, 3);
	assert_true(!strncmp(lines.v[0], "- h1: ssh to 'h1' (10.0.0.1:22): host key is unknown", 52));
	assert_true(!strncmp(lines.v[1], "- and 255 more hosts: same error (h2, h3, h4, ", 46));
	/* the names end at a name, never inside one */
	assert_non_null(strstr(lines.v[1], ", ...)"));
	assert_true(strlen(lines.v[1]) < 120);
	assert_string_equal(lines.v[2], "hint: " HINT_KEY);
	mr_strvec_release(&lines);

	/* all: every host in full */
	assert_int_equal(mr_hostfold_render(&f, true, "--verbose", "", &lines), 0);
	assert_int_equal(lines.nr, 257);
	assert_true(!strncmp(lines.v[255], "h256: ssh to 'h256' (10.0.1.0:22)", 33));
	mr_strvec_release(&lines);
	mr_hostfold_release(&f);
}

static void test_many_kinds(void **state)
{
	struct mr_hostfold f = MR_HOSTFOLD_INIT;
	struct mr_strvec lines = MR_STRVEC_INIT;

	(void)state;
	/* 20 hosts, 12 different exit statuses (hosts 13..20 repeat 1..8) */
	for (int i = 0; i < 20; i++) {
		char host[16], why[64];

		snprintf(host, sizeof(host), "n%d", i);
		snprintf(why, sizeof(why), "setup failed: exit status %d", i < 12 ? i + 1 : i - 11);
		assert_int_equal(mr_hostfold_add(&f, host, why, NULL), 0);
	}
	assert_int_equal(mr_hostfold_render(&f, false, "--verbose", "", &lines), 0);
	/* 8 kinds shown, each with its one repeat folded; 4 kinds (4 hosts) summed up */
	assert_int_equal(lines.nr, 8 * 2 + 1);
	assert_string_equal(lines.v[0], "n0: setup failed: exit status 1");
	assert_string_equal(lines.v[1], "and 1 more host: same error (n12)");
	assert_string_equal(lines.v[16], "and 4 more hosts with other errors (--verbose lists every host)");
	mr_strvec_release(&lines);
	mr_hostfold_release(&f);
}

static void test_same(void **state)
{
	(void)state;
	assert_true(mr_hostfold_same("h1", "connect to 'h1' (10.0.0.1:22): timed out",
				     "m22", "connect to 'm22' (192.168.7.22:22): timed out"));
	assert_false(mr_hostfold_same("h1", "exit status 3", "h2", "exit status 4"));
	assert_false(mr_hostfold_same("h1", "host key is unknown", "h2", "host key has changed"));
	/* a short word is no fingerprint */
	assert_false(mr_hostfold_same("h1", "command 'abc' not found", "h2", "command 'abd' not found"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_few_hosts_in_full),
		cmocka_unit_test(test_many_hosts_fold),
		cmocka_unit_test(test_many_kinds),
		cmocka_unit_test(test_same),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
