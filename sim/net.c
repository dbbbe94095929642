#include "common/compat.h"
#include "common/array.h"
#include "sim/net.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/timeutil.h"
#include "common/xalloc.h"
#include "sim/plan.h"
#include "sim/proc.h"

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_prefix(const char *dir, const char *prefix, struct mr_strvec *out)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t pl = strlen(prefix);

	if (!d)
		return errno == ENOENT ? 0 : -1;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, prefix, pl) && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			mr_strvec_push(out, e->d_name);
	closedir(d);
	if (out->nr > 1)
		qsort(out->v, out->nr, sizeof(*out->v), cmp_str);
	return 0;
}

int mr_sim_list_netns(const char *prefix, struct mr_strvec *out)
{
	return list_prefix("/run/netns", prefix, out);
}

int mr_sim_list_links(const char *prefix, struct mr_strvec *out)
{
	return list_prefix("/sys/class/net", prefix, out);
}

static bool same_ns(pid_t pid, const struct stat *ns)
{
	char p[64];
	struct stat st;

	snprintf(p, sizeof(p), "/proc/%d/ns/net", (int)pid);
	return stat(p, &st) == 0 && st.st_ino == ns->st_ino && st.st_dev == ns->st_dev;
}

int mr_sim_netns_pids(const char *ns, pid_t **pids, size_t *n)
{
	char *path = xasprintf("/run/netns/%s", ns);
	struct stat nst;
	DIR *d;
	struct dirent *e;
	size_t cnt = 0, alloc = 0;
	pid_t *v = NULL;

	*pids = NULL;
	*n = 0;
	if (stat(path, &nst) < 0) {
		free(path);
		return -1;
	}
	free(path);
	d = opendir("/proc");
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 1 || pid == getpid())
			continue;
		if (!same_ns((pid_t)pid, &nst))
			continue;
		pid_t *nv = mr_array_grow(v, cnt + 1, &alloc, sizeof(*v));
		if (!nv) {
			free(v);
			closedir(d);
			return -1;
		}
		v = nv;
		v[cnt++] = (pid_t)pid;
	}
	closedir(d);
	*pids = v;
	*n = cnt;
	return 0;
}

bool mr_sim_pid_in_netns(pid_t pid, const char *ns)
{
	char *path = xasprintf("/run/netns/%s", ns);
	struct stat nst;
	bool ok;

	ok = pid > 1 && stat(path, &nst) == 0 && kill(pid, 0) == 0 && same_ns(pid, &nst);
	free(path);
	return ok;
}

/*
 * A power cut's first step: SIGSTOP every process of ns until a listing finds
 * none that was not stopped already (a child forked meanwhile is in the next
 * listing). SIGKILL one by one would let a survivor see the death of another
 * (the watchdog reads EOF when sshd dies, and removes its job directory) for
 * the microseconds between two kills; a stopped process sees nothing.
 */
static void freeze_netns(const char *ns, int64_t give_up)
{
	pid_t *pids = NULL, *stopped = NULL;
	size_t n = 0, nstopped = 0, alloc = 0;

	while (mr_now_ms() < give_up && mr_sim_netns_pids(ns, &pids, &n) == 0 && n > 0) {
		size_t fresh = 0;

		for (size_t i = 0; i < n; i++) {
			size_t j = 0;

			while (j < nstopped && stopped[j] != pids[i])
				j++;
			if (j < nstopped)
				continue;
			pid_t *nv = mr_array_grow(stopped, nstopped + 1, &alloc, sizeof(*stopped));
			if (!nv)
				goto out;
			stopped = nv;
			stopped[nstopped++] = pids[i];
			kill(pids[i], SIGSTOP);
			fresh++;
		}
		free(pids);
		pids = NULL;
		if (fresh == 0)
			break;
	}
out:
	free(pids);
	free(stopped);
}

