/*
 * bench_timeit.c - wall time of a command, without the cost of the timer: on
 * a VM an exec of date(1) costs milliseconds, which `$(date +%s%N)` around a
 * 100 ms launch would count. Runs COMMAND N times in a row (stdin, stdout and
 * stderr /dev/null) and prints the mean wall time in microseconds.
 * Usage: bench-timeit N COMMAND [ARGS...]   (exit 1 when a run fails)
 */
#include "common/compat.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	posix_spawn_file_actions_t fa;
	char *end;
	long n = argc > 2 ? strtol(argv[1], &end, 10) : 0;
	double total = 0;
	int rc = 0;

	if (argc < 3 || *end || n < 1) {
		fprintf(stderr, "usage: bench-timeit N COMMAND [ARGS...]\n");
		return 2;
	}
	if (posix_spawn_file_actions_init(&fa) != 0 ||
	    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) != 0 ||
	    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0) != 0 ||
	    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0) != 0) {
		fprintf(stderr, "bench-timeit: posix_spawn_file_actions: out of memory\n");
		return 1;
	}
	for (long i = 0; i < n; i++) {
		double t0 = now_us();
		pid_t pid;
		int st, err = posix_spawnp(&pid, argv[2], &fa, NULL, &argv[2], environ);

		if (err != 0) {
			fprintf(stderr, "bench-timeit: cannot run '%s': %s\n", argv[2], strerror(err));
			rc = 1;
			break;
		}
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		total += now_us() - t0;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "bench-timeit: '%s' failed (run %ld, status 0x%x)\n", argv[2], i + 1, st);
			rc = 1;
			break;
		}
	}
	posix_spawn_file_actions_destroy(&fa);
	if (rc == 0)
		printf("%.0f\n", total / (double)n);
	return rc;
}
