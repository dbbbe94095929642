/*
 * meshsim-appleverbs-stat - print (and with --reset, clear) the counters of
 * meshsim's Apple RDMA layer (appleverbs.h): what it refused, held and
 * dropped, summed over every process that used the shared table.
 *
 * Output: one "name value" line per counter (state.h, AV_STAT_MAP), in the
 * table's order; --reset removes the table file afterwards (the next process
 * under the layer starts an empty one). Exit 0, 1 when the table is missing
 * (nothing ran under the layer yet), 2 on a usage error.
 */
#include "common/compat.h"
#include "common/opt.h"
#include "common/strvec.h"
#include "sim/appleverbs/appleverbs.h"
#include "sim/appleverbs/state.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *path = getenv(AV_ENV_STATE);
	bool reset = false, quiet = false;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	const struct mr_opt table[] = {
		MR_OPT_STRING(0, "state", &path, "PATH", "the shared table (default $" AV_ENV_STATE ", else " AV_STATE_DEFAULT ")"),
		MR_OPT_BOOL(0, "reset", &reset, "remove the table after printing it"),
		MR_OPT_BOOL('q', "quiet", &quiet, "print nothing (with --reset: only clear)"),
		MR_OPT_END(),
	};
	int rc = mr_opt_parse(table, argc, argv, 0, NULL, NULL, &err);

	if (rc == MR_OPT_HELP) {
		mr_opt_usage(stdout, "meshsim-appleverbs-stat [--state PATH] [--reset] [-q]", table, NULL);
		return 0;
	}
	if (rc != MR_OPT_OK) {
		fprintf(stderr, "meshsim-appleverbs-stat: %s\n", err.msg);
		return 2;
	}
	if (!path || !*path)
		path = AV_STATE_DEFAULT;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (reset && errno == ENOENT)
			return 0;
		fprintf(stderr, "meshsim-appleverbs-stat: '%s': %s\n", path, strerror(errno));
		return 1;
	}
	struct av_shared *s = mmap(NULL, sizeof(*s), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (s == MAP_FAILED || s->magic != AV_STATE_MAGIC) {
		fprintf(stderr, "meshsim-appleverbs-stat: '%s' is not the layer's table\n", path);
		return 1;
	}
	for (int i = 0; i < AV_STAT_COUNT && !quiet; i++)
		printf("%s %llu\n", av_stat_name(i), (unsigned long long)__atomic_load_n(&s->stat[i], __ATOMIC_RELAXED));
	munmap(s, sizeof(*s));
	if (reset && unlink(path) < 0) {
		fprintf(stderr, "meshsim-appleverbs-stat: remove '%s': %s\n", path, strerror(errno));
		return 1;
	}
	return 0;
}
