/*
 * test_config.c - meshconfig's logic driven through the replay hal: every shipped
 * fixture gives its expected verdict, backend and hostfile; bad remote output,
 * unreachable hosts and failing setups give an error naming the host and field, a
 * non-zero exit code, and (checked in the replay log) no configuration command.
 */
#include "common/compat.h"

#include <setjmp.h>
#include <cmocka.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "common/err.h"
#include "common/fdio.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "config/boot.h"
#include "config/config_impl.h"
#include "hal/replay.h"
#include "topo/topo.h"

#define FIXTURES MESHRUN_SOURCE_DIR "/fixtures"

struct result {
	int rc;
	char *out;            /* stdout text */
	char *err;            /* stderr text */
	struct mr_strvec log; /* "host: command" for every command the hosts were sent */
};

/* A scripted answer on top of the fixture's, for one host. */
struct answer {
	const char *host, *pattern;
	int status;
	const char *out, *errout;
	int delay_ms, fail_code;
};

/* Run meshconfig's logic on fixture dir with args (NULL-terminated) and answers. */
static void run_with(const char *dir, const char *const *args, const struct answer *ans,
		     size_t nans, struct result *r)
{
	char *argv[32];
	int argc = 0;
	struct mr_config_opts o = MR_CONFIG_OPTS_INIT;
	struct mr_hal_opts ho;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_hal *hal = NULL;
	struct mr_replay *rp;
	size_t outlen = 0, errlen = 0;
	FILE *out, *err;

	memset(r, 0, sizeof(*r));
	memset(&ho, 0, sizeof(ho));
	argv[argc++] = "meshconfig";
	for (size_t i = 0; args && args[i]; i++)
		argv[argc++] = (char *)args[i];
	argv[argc] = NULL;
	out = open_memstream(&r->out, &outlen);
	err = open_memstream(&r->err, &errlen);
	assert_non_null(out);
	assert_non_null(err);

	r->rc = mr_config_parse_args(&o, argc, argv, out, err);
	if (r->rc < 0) {
		assert_int_equal(cfg_sim_hal(dir, &ho, &hal, &e), 0);
		rp = mr_hal_replay(hal);
		assert_non_null(rp);
		for (size_t i = 0; i < nans; i++)
			assert_int_equal(mr_replay_add(rp, ans[i].host, ans[i].pattern, ans[i].status,
						       ans[i].out, ans[i].errout, ans[i].delay_ms,
						       ans[i].fail_code),
					 0);
		if (!o.simulate)
			o.simulate = dir; /* take the hosts from the fixture */
		r->rc = mr_config_run(&o, hal, out, err);
		for (size_t i = 0; i < mr_replay_log_count(rp, NULL); i++) {
			const char *host = NULL;
			const char *cmd = mr_replay_log_cmd(rp, NULL, i, &host);
			assert_int_equal(mr_strvec_pushf(&r->log, "%s: %s", host, cmd), 0);
		}
		mr_hal_free(hal);
	}
	mr_config_opts_release(&o);
	fclose(out);
	fclose(err);
}

static void result_release(struct result *r)
{
	free(r->out);
	free(r->err);
	mr_strvec_release(&r->log);
}

static size_t log_count(const struct result *r, const char *needle)
{
	size_t n = 0;

	for (size_t i = 0; i < r->log.nr; i++)
		n += strstr(r->log.v[i], needle) != NULL;
	return n;
}

/* Nothing that changes a host was sent (no setup script: no ifconfig, no route
 * change), nor the pings that follow a setup. */
static void assert_no_config_sent(const struct result *r)
{
	for (size_t i = 0; i < r->log.nr; i++) {
		const char *cmd = strchr(r->log.v[i], ':') + 2;
		if (strstr(cmd, "ifconfig") || strstr(cmd, "route change") || strstr(cmd, "ping "))
			fail_msg("configuration command sent after an error: %s", r->log.v[i]);
	}
}

static void assert_contains(const char *hay, const char *needle)
{
	if (!hay || !strstr(hay, needle))
		fail_msg("expected '%s' in:\n%s", needle, hay ? hay : "(null)");
}

static cJSON *load_json(const char *path)
{
	struct mr_buf b = MR_BUF_INIT;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	cJSON *j;

	assert_int_equal(mr_read_file(path, 1 << 24, &b, &e), 0);
	j = cJSON_ParseWithLength(b.p, b.len);
	mr_buf_release(&b);
	assert_non_null(j);
	return j;
}

/* ---- every shipped fixture ------------------------------------------------------ */

