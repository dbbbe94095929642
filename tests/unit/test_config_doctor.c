/*
 * test_config_doctor.c - meshconfig doctor's parsers and verdicts without a
 * network: the facts of real Macs (fixtures/two-mbp-one-cable: system_profiler,
 * networksetup, ibv_devices, ibv_devinfo as macOS prints them) and
 * ifconfig/ibv_devinfo/df outputs parsed; then each check over hand-made facts
 * of two or three hosts, so that every rule names the right host, check and
 * code with its fix, and nothing else; the path check's endpoints against
 * meshrun's own (launch/env.h); and the whole run through the replay hal with
 * an unreachable host.
 */
#include "common/compat.h"

#include <setjmp.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/fdio.h"
#include "common/spawn.h"
#include "common/xalloc.h"
#include "config/doctor.h"
#include "config/doctor_impl.h"
#include "hal/replay.h"
#include "launch/env.h"

/* Real Macs: fixtures/two-mbp-one-cable is shared/fixtures-upstream's
 * two-macbook-pro-one-cable (local = mbp1, peer = mbp2); mbp2's ibv_devinfo
 * from there is in tests/unit/data/doctor. */
#define MBP MESHRUN_SOURCE_DIR "/fixtures/two-mbp-one-cable"
#define DEVINFO MESHRUN_SOURCE_DIR "/tests/unit/data/doctor/mbp2-ibv_devinfo.txt"

static char *slurp(const char *path)
{
	struct mr_buf b = MR_BUF_INIT;

	assert_int_equal(mr_read_file(path, 1 << 22, &b, NULL), 0);
	return mr_buf_detach(&b, NULL) ?: xstrdup("");
}

/* ---- parsers ---------------------------------------------------------------------- */

static void test_ifconfig(void **state)
{
	static const char text[] =
		"en6: flags=8863<UP,BROADCAST,SMART,RUNNING,SIMPLEX,MULTICAST> mtu 9000\n"
		"\toptions=460<TSO4,TSO6,CHANNEL_IO>\n"
		"\tether 36:a1:6c:2d:f4:02\n"
		"\tinet6 fe80::1%en6 prefixlen 64 scopeid 0x10\n"
		"\tinet 192.168.0.1 netmask 0xfffffffc broadcast 192.168.0.3\n"
		"\tmedia: autoselect <full-duplex>\n"
		"\tstatus: active\n";
	static const char bridge[] =
		"bridge0: flags=8863<UP,BROADCAST,SMART,RUNNING,SIMPLEX,MULTICAST> mtu 1500\n"
		"\tConfiguration:\n"
		"\t\tid 0:0:0:0:0:0 priority 0 hellotime 0 fwddelay 0\n"
		"\tmember: en1 flags=3<LEARNING,DISCOVER>\n"
		"\t        ifmaxaddr 0 port 9 priority 0 path cost 0\n"
		"\tmember: en6 flags=3<LEARNING,DISCOVER>\n"
		"\tstatus: inactive\n";
	struct dr_if x;

	(void)state;
	assert_int_equal(dr_parse_ifconfig("en6", text, &x), 0);
	assert_true(x.up && x.running && x.status_known && x.active);
	assert_int_equal(x.mtu, 9000);
	assert_int_equal(x.ninet, 1);
	assert_int_equal(x.inet[0].addr, 0xc0a80001u);
	assert_int_equal(x.inet[0].len, 30);
	assert_int_equal(x.members.nr, 0);
	mr_strvec_release(&x.members);
	assert_int_equal(dr_parse_ifconfig("bridge0", bridge, &x), 0);
	assert_int_equal(x.members.nr, 2);
	assert_string_equal(x.members.v[1], "en6");
	assert_false(x.active);
	mr_strvec_release(&x.members);
	/* another interface's report, or none */
	assert_int_equal(dr_parse_ifconfig("en2", text, &x), -1);
	assert_int_equal(dr_parse_ifconfig("en6", "", &x), -1);
}

/* Apple's ibv_devinfo (no -v: no GIDs); rdma-core's -v, both GID forms. */
static void test_devinfo(void **state)
{
	static const char rdma_core[] =
		"hca_id:\trxe0\n"
		"\ttransport:\t\t\tInfiniBand (0)\n"
		"\tmax_qp:\t\t\t\t1048560\n"
		"\tphys_port_cnt:\t\t\t1\n"
		"\t\tport:\t1\n"
		"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
		"\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:5054:00ff:fe12:3456, RoCE v2\n"
		"\t\t\tGID[  1]:\t\t::ffff:192.168.0.1, RoCE v2\n"
		"\t\t\tGID[  2]:\t\t0000:0000:0000:0000:0000:ffff:c0a8:0002\n"
		"\t\t\tGID[  3]:\t\t0000:0000:0000:0000:0000:0000:0000:0000\n";
	char *apple = slurp(DEVINFO);
	struct dr_dev devs[3];
	unsigned char raw[16];

	(void)state;
	memset(devs, 0, sizeof(devs));
	snprintf(devs[0].name, sizeof(devs[0].name), "rdma_en6");
	snprintf(devs[1].name, sizeof(devs[1].name), "rdma_en9"); /* not described there */
	assert_int_equal(dr_parse_devinfo(apple, devs, 2), 0);
	assert_true(devs[0].described);
	assert_false(devs[0].active);
	assert_string_equal(devs[0].state, "PORT_DOWN (1)");
	assert_false(devs[0].gids_listed);
	assert_false(devs[1].described);

	memset(devs, 0, sizeof(devs));
	snprintf(devs[0].name, sizeof(devs[0].name), "rxe0");
	assert_int_equal(dr_parse_devinfo(rdma_core, devs, 1), 0);
	assert_true(devs[0].active);
	assert_int_equal(devs[0].max_qp, 1048560);
	assert_true(devs[0].gids_listed);
	assert_int_equal(devs[0].ngid, 3); /* the zero GID is not one */
	assert_false(devs[0].gids[0].v4);
	assert_true(devs[0].gids[1].v4);
	assert_true(devs[0].gids[2].v4);
	assert_int_equal(devs[0].gids[2].index, 2);
	assert_false(dr_parse_gid("not-a-gid", raw));
	free(apple);
}

