/*
 * bench_hal_ssh.c - `true` on every host: the hal's ssh backend (libssh2: one
 * reused connection per host, one poll loop) vs the hal's openssh backend (the
 * `ssh` binary: a control master per host, one multiplexed client per command)
 * vs one plain OpenSSH `ssh` process per host, started in parallel, as
 * pdsh-style tools and mlx.launch do. Same hosts, same run, rounds taken in turn.
 * Prints per-round times, the medians and the ratios.
 *
 * Run through bench/hal/run.sh (needs the environment of sshd_hosts.sh).
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/num.h"
#include "common/strvec.h"
#include "common/timeutil.h"
#include "hal/hal.h"

#include <inttypes.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static double median_ms(int64_t *us, size_t n)
{
	qsort(us, n, sizeof(*us), cmp_i64);
	return (n % 2 ? (double)us[n / 2] : (us[n / 2 - 1] + us[n / 2]) / 2.0) / 1000.0;
}

/* One round through the hal; returns microseconds, or -1 when a command failed. */
static int64_t hal_round(struct mr_hal *hal, const struct mr_strvec *hosts)
{
	char *argv[] = { "true", NULL };
	struct mr_hal_cmd cmds[64] = { { 0 } };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	int64_t t0 = mr_now_us(), t;
	bool ok = true;

	for (size_t i = 0; i < hosts->nr; i++) {
		cmds[i].host = hosts->v[i];
		cmds[i].argv = argv;
	}
	if (mr_hal_run(hal, cmds, hosts->nr, &err) < 0) {
		fprintf(stderr, "mr_hal_run: %s\n", err.msg);
		return -1;
	}
	t = mr_now_us() - t0;
	for (size_t i = 0; i < hosts->nr; i++) {
		if (!mr_hal_cmd_ok(&cmds[i])) {
			char d[MESHRUN_ERR_MSG_MAX];

			fprintf(stderr, "%s: %s\n", hosts->v[i], mr_hal_cmd_describe(&cmds[i], d, sizeof(d)));
			ok = false;
		}
		mr_hal_cmd_release(&cmds[i]);
	}
	return ok ? t : -1;
}

/* One round of `ssh -F CONFIG host true` per host, all started at once. */
static int64_t ssh_round(const char *config, const struct mr_strvec *hosts)
{
	pid_t pids[64];
	int64_t t0 = mr_now_us();
	bool ok = true;

	for (size_t i = 0; i < hosts->nr; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			execlp("ssh", "ssh", "-F", config, "-o", "BatchMode=yes", hosts->v[i], "true",
			       (char *)NULL);
			_exit(127);
		}
		if (pids[i] < 0) {
			perror("fork");
			return -1;
		}
	}
	for (size_t i = 0; i < hosts->nr; i++) {
		int st = 0;

		if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			ok = false;
	}
	return ok ? mr_now_us() - t0 : -1;
}

int main(int argc, char **argv)
{
	const char *config = getenv("MRH_SSH_CONFIG");
	const char *list = getenv("MRH_HOSTS");
	struct mr_strvec hosts = MR_STRVEC_INIT;
	struct mr_hal_opts o = { 0 };
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_hal *hal = NULL, *ohal = NULL;
	int rounds = 15;
	int64_t *hal_us, *ssh_us, *os_us, first, ofirst;
	double mh, ms, mo;

	if (!config || !list) {
		fprintf(stderr, "bench_hal_ssh: run me through bench/hal/run.sh\n");
		return 2;
	}
	if (argc > 1 && mr_parse_int(argv[1], 1, 1000, &rounds) < 0) {
		fprintf(stderr, "bench_hal_ssh: rounds: expected 1..1000, got '%s'\n", argv[1]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	mr_strvec_split(&hosts, list, ' ', true);
	if (hosts.nr == 0 || hosts.nr > 64) {
		fprintf(stderr, "bench_hal_ssh: 1..64 hosts expected\n");
		return 2;
	}
	o.ssh_config = config;
	if (mr_hal_new_ssh(&hal, &o, &err) < 0 || mr_hal_new_openssh(&ohal, &o, &err) < 0) {
		fprintf(stderr, "bench_hal_ssh: %s\n", err.msg);
		return 1;
	}
	hal_us = calloc((size_t)rounds, sizeof(*hal_us));
	ssh_us = calloc((size_t)rounds, sizeof(*ssh_us));
	os_us = calloc((size_t)rounds, sizeof(*os_us));
	first = hal_round(hal, &hosts); /* connects: reported, not counted */
	ofirst = hal_round(ohal, &hosts); /* starts the masters: likewise */
	if (first < 0 || ofirst < 0 || !hal_us || !ssh_us || !os_us)
		return 1;
	printf("hosts: %zu, rounds: %d, command: true\n", hosts.nr, rounds);
	printf("first round (connect + handshake + auth + run): libssh2 %.2f ms, openssh masters %.2f ms\n",
	       first / 1000.0, ofirst / 1000.0);
	printf("%5s %12s %12s %12s\n", "round", "libssh2 ms", "openssh ms", "ssh ms");
	for (int r = 0; r < rounds; r++) {
		hal_us[r] = hal_round(hal, &hosts);
		os_us[r] = hal_round(ohal, &hosts);
		ssh_us[r] = ssh_round(config, &hosts);
		if (hal_us[r] < 0 || os_us[r] < 0 || ssh_us[r] < 0) {
			fprintf(stderr, "round %d failed\n", r);
			return 1;
		}
		printf("%5d %12.2f %12.2f %12.2f\n", r + 1, hal_us[r] / 1000.0, os_us[r] / 1000.0,
		       ssh_us[r] / 1000.0);
	}
	mh = median_ms(hal_us, (size_t)rounds);
	mo = median_ms(os_us, (size_t)rounds);
	ms = median_ms(ssh_us, (size_t)rounds);
	printf("median per round: libssh2 hal %.2f ms, openssh hal (control masters) %.2f ms, plain ssh %.2f ms\n",
	       mh, mo, ms);
	printf("ratio ssh/libssh2: %.1fx (target >= 2x)\n", ms / mh);
	printf("ratio ssh/openssh-hal: %.1fx, openssh-hal/libssh2: %.1fx\n", ms / mo, mo / mh);
	mr_hal_free(hal);
	mr_hal_free(ohal);
	free(hal_us);
	free(os_us);
	free(ssh_us);
	mr_strvec_release(&hosts);
	return 0;
}