static void check_fixture(const char *name)
{
	char dir[1024], cj[1100], want_verdict[64];
	const char *args[] = { "--simulate", dir, NULL };
	cJSON *cluster, *expect, *backend, *verdict, *hf;
	struct result r;

	snprintf(dir, sizeof(dir), "%s/%s", FIXTURES, name);
	snprintf(cj, sizeof(cj), "%s/cluster.json", dir);
	cluster = load_json(cj);
	expect = cJSON_GetObjectItemCaseSensitive(cluster, "expect");
	backend = cJSON_GetObjectItemCaseSensitive(expect, "backend");
	verdict = cJSON_GetObjectItemCaseSensitive(expect, "verdict");
	hf = cJSON_GetObjectItemCaseSensitive(expect, "hostfile");
	print_message("fixture %s\n", name);

	run_with(dir, args, NULL, 0, &r);
	assert_no_config_sent(&r);
	if (cJSON_IsString(backend)) {
		cJSON *got;
		char want_backend[80];

		if (r.rc != 0)
			fail_msg("%s: exit %d, stderr:\n%s", name, r.rc, r.err);
		snprintf(want_verdict, sizeof(want_verdict), "verdict: %s", verdict->valuestring);
		assert_contains(r.err, want_verdict);
		snprintf(want_backend, sizeof(want_backend), "backend %s", backend->valuestring);
		assert_contains(r.err, want_backend);
		assert_contains(r.err, "Setup for "); /* no --auto-setup: commands printed */
		got = cJSON_Parse(r.out);
		assert_non_null(got);
		/* MLX's hostfile plus meshrun's "mesh_ips" on a full mesh (which MLX ignores) */
		{
			const cJSON *hs = cJSON_GetObjectItemCaseSensitive(got, "hosts"), *h;
			int nmesh = 0;
			cJSON_ArrayForEach(h, hs)
				if (cJSON_GetObjectItemCaseSensitive(h, "mesh_ips")) {
					nmesh++;
					cJSON_DeleteItemFromObjectCaseSensitive((cJSON *)h, "mesh_ips");
				}
			if (!strcmp(verdict->valuestring, "mesh") && nmesh != cJSON_GetArraySize(hs))
				fail_msg("%s: a full mesh but %d of %d hosts have mesh_ips:\n%s", name, nmesh, cJSON_GetArraySize(hs), r.out);
			if (strcmp(verdict->valuestring, "mesh") && nmesh)
				fail_msg("%s: not a full mesh but mesh_ips written:\n%s", name, r.out);
		}
		if (hf && !cJSON_Compare(got, hf, true)) {
			char *w = cJSON_Print(hf);
			fail_msg("%s: hostfile differs; got:\n%s\nwant:\n%s", name, r.out, w);
		}
		cJSON_Delete(got);
	} else {
		assert_int_equal(r.rc, MR_CONFIG_EXIT_TOPOLOGY);
		assert_string_equal(r.out, "");
		assert_contains(r.err, "[ERROR]");
	}
	result_release(&r);
	cJSON_Delete(cluster);
}

static void test_every_fixture(void **state)
{
	DIR *d = opendir(FIXTURES);
	struct dirent *de;
	size_t n = 0;

	(void)state;
	assert_non_null(d);
	while ((de = readdir(d))) {
		char cj[1024];
		struct stat st;

		snprintf(cj, sizeof(cj), "%s/%s/cluster.json", FIXTURES, de->d_name);
		if (de->d_name[0] == '.' || stat(cj, &st) < 0)
			continue;
		check_fixture(de->d_name);
		n++;
	}
	closedir(d);
	assert_true(n >= 9); /* the fixture set of issue 3 */
}

/* ---- auto setup ----------------------------------------------------------------- */

#define M3 FIXTURES "/mesh4-m3ultra"

static void test_auto_setup_applies_and_verifies(void **state)
{
	const char *args[] = { "--auto-setup", "--verbose", NULL };
	struct result r;

	(void)state;
	run_with(M3, args, NULL, 0, &r);
	if (r.rc != 0)
		fail_msg("exit %d: %s", r.rc, r.err);
	/* one setup script per host, in one batch, with sudo -n and checked words */
	assert_int_equal(log_count(&r, "sudo -n ifconfig bridge0 down"), 4);
	assert_int_equal(log_count(&r, "m1: /bin/sh -c 'sudo -n ifconfig bridge0 down"), 1);
	assert_int_equal(log_count(&r, "sudo -n ifconfig en2 inet 192.168.0.1 netmask 255.255.255.252"), 1);
	assert_int_equal(log_count(&r, "sudo -n route change 192.168.0.2 -interface en2"), 1);
	/* both ends of the 6 cables pinged through their interface */
	assert_int_equal(log_count(&r, "ping -c 1"), 12);
	assert_int_equal(log_count(&r, "m1: /bin/sh -c 'if"), 3);
	assert_int_equal(log_count(&r, "' sh en2 192.168.0.2"), 1);
	assert_contains(r.err, "Running auto setup for m4");
	assert_contains(r.err, "ms)"); /* --verbose timings */
	assert_contains(r.out, "\"backend\": \"jaccl\"");
	result_release(&r);
}

static void test_auto_setup_without_sudo_prints(void **state)
{
	const char *args[] = { "--auto-setup", NULL };
	const struct answer ans[] = {
		{ "m2", "sudo -n true", 1, NULL, "sudo: a password is required\n", 0, 0 },
	};
	struct result r;

	(void)state;
	run_with(M3, args, ans, ARRAY_SIZE(ans), &r);
	assert_int_equal(r.rc, 0);
	assert_no_config_sent(&r);
	assert_contains(r.err, "no passwordless sudo");
	assert_contains(r.err, "  - m2");
	assert_contains(r.err, "Setup for m2\n============\nsudo ifconfig bridge0 down\n");
	assert_contains(r.err, "sudo ifconfig en2 inet 192.168.0.2 netmask 255.255.255.252\n");
	result_release(&r);
}

static void test_setup_command_fails(void **state)
{
	const char *args[] = { "--auto-setup", NULL };
	const struct answer ans[] = {
		{ "m2", "/bin/sh -c 'sudo*", 0, "fail 1 1\ndone\n", "ifconfig: SIOCAIFADDR: Invalid argument\n", 0, 0 },
	};
	struct result r;

	(void)state;
	run_with(M3, args, ans, ARRAY_SIZE(ans), &r);
	assert_int_equal(r.rc, MR_CONFIG_EXIT_SETUP);
	assert_contains(r.err, "m2: 'sudo ifconfig en2 inet 192.168.0.2 netmask 255.255.255.252' failed");
	assert_contains(r.err, "SIOCAIFADDR");
	assert_string_equal(r.out, ""); /* no hostfile after a failed setup */
	result_release(&r);
}