/* A whole facts output: sections, df with blanks, job directories, rdma. */
static void test_facts(void **state)
{
	struct dr_facts f;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct mr_buf t = MR_BUF_INIT;
	char *sp = slurp(MBP "/mbp1/system_profiler.json");
	char *hw = slurp(MBP "/mbp1/networksetup.txt");
	char *ibv = slurp(MBP "/mbp2/ibv_devices.txt");

	(void)state;
	memset(&f, 0, sizeof(f));
	mr_buf_printf(&t, "\n@@doctor os\nDarwin\n@@doctor id\nalice\n/bin/zsh\n"
		      "@@doctor sw_vers\n26.2\n25C56\n"
		      "@@doctor tmp\n/var/folders/x y/T/\n/dev/disk3s5 my vol 971350180 21000000 512000 4%% /System/Volumes/Data\n"
		      "@@doctor jobdirs\nstale meshrun.AAAA\nlive meshrun.BBBB\n"
		      "@@doctor tools\nprobe /opt/homebrew/bin/meshconfig\n"
		      "meshrun /opt/homebrew/bin/meshrun\nmeshrun_version meshrun 0.1.0\n"
		      "@@doctor python\npython 3.12.1\nmlx 0.32.1\n"
		      "@@doctor hwports\n%s\n@@doctor sp\n%s\n"
		      "@@doctor if en6\nen6: flags=8863<UP,RUNNING> mtu 1500\n\tinet 192.168.0.1 netmask 0xfffffffc\n\tstatus: active\n"
		      "@@doctor rdma_ctl\nenabled\n@@doctor ibv_devices\n%s\n"
		      "@@doctor rdma_qp\nlink rdma_en6/1 lqpn 1 type GSI state RTS\nlink rdma_en6/1 lqpn 17 type UC state RTS pid 9\n",
		      hw, sp, ibv);
	assert_int_equal(dr_facts_parse(mr_buf_cstr(&t), &f, &e), MESHRUN_E_PARSE); /* no end */
	assert_false(f.ok);
	mr_buf_puts(&t, "@@doctor end\n");
	assert_int_equal(dr_facts_parse(mr_buf_cstr(&t), &f, &e), 0);
	assert_true(f.ok);
	assert_string_equal(f.os, "Darwin");
	assert_string_equal(f.shell, "/bin/zsh");
	assert_string_equal(f.build, "25C56");
	assert_string_equal(f.tmpdir, "/var/folders/x y/T/");
	assert_int_equal(f.avail_kb, 512000);
	assert_string_equal(f.stale_dirs.v[0], "meshrun.AAAA");
	assert_string_equal(f.live_dirs.v[0], "meshrun.BBBB");
	assert_string_equal(f.probe, "/opt/homebrew/bin/meshconfig");
	assert_string_equal(f.meshrun_version, "meshrun 0.1.0");
	assert_string_equal(f.mlx_version, "0.32.1");
	assert_true(f.tb);
	assert_non_null(strstr(f.hwports, "Thunderbolt 2"));
	assert_int_equal(f.nifs, 1);
	assert_non_null(dr_facts_if_of_addr(&f, 0xc0a80001u, NULL));
	assert_int_equal(f.rdma_ctl, 1);
	assert_int_equal(f.ndevs, 3);
	assert_string_equal(f.devs[1].name, "rdma_en6");
	assert_int_equal(f.devs[1].qp_used, 1); /* the GSI QP is the kernel's */
	dr_facts_release(&f);
	mr_buf_release(&t);
	free(ibv);
	free(hw);
	free(sp);
}


/*
 * The facts script itself, run as a Mac's /bin/sh would run it (POSIX sh: bash
 * 3.2 in sh mode there; here each of bash, dash and zsh started as "sh") with
 * stubs for macOS's commands that print what a Mac prints (the MacBook Pro of
 * fixtures/two-mbp-one-cable): every section comes back parsed.
 */
static void put_stub(const char *dir, const char *name, const char *body)
{
	char *p = xasprintf("%s/%s", dir, name), *t = xasprintf("#!/bin/sh\n%s", body);

	assert_int_equal(mr_write_file(p, t, strlen(t), 0755, NULL), 0);
	free(t);
	free(p);
}

