/* Unit tests of src/hal/ssh_config.c: the ssh_config subset of the ssh backend. */
#include "common/compat.h"
#include "hal/ssh_config.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/spawn.h"

#include <libssh2.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static struct mr_ssh_config *parse_ok(const char *text)
{
	struct mr_ssh_config *cfg = NULL;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	if (mr_ssh_config_parse(&cfg, text, strlen(text), "cfg", &err) < 0)
		fail_msg("parse failed: %s", err.msg);
	assert_non_null(cfg);
	return cfg;
}

static void lookup_ok(struct mr_ssh_config *cfg, const char *alias, struct mr_ssh_host_cfg *h)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;

	if (mr_ssh_config_lookup(cfg, alias, h, &err) < 0)
		fail_msg("lookup '%s' failed: %s", alias, err.msg);
}

static void test_pattern(void **state)
{
	static const struct { const char *pat, *s; bool want; } cases[] = {
		{ "h1", "h1", true },        { "h1", "h10", false },
		{ "h*", "h10", true },       { "h*", "x1", false },
		{ "*", "", true },           { "h?", "h1", true },
		{ "h?", "h12", false },      { "*.lan", "a.b.lan", true },
		{ "*.lan", "a.lan.x", false }, { "a*b*c", "aXbYbZc", true },
		{ "a*b*c", "aXbYc1", false }, { "H1", "h1", true },
		{ "10.231.0.*", "10.231.0.7", true }, { "", "", true }, { "", "x", false },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		if (mr_ssh_pattern_match(cases[i].pat, cases[i].s) != cases[i].want)
			fail_msg("pattern '%s' vs '%s': want %d", cases[i].pat, cases[i].s,
				 cases[i].want);
}

static void test_first_match_wins(void **state)
{
	struct mr_ssh_config *cfg;
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;
	char *home_id;

	(void)state;
	setenv("HOME", "/home/tester", 1);
	cfg = parse_ok("# global part\n"
		       "ConnectTimeout 7\n"
		       "\n"
		       "Host h1 h2 \"h 3\" \"h_3\"\n"
		       "    HostName 10.0.0.%h-x\n"
		       "    User alice\n"
		       "    Port=2222\n"
		       "    IdentityFile ~/.ssh/id_h\n"
		       "Host !h2 h*\n"
		       "    HostName ignored-for-h1\n"
		       "    User bob\n"
		       "    IdentityFile /keys/%r@%h\n"
		       "    StrictHostKeyChecking accept-new\n"
		       "Host *\n"
		       "    Port 22\n"
		       "    UserKnownHostsFile ~/kh1 /etc/kh2\n"
		       "    StrictHostKeyChecking no\n"
		       "    ConnectTimeout 99\n"
		       "    ForwardAgent yes\n"
		       "    Unknownkeyword\n");

	lookup_ok(cfg, "h1", &h);
	assert_string_equal(h.alias, "h1");
	assert_string_equal(h.hostname, "10.0.0.h1-x");
	assert_string_equal(h.user, "alice");
	assert_int_equal(h.port, 2222);
	assert_int_equal(h.identity_files.nr, 2);
	assert_string_equal(h.identity_files.v[0], "/home/tester/.ssh/id_h");
	/* %h is the HostName, as in OpenSSH */
	assert_string_equal(h.identity_files.v[1], "/keys/alice@10.0.0.h1-x");
	assert_int_equal(h.known_hosts.nr, 2);
	assert_string_equal(h.known_hosts.v[0], "/home/tester/kh1");
	assert_string_equal(h.known_hosts.v[1], "/etc/kh2");
	assert_int_equal(h.strict, MR_SSH_STRICT_ACCEPT_NEW);
	assert_int_equal(h.connect_timeout_ms, 7000);
	mr_ssh_host_cfg_release(&h);

	/* h2 is excluded from the second block by its negated pattern */
	lookup_ok(cfg, "h2", &h);
	assert_string_equal(h.user, "alice");
	assert_int_equal(h.strict, MR_SSH_STRICT_NO);
	assert_int_equal(h.identity_files.nr, 1);
	mr_ssh_host_cfg_release(&h);

	/* a quoted pattern parses, but a destination with a space is refused */
	lookup_ok(cfg, "h_3", &h);
	assert_string_equal(h.hostname, "10.0.0.h_3-x");
	mr_ssh_host_cfg_release(&h);
	{
		struct meshrun_err e = MESHRUN_ERR_INIT;

		assert_int_equal(mr_ssh_config_lookup(cfg, "h 3", &h, &e), MESHRUN_E_USAGE);
	}

	lookup_ok(cfg, "h7", &h);
	assert_string_equal(h.hostname, "ignored-for-h1");
	assert_string_equal(h.user, "bob");
	assert_int_equal(h.port, 22);
	mr_ssh_host_cfg_release(&h);

	lookup_ok(cfg, "other", &h);
	assert_string_equal(h.hostname, "other");
	assert_null(h.user);
	assert_int_equal(h.port, 22);
	assert_int_equal(h.identity_files.nr, 0);
	mr_ssh_host_cfg_release(&h);

	home_id = mr_ssh_expand_tilde("~");
	assert_string_equal(home_id, "/home/tester");
	free(home_id);
	home_id = mr_ssh_expand_tilde("~root/x");
	assert_non_null(home_id);
	assert_string_equal(home_id + strlen(home_id) - 2, "/x");
	free(home_id);
	mr_ssh_config_free(cfg);
}

static void test_match_and_none(void **state)
{
	struct mr_ssh_config *cfg;
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;

	(void)state;
	cfg = parse_ok("Match host foo exec \"true\"\n"
		       "  User never\n"
		       "Match all\n"
		       "  UserKnownHostsFile none\n"
		       "  User everyone # trailing comment\n");
	lookup_ok(cfg, "foo", &h);
	assert_string_equal(h.user, "everyone");
	assert_true(h.known_hosts_none);
	assert_int_equal(h.known_hosts.nr, 0);
	mr_ssh_host_cfg_release(&h);
	mr_ssh_config_free(cfg);

	/* no config at all */
	lookup_ok(NULL, "bare", &h);
	assert_string_equal(h.hostname, "bare");
	assert_int_equal(h.port, 0);
	assert_int_equal(h.strict, MR_SSH_STRICT_UNSET);
	mr_ssh_host_cfg_release(&h);
}

static void test_malformed(void **state)
{
	static const struct { const char *text, *want; } cases[] = {
		{ "Host a\n  Port 0\n", "cfg:2: Port: bad port" },
		{ "Host a\n\n  Port 70000\n", "cfg:3: Port: bad port" },
		{ "Port 22x\n", "cfg:1: Port: bad port" },
		{ "Host\n", "cfg:1: Host: Host without a pattern" },
		{ "Host a\nUser\n", "cfg:2: User: missing value" },
		{ "HostName \"a b\n", "cfg:1: HostName: unterminated quote" },
		{ "User a b\n", "cfg:1: User: garbage at end of line" },
		{ "StrictHostKeyChecking maybe\n", "cfg:1: StrictHostKeyChecking: bad" },
		{ "ConnectTimeout soon\n", "cfg:1: ConnectTimeout: bad" },
		{ "ConnectTimeout 0\n", "cfg:1: ConnectTimeout: bad" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct mr_ssh_config *cfg = NULL;
		struct meshrun_err err = MESHRUN_ERR_INIT;
		int rc = mr_ssh_config_parse(&cfg, cases[i].text, strlen(cases[i].text), "cfg", &err);

		assert_int_equal(rc, MESHRUN_E_PARSE);
		assert_null(cfg);
		if (strncmp(err.msg, cases[i].want, strlen(cases[i].want)))
			fail_msg("case %zu: got '%s', want prefix '%s'", i, err.msg, cases[i].want);
	}
}

static void test_bad_token(void **state)
{
	struct mr_ssh_config *cfg = parse_ok("Host *\n HostName %z.lan\n");
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	assert_int_equal(mr_ssh_config_lookup(cfg, "x", &h, &err), MESHRUN_E_PARSE);
	assert_non_null(strstr(err.msg, "'x'"));
	assert_non_null(strstr(err.msg, "%-token"));
	mr_ssh_config_free(cfg);
}

static void test_load(void **state)
{
	char dir[] = "/tmp/mr-sshcfg-XXXXXX";
	char path[256], sshdir[256];
	struct mr_ssh_config *cfg = NULL;
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	const char *text = "Host e\n User fromenv\n";

	(void)state;
	assert_non_null(mkdtemp(dir));
	setenv("HOME", dir, 1);
	unsetenv("MESHRUN_SSH_CONFIG");

	/* default ~/.ssh/config missing: empty config */
	assert_int_equal(mr_ssh_config_load(&cfg, NULL, &err), 0);
	lookup_ok(cfg, "e", &h);
	assert_null(h.user);
	mr_ssh_host_cfg_release(&h);
	mr_ssh_config_free(cfg);

	/* an explicit file that is missing is an error naming it */
	snprintf(path, sizeof(path), "%s/nope", dir);
	assert_int_not_equal(mr_ssh_config_load(&cfg, path, &err), 0);
	assert_null(cfg);
	assert_non_null(strstr(err.msg, path));
	mr_err_clear(&err);

	/* $MESHRUN_SSH_CONFIG */
	snprintf(path, sizeof(path), "%s/cfg", dir);
	assert_int_equal(mr_write_file(path, text, strlen(text), 0600, &err), 0);
	setenv("MESHRUN_SSH_CONFIG", path, 1);
	assert_int_equal(mr_ssh_config_load(&cfg, NULL, &err), 0);
	lookup_ok(cfg, "e", &h);
	assert_string_equal(h.user, "fromenv");
	mr_ssh_host_cfg_release(&h);
	mr_ssh_config_free(cfg);
	unsetenv("MESHRUN_SSH_CONFIG");

	/* ~/.ssh/config, errors name the file and line */
	snprintf(sshdir, sizeof(sshdir), "%s/.ssh", dir);
	assert_int_equal(mkdir(sshdir, 0700), 0);
	snprintf(path, sizeof(path), "%s/.ssh/config", dir);
	assert_int_equal(mr_write_file(path, "Host e\n Port x\n", 15, 0600, &err), 0);
	assert_int_equal(mr_ssh_config_load(&cfg, NULL, &err), MESHRUN_E_PARSE);
	assert_non_null(strstr(err.msg, "/.ssh/config:2: Port"));

	unlink(path);
	rmdir(sshdir);
	snprintf(path, sizeof(path), "%s/cfg", dir);
	unlink(path);
	rmdir(dir);
}

/* "[user@]host" (issue 15): split at the last '@', the user wins over User and
 * is %r; hostile parts are refused naming the part. */
static void test_dest(void **state)
{
	static const struct { const char *dest, *user, *host; } ok[] = {
		{ "h1", NULL, "h1" },           { "me@h1", "me", "h1" },
		{ "me@10.0.0.5", "me", "10.0.0.5" }, { "a.b-c_d@h.lan", "a.b-c_d", "h.lan" },
		{ "fe80::1", NULL, "fe80::1" }, { "me@fe80::1", "me", "fe80::1" },
	};
	static const char *const bad[] = {
		"", "@h1", "me@", "-oProxyCommand=x", "me@-h1", "-l@h1", "a b@h1", "me@h 1",
		"me@h1;id", "$(id)@h1", "a@b@h1", "me@h1\n", "`x`@h1", "me@h1|x", "'q'@h1",
	};
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_ssh_config *cfg;
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		char *u = NULL, *host = NULL;

		if (mr_ssh_dest_split(ok[i].dest, &u, &host, &err) < 0)
			fail_msg("'%s': %s", ok[i].dest, err.msg);
		if (ok[i].user)
			assert_string_equal(u, ok[i].user);
		else
			assert_null(u);
		assert_string_equal(host, ok[i].host);
		free(u);
		free(host);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *u = NULL, *host = NULL;

		mr_err_clear(&err);
		if (mr_ssh_dest_split(bad[i], &u, &host, &err) != MESHRUN_E_USAGE)
			fail_msg("'%s' accepted", bad[i]);
		assert_null(u);
		assert_null(host);
		assert_non_null(strstr(err.msg, "ssh destination"));
		assert_non_null(strstr(err.msg, bad[i]));
	}

	cfg = parse_ok("Host h1\n  HostName 10.0.0.1\n  User cfguser\n  IdentityFile /k/%r-%h\n");
	lookup_ok(cfg, "me@h1", &h);
	assert_string_equal(h.dest, "me@h1");
	assert_string_equal(h.alias, "h1");
	assert_string_equal(h.hostname, "10.0.0.1");
	assert_string_equal(h.user, "me");
	assert_true(h.user_from_dest);
	assert_string_equal(h.identity_files.v[0], "/k/me-10.0.0.1");
	mr_ssh_host_cfg_release(&h);
	lookup_ok(cfg, "h1", &h);
	assert_string_equal(h.user, "cfguser");
	assert_false(h.user_from_dest);
	mr_ssh_host_cfg_release(&h);
	assert_int_equal(mr_ssh_config_lookup(cfg, "x;y@h1", &h, &err), MESHRUN_E_USAGE);
	mr_ssh_config_free(cfg);
}

/* Issue 21: the built-in parser names what it skips, in one string. */
static void test_unsupported_named(void **state)
{
	struct mr_ssh_config *cfg;
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;

	(void)state;
	cfg = parse_ok("Host *\n  ForwardAgent yes\n  BatchMode yes\n  ControlMaster auto\n"
		       "  forwardagent no\nMatch exec \"true\"\n  User x\n");
	assert_string_equal(mr_ssh_config_unsupported(cfg), "ForwardAgent, ControlMaster, Match exec");
	lookup_ok(cfg, "a", &h);
	assert_null(h.user); /* the Match exec block never applies */
	mr_ssh_host_cfg_release(&h);
	mr_ssh_config_free(cfg);
	cfg = parse_ok("Host a\n  User u\n");
	assert_null(mr_ssh_config_unsupported(cfg));
	mr_ssh_config_free(cfg);
}

/* Match host/originalhost/user; ProxyJump, ProxyCommand (rest of line, tokens),
 * IdentityAgent, IdentitiesOnly, CertificateFile, AddressFamily. */
static void test_match_and_new_keys(void **state)
{
	struct mr_ssh_config *cfg;
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;

	(void)state;
	setenv("HOME", "/home/tester", 1);
	cfg = parse_ok("Host j*\n  HostName 10.9.0.%h\n"
		       "Match host 10.9.0.*,!10.9.0.jx user root\n  User matched\n"
		       "Match originalhost jy\n  Port 2200\n"
		       "Host *\n  ProxyJump none\n  ProxyCommand  nc -q0 \"%h\" %p  \n"
		       "  IdentityAgent ~/agent.sock\n  IdentitiesOnly yes\n  CertificateFile ~/c-%r\n"
		       "  AddressFamily inet\n");
	lookup_ok(cfg, "root@jy", &h);
	assert_string_equal(h.user, "root"); /* dest's user wins over the Match's User */
	assert_int_equal(h.port, 2200);
	assert_null(h.proxy_jump);
	assert_null(h.proxy_command); /* ProxyJump none came first: no proxy */
	mr_ssh_host_cfg_release(&h);
	mr_ssh_config_free(cfg);

	setenv("USER", "root", 1);
	cfg = parse_ok("Host j*\n  HostName 10.9.0.%h\n"
		       "Match host 10.9.0.*,!10.9.0.jx user root\n  User matched\n"
		       "Host *\n  ProxyCommand  nc -q0 \"%h\" %p  \n"
		       "  IdentityAgent ~/agent.sock\n  IdentitiesOnly yes\n  CertificateFile ~/c-%r\n"
		       "  AddressFamily inet\n");
	lookup_ok(cfg, "jy", &h);
	assert_string_equal(h.user, "matched");
	assert_string_equal(h.proxy_command, "nc -q0 \"10.9.0.jy\" 22");
	assert_string_equal(h.identity_agent, "/home/tester/agent.sock");
	assert_true(h.identities_only);
	assert_string_equal(h.certificate_files.v[0], "/home/tester/c-matched");
	assert_int_equal(h.address_family, AF_INET);
	mr_ssh_host_cfg_release(&h);
	lookup_ok(cfg, "jx", &h);
	assert_null(h.user); /* negated in the Match host list */
	mr_ssh_host_cfg_release(&h);
	mr_ssh_config_free(cfg);

	cfg = parse_ok("Host b\n  ProxyJump a,root@c:2222\n  IdentityAgent none\n");
	lookup_ok(cfg, "b", &h);
	assert_string_equal(h.proxy_jump, "a,root@c:2222");
	assert_true(h.identity_agent_none);
	assert_null(h.identity_agent);
	mr_ssh_host_cfg_release(&h);
	mr_ssh_config_free(cfg);
}

/* Include: globs, relative to ~/.ssh, inside the including block. */
static void test_include(void **state)
{
	char dir[] = "/tmp/mr-sshinc-XXXXXX";
	char path[512];
	struct mr_ssh_config *cfg = NULL;
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	const char *a = "Host ia\n  HostName 10.0.0.1\n";
	const char *b = "Port 2022\nHost ib\n  HostName 10.0.0.2\n";
	const char *top = "Include conf.d/*.conf\nHost ic\n  Include inner\nHost *\n  User last\n";
	const char *inner = "User inneruser\n";

	(void)state;
	assert_non_null(mkdtemp(dir));
	setenv("HOME", dir, 1);
	unsetenv("MESHRUN_SSH_CONFIG");
	snprintf(path, sizeof(path), "%s/.ssh", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/.ssh/conf.d", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/.ssh/conf.d/a.conf", dir);
	assert_int_equal(mr_write_file(path, a, strlen(a), 0600, &err), 0);
	snprintf(path, sizeof(path), "%s/.ssh/conf.d/b.conf", dir);
	assert_int_equal(mr_write_file(path, b, strlen(b), 0600, &err), 0);
	snprintf(path, sizeof(path), "%s/.ssh/inner", dir);
	assert_int_equal(mr_write_file(path, inner, strlen(inner), 0600, &err), 0);
	snprintf(path, sizeof(path), "%s/.ssh/config", dir);
	assert_int_equal(mr_write_file(path, top, strlen(top), 0600, &err), 0);
	assert_int_equal(mr_ssh_config_load(&cfg, NULL, &err), 0);
	lookup_ok(cfg, "ia", &h);
	assert_string_equal(h.hostname, "10.0.0.1");
	assert_int_equal(h.port, 2022); /* b.conf's global line */
	assert_string_equal(h.user, "last");
	mr_ssh_host_cfg_release(&h);
	lookup_ok(cfg, "ib", &h);
	assert_string_equal(h.hostname, "10.0.0.2");
	mr_ssh_host_cfg_release(&h);
	lookup_ok(cfg, "ic", &h);
	assert_string_equal(h.user, "inneruser"); /* Include inside Host ic */
	mr_ssh_host_cfg_release(&h);
	mr_ssh_config_free(cfg);

	/* an include loop ends with an error naming the depth */
	assert_int_equal(mr_write_file(path, "Include config\n", 15, 0600, &err), 0);
	assert_int_equal(mr_ssh_config_load(&cfg, NULL, &err), MESHRUN_E_PARSE);
	assert_non_null(strstr(err.msg, "nested too deep"));
	mr_err_clear(&err);

	for (const char *f = "conf.d/a.conf\0conf.d/b.conf\0conf.d\0inner\0config\0"; *f; f += strlen(f) + 1) {
		snprintf(path, sizeof(path), "%s/.ssh/%s", dir, f);
		if (unlink(path) < 0)
			rmdir(path);
	}
	snprintf(path, sizeof(path), "%s/.ssh", dir);
	rmdir(path);
	rmdir(dir);
}

/*
 * Issue 33: an Include inside a block while the table of blocks grows (more
 * than 8, 16, 32 blocks before it and in the files it names): the blocks made
 * for the included lines and for the lines after the Include must carry the
 * outer block's conditions (the parser once kept a pointer to the outer block
 * across the growth and copied them from freed memory).
 */
static void test_include_many(void **state)
{
	char dir[] = "/tmp/mr-sshincn-XXXXXX";
	char path[512], want[64];
	struct mr_buf top = MR_BUF_INIT, inc = MR_BUF_INIT;
	struct mr_ssh_config *cfg = NULL;
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	assert_non_null(mkdtemp(dir));
	setenv("HOME", dir, 1);
	unsetenv("MESHRUN_SSH_CONFIG");
	snprintf(path, sizeof(path), "%s/.ssh", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	for (int i = 0; i < 12; i++)
		assert_int_equal(mr_buf_printf(&top, "Host h%d\n  HostName 10.1.0.%d\n", i, i), 0);
	assert_int_equal(mr_buf_puts(&top, "Host ic\n  Include many*.conf\n  User after\nHost *\n  User last\n"), 0);
	snprintf(path, sizeof(path), "%s/.ssh/config", dir);
	assert_int_equal(mr_write_file(path, top.p, top.len, 0600, &err), 0);
	for (int f = 1; f <= 2; f++) {
		mr_buf_reset(&inc);
		assert_int_equal(mr_buf_printf(&inc, "Port 23%02d\n", f), 0);
		for (int i = 0; i < 20; i++)
			assert_int_equal(mr_buf_printf(&inc, "Host m%d-%d\n  HostName 10.2.%d.%d\n", f, i, f, i), 0);
		snprintf(path, sizeof(path), "%s/.ssh/many%d.conf", dir, f);
		assert_int_equal(mr_write_file(path, inc.p, inc.len, 0600, &err), 0);
	}
	assert_int_equal(mr_ssh_config_load(&cfg, NULL, &err), 0);
	lookup_ok(cfg, "ic", &h);
	assert_int_equal(h.port, 2301); /* many1.conf's first line, under Host ic */
	assert_string_equal(h.user, "after"); /* back in Host ic after the Include */
	mr_ssh_host_cfg_release(&h);
	lookup_ok(cfg, "m2-19", &h);
	assert_string_equal(h.hostname, "10.2.2.19");
	assert_int_equal(h.port, 0); /* not set: many2.conf's Port is under Host ic only */
	assert_string_equal(h.user, "last");
	mr_ssh_host_cfg_release(&h);
	for (int i = 0; i < 12; i++) {
		snprintf(want, sizeof(want), "h%d", i);
		lookup_ok(cfg, want, &h);
		snprintf(want, sizeof(want), "10.1.0.%d", i);
		assert_string_equal(h.hostname, want);
		assert_string_equal(h.user, "last");
		mr_ssh_host_cfg_release(&h);
	}
	mr_ssh_config_free(cfg);
	mr_buf_release(&top);
	mr_buf_release(&inc);
	for (const char *f = "many1.conf\0many2.conf\0config\0"; *f; f += strlen(f) + 1) {
		snprintf(path, sizeof(path), "%s/.ssh/%s", dir, f);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/.ssh", dir);
	rmdir(path);
	rmdir(dir);
}

/* `ssh -G` resolves (where OpenSSH is installed): Match host and tokens come from it. */
static void test_ssh_g(void **state)
{
	char dir[] = "/tmp/mr-sshg-XXXXXX";
	char path[512];
	struct mr_ssh_config *cfg = NULL;
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	const char *text = "Host g1 g2\n  HostName 10.7.0.%h\n  ProxyCommand nc %h %p\n"
			   "  IdentityFile /k/%r-%h\n  ForwardX11 no\n"
			   "Match host 10.7.0.g2\n  User viamatch\n  Port 2202\n";
	const char *dests[] = { "g1", "g2", "u@g1" };
	char *ssh = mr_which("ssh", NULL);

	(void)state;
	if (!ssh) {
		skip();
		return;
	}
	free(ssh);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/cfg", dir);
	assert_int_equal(mr_write_file(path, text, strlen(text), 0600, &err), 0);
	setenv("MESHRUN_SSH_RESOLVER", "ssh", 1);
	assert_int_equal(mr_ssh_config_load(&cfg, path, &err), 0);
	assert_non_null(mr_ssh_config_resolver(cfg));
	mr_ssh_config_prefetch(cfg, dests, ARRAY_SIZE(dests));
	lookup_ok(cfg, "g2", &h);
	assert_true(h.from_ssh_g);
	assert_string_equal(h.hostname, "10.7.0.g2");
	assert_string_equal(h.user, "viamatch");
	assert_int_equal(h.port, 2202);
	assert_string_equal(h.proxy_command, "nc 10.7.0.g2 2202");
	assert_string_equal(h.identity_files.v[0], "/k/viamatch-10.7.0.g2");
	mr_ssh_host_cfg_release(&h);
	lookup_ok(cfg, "u@g1", &h);
	assert_string_equal(h.user, "u");
	assert_true(h.user_from_dest);
	assert_int_equal(h.port, 22);
	mr_ssh_host_cfg_release(&h);
	assert_null(mr_ssh_config_unsupported(cfg));
	mr_ssh_config_free(cfg);
	/* a broken config: ssh's own message, naming the host */
	assert_int_equal(mr_write_file(path, "Host x\n  Bogus 1\n", 17, 0600, &err), 0);
	assert_int_equal(mr_ssh_config_load(&cfg, path, &err), 0);
	assert_int_equal(mr_ssh_config_lookup(cfg, "x", &h, &err), MESHRUN_E_PARSE);
	assert_non_null(strstr(err.msg, "ssh -G for 'x' failed"));
	assert_non_null(strstr(err.msg, "bogus"));
	mr_ssh_config_free(cfg);
	setenv("MESHRUN_SSH_RESOLVER", "builtin", 1);
	unlink(path);
	rmdir(dir);
}

/*
 * Issue 33: a prefetch of more hosts than one batch of parallel `ssh -G` runs
 * (SSH_G_PARALLEL, 32), so the table of answers grows several times while runs
 * are in flight. Every host must get its own answer: on the code that kept a
 * pointer into the table, the first 16 hosts read "ssh -G: out of memory" (a
 * use-after-free that ASan reports).
 */
static void test_ssh_g_many(void **state)
{
	enum { NDEST = 100 };
	char dir[] = "/tmp/mr-sshgn-XXXXXX";
	char path[512], want[64];
	char names[NDEST][16];
	const char *dests[NDEST];
	struct mr_ssh_config *cfg = NULL;
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	const char *text = "Host p*\n  HostName %h.example\n  Port 2200\n";
	char *ssh = mr_which("ssh", NULL);

	(void)state;
	if (!ssh) {
		skip();
		return;
	}
	free(ssh);
	for (int i = 0; i < NDEST; i++) {
		snprintf(names[i], sizeof(names[i]), "p%d", i);
		dests[i] = names[i];
	}
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/cfg", dir);
	assert_int_equal(mr_write_file(path, text, strlen(text), 0600, &err), 0);
	setenv("MESHRUN_SSH_RESOLVER", "ssh", 1);
	assert_int_equal(mr_ssh_config_load(&cfg, path, &err), 0);
	mr_ssh_config_prefetch(cfg, dests, NDEST);
	/* a second prefetch of the same hosts finds them all answered and changes nothing */
	mr_ssh_config_prefetch(cfg, dests, NDEST);
	for (int i = 0; i < NDEST; i++) {
		lookup_ok(cfg, dests[i], &h);
		assert_true(h.from_ssh_g);
		snprintf(want, sizeof(want), "p%d.example", i);
		assert_string_equal(h.hostname, want);
		assert_int_equal(h.port, 2200);
		mr_ssh_host_cfg_release(&h);
	}
	mr_ssh_config_free(cfg);
	setenv("MESHRUN_SSH_RESOLVER", "builtin", 1);
	unlink(path);
	rmdir(dir);
}

/* The auto backend choice: ssh -G output it ran itself, and what libssh2 cannot do. */
static void test_from_g_gaps(void **state)
{
	char dir[] = "/tmp/mr-sshgap-XXXXXX";
	char text[1024], key[256], pub[300];
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(key, sizeof(key), "%s/id_ed25519_sk", dir);
	snprintf(pub, sizeof(pub), "%s.pub", key);
	assert_int_equal(mr_write_file(key, "x\n", 2, 0600, &err), 0);
	assert_int_equal(mr_write_file(pub, "sk-ssh-ed25519@openssh.com AAAA c\n", 34, 0600, &err), 0);
	snprintf(text, sizeof(text), "host a\nuser u\nhostname 10.1.1.1\nport 2222\nidentityfile %s\n"
		 "identityfile ~/.ssh/none\nproxyjump none\nproxycommand nc %%h %%p\ngssapiauthentication yes\n"
		 "identityagent none\naddressfamily inet6\nconnecttimeout none\nstricthostkeychecking accept-new\n"
		 "certificatefile %s\n", key, pub);
	assert_int_equal(mr_ssh_host_cfg_from_g("a", text, &h, &err), 0);
	assert_true(h.from_ssh_g);
	assert_string_equal(h.user, "u");
	assert_int_equal(h.port, 2222);
	assert_string_equal(h.proxy_command, "nc 10.1.1.1 2222");
	assert_null(h.proxy_jump);
	assert_true(h.identity_agent_none);
	assert_int_equal(h.address_family, AF_INET6);
	assert_int_equal(h.connect_timeout_ms, 0);
	assert_int_equal(h.strict, MR_SSH_STRICT_ACCEPT_NEW);
	assert_int_equal(h.libssh2_gaps.nr, LIBSSH2_VERSION_NUM < 0x010b00 ? 2 : 1);
	assert_non_null(strstr(h.libssh2_gaps.v[0], "IdentityFile"));
	assert_non_null(strstr(h.libssh2_gaps.v[0], "FIDO"));
	if (LIBSSH2_VERSION_NUM < 0x010b00) /* measured: 1.10 cannot sign with a certificate */
		assert_non_null(strstr(h.libssh2_gaps.v[1], "CertificateFile"));
	assert_int_equal(h.auth_notes.nr, 1);
	assert_non_null(strstr(h.auth_notes.v[0], "GSSAPIAuthentication"));
	mr_ssh_host_cfg_release(&h);
	unlink(pub);
	unlink(key);
	rmdir(dir);
}

/*
 * OpenSSH before 6.8 has no -G (issue 21): a fake `ssh` first on PATH answers it as
 * old OpenSSH does ("unknown option -- G", its usage, exit 255); the lookups fall
 * back to the built-in parser with one warning (naming what it skips), no error,
 * and ssh is asked once, not once per host.
 */
static void test_old_openssh_no_g(void **state)
{
	char dir[] = "/tmp/mr-oldssh-XXXXXX";
	char path[512], conf[512], calls[512], script[1024], logbuf[4096] = "";
	const char *old_path = getenv("PATH");
	char *saved_path = strdup(old_path ? old_path : "/usr/bin:/bin");
	const char *text = "Host o1 o2\n  HostName 10.8.0.%h\n  User old\n  ForwardX11 no\n";
	const char *dests[] = { "o1", "o2" };
	struct mr_ssh_config *cfg = NULL;
	struct mr_ssh_host_cfg h = MR_SSH_HOST_CFG_INIT;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	FILE *log, *f;
	int ncalls = 0;

	(void)state;
	assert_non_null(saved_path);
	assert_non_null(mkdtemp(dir));
	snprintf(calls, sizeof(calls), "%s/calls", dir);
	snprintf(script, sizeof(script),
		 "#!/bin/sh\n"
		 "echo \"$*\" >>%s\n"
		 "echo 'unknown option -- G' >&2\n"
		 "echo 'usage: ssh [-1246AaCfgKkMNnqsTtVvXxYy] [-b bind_address] [-c cipher_spec]' >&2\n"
		 "echo '           [-D [bind_address:]port] [-E log_file] [-e escape_char]' >&2\n"
		 "exit 255\n", calls);
	snprintf(path, sizeof(path), "%s/ssh", dir);
	assert_int_equal(mr_write_file(path, script, strlen(script), 0755, &err), 0);
	snprintf(conf, sizeof(conf), "%s/cfg", dir);
	assert_int_equal(mr_write_file(conf, text, strlen(text), 0600, &err), 0);
	snprintf(script, sizeof(script), "%s:%s", dir, saved_path);
	setenv("PATH", script, 1);
	unsetenv("MESHRUN_SSH_RESOLVER"); /* auto: ssh is there, so it is asked */
	log = fmemopen(logbuf, sizeof(logbuf) - 1, "w");
	assert_non_null(log);
	mr_log_set_stream(log);

	assert_int_equal(mr_ssh_config_load(&cfg, conf, &err), 0);
	assert_non_null(mr_ssh_config_resolver(cfg));
	mr_ssh_config_prefetch(cfg, dests, ARRAY_SIZE(dests));
	lookup_ok(cfg, "o1", &h);
	assert_false(h.from_ssh_g);
	assert_string_equal(h.hostname, "10.8.0.o1");
	assert_string_equal(h.user, "old");
	mr_ssh_host_cfg_release(&h);
	lookup_ok(cfg, "o2", &h);
	assert_string_equal(h.hostname, "10.8.0.o2");
	mr_ssh_host_cfg_release(&h);
	assert_null(mr_ssh_config_resolver(cfg));
	assert_true(mr_ssh_config_fell_back(cfg));
	assert_string_equal(mr_ssh_config_unsupported(cfg), "ForwardX11");
	mr_ssh_config_free(cfg);

	mr_log_set_stream(stderr);
	fclose(log);
	/* one line: the program, why, and what the built-in parser ignores */
	assert_non_null(strstr(logbuf, "has no -G (OpenSSH older than 6.8)"));
	assert_non_null(strstr(logbuf, "built-in parser, which ignores: ForwardX11"));
	assert_null(strchr(logbuf, '\n') ? strchr(strchr(logbuf, '\n') + 1, '\n') : NULL);
	/* the prefetch asked for both hosts at once; nothing after the fallback */
	f = fopen(calls, "r");
	assert_non_null(f);
	while (fgets(script, sizeof(script), f))
		ncalls++;
	fclose(f);
	assert_int_equal(ncalls, 2);

	setenv("MESHRUN_SSH_RESOLVER", "builtin", 1);
	setenv("PATH", saved_path, 1);
	free(saved_path);
	unlink(calls);
	unlink(conf);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pattern),
		cmocka_unit_test(test_first_match_wins),
		cmocka_unit_test(test_match_and_none),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_bad_token),
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_dest),
		cmocka_unit_test(test_unsupported_named),
		cmocka_unit_test(test_match_and_new_keys),
		cmocka_unit_test(test_include),
		cmocka_unit_test(test_include_many),
		cmocka_unit_test(test_ssh_g),
		cmocka_unit_test(test_ssh_g_many),
		cmocka_unit_test(test_from_g_gaps),
		cmocka_unit_test(test_old_openssh_no_g),
	};

	/* The built-in parser unless a test asks for `ssh -G`. */
	setenv("MESHRUN_SSH_RESOLVER", "builtin", 1);

	return cmocka_run_group_tests(tests, NULL, NULL);
}