static void test_route_change_failure_is_a_warning(void **state)
{
	const char *args[] = { "--auto-setup", NULL };
	const struct answer ans[] = {
		{ "m3", "/bin/sh -c 'sudo*", 0, "fail 2 1\ndone\n", "route: not in table\n", 0, 0 },
	};
	struct result r;

	(void)state;
	run_with(M3, args, ans, ARRAY_SIZE(ans), &r);
	assert_int_equal(r.rc, 0);
	assert_contains(r.err, "[WARN] m3: 'sudo route change");
	result_release(&r);
}

static void test_setup_script_cut_short(void **state)
{
	const char *args[] = { "--auto-setup", NULL };
	const struct answer ans[] = {
		{ "m4", "/bin/sh -c 'sudo*", 0, "", NULL, 0, MESHRUN_E_NOEXIT },
	};
	struct result r;

	(void)state;
	run_with(M3, args, ans, ARRAY_SIZE(ans), &r);
	assert_int_equal(r.rc, MR_CONFIG_EXIT_SETUP);
	assert_contains(r.err, "m4: setup:");
	assert_int_equal(log_count(&r, "ping -c 1"), 0); /* no verify after a failed setup */
	result_release(&r);
}

static void test_ping_check_fails(void **state)
{
	const char *args[] = { "--auto-setup", NULL };
	const struct answer ans[] = {
		{ "m1", "/bin/sh -c 'if*", 1, "1 packets transmitted, 0 received\n", NULL, 0, 0 },
	};
	struct result r;

	(void)state;
	run_with(M3, args, ans, ARRAY_SIZE(ans), &r);
	assert_int_equal(r.rc, MR_CONFIG_EXIT_SETUP);
	assert_contains(r.err, "m1: en2: no answer from 192.168.0.2 (m2) after setup");
	/* the 3 failing pings of m1 were tried a second time */
	assert_int_equal(log_count(&r, "m1: /bin/sh -c 'if"), 6);
	result_release(&r);
}

/* ---- bad remote output: error naming host and field, nothing configured -------- */

static void test_routes_in_use_are_skipped(void **state)
{
	const char *args[] = { "--verbose", NULL };
	const struct answer ans[] = {
		{ "m1", "/bin/sh -c '[ \"$(uname -s)\" = Darwin ]*", 0,
		  "Routing tables\n\nInternet:\n"
		  "Destination        Gateway            Flags           Netif Expire\n"
		  "default            10.0.1.254         UGScg             en0\n"
		  "192.168.0          link#6             UCS               en0      !\n",
		  NULL, 0, 0 },
	};
	struct result r;

	(void)state;
	run_with(M3, args, ans, ARRAY_SIZE(ans), &r);
	if (r.rc != 0)
		fail_msg("exit %d: %s", r.rc, r.err);
	assert_contains(r.err, "skipped: already routed");
	assert_contains(r.err, "sudo ifconfig en2 inet 192.168.1.1 netmask 255.255.255.252\n");
	assert_true(strstr(r.err, "inet 192.168.0.") == NULL);
	result_release(&r);
}

/*
 * One host answers badly (cut JSON, a wrong type, a port missing, a hostile
 * interface name, a failing or hanging command, a non-address): exit 4 with a
 * message naming the host and the command or field, nothing configured and no
 * hostfile.
 */
static void test_bad_remote_output(void **state)
{
	static const struct {
		const char *args[4];
		struct answer ans[2];
		size_t nans;
		const char *says[3];
	} cases[] = {
		{ { "--auto-setup" },
		  { { "m3", "system_profiler SPThunderboltDataType -json", 0, "{\"SPThunderboltDataType\": [ {", NULL, 0, 0 } },
		  1, { "m3: system_profiler" } },
		{ { "--auto-setup" },
		  { { "m2", "system_profiler SPThunderboltDataType -json", 0,
		      "{\"SPThunderboltDataType\": [{\"domain_uuid_key\": \"00000001-0000-4000-8000-000000000001\", \"device_name_key\": \"Mac\", "
		      "\"receptacle_1_tag\": {\"receptacle_id_key\": 2}}]}", NULL, 0, 0 } },
		  1, { "m2: system_profiler: SPThunderboltDataType[0].receptacle_1_tag.receptacle_id_key" } },
		{ { "--auto-setup" },
		  { { "m2", "networksetup -listallhardwareports", 0,
		      "Hardware Port: Wi-Fi\nDevice: en0\nEthernet Address: 02:00:00:00:00:05\n\n"
		      "Hardware Port: Thunderbolt Bridge\nDevice: bridge0\n\n", NULL, 0, 0 } },
		  1, { "m2: networksetup: no 'Thunderbolt" } },
		{ { "--auto-setup" },
		  { { "m1", "networksetup -listallhardwareports", 0,
		      "Hardware Port: Thunderbolt 1\nDevice: en0; rm -rf /\n\n"
		      "Hardware Port: Thunderbolt 2\nDevice: en3\n\nHardware Port: Thunderbolt 3\nDevice: en4\n\n",
		      NULL, 0, 0 } },
		  1, { "m1: networksetup:", "en0; rm -rf /" } },
		/* every host's problem is reported, each naming host and command */
		{ { "--auto-setup" },
		  { { "m4", "networksetup -listallhardwareports", 127, NULL, "sh: networksetup: not found\n", 0, 0 },
		    { "m2", "system_profiler *", 0, NULL, NULL, 10, MESHRUN_E_TIMEOUT } },
		  2, { "m4: 'networksetup -listallhardwareports' failed: exit status 127",
		       "networksetup: not found", "m2: 'system_profiler SPThunderboltDataType -json'" } },
		{ { "--over", "ethernet" },
		  { { "m3", "ipconfig getifaddr en0", 0, "$(reboot)\n", NULL, 0, 0 } },
		  1, { "m3: 'ipconfig getifaddr en0': expected an IP address" } },
		{ { "--timeout", "50ms" },
		  { { "m2", "system_profiler *", 0, "{}", NULL, 5000, 0 } },
		  1, { "m2: 'system_profiler SPThunderboltDataType -json'" } },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct result r;

		run_with(M3, cases[i].args, cases[i].ans, cases[i].nans, &r);
		if (r.rc != MR_CONFIG_EXIT_DISCOVERY)
			fail_msg("case %zu: exit %d: %s", i, r.rc, r.err);
		for (size_t k = 0; k < ARRAY_SIZE(cases[i].says) && cases[i].says[k]; k++)
			if (!strstr(r.err, cases[i].says[k]))
				fail_msg("case %zu: '%s' not in: %s", i, cases[i].says[k], r.err);
		assert_no_config_sent(&r);
		assert_string_equal(r.out, "");
		result_release(&r);
	}
}