static void test_facts_script_shells(void **state)
{
	static const char *const shells[] = { "bash", "dash", "zsh" };
	char dir[] = "/tmp/mr-doctor-facts.XXXXXX";
	char *bin, *tmp, *mark, *probe, *body;
	struct utsname u;
	int ran = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	bin = xasprintf("%s/bin", dir);
	tmp = xasprintf("%s/tmp", dir);
	assert_int_equal(mkdir(bin, 0755), 0);
	assert_int_equal(mkdir(tmp, 0755), 0);
	put_stub(bin, "uname", "case $1 in -n) echo mbp1 ;; *) echo Darwin ;; esac\n");
	put_stub(bin, "sw_vers", "printf 'ProductName:\\t\\tmacOS\\nProductVersion:\\t\\t26.2\\nBuildVersion:\\t\\t25C56\\n'\n");
	body = xasprintf("exec cat '%s/mbp1/networksetup.txt'\n", MBP);
	put_stub(bin, "networksetup", body);
	free(body);
	body = xasprintf("exec cat '%s/mbp1/system_profiler.json'\n", MBP);
	put_stub(bin, "system_profiler", body);
	free(body);
	put_stub(bin, "ifconfig",
		 "case $1 in\n"
		 "en6) printf 'en6: flags=8863<UP,BROADCAST,SMART,RUNNING,SIMPLEX,MULTICAST> mtu 1500\\n"
		 "\\tinet 192.168.0.1 netmask 0xfffffffc broadcast 192.168.0.3\\n\\tstatus: active\\n' ;;\n"
		 "*) printf '%s: flags=8822<BROADCAST,SMART,SIMPLEX,MULTICAST> mtu 1500\\n\\tstatus: inactive\\n' \"$1\" ;;\n"
		 "esac\n");
	put_stub(bin, "ipconfig", "[ \"$2\" = en0 ] && echo 10.0.0.11 || exit 1\n");
	put_stub(bin, "netstat", "printf 'Routing tables\\n\\nInternet:\\nDestination Gateway Flags Netif Expire\\n"
				 "default 10.0.0.1 UGScg en0\\n192.168.0/30 link#12 UCS en6\\n'\n");
	put_stub(bin, "df", "printf 'Filesystem 1024-blocks Used Available Capacity Mounted on\\n"
			    "/dev/disk3s5 971350180 21000000 512000 4%% /System/Volumes/Data\\n'\n");
	put_stub(bin, "meshconfig", "echo meshconfig 9.9\n");
	put_stub(bin, "meshrun", "echo meshrun 9.9\n");
	/* a dead run's job directory: its mark names this host (the script reads
	 * it as the hal's watchdog writes it) and a pid that does not exist */
	assert_int_equal(uname(&u), 0);
	mark = xasprintf("%s/meshrun.deadrun01", tmp);
	assert_int_equal(mkdir(mark, 0700), 0);
	free(mark);
	mark = xasprintf("%s/meshrun.deadrun01/" MR_HAL_WATCHDOG_MARK, tmp);
	body = xasprintf("%s 999999999\n", u.nodename);
	assert_int_equal(mr_write_file(mark, body, strlen(body), 0644, NULL), 0);
	free(body);
	free(mark);
	probe = xasprintf("%s/meshconfig", bin);
	for (size_t i = 0; i < ARRAY_SIZE(shells); i++) {
		char *sh = mr_which(shells[i], NULL), *path = xasprintf("PATH=%s:/usr/bin:/bin", bin);
		char *tmpdir = xasprintf("TMPDIR=%s", tmp);
		struct mr_buf out = MR_BUF_INIT;
		struct dr_facts f;
		struct meshrun_err e = MESHRUN_ERR_INIT;
		int fds[2], st;
		pid_t pid;

		if (!sh) {
			print_message("skip: %s is not installed\n", shells[i]);
			free(path);
			free(tmpdir);
			continue;
		}
		assert_int_equal(pipe(fds), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			char *env[] = { path, tmpdir, "USER=alice", "SHELL=/bin/zsh", NULL };
			dup2(fds[1], 1);
			close(fds[0]);
			/* started as "sh": bash and zsh then behave as a POSIX sh */
			execle(sh, "sh", "-c", dr_facts_script, "doctor", probe, "", "0", (char *)NULL, env);
			_exit(127);
		}
		close(fds[1]);
		{
			char buf[4096];
			ssize_t n;
			while ((n = read(fds[0], buf, sizeof(buf))) > 0)
				mr_buf_append(&out, buf, (size_t)n);
		}
		close(fds[0]);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		memset(&f, 0, sizeof(f));
		print_message("%s: %zu bytes\n", shells[i], out.len);
		assert_int_equal(dr_facts_parse(mr_buf_cstr(&out), &f, &e), 0);
		assert_string_equal(f.os, "Darwin");
		assert_string_equal(f.user, "alice");
		assert_string_equal(f.macos, "26.2");
		assert_string_equal(f.build, "25C56");
		assert_int_equal(f.avail_kb, 512000);
		assert_int_equal(f.stale_dirs.nr, 1);
		assert_string_equal(f.stale_dirs.v[0], "meshrun.deadrun01");
		assert_string_equal(f.probe, probe);
		assert_string_equal(f.meshrun_version, "meshrun 9.9");
		assert_true(f.tb && f.routes_known);
		/* Thunderbolt 1-3 are en1, en6, en2; then bridge0; en0 by its address */
		assert_int_equal(f.nifs, 5);
		assert_non_null(dr_facts_if(&f, "en1"));
		assert_non_null(dr_facts_if(&f, "bridge0"));
		assert_non_null(dr_facts_if_of_addr(&f, 0xc0a80001u, NULL));
		assert_non_null(dr_facts_if_of_addr(&f, 0x0a00000bu, NULL)); /* en0 10.0.0.11 */
		assert_true(dr_facts_if(&f, "en6")->active);
		dr_facts_release(&f);
		mr_buf_release(&out);
		free(path);
		free(tmpdir);
		free(sh);
		ran++;
	}
	assert_true(ran > 0);
	free(probe);
	body = xasprintf("rm -rf '%s'", dir);
	assert_int_equal(system(body), 0);
	free(body);
	free(tmp);
	free(bin);
}