size_t mr_sim_kill_netns(const char *ns, int wait_ms)
{
	int64_t kill_at, give_up;
	pid_t *pids = NULL;
	size_t n = 0, killed = 0;
	bool first = true;

	/* the freeze has its own bound: a slow one must not use up the kills'
	 * time and leave the host's processes stopped for good */
	if (wait_ms <= 0)
		freeze_netns(ns, mr_now_ms() + 2000);
	kill_at = mr_now_ms() + MR_MAX(wait_ms, 0);
	give_up = kill_at + 2000;

	/* TERM once (wait_ms > 0), then KILL every round until none is left: a
	 * child forked after a round is in the namespace and gets the next one */
	while (mr_sim_netns_pids(ns, &pids, &n) == 0 && n > 0) {
		int64_t now = mr_now_ms();

		if (first)
			killed = n;
		if (now >= give_up)
			break;
		if (first || now >= kill_at)
			for (size_t i = 0; i < n; i++)
				kill(pids[i], now >= kill_at ? SIGKILL : SIGTERM);
		first = false;
		free(pids);
		pids = NULL;
		mr_sleep_ms(now >= kill_at ? 1 : 10);
	}
	free(pids);
	return killed;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (flag == FTW_DP)
		return rmdir(path) < 0 && errno != ENOENT ? -1 : 0;
	return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* Whether something is mounted below path, in this mount namespace
 * (a bind mount keeps the file system, so st_dev cannot tell). */
static bool has_mount_below(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	size_t n = strlen(path);
	char line[4096];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f)) {
		/* id parent major:minor root MOUNTPOINT ... (octal escapes: paths here have no blanks) */
		char mp[4096];
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1)
			found = !strncmp(mp, path, n) && mp[n] == '/';
	}
	if (f)
		fclose(f);
	return found;
}