/* ---- reachability --------------------------------------------------------------- */

static void test_unreachable_host(void **state)
{
	const char *args[] = { "--auto-setup", NULL };
	const struct answer ans[] = {
		{ "m4", "*", 0, NULL, NULL, 0, MESHRUN_E_CONNECT },
	};
	struct result r;

	(void)state;
	run_with(M3, args, ans, ARRAY_SIZE(ans), &r);
	assert_int_equal(r.rc, MR_CONFIG_EXIT_UNREACHABLE);
	assert_contains(r.err, "could not ssh to 1 of 4 hosts");
	assert_contains(r.err, "  - m4: ");
	/* nothing past the ssh check reached any host */
	assert_int_equal(log_count(&r, "system_profiler"), 0);
	assert_no_config_sent(&r);
	result_release(&r);
}

static void test_ignore_unreachable(void **state)
{
	const char *args[] = { "--ignore-unreachable", NULL };
	const struct answer ans[] = {
		{ "m4", "*", 0, NULL, NULL, 0, MESHRUN_E_CONNECT },
	};
	struct result r;
	cJSON *hf, *hosts;

	(void)state;
	run_with(M3, args, ans, ARRAY_SIZE(ans), &r);
	if (r.rc != 0)
		fail_msg("exit %d: %s", r.rc, r.err);
	assert_contains(r.err, "[WARN] ignoring 1 unreachable host");
	assert_contains(r.err, "  - m4: ");
	assert_contains(r.err, "verdict: mesh, 3 hosts, 3 cables");
	hf = cJSON_Parse(r.out);
	hosts = cJSON_GetObjectItemCaseSensitive(hf, "hosts");
	assert_int_equal(cJSON_GetArraySize(hosts), 3);
	assert_int_equal(log_count(&r, "m4: system_profiler"), 0);
	cJSON_Delete(hf);
	result_release(&r);
}

static void test_true_fails(void **state)
{
	const struct answer ans[] = {
		{ "m2", "true", 255, NULL, "Permission denied (publickey).\n", 0, 0 },
	};
	struct result r;

	(void)state;
	run_with(M3, NULL, ans, ARRAY_SIZE(ans), &r);
	assert_int_equal(r.rc, MR_CONFIG_EXIT_UNREACHABLE);
	assert_contains(r.err, "  - m2: 'true': exit status 255");
	result_release(&r);
}

/* ---- ethernet ------------------------------------------------------------------- */

static void test_ethernet(void **state)
{
	const char *args[] = { "--over", "ethernet", "--env", "MLX_METAL_FAST_SYNCH=1", NULL };
	const struct answer ans[] = {
		{ "m2", "ipconfig getifaddr en0", 1, NULL, NULL, 0, 0 },
		{ "m2", "ipconfig getifaddr en1", 0, "10.5.0.2\n", NULL, 0, 0 },
		{ "m3", "ipconfig getifaddr en0", 1, NULL, NULL, 0, 0 },
	};
	static const char want[] =
		"{\n"
		"    \"backend\": \"\",\n"
		"    \"envs\": [\n"
		"        \"MLX_METAL_FAST_SYNCH=1\"\n"
		"    ],\n"
		"    \"hosts\": [\n"
		"        {\n"
		"            \"ssh\": \"m1\",\n"
		"            \"ips\": [\n"
		"                \"10.0.1.1\"\n"
		"            ],\n"
		"            \"rdma\": []\n"
		"        },\n"
		"        {\n"
		"            \"ssh\": \"m2\",\n"
		"            \"ips\": [\n"
		"                \"10.5.0.2\"\n"
		"            ],\n"
		"            \"rdma\": []\n"
		"        },\n"
		"        {\n"
		"            \"ssh\": \"m3\",\n"
		"            \"ips\": [],\n"
		"            \"rdma\": []\n"
		"        },\n"
		"        {\n"
		"            \"ssh\": \"m4\",\n"
		"            \"ips\": [\n"
		"                \"10.0.1.4\"\n"
		"            ],\n"
		"            \"rdma\": []\n"
		"        }\n"
		"    ]\n"
		"}\n";
	struct result r;

	(void)state;
	run_with(M3, args, ans, ARRAY_SIZE(ans), &r);
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.out, want);
	assert_contains(r.err, "[WARN] could not find an IP address for 'm3'");
	assert_int_equal(log_count(&r, "system_profiler"), 0);
	result_release(&r);
}