/* ---- verdicts --------------------------------------------------------------------- */

/* Two Macs of the upstream fixture, one cable: local en6 <-> peer en6. */
struct two {
	struct mr_doctor_opts o;
	struct doctor d;
	char *sp[2], *hw;
};

static const char ifc_fmt[] =
	"en6: flags=8863<UP,BROADCAST,SMART,RUNNING,SIMPLEX,MULTICAST> mtu %u\n%s\tstatus: active\n";

/* The facts text of one host; ifc: its en6's inet line ("" none); extra: more sections. */
static void host_facts(struct two *t, size_t i, const char *macos, const char *inet, unsigned mtu,
		       const char *extra)
{
	struct mr_buf b = MR_BUF_INIT;
	struct meshrun_err e = MESHRUN_ERR_INIT;

	mr_buf_printf(&b, "@@doctor os\nDarwin\n@@doctor sw_vers\n%s\n@@doctor tmp\n/tmp\n"
		      "fs 100 1 50000000 1%% /\n@@doctor tools\nprobe /p/meshconfig\nmeshrun_version meshrun 1\n"
		      "@@doctor hwports\n%s\n@@doctor sp\n%s\n@@doctor if en6\n",
		      macos, t->hw, t->sp[i]);
	mr_buf_printf(&b, ifc_fmt, mtu, inet);
	mr_buf_printf(&b, "%s@@doctor end\n", extra);
	assert_int_equal(dr_facts_parse(mr_buf_cstr(&b), &t->d.hosts[i].f, &e), 0);
	mr_buf_release(&b);
}

static void two_init(struct two *t, const char *hostfile_json)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;

	memset(t, 0, sizeof(*t));
	t->o = (struct mr_doctor_opts)MR_DOCTOR_OPTS_INIT;
	t->o.hostfile = "hosts.json";
	t->d.o = &t->o;
	t->sp[0] = slurp(MBP "/mbp1/system_profiler.json");
	t->sp[1] = slurp(MBP "/mbp2/system_profiler.json");
	t->hw = slurp(MBP "/mbp1/networksetup.txt");
	assert_int_equal(mr_hostfile_parse(hostfile_json, strlen(hostfile_json), "hosts.json", &t->d.hf, &e), 0);
	t->d.nhosts = 2;
	t->d.hosts = xcalloc(2, sizeof(*t->d.hosts));
	t->d.rank_host = xcalloc(t->d.hf->nhosts, sizeof(*t->d.rank_host));
	for (size_t h = 0; h < 2; h++) {
		t->d.hosts[h].name = xstrdup(h ? "peer" : "local");
		t->d.hosts[h].reached = true;
		t->d.hosts[h].topo = -1;
	}
	for (size_t r = 0; r < t->d.hf->nhosts; r++) {
		struct dr_host *H = &t->d.hosts[strcmp(t->d.hf->hosts[r].ssh, "local") ? 1 : 0];

		t->d.rank_host[r] = (size_t)(H - t->d.hosts);
		H->ranks = xreallocarray(H->ranks, H->nranks + 1, sizeof(*H->ranks));
		H->ranks[H->nranks++] = r;
	}
	assert_int_equal(dr_job_setup(&t->d, &e), 0);
}

static void two_release(struct two *t)
{
	doctor_release(&t->d);
	free(t->sp[0]);
	free(t->sp[1]);
	free(t->hw);
}

static const char ring2[] =
	"{\"backend\": \"ring\", \"envs\": [], \"hosts\": ["
	"{\"ssh\": \"local\", \"ips\": [\"192.168.0.1\"], \"rdma\": []},"
	"{\"ssh\": \"peer\", \"ips\": [\"192.168.0.2\"], \"rdma\": []}]}";

/* "host:check:code" of every finding with that status, sorted as found. */
static void codes(const struct doctor *d, enum dr_status st, char *out, size_t n)
{
	out[0] = '\0';
	for (size_t i = 0; i < d->nfinds; i++)
		if (d->finds[i].status == st)
			snprintf(out + strlen(out), n - strlen(out), "%s%s:%s:%s", out[0] ? " " : "",
				 d->hosts[d->finds[i].host].name, dr_check_names[d->finds[i].check],
				 d->finds[i].code);
}

static const struct dr_finding *find(const struct doctor *d, const char *code)
{
	for (size_t i = 0; i < d->nfinds; i++)
		if (!strcmp(d->finds[i].code, code))
			return &d->finds[i];
	return NULL;
}

static void test_cables_healthy(void **state)
{
	struct two t;
	char c[512];

	(void)state;
	two_init(&t, ring2);
	host_facts(&t, 0, "26.2\n25C56", "\tinet 192.168.0.1 netmask 0xfffffffc\n", 1500, "");
	host_facts(&t, 1, "26.2\n25C56", "\tinet 192.168.0.2 netmask 0xfffffffc\n", 1500, "");
	dr_check_facts(&t.d);
	codes(&t.d, DR_FAIL, c, sizeof(c));
	assert_string_equal(c, "");
	codes(&t.d, DR_WARN, c, sizeof(c));
	assert_string_equal(c, "");
	assert_int_equal(t.d.tc->ncables, 1);
	for (size_t h = 0; h < 2; h++) {
		assert_int_equal(t.d.hosts[h].st[DR_CABLES], DR_OK);
		assert_int_equal(t.d.hosts[h].st[DR_SOFTWARE], DR_OK);
		assert_int_equal(t.d.hosts[h].st[DR_RDMA], DR_NA); /* ring: no RDMA asked */
	}
	/* each end pings the other through its own port */
	assert_int_equal(t.d.npings, 2);
	assert_string_equal(t.d.pings[0].ifname, "en6");
	assert_string_equal(t.d.pings[0].peer_ip, "192.168.0.2");
	assert_string_equal(t.d.pings[1].peer_ip, "192.168.0.1");
	/* a ping without an answer is the pinging end's */
	t.d.pings[1].result = 1;
	t.d.pings[0].result = 0;
	dr_check_pings(&t.d);
	codes(&t.d, DR_FAIL, c, sizeof(c));
	assert_string_equal(c, "peer:cables:ping");
	two_release(&t);
}

