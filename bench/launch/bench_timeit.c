/*
 * bench_timeit.c - wall time of a command, without the cost of the timer: on
 * a VM an exec of date(1) costs milliseconds, which `$(date +%s%N)` around a
 * 100 ms launch would count. Runs COMMAND N times in a row (stdin, stdout and
 * stderr /dev/null) and prints the mean wall time in microseconds.
 * Usage: bench-timeit N COMMAND [ARGS...]   (exit 1 when a run fails)
 */
#include "common/compat.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "common/spawn.h"
#include "common/timeutil.h"

int main(int argc, char **argv)
{
	struct mr_spawn_opts so = { .argv = &argv[2], .fds = { -1, -1, -1 } };
	char *end;
	long n = argc > 2 ? strtol(argv[1], &end, 10) : 0;
	int64_t total = 0;

	if (argc < 3 || *end || n < 1) {
		fprintf(stderr, "usage: bench-timeit N COMMAND [ARGS...]\n");
		return 2;
	}
	for (long i = 0; i < n; i++) {
		struct meshrun_err err = MESHRUN_ERR_INIT;
		int64_t t0 = mr_now_us();
		pid_t pid;
		int st;

		if (mr_spawn_child(&so, &pid, &err) < 0) {
			fprintf(stderr, "bench-timeit: %s\n", err.msg);
			return 1;
		}
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		total += mr_now_us() - t0;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "bench-timeit: '%s' failed (run %ld, status 0x%x)\n", argv[2], i + 1, st);
			return 1;
		}
	}
	printf("%" PRId64 "\n", total / n);
	return 0;
}