/* ---- options, dot, backend ------------------------------------------------------ */

static void test_dot(void **state)
{
	const char *args[] = { "--dot", "--auto-setup", NULL };
	struct result r;

	(void)state;
	run_with(M3, args, NULL, 0, &r);
	assert_int_equal(r.rc, 0);
	assert_true(!strncmp(r.out, "graph", 5));
	assert_contains(r.out, "en2/en2");
	assert_no_config_sent(&r);
	result_release(&r);
}

static void test_backend_forced(void **state)
{
	const char *ring_args[] = { "--backend", "ring", NULL };
	const char *jaccl_args[] = { "--backend", "jaccl", NULL };
	struct result r;

	(void)state;
	run_with(M3, ring_args, NULL, 0, &r);
	assert_int_equal(r.rc, 0);
	assert_contains(r.out, "\"backend\": \"ring\"");
	result_release(&r);

	run_with(FIXTURES "/ring4", jaccl_args, NULL, 0, &r);
	assert_int_equal(r.rc, MR_CONFIG_EXIT_TOPOLOGY);
	assert_contains(r.err, "[ERROR]");
	assert_contains(r.err, "--dot");
	assert_string_equal(r.out, "");
	result_release(&r);
}

static void test_usage_errors(void **state)
{
	static const char *const cases[][5] = {
		{ "--backend", "nccl", NULL },
		{ "--over", "wifi", NULL },
		{ "--env", "1BAD=x", NULL },
		{ "--env", "NOEQUALS", NULL },
		{ "--bogus", NULL },
		{ "--timeout", "soon", NULL },
		{ "--hosts", "a,,b", NULL },
		{ "stray", NULL },
		{ "--at-boot", NULL },                       /* needs --auto-setup */
		{ "--undo", "--auto-setup", NULL },
		{ "--undo", "--mtu", "9000", NULL },
		{ "--mtu", "100", NULL },
		{ "--mtu", "9k", NULL },
		{ "--mtu", "9000", "--over", "ethernet", NULL },
	};
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct result r;

		run_with(M3, (const char *const *)cases[i], NULL, 0, &r);
		if (r.rc != MR_CONFIG_EXIT_USAGE)
			fail_msg("case %zu (%s): exit %d, want 2", i, cases[i][0], r.rc);
		assert_true(strlen(r.err) > 0);
		assert_int_equal(r.log.nr, 0);
		result_release(&r);
	}
}

static void test_option_prefix_and_output(void **state)
{
	char path[] = "/tmp/test_config_hfXXXXXX";
	int fd = mkstemp(path);
	const char *args[] = { "--output", path, "--env", "A_B=x y", "--no-auto-setup", NULL };
	struct mr_buf b = MR_BUF_INIT;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct result r;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	run_with(FIXTURES "/ring4", args, NULL, 0, &r);
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.out, "");
	assert_int_equal(mr_read_file(path, 1 << 20, &b, &e), 0);
	assert_contains(b.p, "\"backend\": \"jaccl-ring\"");
	assert_contains(b.p, "\"A_B=x y\"");
	mr_buf_release(&b);
	unlink(path);
	result_release(&r);
}

/* An --output-hostfile that cannot be written fails before any host is touched,
 * naming the path as given (issue 15), not a temporary file after the setup. */
static void test_output_checked_first(void **state)
{
	const char *args[] = { "--output-hostfile", "/no/such/dir/h.json", "--auto-setup", NULL };
	const char *dir_args[] = { "--output-hostfile", "/tmp", NULL };
	struct result r;

	(void)state;
	run_with(FIXTURES "/ring4", args, NULL, 0, &r);
	assert_int_equal(r.rc, MR_CONFIG_EXIT_USAGE);
	assert_contains(r.err, "--output-hostfile '/no/such/dir/h.json': directory '/no/such/dir' does not exist");
	assert_null(strstr(r.err, ".tmp"));
	assert_int_equal(r.log.nr, 0); /* no command reached any host */
	result_release(&r);

	run_with(FIXTURES "/ring4", dir_args, NULL, 0, &r);
	assert_int_equal(r.rc, MR_CONFIG_EXIT_USAGE);
	assert_contains(r.err, "--output-hostfile '/tmp': is a directory");
	assert_int_equal(r.log.nr, 0);
	result_release(&r);
}

/* Not a full mesh: said without --verbose, with every missing cable (issue 15). */
static void test_not_a_mesh_said(void **state)
{
	struct result r;

	(void)state;
	run_with(FIXTURES "/ring4", NULL, NULL, 0, &r);
	assert_int_equal(r.rc, 0);
	assert_contains(r.err, "not a full mesh: a1 is not cabled to a3; a2 to a4\n");
	assert_null(strstr(r.out, "not a full mesh")); /* stdout stays the hostfile */
	result_release(&r);
	run_with(FIXTURES "/ring8", NULL, NULL, 0, &r);
	assert_contains(r.err, "not a full mesh: ");
	assert_contains(r.err, "more pairs)");
	result_release(&r);
}