/* One fault per case: only that end fails, with the fix that mends it. */
static void test_cables_faults(void **state)
{
	static const char *const in1 = "\tinet 192.168.0.1 netmask 0xfffffffc\n";
	static const char *const in2 = "\tinet 192.168.0.2 netmask 0xfffffffc\n";
	static const char bridged[] =
		"@@doctor if bridge0\nbridge0: flags=8863<UP,RUNNING> mtu 1500\n\tmember: en6 flags=3<LEARNING>\n";
	static const char via_en0[] =
		"@@doctor routes\nRouting tables\n\nInternet:\nDestination        Gateway            Flags        Netif Expire\n"
		"default            10.0.0.1           UGScg          en0\n";
	static const struct {
		const char *inet0, *inet1;
		unsigned mtu0, mtu1;
		const char *extra0, *extra1;
		const char *fails, *code, *fix;
	} cases[] = {
		{ in1, "", 1500, 1500, "", "", "peer:cables:no-ipv4", "no-ipv4",
		  "sudo ifconfig en6 inet 192.168.0.2 netmask 255.255.255.252" },
		{ "", in2, 1500, 1500, "", "", "local:cables:no-ipv4", "no-ipv4",
		  "sudo ifconfig en6 inet 192.168.0.1 netmask 255.255.255.252" },
		{ in1, in2, 1500, 1500, bridged, "", "local:cables:bridge-member", "bridge-member",
		  "sudo ifconfig bridge0 down" },
		{ in1, in2, 1500, 1500, "", via_en0, "peer:cables:route", "route",
		  "sudo route change 192.168.0.1 -interface en6" },
		/* two ends, a tie: both are told to match the other */
		{ in1, in2, 9000, 1500, "", "", "local:cables:mtu-mismatch peer:cables:mtu-mismatch",
		  "mtu-mismatch", "sudo ifconfig en6 mtu 1500" },
		{ in1, "\tinet 10.0.0.9 netmask 0xfffffffc\n", 1500, 1500, "", "",
		  "local:cables:subnet-mismatch peer:cables:subnet-mismatch peer:cables:hostfile-ip",
		  "subnet-mismatch", NULL },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct two t;
		const struct dr_finding *f;
		char c[512];

		two_init(&t, ring2);
		host_facts(&t, 0, "26.2\n25C56", cases[i].inet0, cases[i].mtu0, cases[i].extra0);
		host_facts(&t, 1, "26.2\n25C56", cases[i].inet1, cases[i].mtu1, cases[i].extra1);
		dr_check_facts(&t.d);
		codes(&t.d, DR_FAIL, c, sizeof(c));
		print_message("case %zu: %s\n", i, c);
		assert_string_equal(c, cases[i].fails);
		f = find(&t.d, cases[i].code);
		assert_non_null(f);
		if (cases[i].fix)
			assert_string_equal(f->fix, cases[i].fix);
		assert_non_null(f->fix);
		assert_int_equal(t.d.npings, 0); /* not over a cable known to be wrong */
		two_release(&t);
	}
}

/* The hostfile against the hosts: the ring's address on the wrong cable, an
 * address the host lacks; rdma devices missing or on another cable. */
static void test_hostfile(void **state)
{
	static const char wrong_ip[] =
		"{\"backend\": \"ring\", \"envs\": [], \"hosts\": ["
		"{\"ssh\": \"local\", \"ips\": [\"192.168.0.9\"], \"rdma\": []},"
		"{\"ssh\": \"peer\", \"ips\": [\"192.168.0.2\"], \"rdma\": []}]}";
	static const char jaccl[] =
		"{\"backend\": \"jaccl\", \"envs\": [], \"hosts\": ["
		"{\"ssh\": \"local\", \"ips\": [], \"rdma\": [null, \"rdma_en6\"]},"
		"{\"ssh\": \"peer\", \"ips\": [], \"rdma\": [\"%s\", null]}]}";
	static const char *const in1 = "\tinet 192.168.0.1 netmask 0xfffffffc\n";
	static const char *const in2 = "\tinet 192.168.0.2 netmask 0xfffffffc\n";
	char *ibv = slurp(MBP "/mbp2/ibv_devices.txt");
	char *rdma = xasprintf("@@doctor rdma_ctl\nenabled\n@@doctor ibv_devices\n%s\n", ibv);
	static const struct {
		const char *peer_dev, *fails;
	} rcases[] = {
		{ "rdma_en6", "" },
		{ "rdma_en9", "peer:rdma:hostfile-rdma" },   /* no such device */
		{ "rdma_en2", "peer:rdma:rdma-wrong-cable" }, /* a device, no cable there */
	};
	struct two t;
	char c[512];

	(void)state;
	two_init(&t, wrong_ip);
	host_facts(&t, 0, "26.2\n25C56", in1, 1500, "");
	host_facts(&t, 1, "26.2\n25C56", in2, 1500, "");
	dr_check_facts(&t.d);
	codes(&t.d, DR_FAIL, c, sizeof(c));
	assert_string_equal(c, "local:cables:hostfile-ip");
	two_release(&t);

	for (size_t i = 0; i < ARRAY_SIZE(rcases); i++) {
		char *hf = xasprintf(jaccl, rcases[i].peer_dev);
		two_init(&t, hf);
		assert_true(t.d.want_rdma);
		host_facts(&t, 0, "26.3\n25D1", in1, 1500, rdma);
		host_facts(&t, 1, "26.3\n25D1", in2, 1500, rdma);
		dr_check_facts(&t.d);
		codes(&t.d, DR_FAIL, c, sizeof(c));
		print_message("rdma case %zu: %s\n", i, c);
		assert_string_equal(c, rcases[i].fails);
		assert_int_equal(t.d.hosts[0].st[DR_RDMA], DR_OK);
		two_release(&t);
		free(hf);
	}
	free(rdma);
	free(ibv);
}

