/*
 * test_sim.c - meshsim's pure parts: names and addresses, the shims (run with a
 * fake `ip` that records its arguments), state.json round trip, cluster checks,
 * a generated fixture read through topo, the faults file.
 */
#include "common/compat.h"

#include <setjmp.h>
#include <stdarg.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/fdio.h"
#include "common/xalloc.h"
#include "sim/model.h"
#include "sim/net.h"
#include "sim/plan.h"
#include "sim/render.h"
#include "sim/state.h"
#include "fixture/fixture.h"

static char tmpdir[64];

static int setup_tmp(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/mst-unit.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
	(void)state;
	return mr_sim_rm_rf(tmpdir);
}

static void test_names(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	char a[16];
	char *s;

	(void)state;
	assert_int_equal(mr_sim_check_name("meshsim", NULL), 0);
	assert_int_equal(mr_sim_check_name("mst_1", NULL), 0);
	assert_true(mr_sim_check_name("", &err) < 0);
	assert_true(mr_sim_check_name("toolongname", NULL) < 0);
	assert_true(mr_sim_check_name("a-b", NULL) < 0);   /* '-' would blur the prefix */
	assert_true(mr_sim_check_name("Upper", NULL) < 0);
	assert_true(mr_sim_check_name("1abc", NULL) < 0);
	assert_non_null(strstr(err.msg, "cluster name"));

	s = mr_sim_ns_name("mst", "h1");
	assert_string_equal(s, "mst-h1");
	free(s);
	s = mr_sim_bridge_name("meshsim");
	assert_string_equal(s, "meshsim-br");
	assert_true(strlen(s) <= 15);
	free(s);
	s = mr_sim_mgmt_link("abcdefghi", 249);   /* the longest name and index fit IFNAMSIZ */
	assert_string_equal(s, "abcdefghi-m249");
	assert_true(strlen(s) <= 15);
	free(s);

	static const char *const names[] = { "meshsim", "a", "mst1", "zzzzzzzzz" };
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		unsigned k = mr_sim_subnet_hint(names[i]);
		assert_true(k >= 1 && k <= 250);
	}
	assert_int_equal(mr_sim_subnet_hint("mst1"), mr_sim_subnet_hint("mst1"));
	assert_int_equal(mr_sim_subnet_next(250), 1);
	assert_int_equal(mr_sim_subnet_next(7), 8);
	mr_sim_host_addr(57, 0, a, sizeof(a));
	assert_string_equal(a, "10.230.57.1");
	mr_sim_host_addr(57, 249, a, sizeof(a));
	assert_string_equal(a, "10.230.57.250");
	mr_sim_bridge_addr(57, a, sizeof(a));
	assert_string_equal(a, "10.230.57.254");
	/* above 250 hosts: a /23, host 251 on in the next /24 */
	mr_sim_host_addr(56, 250, a, sizeof(a));
	assert_string_equal(a, "10.230.57.1");
	mr_sim_host_addr(56, 499, a, sizeof(a));
	assert_string_equal(a, "10.230.57.250");
	assert_int_equal(mr_sim_prefix_len(250), 24);
	assert_int_equal(mr_sim_prefix_len(251), 23);
	assert_int_equal(MR_SIM_MAX_HOSTS, 500);

	assert_true(mr_sim_is_topology_spec("mesh:4"));
	assert_true(mr_sim_is_topology_spec("ring:8,cables=2"));
	assert_false(mr_sim_is_topology_spec("fixtures/mesh4"));
	assert_false(mr_sim_is_topology_spec("mesh:"));
	assert_false(mr_sim_is_topology_spec(":4"));
	assert_true(mr_sim_ifname_reserved("en0"));
	assert_true(mr_sim_ifname_reserved("bridge0"));
	assert_false(mr_sim_ifname_reserved("en2"));
}

static const char ns_text[] =
	"Hardware Port: Wi-Fi\nDevice: en1\nEthernet Address: 02:00:00:00:20:01\n\n"
	"Hardware Port: Thunderbolt 1\nDevice: en2\nEthernet Address: 36:00:00:01:01:00\n\n"
	"Hardware Port: Thunderbolt 4\nDevice: en5\nEthernet Address: 36:00:00:01:04:00\n\n";