static void test_help_lists_every_flag(void **state)
{
	static const char *const flags[] = {
		"--hosts", "--hostfile", "--over", "--backend", "--auto-setup", "--no-auto-setup",
		"--output-hostfile", "--dot", "--ignore-unreachable", "--env", "--verbose",
		"--simulate", "--ssh-config", "--known-hosts", "--accept-new-hostkeys", "--timeout", "Exit status:", "127.0.0.1",
		"thunderbolt|ethernet", "ring|jaccl|jaccl-ring",
	};
	const char *args[] = { "--help", NULL };
	struct result r;

	(void)state;
	run_with(M3, args, NULL, 0, &r);
	assert_int_equal(r.rc, 0);
	for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
		assert_contains(r.out, flags[i]);
	result_release(&r);
}

/* ---- the command builder refuses what topo would never produce ------------------ */

static void test_setup_lines_refuse_hostile_words(void **state)
{
	static const char *const bad[][7] = {
		{ "ifconfig", "en2;reboot", "inet", "192.168.0.1", "netmask", "255.255.255.252", NULL },
		{ "ifconfig", "en2", "inet", "192.168.0.1 ", "netmask", "255.255.255.252", NULL },
		{ "ifconfig", "-en2", "inet", "192.168.0.1", "netmask", "255.255.255.252", NULL },
		{ "route", "change", "$(id)", "-interface", "en2", NULL },
		{ "route", "change", "192.168.0.2", "-interface", "en2", "extra", NULL },
		{ "rm", "-rf", "/", NULL },
	};
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct mr_topo_cmd cmd = { MR_STRVEC_INIT };
		struct mr_topo_host_cmds hc = { &cmd, 1 };
		struct mr_topo_plan p;
		struct mr_strvec lines = MR_STRVEC_INIT;
		struct meshrun_err e = MESHRUN_ERR_INIT;

		memset(&p, 0, sizeof(p));
		p.cmds = &hc;
		p.nhosts = 1;
		for (size_t k = 0; bad[i][k]; k++)
			assert_int_equal(mr_strvec_push(&cmd.argv, bad[i][k]), 0);
		assert_true(cfg_setup_lines(&p, 0, "h1", &lines, &e) < 0);
		assert_int_equal(lines.nr, 0);
		assert_non_null(strstr(e.msg, "h1: "));
		mr_strvec_release(&cmd.argv);
		mr_strvec_release(&lines);
	}
}


/* ---- --mtu, --at-boot, --undo (boot.h) ------------------------------------------- */

#define SET_MTU "/bin/sh -c 'n=$1; shift*"
#define DF_PING "/bin/sh -c 'if [ \"$(uname -s)\" = Linux ]; then exec ping -c 1 -W 2*"
#define INSTALL "sudo -n /bin/sh -c 'umask 022*"
#define UNDO "sudo -n /bin/sh -c 'did() *"

static void test_mtu_set_read_back_and_pinged(void **state)
{
	const char *args[] = { "--auto-setup", "--mtu", "9000", NULL };
	struct result r;

	(void)state;
	run_with(M3, args, NULL, 0, &r);
	if (r.rc != 0)
		fail_msg("exit %d: %s", r.rc, r.err);
	/* one set-and-read-back script per host, its planned ports as arguments */
	assert_int_equal(log_count(&r, "/bin/sh -c 'n=$1; shift"), 4);
	assert_int_equal(log_count(&r, "m1: /bin/sh -c 'n=$1; shift"), 1);
	assert_int_equal(log_count(&r, "' sh 9000 en2 en3 en4"), 4); /* each host: its 3 cabled ports */
	/* both ends of the 6 cables: a don't-fragment ping of 9000 bytes, under sudo on a Mac */
	assert_int_equal(log_count(&r, "sudo -n ping -c 1 -t 2 -D -s"), 12);
	assert_int_equal(log_count(&r, "' sh en2 192.168.0.2 8972"), 1);
	/* the plain ping check came first, as without --mtu */
	assert_int_equal(log_count(&r, "ping -c 1 -W 1 -I"), 12);
	result_release(&r);

	/* without --auto-setup the MTU commands are printed with the others */
	{
		const char *pargs[] = { "--mtu", "9000", NULL };
		run_with(M3, pargs, NULL, 0, &r);
		assert_int_equal(r.rc, 0);
		assert_no_config_sent(&r);
		assert_contains(r.err, "MTU for m2 (--mtu 9000)\nsudo ifconfig en2 mtu 9000\n");
		result_release(&r);
	}
}

static void test_mtu_refused_names_the_cable(void **state)
{
	const char *args[] = { "--auto-setup", "--mtu", "9000", NULL };
	const struct answer ans[] = {
		{ "m3", SET_MTU, 0, "refused en3 1500 ifconfig: ioctl (set mtu): Invalid argument\ndone\n", NULL, 0, 0 },
	};
	struct result r;

	(void)state;
	run_with(M3, args, ans, ARRAY_SIZE(ans), &r);
	assert_int_equal(r.rc, MR_CONFIG_EXIT_SETUP);
	assert_contains(r.err, "m3:en3 refuses mtu 9000 (it has 1500); ifconfig said: ifconfig: ioctl (set mtu): Invalid argument");
	assert_contains(r.err, "[ERROR] cable m");
	assert_contains(r.err, " <-> ");
	assert_int_equal(log_count(&r, "-D -s"), 0); /* no full-size ping after a refusal */
	assert_string_equal(r.out, "");
	result_release(&r);
}