/* RDMA: rdma_ctl against ibv_devices, the port, the GID, the queue pairs. */
static void test_rdma(void **state)
{
	static const char *const in1 = "\tinet 192.168.0.1 netmask 0xfffffffc\n";
	static const char *const in2 = "\tinet 192.168.0.2 netmask 0xfffffffc\n";
	static const char none[] = "    device          \t   node GUID\n    ------          \t----------------\n";
	char *ibv = slurp(MBP "/mbp2/ibv_devices.txt");
	char *info = slurp(DEVINFO); /* ports down */
	char *ok = xasprintf("@@doctor rdma_ctl\nenabled\n@@doctor ibv_devices\n%s\n", ibv);
	char *down = xasprintf("%s@@doctor ibv_devinfo\n%s\n", ok, info);
	char *nodev = xasprintf("@@doctor rdma_ctl\nenabled\n@@doctor ibv_devices\n%s\n", none);
	char *off = xasprintf("@@doctor rdma_ctl\ndisabled\n@@doctor ibv_devices\n%s\n", none);
	struct mr_buf hf = MR_BUF_INIT;
	const struct {
		const char *peer_rdma, *peer_inet, *peer_macos, *fails;
		int ranks; /* per host */
	} cases[] = {
		{ ok, in2, "26.3\n25D1", "", 1 },
		{ down, in2, "26.3\n25D1", "peer:rdma:rdma-port-down", 1 },
		{ ok, "", "26.3\n25D1", "peer:cables:no-ipv4 peer:rdma:rdma-no-ipv4-gid", 1 },
		{ nodev, in2, "26.3\n25D1", "peer:rdma:rdma-no-devices", 1 },
		{ off, in2, "26.3\n25D1", "peer:rdma:rdma-disabled", 1 },
		/* two hosts, two builds: neither is the odd one, both are named */
		{ ok, in2, "26.1\n25B78", "local:software:macos-differs peer:software:macos-differs peer:software:macos-rdma", 1 },
		/* 6 ranks a host, each with a queue pair to each of the 6 others: 36 > 10 */
		{ ok, in2, "26.3\n25D1", "local:rdma:rdma-qp peer:rdma:rdma-qp", 6 },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct two t;
		char c[512];
		int n = 2 * cases[i].ranks;

		mr_buf_reset(&hf);
		mr_buf_puts(&hf, "{\"backend\": \"jaccl\", \"envs\": [], \"hosts\": [");
		for (int r = 0; r < n; r++) {
			mr_buf_printf(&hf, "%s{\"ssh\": \"%s\", \"ips\": [], \"rdma\": [", r ? "," : "",
				      r < n / 2 ? "local" : "peer");
			for (int j = 0; j < n; j++)
				mr_buf_printf(&hf, "%s%s", j ? "," : "",
					      (r < n / 2) == (j < n / 2) ? "null" : "\"rdma_en6\"");
			mr_buf_puts(&hf, "]}");
		}
		mr_buf_puts(&hf, "]}");
		two_init(&t, mr_buf_cstr(&hf));
		host_facts(&t, 0, "26.3\n25D1", in1, 1500, ok);
		host_facts(&t, 1, cases[i].peer_macos, cases[i].peer_inet, 1500, cases[i].peer_rdma);
		dr_check_facts(&t.d);
		codes(&t.d, DR_FAIL, c, sizeof(c));
		print_message("case %zu: %s\n", i, c);
		assert_string_equal(c, cases[i].fails);
		two_release(&t);
	}
	mr_buf_release(&hf);
	free(off);
	free(nodev);
	free(down);
	free(ok);
	free(info);
	free(ibv);
}

/* ---- three hosts: software, clock, disk, job directories, path -------------------------- */

static void three_init(struct doctor *d, struct mr_doctor_opts *o)
{
	static const char hf[] = "[{\"ssh\": \"a\", \"ips\": [\"10.0.0.1\"]}, {\"ssh\": \"b\", \"ips\": [\"10.0.0.2\"]},"
				 " {\"ssh\": \"c\", \"ips\": [\"10.0.0.3\", \"10.0.1.3\"]}]";
	struct meshrun_err e = MESHRUN_ERR_INIT;

	memset(d, 0, sizeof(*d));
	*o = (struct mr_doctor_opts)MR_DOCTOR_OPTS_INIT;
	o->hostfile = "h.json";
	d->o = o;
	assert_int_equal(mr_hostfile_parse(hf, strlen(hf), "h.json", &d->hf, &e), 0);
	d->nhosts = 3;
	d->hosts = xcalloc(3, sizeof(*d->hosts));
	d->rank_host = xcalloc(3, sizeof(*d->rank_host));
	for (size_t h = 0; h < 3; h++) {
		d->hosts[h].name = xasprintf("%c", (char)('a' + h));
		d->hosts[h].reached = true;
		d->hosts[h].topo = -1;
		d->rank_host[h] = h;
		d->hosts[h].ranks = xcalloc(1, sizeof(*d->hosts[h].ranks));
		d->hosts[h].ranks[0] = h;
		d->hosts[h].nranks = 1;
	}
	assert_int_equal(dr_job_setup(d, &e), 0);
}

