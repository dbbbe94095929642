/*
 * test_sim_mac.c - the simulated Macs' own answers (sim/mac.h): the values taken
 * from the fixtures, and the uname, sw_vers, sysctl, ping and netstat shims run
 * here with /bin/sh (no root: ping and netstat are only checked for what they
 * refuse); the passwd copy that gives root zsh as its login shell (sim/login.h).
 */
#include "common/compat.h"

#include <setjmp.h>
#include <cmocka.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/xalloc.h"
#include "fixture/fixture.h"
#include "sim/login.h"
#include "sim/mac.h"
#include "sim/model.h"
#include "topo/topo.h"

#define FIXTURES MESHRUN_SOURCE_DIR "/fixtures"

static char tmpdir[] = "/tmp/mr-sim-mac.XXXXXX";

/* Run `sh -c CMD` with the shims of tmpdir/bin first on the PATH; stdout+stderr into out. */
static int sh(const char *cmd, struct mr_buf *out)
{
	char *full = xasprintf("PATH=%s/bin:$PATH; %s 2>&1", tmpdir, cmd);
	FILE *f = popen(full, "r");
	char buf[512];
	size_t n;
	int st;

	assert_non_null(f);
	mr_buf_reset(out);
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		mr_buf_append(out, buf, n);
	st = pclose(f);
	free(full);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_mac_shims(const struct mr_sim_mac *mac)
{
	char *bin = xasprintf("%s/bin", tmpdir);
	struct mr_buf b = MR_BUF_INIT;

	mkdir(bin, 0755);
	for (size_t i = 0; mr_sim_mac_shim_names[i]; i++) {
		char *p = xasprintf("%s/%s", bin, mr_sim_mac_shim_names[i]);

		mr_buf_reset(&b);
		assert_int_equal(mr_sim_render_mac_shim(mr_sim_mac_shim_names[i], "m1", tmpdir, mac, &b), 0);
		assert_int_equal(mr_write_file(p, b.p, b.len, 0755, NULL), 0);
		free(p);
	}
	mr_buf_release(&b);
	free(bin);
}

static void test_values(void **state)
{
	struct mr_sim_cluster *c = NULL;
	struct mr_sim_mac m;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	char rel[32];
	cJSON *h;

	(void)state;
	assert_int_equal(mr_sim_cluster_load(FIXTURES "/mesh4-m3ultra", &c, NULL, &e), 0);
	assert_int_equal(mr_sim_mac_of_host(c, 0, &m, &e), 0);
	assert_string_equal(m.model, "Mac15,14"); /* "Mac Studio" */
	assert_int_equal(m.ncpu, 32);
	assert_string_equal(m.version, "26.2");
	assert_string_equal(m.build, "25C56");
	/* cluster.json's host object wins */
	h = cJSON_GetArrayItem(cJSON_GetObjectItem(c->fx->json, "hosts"), 1);
	cJSON_AddStringToObject(h, "model", "Mac16,9");
	cJSON_AddStringToObject(h, "macos", "15.5");
	cJSON_AddStringToObject(h, "build", "24F74");
	cJSON_AddNumberToObject(h, "ncpu", 14);
	assert_int_equal(mr_sim_mac_of_host(c, 1, &m, &e), 0);
	assert_string_equal(m.model, "Mac16,9");
	assert_string_equal(m.version, "15.5");
	assert_string_equal(m.build, "24F74");
	assert_int_equal(m.ncpu, 14);
	/* bad values name the field */
	h = cJSON_GetArrayItem(cJSON_GetObjectItem(c->fx->json, "hosts"), 2);
	cJSON_AddStringToObject(h, "model", "Mac 15;rm");
	assert_true(mr_sim_mac_of_host(c, 2, &m, &e) < 0);
	assert_non_null(strstr(e.msg, "hosts[2].model"));
	mr_err_clear(&e);
	h = cJSON_GetArrayItem(cJSON_GetObjectItem(c->fx->json, "hosts"), 3);
	cJSON_AddStringToObject(h, "macos", "26.1");
	assert_true(mr_sim_mac_of_host(c, 3, &m, &e) < 0);
	assert_non_null(strstr(e.msg, "hosts[3]"));
	mr_sim_cluster_free(c);
	c = NULL;
	mr_err_clear(&e);
	assert_int_equal(mr_sim_cluster_load(FIXTURES "/ring8", &c, NULL, &e), 0);
	assert_int_equal(mr_sim_mac_of_host(c, 0, &m, &e), 0);
	assert_string_equal(m.model, "Mac16,11"); /* "Mac mini" */
	mr_sim_cluster_free(c);

	mr_sim_mac_darwin_release("26.2", rel, sizeof(rel));
	assert_string_equal(rel, "25.2.0");
	mr_sim_mac_darwin_release("15.5", rel, sizeof(rel));
	assert_string_equal(rel, "24.5.0");
	mr_sim_mac_darwin_release("14", rel, sizeof(rel));
	assert_string_equal(rel, "23.0.0");
}

static void test_shims(void **state)
{
	struct mr_sim_mac m = { "Mac15,14", "26.2", "25C56", 32 };
	struct mr_buf out = MR_BUF_INIT, host = MR_BUF_INIT;
	char *want;

	(void)state;
	write_mac_shims(&m);
	mr_read_file("/proc/sys/kernel/hostname", 4096, &host, NULL);

	assert_int_equal(sh("uname", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "Darwin\n");
	assert_int_equal(sh("uname -s", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "Darwin\n");
	assert_int_equal(sh("uname -m", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "arm64\n");
	assert_int_equal(sh("uname -r", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "25.2.0\n");
	assert_int_equal(sh("uname -sr", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "Darwin 25.2.0\n");
	assert_int_equal(sh("uname -p", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "arm\n");
	want = xasprintf("Darwin %.*s 25.2.0 Darwin Kernel Version 25.2.0: ", (int)host.len - 1, host.p);
	assert_int_equal(sh("uname -a", &out), 0);
	assert_true(!strncmp(mr_buf_cstr(&out), want, strlen(want)));
	assert_non_null(strstr(mr_buf_cstr(&out), "/RELEASE_ARM64_T6031 arm64\n"));
	free(want);
	/* GNU forms are refused as BSD uname refuses them */
	assert_int_equal(sh("uname --kernel-name", &out), 1);
	assert_string_equal(mr_buf_cstr(&out), "uname: illegal option -- -\nusage: uname [-amnprsv]\n");
	assert_int_equal(sh("uname -o", &out), 1);
	assert_string_equal(mr_buf_cstr(&out), "uname: illegal option -- o\nusage: uname [-amnprsv]\n");
	assert_int_equal(sh("uname -i", &out), 1);
	assert_int_equal(sh("uname x", &out), 1);

	assert_int_equal(sh("sw_vers", &out), 0);
	assert_string_equal(mr_buf_cstr(&out),
			    "ProductName:\t\tmacOS\nProductVersion:\t\t26.2\nBuildVersion:\t\t25C56\n");
	assert_int_equal(sh("sw_vers -productVersion", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "26.2\n");
	assert_int_equal(sh("sw_vers --buildVersion", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "25C56\n");
	assert_int_equal(sh("sw_vers -productName", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "macOS\n");
	assert_int_equal(sh("sw_vers --version", &out), 1);

	assert_int_equal(sh("sysctl -n hw.model", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "Mac15,14\n");
	assert_int_equal(sh("sysctl -n hw.ncpu hw.physicalcpu", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "32\n32\n");
	assert_int_equal(sh("sysctl hw.model kern.ostype", &out), 0);
	assert_string_equal(mr_buf_cstr(&out), "hw.model: Mac15,14\nkern.ostype: Darwin\n");
	assert_int_equal(sh("sysctl -n net.ipv4.ip_forward", &out), 1);
	assert_string_equal(mr_buf_cstr(&out), "sysctl: unknown oid 'net.ipv4.ip_forward'\n");
	assert_int_equal(sh("sysctl --values hw.model", &out), 1);
	assert_non_null(strstr(mr_buf_cstr(&out), "sysctl: illegal option -- -\nusage: sysctl"));
	assert_int_equal(sh("sysctl -w hw.ncpu=4", &out), 1);

	/* ping and netstat: what they refuse, before anything runs */
	assert_int_equal(sh("ping --count=1 10.0.0.1", &out), 64);
	assert_non_null(strstr(mr_buf_cstr(&out), "ping: illegal option -- -"));
	assert_int_equal(sh("ping -c", &out), 64);
	assert_int_equal(sh("ping -c 1 a b", &out), 64);
	assert_int_equal(sh("netstat -tulpn", &out), 1);
	assert_int_equal(sh("netstat -rn -f inet6", &out), 1);

	/* values that could break out of the script are refused */
	{
		struct mr_sim_mac bad = m;

		snprintf(bad.model, sizeof(bad.model), "x';reboot;'");
		assert_int_equal(mr_sim_render_mac_shim("uname", "m1", tmpdir, &bad, &out), -1);
		assert_int_equal(mr_sim_render_mac_shim("nope", "m1", tmpdir, &m, &out), -1);
	}
	mr_buf_release(&out);
	mr_buf_release(&host);
}

static void test_passwd(void **state)
{
	struct mr_buf b = MR_BUF_INIT, etc = MR_BUF_INIT;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	char *p = xasprintf("%s/passwd", tmpdir);
	char *zsh = mr_sim_which("zsh");
	const char *root;

	(void)state;
	if (!zsh) {
		assert_true(mr_sim_login_write_passwd(tmpdir, &e) < 0);
		assert_non_null(strstr(e.msg, "zsh"));
		free(p);
		return;
	}
	assert_int_equal(mr_sim_login_write_passwd(tmpdir, &e), 0);
	assert_int_equal(mr_read_file(p, 4 << 20, &b, NULL), 0);
	assert_int_equal(mr_read_file("/etc/passwd", 4 << 20, &etc, NULL), 0);
	root = strstr(mr_buf_cstr(&b), "root:");
	assert_non_null(root);
	assert_true(root == b.p || root[-1] == '\n');
	{
		const char *nl = strchr(root, '\n');
		size_t zl = strlen(zsh);

		assert_non_null(nl);
		assert_true((size_t)(nl - root) > zl + 1);
		assert_memory_equal(nl - zl, zsh, zl);
		assert_int_equal(nl[-(long)zl - 1], ':');
	}
	/* same number of lines; only root's shell differs */
	{
		size_t n1 = 0, n2 = 0;

		for (size_t i = 0; i < b.len; i++)
			n1 += b.p[i] == '\n';
		for (size_t i = 0; i < etc.len; i++)
			n2 += etc.p[i] == '\n';
		assert_int_equal(n1, n2 + (etc.len && etc.p[etc.len - 1] != '\n'));
	}
	unlink(p);
	free(p);
	free(zsh);
	mr_buf_release(&b);
	mr_buf_release(&etc);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char *cmd = xasprintf("rm -rf '%s'", tmpdir);

	(void)state;
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	free(cmd);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_shims),
		cmocka_unit_test(test_passwd),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