static void test_mtu_ping_fails(void **state)
{
	const char *args[] = { "--auto-setup", "--mtu", "9000", NULL };
	const struct answer ans[] = {
		{ "m1", DF_PING, 2, "ping: sendto: Message too long\n", NULL, 0, 0 },
	};
	struct result r;

	(void)state;
	run_with(M3, args, ans, ARRAY_SIZE(ans), &r);
	assert_int_equal(r.rc, MR_CONFIG_EXIT_SETUP);
	assert_contains(r.err, "m1: en2: a 9000-byte packet with don't-fragment to 192.168.0.2 (m2) did not arrive");
	assert_int_equal(log_count(&r, "m1: /bin/sh -c 'if [ \"$(uname -s)\" = Linux ]; then exec ping -c 1 -W 2"), 6);
	result_release(&r);
}

static void test_at_boot_installs_everywhere(void **state)
{
	const char *args[] = { "--auto-setup", "--at-boot", NULL };
	const struct answer fail_m3[] = {
		{ "m3", INSTALL, 1, NULL, "Bootstrap failed: 5: Input/output error\n", 0, 0 },
	};
	const struct answer nosudo[] = {
		{ "m2", "sudo -n true", 1, NULL, "sudo: a password is required\n", 0, 0 },
	};
	struct result r;

	(void)state;
	run_with(M3, args, NULL, 0, &r);
	if (r.rc != 0)
		fail_msg("exit %d: %s", r.rc, r.err);
	assert_int_equal(log_count(&r, "sudo -n /bin/sh -c 'umask 022"), 4);
	assert_int_equal(log_count(&r, "launchctl bootstrap system"), 4);
	assert_contains(r.err, "LaunchDaemon " CFG_BOOT_LABEL " installed on 4 hosts");
	assert_int_equal(log_count(&r, "[ -e"), 0); /* no check for an older one: replaced */
	result_release(&r);

	run_with(M3, args, fail_m3, ARRAY_SIZE(fail_m3), &r);
	assert_int_equal(r.rc, MR_CONFIG_EXIT_SETUP);
	assert_contains(r.err, "m3: --at-boot: installing the LaunchDaemon failed: exit status 1: Bootstrap failed: 5");
	assert_string_equal(r.out, "");
	result_release(&r);

	/* a host without passwordless sudo: printed, nothing installed, an error */
	run_with(M3, args, nosudo, ARRAY_SIZE(nosudo), &r);
	assert_int_equal(r.rc, MR_CONFIG_EXIT_SETUP);
	assert_contains(r.err, "--at-boot: the LaunchDaemon was not installed");
	assert_no_config_sent(&r);
	assert_int_equal(log_count(&r, "umask"), 0);
	result_release(&r);
}

static void test_older_launchdaemon_warned(void **state)
{
	const char *args[] = { "--auto-setup", NULL };
	const struct answer ans[] = {
		{ "m4", "/bin/sh -c '[ -e *", 0, NULL, NULL, 0, 0 },
	};
	struct result r;

	(void)state;
	run_with(M3, args, ans, ARRAY_SIZE(ans), &r);
	assert_int_equal(r.rc, 0);
	assert_contains(r.err, "[WARN] m4: the LaunchDaemon of an earlier 'meshconfig --at-boot'");
	assert_int_equal(log_count(&r, "/bin/sh -c '[ -e"), 4);
	assert_null(strstr(r.err, "m1: the LaunchDaemon"));
	result_release(&r);
}

static void test_undo(void **state)
{
	const char *args[] = { "--undo", "--verbose", NULL };
	const struct answer did[] = {
		{ "m2", UNDO, 0, "did unloaded " CFG_BOOT_LABEL "\ndid en2: 192.168.0.2 removed\ndone\n", NULL, 0, 0 },
	};
	const struct answer failed[] = {
		{ "m2", UNDO, 0, "fail ifconfig bridge0 addm en2\ndone\n", "ifconfig: BRDGADD en2: Device busy\n", 0, 0 },
	};
	const struct answer nosudo[] = {
		{ "m4", "sudo -n true", 1, NULL, "sudo: a password is required\n", 0, 0 },
	};
	struct result r;

	(void)state;
	run_with(M3, args, did, ARRAY_SIZE(did), &r);
	if (r.rc != 0)
		fail_msg("exit %d: %s", r.rc, r.err);
	assert_int_equal(log_count(&r, "sudo -n /bin/sh -c 'did()"), 4);
	assert_int_equal(log_count(&r, "system_profiler"), 0); /* no discovery: ports found on the hosts */
	assert_contains(r.err, "m2: en2: 192.168.0.2 removed");
	assert_contains(r.err, "undone on 4 hosts (2 changes");
	assert_string_equal(r.out, ""); /* no hostfile */
	result_release(&r);

	run_with(M3, args, failed, ARRAY_SIZE(failed), &r);
	assert_int_equal(r.rc, MR_CONFIG_EXIT_SETUP);
	assert_contains(r.err, "m2: --undo: 'ifconfig bridge0 addm en2' failed: ifconfig: BRDGADD en2: Device busy");
	result_release(&r);

	/* its deadline is 4 x --timeout: 0.6 s of work within --timeout 0.3 */
	{
		const char *targs[] = { "--undo", "--timeout", "0.3", NULL };
		const struct answer slow[] = { { "m3", UNDO, 0, "done\n", NULL, 600, 0 } };
		run_with(M3, targs, slow, ARRAY_SIZE(slow), &r);
		if (r.rc != 0)
			fail_msg("exit %d: %s", r.rc, r.err);
		result_release(&r);
	}

	run_with(M3, args, nosudo, ARRAY_SIZE(nosudo), &r);
	assert_int_equal(r.rc, MR_CONFIG_EXIT_SETUP);
	assert_contains(r.err, "--undo needs passwordless sudo");
	assert_contains(r.err, "  - m4");
	assert_int_equal(log_count(&r, "did()"), 0);
	result_release(&r);
}