static void facts3(struct doctor *d, size_t h, const char *macos, const char *df, const char *jobdirs)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	char *t = xasprintf("@@doctor os\nDarwin\n@@doctor sw_vers\n%s\n@@doctor tmp\n/tmp/x\n%s\n"
			    "@@doctor jobdirs\n%s\n@@doctor tools\nprobe /p\nmeshrun_version meshrun 1\n@@doctor end\n",
			    macos, df, jobdirs);

	assert_int_equal(dr_facts_parse(t, &d->hosts[h].f, &e), 0);
	free(t);
}

static void test_three(void **state)
{
	struct doctor d;
	struct mr_doctor_opts o;
	char c[512];

	(void)state;
	three_init(&d, &o);
	facts3(&d, 0, "26.2\n25C56", "fs 1 1 50000000 1% /", "");
	facts3(&d, 1, "26.2\n25C57", "fs 1 1 2000 99% /", "stale meshrun.XY");
	facts3(&d, 2, "26.2\n25C56", "fs 1 1 600000 99% /", "live meshrun.ZZ");
	/* clocks: a and c agree with us, b runs 30 s ahead; each `date` ran
	 * within 200 ms of our wall clock 1e12 */
	for (size_t h = 0; h < 3; h++) {
		d.hosts[h].clock_known = true;
		d.hosts[h].wall_lo_ms = 1000000000000LL;
		d.hosts[h].wall_hi_ms = 1000000000200LL;
		d.hosts[h].clock_s = 1000000000LL + (h == 1 ? 30 : 0);
	}
	dr_check_facts(&d);
	codes(&d, DR_FAIL, c, sizeof(c));
	assert_string_equal(c, "b:software:macos-differs b:housekeeping:clock-skew b:housekeeping:disk-full");
	codes(&d, DR_WARN, c, sizeof(c));
	assert_string_equal(c, "b:housekeeping:stale-jobdir c:housekeeping:disk-low c:housekeeping:job-running");
	assert_non_null(strstr(find(&d, "stale-jobdir")->fix, "rm -rf /tmp/x/meshrun.XY"));
	assert_int_equal(d.hosts[0].st[DR_HOUSE], DR_OK);
	assert_int_equal(d.hosts[0].st[DR_CABLES], DR_NA); /* no Thunderbolt facts */

	/* the path: the ring's ports, as meshrun gives them; rank r-1 connects to rank r */
	{
		struct meshrun_err e = MESHRUN_ERR_INIT;
		struct mr_buf want = MR_BUF_INIT;

		assert_int_equal(dr_path_plan(&d, &e), 0);
		assert_int_equal(mr_launch_ring_json(d.hf, 32323, 1, &want, &e), 0);
		assert_string_equal(mr_buf_cstr(&want),
				    "[[\"10.0.0.1:32323\"], [\"10.0.0.2:32324\"], [\"10.0.0.3:32325\", \"10.0.1.3:32326\"]]");
		assert_int_equal(d.neps, 4);
		assert_int_equal(d.nconns, 4);
		for (size_t i = 0; i < d.nconns; i++) {
			const struct dr_ep *ep = &d.eps[d.conns[i].ep];
			assert_int_equal(ep->port, 32323 + (int)d.conns[i].ep);
			assert_int_equal(d.conns[i].from, (ep->host + 2) % 3); /* the left neighbour */
		}
		mr_buf_release(&want);
	}
	/* results: c's second port dropped (a firewall), b cannot reach (Local
	 * Network privacy), a's port taken by another process */
	snprintf(d.eps[0].bind_err, sizeof(d.eps[0].bind_err), "EADDRINUSE");
	for (size_t i = 0; i < d.nconns; i++)
		d.conns[i].tried = !d.eps[d.conns[i].ep].bind_err[0];
	snprintf(d.conns[3].err, sizeof(d.conns[3].err), "ETIMEDOUT");
	snprintf(d.conns[2].err, sizeof(d.conns[2].err), "EHOSTUNREACH");
	dr_check_path(&d);
	codes(&d, DR_FAIL, c, sizeof(c));
	assert_non_null(strstr(c, "a:path:port-in-use"));
	assert_non_null(strstr(c, "b:path:local-network")); /* the connecting host's */
	assert_non_null(strstr(c, "c:path:port-blocked"));  /* the listening host's */
	assert_non_null(strstr(find(&d, "port-blocked")->fix, "32326"));
	doctor_release(&d);
}

/* --python: the same Python and MLX everywhere, each host's own failure named. */
static void test_python(void **state)
{
	static const char *const py[] = {
		"python 3.12.1\nmlx 0.32.1",
		"python 3.12.1\nModuleNotFoundError: No module named 'mlx'",
		"python 3.11.4\nmlx 0.32.1",
	};
	struct doctor d;
	struct mr_doctor_opts o;
	char c[512];

	(void)state;
	three_init(&d, &o);
	o.python = "/opt/venv/bin/python3";
	for (size_t h = 0; h < 3; h++) {
		struct meshrun_err e = MESHRUN_ERR_INIT;
		char *t = xasprintf("@@doctor os\nDarwin\n@@doctor sw_vers\n26.2\n25C56\n@@doctor tools\nprobe /p\n"
				    "meshrun_version meshrun 1\n@@doctor python\n%s\n@@doctor end\n", py[h]);
		assert_int_equal(dr_facts_parse(t, &d.hosts[h].f, &e), 0);
		free(t);
	}
	dr_check_facts(&d);
	codes(&d, DR_FAIL, c, sizeof(c));
	assert_string_equal(c, "b:software:no-mlx c:software:python-differs");
	assert_non_null(strstr(find(&d, "no-mlx")->what, "No module named 'mlx'"));
	doctor_release(&d);
}