/* Write every shim of host h1 into tmpdir/h1/bin plus a fake ip logging to tmpdir/ip.log. */
static void write_shims(void)
{
	char *hdir = xasprintf("%s/h1", tmpdir), *p;
	struct mr_buf b = MR_BUF_INIT;
	static const char fake_ip[] =
		"#!/bin/sh\n"
		"echo \"$*\" >> \"$LOG\"\n"
		"case \"$*\" in\n"
		"'link show dev nope'|*'link show dev en5'|*'link show dev en1') exit 1 ;;\n"
		"'-o link show dev en2') echo '7: en2@if8: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT group default qlen 1000\\    link/ether 36:00:00:01:01:00 brd ff:ff:ff:ff:ff:ff link-netns x' ;;\n"
		"'-4 -o addr show dev en2') echo '5: en2    inet 192.168.0.1/30 brd 192.168.0.3 scope global en2' ;;\n"
		"esac\n"
		"exit 0\n";

	p = xasprintf("%s/bin", hdir);
	mkdir(hdir, 0755);
	mkdir(p, 0755);
	free(p);
	p = xasprintf("%s/fixture", hdir);
	mkdir(p, 0755);
	free(p);
	for (size_t i = 0; mr_sim_shim_names[i]; i++) {
		mr_buf_reset(&b);
		assert_int_equal(mr_sim_render_shim(mr_sim_shim_names[i], "h1", hdir, &b), 0);
		p = xasprintf("%s/bin/%s", hdir, mr_sim_shim_names[i]);
		assert_int_equal(mr_write_file(p, b.p, b.len, 0755, NULL), 0);
		free(p);
	}
	p = xasprintf("%s/bin/ip", hdir);
	assert_int_equal(mr_write_file(p, fake_ip, strlen(fake_ip), 0755, NULL), 0);
	free(p);
	p = xasprintf("%s/live", hdir);
	mkdir(p, 0755);
	free(p);
	p = xasprintf("%s/live/unplugged", hdir);
	mkdir(p, 0755);
	free(p);
	p = xasprintf("%s/fixture/networksetup.txt", hdir);
	assert_int_equal(mr_write_file(p, ns_text, strlen(ns_text), 0644, NULL), 0);
	free(p);
	p = xasprintf("%s/live/system_profiler.json", hdir);
	assert_int_equal(mr_write_file(p, "{\"SPThunderboltDataType\": []}\n", 30, 0644, NULL), 0);
	free(p);
	mr_buf_release(&b);
	free(hdir);
}