/* A plan of one link on host 0 (en2 A -> B) for the script builders. */
static void one_link_plan(struct mr_topo_plan *p, struct mr_topo_link *lk, const char *ifn,
			  const char *a, const char *b)
{
	memset(p, 0, sizeof(*p));
	memset(lk, 0, sizeof(*lk));
	p->links = lk;
	p->nlinks = 1;
	p->nhosts = 2;
	lk->host[0] = 0;
	lk->host[1] = 1;
	lk->ifname[0] = ifn;
	lk->ifname[1] = "en3";
	snprintf(lk->ip[0], sizeof(lk->ip[0]), "%s", a);
	snprintf(lk->ip[1], sizeof(lk->ip[1]), "%s", b);
}

/* The boot script: the plan's words checked, the result valid sh for dash and
 * bash (sh -n), and the undo script too. */
static void test_boot_script_words_and_syntax(void **state)
{
	static const char *const shells[] = { "/bin/sh", "/bin/dash", "/bin/bash" };
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_topo_plan p;
	struct mr_topo_link lk;
	struct mr_buf b = MR_BUF_INIT;
	char path[] = "/tmp/test_config_bootXXXXXX";
	int fd;

	(void)state;
	one_link_plan(&p, &lk, "en2", "192.168.0.1", "192.168.0.2");
	assert_int_equal(cfg_boot_script(&p, 0, "m1", 9000, &b, &e), 0);
	assert_contains(b.p, "HOST='m1'\nMTU=9000\n");
	assert_contains(b.p, "LINKS='\nen2 192.168.0.1 192.168.0.2\n'\n");
	assert_contains(b.p, "ifconfig bridge0 deletem");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(mr_write_full(fd, b.p, b.len), 0);
	close(fd);
	for (size_t i = 0; i < ARRAY_SIZE(shells); i++) {
		char *cmd;
		if (access(shells[i], X_OK) < 0)
			continue;
		cmd = xasprintf("%s -n %s", shells[i], path);
		if (system(cmd) != 0)
			fail_msg("%s: the boot script does not parse", cmd);
		free(cmd);
		assert_int_equal(mr_write_file(path, cfg_undo_script, strlen(cfg_undo_script), 0600, NULL), 0);
		cmd = xasprintf("%s -n %s", shells[i], path);
		if (system(cmd) != 0)
			fail_msg("%s: the undo script does not parse", cmd);
		free(cmd);
		assert_int_equal(mr_write_file(path, b.p, b.len, 0600, NULL), 0);
	}
	unlink(path);
	mr_buf_reset(&b);
	assert_int_equal(cfg_boot_script(&p, 1, "m2", 0, &b, &e), 0); /* host 1: the other end */
	assert_contains(b.p, "MTU=\n");
	assert_contains(b.p, "en3 192.168.0.2 192.168.0.1\n");
	/* hostile words never reach the script */
	static const char *const bad[][3] = {
		{ "en2';reboot;'", "192.168.0.1", "192.168.0.2" },
		{ "en2", "192.168.0.1 x", "192.168.0.2" },
		{ "en2", "192.168.0.1", "$(id)" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		mr_buf_reset(&b);
		mr_err_clear(&e);
		one_link_plan(&p, &lk, bad[i][0], bad[i][1], bad[i][2]);
		assert_true(cfg_boot_script(&p, 0, "m1", 0, &b, &e) < 0);
		assert_contains(e.msg, "m1: --at-boot: refusing");
	}
	mr_buf_reset(&b);
	mr_err_clear(&e);
	assert_true(cfg_boot_script(&p, 0, "m1'x", 0, &b, &e) < 0);
	mr_buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_fixture),
		cmocka_unit_test(test_auto_setup_applies_and_verifies),
		cmocka_unit_test(test_auto_setup_without_sudo_prints),
		cmocka_unit_test(test_setup_command_fails),
		cmocka_unit_test(test_route_change_failure_is_a_warning),
		cmocka_unit_test(test_setup_script_cut_short),
		cmocka_unit_test(test_ping_check_fails),
		cmocka_unit_test(test_bad_remote_output),
		cmocka_unit_test(test_routes_in_use_are_skipped),
		cmocka_unit_test(test_unreachable_host),
		cmocka_unit_test(test_ignore_unreachable),
		cmocka_unit_test(test_true_fails),
		cmocka_unit_test(test_ethernet),
		cmocka_unit_test(test_dot),
		cmocka_unit_test(test_backend_forced),
		cmocka_unit_test(test_usage_errors),
		cmocka_unit_test(test_option_prefix_and_output),
		cmocka_unit_test(test_output_checked_first),
		cmocka_unit_test(test_not_a_mesh_said),
		cmocka_unit_test(test_help_lists_every_flag),
		cmocka_unit_test(test_setup_lines_refuse_hostile_words),
		cmocka_unit_test(test_mtu_set_read_back_and_pinged),
		cmocka_unit_test(test_mtu_refused_names_the_cable),
		cmocka_unit_test(test_mtu_ping_fails),
		cmocka_unit_test(test_at_boot_installs_everywhere),
		cmocka_unit_test(test_older_launchdaemon_warned),
		cmocka_unit_test(test_undo),
		cmocka_unit_test(test_boot_script_words_and_syntax),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