int mr_sim_rm_rf(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -1;
	/* A host's root (login.h) is bind mounts of the machine's / under its state
	 * folder, visible only in that host's own mount namespace; were one ever
	 * left where this runs, rm -rf must refuse, not delete the machine's files
	 * through it. FTW_MOUNT too: never into another file system. */
	if (has_mount_below(path)) {
		errno = EBUSY;
		return -1;
	}
	return nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

bool mr_sim_cluster_exists(const char *name)
{
	char *prefix = mr_sim_prefix(name), *dir = mr_sim_state_dir(name);
	struct mr_strvec v = MR_STRVEC_INIT;
	struct stat st;
	bool found;

	mr_sim_list_netns(prefix, &v);
	mr_sim_list_links(prefix, &v);
	found = v.nr > 0 || stat(dir, &st) == 0;
	mr_strvec_release(&v);
	free(prefix);
	free(dir);
	return found;
}

int mr_sim_teardown(const char *name, size_t *removed, struct meshrun_err *err)
{
	char *prefix = mr_sim_prefix(name), *dir = mr_sim_state_dir(name);
	struct mr_strvec ns = MR_STRVEC_INIT, links = MR_STRVEC_INIT;
	struct mr_sim_job *jobs = NULL;
	size_t njobs = 0, count = 0;
	int rc = 0;

	mr_sim_list_netns(prefix, &ns);
	/* processes first: a namespace lives on while a process is in it */
	for (size_t i = 0; i < ns.nr; i++)
		count += mr_sim_kill_netns(ns.v[i], 1000);
	mr_sim_list_links(prefix, &links);
	jobs = xcalloc(ns.nr + links.nr + 1, sizeof(*jobs));
	for (size_t i = 0; i < links.nr; i++) {
		struct mr_sim_job j = MR_SIM_JOB_INIT;
		char *label = xasprintf("remove link '%s'", links.v[i]);
		mr_sim_job_set(&j, label, "ip", "link", "del", "dev", links.v[i], NULL);
		free(label);
		jobs[njobs++] = j;
	}
	for (size_t i = 0; i < ns.nr; i++) {
		struct mr_sim_job j = MR_SIM_JOB_INIT;
		char *label = xasprintf("remove namespace '%s'", ns.v[i]);
		mr_sim_job_set(&j, label, "ip", "netns", "del", ns.v[i], NULL);
		free(label);
		jobs[njobs++] = j;
	}
	if (njobs && mr_sim_run_jobs(jobs, njobs, 8, 30000, MR_SIM_KEEP_GOING, err) < 0)
		rc = err ? err->code : MESHRUN_E_SYS;
	count += njobs;
	/* a root link whose peer was in a namespace may already be gone: not an error */
	if (rc < 0) {
		struct mr_strvec left = MR_STRVEC_INIT, leftns = MR_STRVEC_INIT;
		mr_sim_list_links(prefix, &left);
		mr_sim_list_netns(prefix, &leftns);
		if (left.nr == 0 && leftns.nr == 0) {
			rc = 0;
			if (err)
				mr_err_clear(err);
		}
		mr_strvec_release(&left);
		mr_strvec_release(&leftns);
	}
	{
		struct stat st;
		if (stat(dir, &st) == 0) {
			count++;
			if (mr_sim_rm_rf(dir) < 0 && rc == 0)
				rc = mr_err_sys(err, "remove '%s'", dir);
		}
	}
	for (size_t i = 0; i < njobs; i++)
		mr_sim_job_release(&jobs[i]);
	free(jobs);
	mr_strvec_release(&ns);
	mr_strvec_release(&links);
	free(prefix);
	free(dir);
	if (removed)
		*removed = count;
	return rc;
}

/* A command's output as one line: newlines as spaces, none at the end. */
static void one_line(struct mr_buf *b)
{
	for (size_t i = 0; i < b->len; i++)
		if (b->p[i] == '\n')
			b->p[i] = ' ';
	while (b->len && b->p[b->len - 1] == ' ')
		b->len--;
}

/* What the kernel says of the path to addr: its route and neighbour entries,
 * on one line (for an error naming why a host cannot be reached). */
static void path_story(const char *addr, struct mr_buf *b)
{
	struct mr_buf r = MR_BUF_INIT, n = MR_BUF_INIT;

	(void)mr_sim_run(&r, NULL, "route", "ip", "route", "get", addr, NULL);
	(void)mr_sim_run(&n, NULL, "neighbour", "ip", "neigh", "show", "to", addr, NULL);
	one_line(&r);
	one_line(&n);
	mr_buf_printf(b, "ip route get: '%.*s'; ip neigh: '%.*s'", (int)r.len, r.p ? r.p : "",
		      (int)n.len, n.p ? n.p : "");
	mr_buf_release(&r);
	mr_buf_release(&n);
}

/* The port a reach probe knocks at: nothing listens there on a simulated host,
 * so its kernel answers with a reset and no process starts for it (a connect to
 * sshd would fork a child, seen for a moment as a process of the host). */
#define REACH_PORT 1

static int reach_start(const char *addr)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(REACH_PORT) };
	int fd;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int mr_sim_wait_reach(const char *const *names, const char (*addrs)[16], size_t n, int timeout_ms,
		      struct meshrun_err *err)
{
	struct pollfd *pfd = xcalloc(n ? n : 1, sizeof(*pfd));
	int64_t *next = xcalloc(n ? n : 1, sizeof(*next));
	int *why = xcalloc(n ? n : 1, sizeof(*why));
	bool *done = xcalloc(n ? n : 1, sizeof(*done));
	int64_t deadline = mr_now_ms() + timeout_ms;
	size_t left = n;
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		pfd[i].fd = -1;
	while (left && mr_ms_left(deadline) > 0) {
		int64_t now = mr_now_ms();
		for (size_t i = 0; i < n; i++) {
			if (done[i] || pfd[i].fd >= 0 || next[i] > now)
				continue;
			pfd[i].fd = reach_start(addrs[i]);
			pfd[i].events = POLLOUT;
			if (pfd[i].fd < 0) {
				why[i] = errno;
				next[i] = now + 100;
			}
		}
		int wait = mr_ms_left(deadline) < 100 ? (int)mr_ms_left(deadline) : 100;
		if (poll(pfd, (nfds_t)n, wait) < 0 && errno != EINTR) {
			rc = mr_err_sys(err, "poll");
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			int e = 0;
			socklen_t el = sizeof(e);

			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			if (getsockopt(pfd[i].fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
				e = errno;
			close(pfd[i].fd);
			pfd[i].fd = -1;
			pfd[i].revents = 0;
			if (e == 0 || e == ECONNREFUSED) { /* the host's kernel answered */
				done[i] = true;
				left--;
			} else { /* unresolved, unreachable, no answer: again shortly */
				why[i] = e;
				next[i] = mr_now_ms() + 100;
			}
		}
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (done[i])
			continue;
		struct mr_buf story = MR_BUF_INIT;
		path_story(addrs[i], &story);
		rc = mr_err_set(err, MESHRUN_E_TIMEOUT,
				"host '%s': %s does not answer over the management bridge within %d s "
				"(%s), %zu host(s) not reached in all; %s",
				names[i], addrs[i], timeout_ms / 1000,
				why[i] ? strerror(why[i]) : "no answer", left, mr_buf_cstr(&story));
		mr_buf_release(&story);
	}
out:
	for (size_t i = 0; i < n; i++)
		if (pfd[i].fd >= 0)
			close(pfd[i].fd);
	free(pfd);
	free(next);
	free(why);
	free(done);
	return rc;
}