/* Run a shell command line with the shims first on PATH; returns the exit code. */
static int sh(const char *cmd, struct mr_buf *out)
{
	char *line = xasprintf("PATH='%s/h1/bin':/usr/bin:/bin LOG='%s/ip.log'; export PATH LOG; "
			       "rm -f \"$LOG\"; touch \"$LOG\"; %s > '%s/out' 2>&1", tmpdir, tmpdir,
			       cmd, tmpdir);
	char *outp = xasprintf("%s/out", tmpdir);
	int st = system(line);

	mr_buf_reset(out);
	mr_read_file(outp, 1 << 20, out, NULL);
	free(line);
	free(outp);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

static const char *iplog(struct mr_buf *b)
{
	char *p = xasprintf("%s/ip.log", tmpdir);

	mr_buf_reset(b);
	mr_read_file(p, 1 << 20, b, NULL);
	free(p);
	return mr_buf_cstr(b);
}

static void test_shims(void **state)
{
	struct mr_buf out = MR_BUF_INIT, log = MR_BUF_INIT;
	char *p;

	(void)state;
	write_shims();

	assert_int_equal(sh("ifconfig en2 inet 192.168.0.1 netmask 255.255.255.252", &out), 0);
	assert_string_equal(iplog(&log), "link show dev en2\nlink set dev en2 nomaster\n"
				     "-4 addr flush dev en2\naddr add 192.168.0.1/30 brd + dev en2\n"
				     "link set dev en2 up\n");
	assert_int_equal(sh("ifconfig en3 inet 10.1.2.3 netmask 0xffffff00", &out), 0);
	assert_non_null(strstr(iplog(&log), "addr add 10.1.2.3/24 brd + dev en3\n"));
	assert_int_equal(sh("ifconfig bridge0 down", &out), 0);
	assert_non_null(strstr(iplog(&log), "link set dev bridge0 down\n"));

	/* refused before any change */
	static const char *const bad[] = {
		"ifconfig 'en0;reboot' inet 1.2.3.4 netmask 255.255.255.0",
		"ifconfig en2 inet 1.2.3.256 netmask 255.255.255.0",
		"ifconfig en2 inet 1.2.3 netmask 255.255.255.0",
		"ifconfig en2 inet 01.2.3.4 netmask 255.255.255.0",
		"ifconfig en2 inet 1.2.3.4 netmask 255.0.255.0",
		"ifconfig en2 inet 1.2.3.4 netmask 255.255.255.253",
		"ifconfig en2 inet 1.2.3.4 netmask 0xfffffzz0",
		"ifconfig en2 inet 1.2.3.4",
		"ifconfig en2 alias 1.2.3.4 netmask 255.255.255.0",
		"ifconfig nope inet 1.2.3.4 netmask 255.255.255.0",
		"route change 1.2.3.4 -interface nope",
		"route change '1.2.3.4;' -interface en2",
		"route flush",
		"route change '$(reboot)' -interface en2",
		"ipconfig getifaddr '-x'",
		"ipconfig set en2 DHCP",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_int_equal(sh(bad[i], &out), 1);
		assert_null(strstr(iplog(&log), "addr add"));
		assert_null(strstr(iplog(&log), "route"));
	}

	assert_int_equal(sh("route change 192.168.0.2 -interface en2", &out), 0);
	assert_string_equal(iplog(&log), "link show dev en2\nroute replace 192.168.0.2/32 dev en2\n");
	assert_string_equal(mr_buf_cstr(&out), "change host 192.168.0.2: gateway en2\n");
	assert_int_equal(sh("route -n add -host 192.168.0.6 -interface en3", &out), 0);
	assert_non_null(strstr(iplog(&log), "route add 192.168.0.6/32 dev en3\n"));
	assert_int_equal(sh("route -n delete 192.168.0.6", &out), 0);
	assert_non_null(strstr(iplog(&log), "route del 192.168.0.6/32\n"));

	assert_int_equal(sh("ipconfig getifaddr en2", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "192.168.0.1\n");
	assert_int_equal(sh("ipconfig getifaddr en5", &out), 1);
	assert_string_equal(mr_buf_cstr(&out), "");

	assert_int_equal(sh("system_profiler SPThunderboltDataType -json", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "{\"SPThunderboltDataType\": []}\n");
	assert_int_equal(sh("system_profiler SPUSBDataType", &out), 1);

	/* sudo runs the command; with the nosudo marker it fails as sudo -n does */
	assert_int_equal(sh("sudo -n sh -c 'exit 5'", &out), 5);
	assert_int_equal(sh("sudo -- echo 'a b'", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "a b\n");
	p = xasprintf("%s/h1/nosudo", tmpdir);
	assert_int_equal(mr_write_file(p, "", 0, 0644, NULL), 0);
	assert_int_equal(sh("sudo -n true", &out), 1);
	assert_string_equal(mr_buf_cstr(&out), "sudo: a password is required\n");
	unlink(p);
	free(p);

	/* unsafe paths never reach a script */
	mr_buf_reset(&out);
	assert_int_equal(mr_sim_render_shim("sudo", "h1", "/tmp/a b", &out), -1);
	assert_int_equal(mr_sim_render_shim("rm", "h1", "/tmp/x", &out), -1);
	mr_buf_release(&out);
	mr_buf_release(&log);
}

/* ifconfig IF as macOS prints it; a pulled cable (live/unplugged/IF) stays pulled. */
static void test_ifconfig(void **state)
{
	struct mr_buf out = MR_BUF_INIT, log = MR_BUF_INIT, m = MR_BUF_INIT;
	char *mark = xasprintf("%s/h1/live/unplugged/en2", tmpdir);

	(void)state;
	write_shims();
	assert_int_equal(sh("ifconfig en2", &out), 0);
	assert_string_equal(mr_buf_cstr(&out),
			    "en2: flags=8863<UP,BROADCAST,SMART,RUNNING,SIMPLEX,MULTICAST> mtu 1500\n"
			    "\tether 36:00:00:01:01:00\n"
			    "\tinet 192.168.0.1 netmask 0xfffffffc broadcast 192.168.0.3\n"
			    "\tmedia: autoselect\n"
			    "\tstatus: active\n");

	/* unplugged, and down before: inactive, not UP */
	assert_int_equal(mr_write_file(mark, "down\n", 5, 0644, NULL), 0);
	assert_int_equal(sh("ifconfig en2", &out), 0);
	assert_non_null(strstr(mr_buf_cstr(&out), "en2: flags=8822<BROADCAST,SMART,SIMPLEX,MULTICAST> mtu 1500\n"));
	assert_non_null(strstr(mr_buf_cstr(&out), "\tstatus: inactive\n"));
	/* up, a new address: recorded for the plug, the link is not touched */
	assert_int_equal(sh("sudo ifconfig en2 up", &out), 0);
	assert_null(strstr(iplog(&log), "link set"));
	assert_int_equal(mr_read_file(mark, 64, &m, NULL), 0);
	assert_string_equal(mr_buf_cstr(&m), "up\n");
	assert_int_equal(sh("ifconfig en2", &out), 0);
	assert_non_null(strstr(mr_buf_cstr(&out), "en2: flags=8823<UP,BROADCAST,SMART,SIMPLEX,MULTICAST>"));
	assert_non_null(strstr(mr_buf_cstr(&out), "\tstatus: inactive\n"));
	assert_int_equal(sh("ifconfig en2 down", &out), 0);
	assert_non_null(strstr(iplog(&log), "link set dev en2 down\n"));
	mr_buf_reset(&m);
	assert_int_equal(mr_read_file(mark, 64, &m, NULL), 0);
	assert_string_equal(mr_buf_cstr(&m), "down\n");
	assert_int_equal(sh("ifconfig en2 inet 192.168.0.5 netmask 255.255.255.252", &out), 0);
	assert_non_null(strstr(iplog(&log), "addr add 192.168.0.5/30 brd + dev en2\n"));
	assert_null(strstr(iplog(&log), "link set dev en2 up"));
	mr_buf_reset(&m);
	assert_int_equal(mr_read_file(mark, 64, &m, NULL), 0);
	assert_string_equal(mr_buf_cstr(&m), "up\n");
	unlink(mark);

	/* a Thunderbolt port without a cable exists on a Mac, inactive */
	assert_int_equal(sh("ifconfig en5", &out), 0);
	assert_string_equal(mr_buf_cstr(&out),
			    "en5: flags=8822<BROADCAST,SMART,SIMPLEX,MULTICAST> mtu 1500\n"
			    "\tether 36:00:00:01:04:00\n"
			    "\tmedia: autoselect\n"
			    "\tstatus: inactive\n");
	assert_int_equal(sh("ifconfig en1", &out), 1);
	assert_string_equal(mr_buf_cstr(&out), "ifconfig: interface en1 does not exist\n");
	assert_int_equal(sh("ifconfig", &out), 1);
	assert_int_equal(sh("ifconfig 'en2;x'", &out), 1);
	mr_buf_release(&m);
	mr_buf_release(&out);
	mr_buf_release(&log);
	free(mark);
}

static void test_configs(void **state)
{
	struct mr_buf b = MR_BUF_INIT;

	(void)state;
	assert_int_equal(mr_sim_render_sshd_config("/run/meshsim/x", "/run/meshsim/x/h1", "10.230.5.1", NULL, &b), 0);
	const char *t = mr_buf_cstr(&b);
	assert_non_null(strstr(t, "ListenAddress 10.230.5.1:22\n"));
	assert_non_null(strstr(t, "HostKey /run/meshsim/x/h1/ssh_host_ed25519_key\n"));
	assert_non_null(strstr(t, "AuthorizedKeysFile /run/meshsim/x/authorized_keys\n"));
	assert_non_null(strstr(t, "MaxSessions 30\n"));
	assert_non_null(strstr(t, "MaxStartups 100:30:200\n"));
	assert_non_null(strstr(t, "ClientAliveInterval 2\n"));
	assert_non_null(strstr(t, "UsePAM no\n"));
	assert_non_null(strstr(t, "SetEnv SHLVL=1 PATH=/run/meshsim/x/h1/bin:"));
	assert_non_null(strstr(t, ":/bin TMPDIR=/run/meshsim/x/h1/tmp\n"));
	mr_buf_reset(&b);
	assert_int_equal(mr_sim_render_ssh_host("/s", "h2", "10.230.5.2", &b), 0);
	assert_string_equal(mr_buf_cstr(&b),
			    "Host h2\n  HostName 10.230.5.2\n  User root\n  IdentityFile /s/id_ed25519\n"
			    "  IdentitiesOnly yes\n  UserKnownHostsFile /s/known_hosts\n"
			    "  StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n\n");
	mr_buf_reset(&b);
	assert_int_equal(mr_sim_render_known_host("h2", "10.230.5.2",
						  "ssh-ed25519 AAAAC3Nza h2\n", &b), 0);
	assert_string_equal(mr_buf_cstr(&b), "h2,10.230.5.2 ssh-ed25519 AAAAC3Nza\n");
	assert_int_equal(mr_sim_render_known_host("h2", "a", "garbage", &b), -1);
	mr_buf_release(&b);
}

static void test_state_roundtrip(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_sim_state st = { 0 }, *back = NULL;
	struct mr_buf a = MR_BUF_INIT, b = MR_BUF_INIT;
	struct mr_sim_host *h;

	(void)state;
	st.name = "mst";
	st.subnet = 42;
	st.fixture = "fixtures/mesh4";
	st.rxe_note = "skipped: \"no rxe\"";
	st.cluster = mr_sim_cluster_new();
	h = mr_sim_cluster_add_host(st.cluster, "h1");
	mr_strvec_push(&h->rdma, "rdma_en2");
	h = mr_sim_cluster_add_host(st.cluster, "h2");
	h->nosudo = true;
	mr_sim_cluster_add_cable(st.cluster, 1, "en5", 0, "en3");
	assert_int_equal(st.cluster->cables[0].a, 0);   /* stored lower host first */
	assert_string_equal(st.cluster->cables[0].a_if, "en3");

	assert_int_equal(mr_sim_state_emit(&st, &a), 0);
	assert_int_equal(mr_sim_state_parse(a.p, a.len, "state.json", &back, &err), 0);
	assert_string_equal(back->name, "mst");
	assert_int_equal(back->subnet, 42);
	assert_string_equal(back->rxe_note, st.rxe_note);
	assert_int_equal(back->cluster->nhosts, 2);
	assert_true(back->cluster->hosts[1].nosudo);
	assert_string_equal(back->cluster->hosts[0].rdma.v[0], "rdma_en2");
	int side = -1;
	assert_int_equal(mr_sim_cluster_find_cable(back->cluster, 1, "en5", &side), 0);
	assert_int_equal(side, 1);
	assert_int_equal(mr_sim_cluster_find_cable(back->cluster, 1, "en3", &side), -1);
	assert_int_equal(mr_sim_state_emit(back, &b), 0);
	assert_string_equal(a.p, b.p);
	mr_sim_state_free(back);
	back = NULL;

	static const char *const bad[] = {
		"{\"name\": \"x\"",
		"{\"name\": \"x\", \"subnet\": 0, \"fixture\": \"f\", \"hosts\": [], \"cables\": []}",
		"{\"name\": \"x\", \"subnet\": 3, \"fixture\": \"f\", \"hosts\": [{\"name\": 1}], \"cables\": []}",
		"{\"name\": \"x\", \"subnet\": 3, \"fixture\": \"f\", \"hosts\": [{\"name\": \"h1\"}], \"cables\": [[\"h1\", \"en2\", \"h9\", \"en2\"]]}",
	};
	static const char *const want[] = { "malformed JSON", "subnet", "hosts[0].name", "unknown host 'h9'" };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct meshrun_err e = MESHRUN_ERR_INIT;
		assert_true(mr_sim_state_parse(bad[i], strlen(bad[i]), "state.json", &back, &e) < 0);
		assert_non_null(strstr(e.msg, "state.json"));
		assert_non_null(strstr(e.msg, want[i]));
	}
	mr_sim_cluster_free(st.cluster);
	mr_buf_release(&a);
	mr_buf_release(&b);
}

static void test_cluster_check(void **state)
{
	struct mr_sim_cluster *c = mr_sim_cluster_new();
	struct meshrun_err err = MESHRUN_ERR_INIT;

	(void)state;
	mr_sim_cluster_add_host(c, "h1");
	mr_sim_cluster_add_host(c, "h2");
	mr_sim_cluster_add_host(c, "h3");
	mr_sim_cluster_add_cable(c, 0, "en2", 1, "en2");
	assert_int_equal(mr_sim_cluster_check(c, &err), 0);
	mr_sim_cluster_add_cable(c, 0, "en2", 2, "en3");   /* h1's en2 twice */
	assert_true(mr_sim_cluster_check(c, &err) < 0);
	assert_non_null(strstr(err.msg, "h1"));
	assert_non_null(strstr(err.msg, "'en2' carries two cables"));
	c->ncables = 1;
	mr_sim_cluster_add_cable(c, 1, "en0", 2, "en3");   /* reserved name */
	memset(&err, 0, sizeof(err));
	assert_true(mr_sim_cluster_check(c, &err) < 0);
	assert_non_null(strstr(err.msg, "'en0'"));
	c->ncables = 1;
	free(c->hosts[2].name);
	c->hosts[2].name = xstrdup("h1");
	memset(&err, 0, sizeof(err));
	assert_true(mr_sim_cluster_check(c, &err) < 0);
	assert_non_null(strstr(err.msg, "hosts[2].name: duplicate host name 'h1'"));
	free(c->hosts[2].name);
	c->hosts[2].name = xstrdup("h;3");
	memset(&err, 0, sizeof(err));
	assert_true(mr_sim_cluster_check(c, &err) < 0);
	assert_non_null(strstr(err.msg, "invalid host name"));
	mr_sim_cluster_free(c);
}

static void test_load_generated(void **state)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_fixture_set *g = NULL;
	struct mr_sim_cluster *c = NULL;
	char *dir = xasprintf("%s/ring6", tmpdir);

	(void)state;
	assert_int_equal(mr_fixture_gen("ring:6,cables=2,nordma=h2", &g, &err), 0);
	assert_int_equal(mr_fixture_gen_write(g, dir, &err), 0);
	assert_int_equal(mr_sim_cluster_load(dir, &c, NULL, &err), 0);
	assert_int_equal(c->nhosts, 6);
	assert_int_equal(c->ncables, 12);
	assert_int_equal(c->hosts[1].rdma.nr, 0);
	assert_true(c->hosts[0].rdma.nr >= 2);
	assert_non_null(c->hosts[0].sp_json);
	for (size_t i = 0; i < c->ncables; i++) {
		/* every end is a Thunderbolt port of that host's networksetup */
		char *port = xasprintf("Device: %s\n", c->cables[i].a_if);
		assert_non_null(strstr(c->hosts[c->cables[i].a].hwports, port));
		free(port);
		assert_true(c->cables[i].a < c->cables[i].b);
	}
	mr_sim_cluster_free(c);
	mr_fixture_set_free(g);
	free(dir);
}

static void test_faults(void **state)
{
	struct mr_strvec v = MR_STRVEC_INIT;

	(void)state;
	assert_int_equal(mr_sim_faults_load(tmpdir, &v, NULL), 0);
	assert_int_equal(v.nr, 0);
	assert_int_equal(mr_sim_faults_update(tmpdir, "unplug h1:en2", "unplug h1:en2", NULL), 0);
	assert_int_equal(mr_sim_faults_update(tmpdir, "latency h1:en2", "latency h1:en2 5ms", NULL), 0);
	assert_int_equal(mr_sim_faults_update(tmpdir, "latency h1:en2", "latency h1:en2 9ms", NULL), 0);
	assert_int_equal(mr_sim_faults_update(tmpdir, "unplug h1:en2", NULL, NULL), 0);
	assert_int_equal(mr_sim_faults_load(tmpdir, &v, NULL), 0);
	assert_int_equal(v.nr, 1);
	assert_string_equal(v.v[0], "latency h1:en2 9ms");
	mr_strvec_release(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_shims),
		cmocka_unit_test(test_ifconfig),
		cmocka_unit_test(test_configs),
		cmocka_unit_test(test_state_roundtrip),
		cmocka_unit_test(test_cluster_check),
		cmocka_unit_test(test_load_generated),
		cmocka_unit_test(test_faults),
	};
	return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