/* The whole run on the replay hal: host b cannot be reached; a is checked. */
static void test_run_unreachable(void **state)
{
	struct mr_doctor_opts o = MR_DOCTOR_OPTS_INIT;
	struct mr_replay *rp = NULL;
	struct mr_hal *hal = NULL;
	struct mr_hal_opts ho;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	char *out = NULL, *err = NULL;
	size_t ol = 0, el = 0;
	FILE *fo, *fe;
	cJSON *j;
	int rc;

	(void)state;
	memset(&ho, 0, sizeof(ho));
	assert_int_equal(mr_replay_new(&rp), 0);
	assert_int_equal(mr_replay_add_host(rp, "a"), 0);
	assert_int_equal(mr_replay_add_host(rp, "b"), 0);
	assert_int_equal(mr_replay_add(rp, "a", "date +%s", 0, "1700000000\n", NULL, 0, 0), 0);
	assert_int_equal(mr_replay_add(rp, "a", "/bin/sh -c *", 0,
				       "\n@@doctor os\nDarwin\n@@doctor sw_vers\n26.2\n25C56\n"
				       "@@doctor tools\nprobe /p\nmeshrun_version meshrun 1\n@@doctor end\n",
				       NULL, 0, 0), 0);
	assert_int_equal(mr_replay_add(rp, "b", "*", 0, NULL, NULL, 0, MESHRUN_E_CONNECT), 0);
	assert_int_equal(mr_hal_new_replay(&hal, rp, &ho, &e), 0);
	o.hosts = "a,b";
	o.json = true;
	fo = open_memstream(&out, &ol);
	fe = open_memstream(&err, &el);
	rc = mr_doctor_run(&o, hal, fo, fe);
	fclose(fo);
	fclose(fe);
	assert_int_equal(rc, MR_DOCTOR_EXIT_FAIL);
	j = cJSON_Parse(out);
	assert_non_null(j);
	{
		const cJSON *hosts = cJSON_GetObjectItem(j, "hosts");
		const cJSON *a = cJSON_GetArrayItem(hosts, 0), *b = cJSON_GetArrayItem(hosts, 1);
		const cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "problems"), 0);

		assert_string_equal(cJSON_GetObjectItem(a, "reach")->valuestring, "ok");
		assert_string_equal(cJSON_GetObjectItem(a, "software")->valuestring, "ok");
		assert_string_equal(cJSON_GetObjectItem(b, "reach")->valuestring, "fail");
		for (const char *const *k = (const char *const[]){ "software", "cables", "rdma", "path",
								   "housekeeping", NULL }; *k; k++)
			assert_string_equal(cJSON_GetObjectItem(b, *k)->valuestring, "-");
		assert_string_equal(cJSON_GetObjectItem(p, "code")->valuestring, "unreachable");
		assert_false(cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")));
	}
	cJSON_Delete(j);
	mr_hal_free(hal);
	free(out);
	free(err);
}

static void test_usage(void **state)
{
	struct mr_doctor_opts o = MR_DOCTOR_OPTS_INIT;
	char *out = NULL, *err = NULL;
	size_t ol = 0, el = 0;
	FILE *fo = open_memstream(&out, &ol), *fe = open_memstream(&err, &el);
	char *none[] = { "doctor", NULL };
	char *bad[] = { "doctor", "--hosts", "a", "--env", "NOEQUALS", NULL };
	char *help[] = { "doctor", "--help", NULL };

	(void)state;
	assert_int_equal(mr_doctor_parse_args(&o, 1, none, fo, fe), MR_DOCTOR_EXIT_USAGE);
	mr_doctor_opts_release(&o);
	o = (struct mr_doctor_opts)MR_DOCTOR_OPTS_INIT;
	assert_int_equal(mr_doctor_parse_args(&o, 5, bad, fo, fe), MR_DOCTOR_EXIT_USAGE);
	mr_doctor_opts_release(&o);
	o = (struct mr_doctor_opts)MR_DOCTOR_OPTS_INIT;
	assert_int_equal(mr_doctor_parse_args(&o, 2, help, fo, fe), MR_DOCTOR_EXIT_OK);
	mr_doctor_opts_release(&o);
	fclose(fo);
	fclose(fe);
	assert_non_null(strstr(err, "give the hosts"));
	assert_non_null(strstr(err, "NOEQUALS"));
	assert_non_null(strstr(out, "--connect-timeout"));
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ifconfig),
		cmocka_unit_test(test_devinfo),
		cmocka_unit_test(test_facts),
		cmocka_unit_test(test_facts_script_shells),
		cmocka_unit_test(test_cables_healthy),
		cmocka_unit_test(test_cables_faults),
		cmocka_unit_test(test_hostfile),
		cmocka_unit_test(test_rdma),
		cmocka_unit_test(test_three),
		cmocka_unit_test(test_python),
		cmocka_unit_test(test_run_unreachable),
		cmocka_unit_test(test_usage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
