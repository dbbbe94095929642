/*
 * launch/run.c - one meshrun job from plan to exit code (not config/run.c,
 * meshconfig's steps): pick the hal, check every host in parallel (reachable;
 * command and cwd exist; one error listing every failing host), write the job's
 * files on every host (one temporary directory per host, removed at the end),
 * start the ranks under the supervisor, clean up.
 */
#include "common/compat.h"
#include "launch/launch.h"
#include "launch/hints.h"
#include "launch/supervise.h"
#include "hal/sh.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/hostfold.h"
#include "common/log.h"
#include "common/num.h"
#include "common/port.h"
#include "common/shquote.h"
#include "common/timeutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

struct job_host {
	const char *name;
	char *dir;   /* job directory there, or NULL */
	char dir_name[24]; /* its name in the host's TMPDIR (hosts may share one /tmp) */
	bool cwd_ok; /* our cwd exists there */
	bool lost;   /* a rank there got no exit status (connection lost, or given up) */
	bool guarded; /* dir is with the host's watchdog (guard_dirs) */
	bool wd_makes; /* that watchdog makes and marks dir_name (mr_hal_makes_dirs) */
	bool nomem;  /* its setup's output could not be kept */
};

struct job {
	const struct mr_launch_opts *o;
	struct mr_launch_plan *plan;
	struct mr_hal *hal;
	struct job_host *hosts;
	size_t nhosts;
	size_t *host_of; /* rank -> index in hosts */
	char cwd[PATH_MAX];
	int64_t deadline_ms; /* --timeout from our start (0: none) */
	struct mr_strvec report; /* the failed hosts' lines under the error (hostfold.h) */
};

/*
 * "meshrun." and 12 random letters and digits, chosen here rather than by mktemp
 * there, so that every host's watchdog is told the name before the directory
 * exists: a kill -9 of meshrun at any instant leaves none behind.
 */
static int make_dir_name(struct job_host *h, struct meshrun_err *err)
{
	static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char r[12];

	if (mr_random_bytes(r, sizeof(r)) < 0)
		return mr_err_sys(err, "random name for the job directory on '%s'", h->name);
	memcpy(h->dir_name, "meshrun.", 8);
	for (size_t i = 0; i < sizeof(r); i++)
		h->dir_name[8 + i] = set[r[i] % (sizeof(set) - 1)];
	h->dir_name[8 + sizeof(r)] = '\0';
	return 0;
}

/* The host's watchdog removes the job directory if we die (see guard_dirs),
 * and on remote hosts makes it. */
static void guard_dir_name(struct job *j, struct job_host *h)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;

	if (mr_hal_remove_at_exit(j->hal, h->name, h->dir_name, &e) < 0)
		mr_warn("%s (it stays behind if meshrun is killed)", e.msg);
	else
		h->wd_makes = mr_hal_makes_dirs(j->hal, h->name);
}

static int distinct_hosts(struct job *j)
{
	const struct mr_hostfile *hf = j->plan->hf;

	j->hosts = calloc(hf->nhosts, sizeof(*j->hosts));
	j->host_of = calloc(hf->nhosts, sizeof(*j->host_of));
	if (!j->hosts || !j->host_of)
		return -1;
	for (size_t r = 0; r < hf->nhosts; r++) {
		size_t k;

		for (k = 0; k < j->nhosts; k++)
			if (!strcmp(j->hosts[k].name, hf->hosts[r].ssh))
				break;
		if (k == j->nhosts)
			j->hosts[j->nhosts++].name = hf->hosts[r].ssh;
		j->host_of[r] = k;
	}
	return 0;
}

static int new_hal(struct job *j, struct meshrun_err *err)
{
	struct mr_hal_opts ho = j->plan->ho;

	ho.batch = true;
	/* within --timeout (ssh_config's ConnectTimeout still wins, as ssh's own) */
	if (j->deadline_ms > 0)
		ho.connect_timeout_ms = (int)MR_MAX(MR_MIN(mr_ms_left(j->deadline_ms), (int64_t)10000), (int64_t)1);
	if (j->plan->all_local)
		return mr_hal_new_local(&j->hal, &ho, err);
	/* local hosts by fork/exec, the others over ssh, one poll loop over both */
	return mr_hal_new_auto(&j->hal, &ho, err);
}

/* The host's watchdog removes dir (made by the setup) if we die, and marks it;
 * quiet: a failure is said later (guard_dirs tries again). */
static void guard_dir(struct job *j, struct job_host *h, bool quiet)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;

	if (!h->dir || h->guarded)
		return;
	if (mr_hal_remove_at_exit(j->hal, h->name, h->dir, &e) == 0)
		h->guarded = true;
	else if (!quiet)
		mr_warn("%s (it stays behind if meshrun is killed)", e.msg);
}

/* setup_done's context: the job and its setup commands, one per host */
struct setup_run {
	struct job *j;
	struct mr_hal_cmd *cmds;
};

/*
 * A host's setup is over (mr_hal_run_cb): keep what it printed (the job
 * directory, whether our cwd exists there) and hand the directory to the
 * host's watchdog now, while slower hosts still set up: the "D" line that has
 * it write its liveness mark. A host stopped before the last setup ended would
 * otherwise keep a directory without a mark, which no later sweep removes.
 */
static void setup_done(struct mr_hal_cmd *c, void *ctx)
{
	struct setup_run *sr = ctx;
	struct job_host *h = &sr->j->hosts[(size_t)(c - sr->cmds)];
	const char *out, *nl;

	if (!mr_hal_cmd_ok(c))
		return;
	out = mr_buf_cstr(&c->out);
	nl = strchr(out, '\n');
	h->cwd_ok = nl && nl[1] == '1';
	if (!nl || !strncmp(out, "-\n", 2))
		return;
	if (!(h->dir = strndup(out, (size_t)(nl - out)))) {
		h->nomem = true;
		return;
	}
	guard_dir(sr->j, h, true); /* inside the run: guard_dirs says a failure */
}

/* meshconfig doctor's host option and its value for this job's hosts */
static const char *doctor_opt(const struct mr_launch_opts *o)
{
	return o->hostfile ? "--hostfile" : "--hosts";
}

static const char *doctor_arg(const struct mr_launch_opts *o)
{
	return o->hostfile ? o->hostfile : o->hosts ? o->hosts : "127.0.0.1";
}

/* Reachability, then the setup command on every host; one error lists them all. */
static int prepare_hosts(struct job *j, struct meshrun_err *err)
{
	const struct mr_launch_env *env = &j->plan->env;
	struct meshrun_err *errs = calloc(j->nhosts, sizeof(*errs));
	const char **names = calloc(j->nhosts, sizeof(*names));
	struct mr_hal_cmd *cmds = calloc(j->nhosts, sizeof(*cmds));
	struct mr_strvec argv = MR_STRVEC_INIT;
	char **av = NULL;
	struct mr_hostfold fold = MR_HOSTFOLD_INIT;
	size_t nbad = 0;
	bool full = false; /* a host could not write the job's files (exit 4) */
	enum { DOCTOR_NONE, DOCTOR_REACH, DOCTOR_DISK } doctor = DOCTOR_NONE;
	int rc = 0;

	if (!errs || !names || !cmds) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < j->nhosts; k++)
		names[k] = j->hosts[k].name;
	if (mr_hal_connect(j->hal, names, j->nhosts, errs) > 0) {
		/* every host in full (a long list folded), what to check once per kind */
		for (size_t k = 0; k < j->nhosts; k++)
			if (errs[k].code && (nbad++, mr_hostfold_add(&fold, names[k], errs[k].msg,
								     mr_hal_err_hint(&errs[k]))) < 0) {
				rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
				goto out;
			}
		rc = mr_err_set(err, MESHRUN_E_CONNECT, "cannot reach %zu of %zu host%s:", nbad,
				j->nhosts, j->nhosts == 1 ? "" : "s");
		doctor = DOCTOR_REACH;
		goto out;
	}

	for (size_t k = 0; env->nfiles && k < j->nhosts; k++) {
		if ((rc = make_dir_name(&j->hosts[k], err)) < 0)
			goto out;
		guard_dir_name(j, &j->hosts[k]);
	}
	if (mr_hal_setup_argv(&argv, j->o->verify_script ? j->plan->argv.v[0] : "",
			      j->o->verify_script && j->o->cwd ? j->o->cwd : "", j->o->cwd ? "" : j->cwd) < 0) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < env->nfiles; i++)
		if (mr_strvec_push(&argv, env->files[i].name) < 0 ||
		    mr_strvec_push(&argv, env->files[i].content) < 0) {
			rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
			goto out;
		}
	/* one argv per host: the same but for DIRNAME and WD (arguments 4 and 5 of the script) */
	if (!(av = calloc(j->nhosts * (argv.nr + 1), sizeof(*av)))) {
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < j->nhosts; k++) {
		char **a = &av[k * (argv.nr + 1)];

		memcpy(a, argv.v, argv.nr * sizeof(*a));
		a[MR_HAL_SETUP_ARG_DIRNAME] = j->hosts[k].dir_name;
		a[MR_HAL_SETUP_ARG_WD] = j->hosts[k].wd_makes ? "1" : "0";
		cmds[k].host = names[k];
		cmds[k].argv = a;
		/* --timeout bounds the whole job, the checks before launch too */
		if (j->deadline_ms > 0)
			cmds[k].timeout_ms = (int)MR_MAX(mr_ms_left(j->deadline_ms), (int64_t)1);
	}
	{
		struct setup_run sr = { j, cmds };

		if ((rc = mr_hal_run_cb(j->hal, cmds, j->nhosts, setup_done, &sr, err)) < 0)
			goto out;
	}
	for (size_t k = 0; k < j->nhosts; k++) {
		struct mr_hal_cmd *c = &cmds[k];
		char why[512];

		if (j->hosts[k].nomem) {
			rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
			goto out;
		}
		if (mr_hal_cmd_ok(c)) {
			if (strchr(mr_buf_cstr(&c->out), '\n') && (env->nfiles == 0 || j->hosts[k].dir))
				continue;
			snprintf(why, sizeof(why), "setup printed no job directory");
		} else if (c->hal_rc == 0 && c->status == 3 && c->errout.len) {
			snprintf(why, sizeof(why), "%.*s", (int)c->errout.len - 1, c->errout.p);
			for (char *p = why; *p; p++)
				if (*p == '\n')
					*p = ';';
		} else {
			char d[256];

			snprintf(why, sizeof(why), "setup failed: %s%s%.200s",
				 mr_hal_cmd_describe(c, d, sizeof(d)), c->errout.len ? ": " : "",
				 mr_buf_cstr(&c->errout));
		}
		if (mr_hostfold_add(&fold, names[k], why, c->hal_rc < 0 ? mr_hal_err_hint(&c->err) : NULL) < 0) {
			rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
			goto out;
		}
		nbad++;
		full |= c->hal_rc == 0 && c->status == 4;
	}
	if (full)
		doctor = DOCTOR_DISK;
	if (nbad)
		rc = mr_err_set(err, MESHRUN_E_NOTFOUND, "checks before launch failed on %zu of %zu host%s:",
				nbad, j->nhosts, j->nhosts == 1 ? "" : "s");
out:
	if (fold.n && mr_hostfold_render(&fold, j->o->verbose, "--verbose", "", &j->report) < 0)
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	/* after the hal's hints: the check that would have named the cause */
	if ((doctor == DOCTOR_REACH &&
	     mr_strvec_pushf(&j->report, "hint: " MR_HINT_DOCTOR_REACH, doctor_opt(j->o), doctor_arg(j->o)) < 0) ||
	    (doctor == DOCTOR_DISK &&
	     mr_strvec_pushf(&j->report, "hint: " MR_HINT_DOCTOR_DISK, doctor_opt(j->o), doctor_arg(j->o)) < 0))
		rc = mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	mr_hostfold_release(&fold);
	for (size_t k = 0; cmds && k < j->nhosts; k++)
		mr_hal_cmd_release(&cmds[k]);
	free(cmds);
	free(av);
	free(names);
	free(errs);
	mr_strvec_release(&argv);
	return rc;
}

/* command -v for an argv[0]: a path with '/' that is executable, or a name on PATH. */
static bool local_has_command(const char *cmd)
{
	const char *path = getenv("PATH");

	if (strchr(cmd, '/'))
		return !access(cmd, X_OK);
	while (path && *path) {
		const char *e = strchr(path, ':');
		size_t len = e ? (size_t)(e - path) : strlen(path);
		char cand[PATH_MAX];

		snprintf(cand, sizeof(cand), "%.*s/%s", (int)len, len ? path : ".", cmd);
		if (!access(cand, X_OK))
			return true;
		path = e ? e + 1 : NULL;
	}
	return false;
}

/*
 * Job directory sweep (docs/contracts.md, "job directory lifecycle"): a
 * meshrun.* directory of ours whose watchdog mark (hal.h, MR_HAL_WATCHDOG_MARK)
 * names this host and a process that is gone outlived its watchdog, which was
 * killed together with everything else on the host (no EOF reached it), and is
 * removed when the next job sets up here. No mark (a setup still under way, a
 * job without a watchdog, an older meshrun), another host's name (a TMPDIR
 * shared between machines) or a live pid: kept. The remote form is in
 * mr_hal_setup_script, which also checks with ps that a live pid is still a
 * meshrun-watchdog; here a live pid keeps the directory (no portable ps), so a
 * reused pid only delays the sweep.
 */
bool mr_launch_dir_is_stale(const char *dir)
{
	struct mr_buf mark = MR_BUF_INIT;
	struct utsname u;
	struct stat st;
	char path[PATH_MAX], *sp, *nl;
	uint64_t pid;
	bool stale = false;

	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || uname(&u) < 0 ||
	    snprintf(path, sizeof(path), "%s/" MR_HAL_WATCHDOG_MARK, dir) >= (int)sizeof(path) ||
	    mr_read_file(path, 512, &mark, NULL) < 0)
		goto out;
	sp = strchr(mr_buf_cstr(&mark), ' ');
	nl = sp ? strchr(sp, '\n') : NULL;
	if (!sp || !nl)
		goto out;
	*sp = *nl = '\0';
	if (strcmp(mr_buf_cstr(&mark), u.nodename) || mr_parse_u64(sp + 1, 1, INT_MAX, &pid) < 0)
		goto out;
	stale = kill((pid_t)pid, 0) < 0 && errno == ESRCH;
out:
	mr_buf_release(&mark);
	return stale;
}

/* Remove a stale job directory: its files (meshrun writes no subdirectory), then itself. */
static void remove_flat_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX];

	if (!d)
		return;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path))
			(void)unlink(path);
	closedir(d);
	if (rmdir(dir) < 0)
		mr_debug("sweep: could not remove '%s': %s", dir, strerror(errno));
	else
		mr_debug("sweep: removed '%s' (its watchdog is gone)", dir);
}

static void sweep_local(const char *tmp)
{
	DIR *d = opendir(tmp);
	struct dirent *e;
	char dir[PATH_MAX];

	if (!d)
		return;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "meshrun.", 8) &&
		    snprintf(dir, sizeof(dir), "%s/%s", tmp, e->d_name) < (int)sizeof(dir) &&
		    mr_launch_dir_is_stale(dir))
			remove_flat_dir(dir);
	closedir(d);
}

/*
 * The same checks and files as mr_hal_setup_script, done in this process when every
 * rank is local: three fork/execs fewer per job (sh, mktemp, rm).
 */
static int prepare_local(struct job *j, struct meshrun_err *err)
{
	const struct mr_launch_env *env = &j->plan->env;
	struct job_host *h = &j->hosts[0];
	const char *tmp = getenv("TMPDIR");
	struct stat st;
	char dir[PATH_MAX];
	int rc;

	if (j->o->verify_script && !local_has_command(j->plan->argv.v[0]))
		return mr_err_set(err, MESHRUN_E_NOTFOUND,
				  "checks before launch failed on 1 of 1 host:\n  %s: command '%s' not found",
				  h->name, j->plan->argv.v[0]);
	if (j->o->verify_script && j->o->cwd && (stat(j->o->cwd, &st) < 0 || !S_ISDIR(st.st_mode)))
		return mr_err_set(err, MESHRUN_E_NOTFOUND,
				  "checks before launch failed on 1 of 1 host:\n  %s: working directory '%s' does not exist",
				  h->name, j->o->cwd);
	h->cwd_ok = !j->o->cwd && j->cwd[0] && !stat(j->cwd, &st) && S_ISDIR(st.st_mode);
	for (size_t k = 1; k < j->nhosts; k++) /* "localhost" and "127.0.0.1": one machine */
		j->hosts[k].cwd_ok = h->cwd_ok;
	if (!env->nfiles)
		return 0;
	if ((rc = make_dir_name(h, err)) < 0)
		return rc;
	if (snprintf(dir, sizeof(dir), "%s/%s", tmp && *tmp ? tmp : "/tmp", h->dir_name) >= (int)sizeof(dir))
		return mr_err_set(err, MESHRUN_E_INVAL, "TMPDIR too long: '%s'", tmp);
	sweep_local(tmp && *tmp ? tmp : "/tmp");
	guard_dir_name(j, h);
	if (mkdir(dir, 0700) < 0)
		return mr_err_sys(err, "create job directory '%s'", dir);
	if (!(h->dir = strdup(dir)))
		return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	for (size_t i = 0; i < env->nfiles; i++) {
		char path[PATH_MAX];
		int fd;

		if (snprintf(path, sizeof(path), "%s/%s", h->dir, env->files[i].name) >= (int)sizeof(path))
			return mr_err_set(err, MESHRUN_E_INVAL, "path too long: '%s'", h->dir);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return mr_err_sys(err, "create '%s'", path);
		if (mr_write_full(fd, env->files[i].content, strlen(env->files[i].content)) < 0) {
			mr_close(&fd);
			return mr_err_sys(err, "write '%s'", path);
		}
		mr_close(&fd);
	}
	for (size_t k = 1; k < j->nhosts; k++)
		if (!(j->hosts[k].dir = strdup(dir)))
			return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
	return 0;
}

static void cleanup_local(struct job *j)
{
	const struct mr_launch_env *env = &j->plan->env;
	const char *dir = j->hosts[0].dir;
	char mark[PATH_MAX];

	if (!dir)
		return;
	for (size_t i = 0; i < env->nfiles; i++) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/%s", dir, env->files[i].name);
		(void)unlink(path);
	}
	/* and the watchdog's mark (guard_dirs; hal/local.c writes it) */
	snprintf(mark, sizeof(mark), "%s/" MR_HAL_WATCHDOG_MARK, dir);
	(void)unlink(mark);
	if (rmdir(dir) < 0)
		mr_warn("could not remove '%s': %s", dir, strerror(errno));
}

/* Remove every job directory (best effort; a failure is a warning). */
static void cleanup_hosts(struct job *j)
{
	struct mr_hal_cmd *cmds = calloc(j->nhosts, sizeof(*cmds));
	char **argvs = calloc(j->nhosts * 5, sizeof(*argvs));
	size_t n = 0;

	if (!cmds || !argvs)
		goto out;
	for (size_t k = 0; k < j->nhosts; k++) {
		char **a = &argvs[n * 5];

		/* A lost host is not dialled again (a stopped one would hold us for the
		 * whole connect timeout): its watchdog removes the directory when our
		 * connection ends, if the host still runs at all. */
		if (!j->hosts[k].dir || j->hosts[k].lost)
			continue;
		/* --persist: the daemon removes it as we go, over a channel it has open */
		if (mr_hal_removes_at_free(j->hal, j->hosts[k].name))
			continue;
		a[0] = "rm";
		a[1] = "-rf";
		a[2] = "--";
		a[3] = j->hosts[k].dir;
		a[4] = NULL;
		cmds[n].host = j->hosts[k].name;
		cmds[n].argv = a;
		n++;
	}
	if (n && mr_hal_run(j->hal, cmds, n, NULL) == 0)
		for (size_t i = 0; i < n; i++)
			if (!mr_hal_cmd_ok(&cmds[i]))
				mr_warn("could not remove '%s' on '%s'", cmds[i].argv[3], cmds[i].host);
	for (size_t i = 0; i < n; i++)
		mr_hal_cmd_release(&cmds[i]);
out:
	free(cmds);
	free(argvs);
}

static int start_ranks(struct job *j, struct mr_sup *sup, struct meshrun_err *err)
{
	const struct mr_hostfile *hf = j->plan->hf;

	for (size_t r = 0; r < hf->nhosts; r++) {
		struct job_host *h = &j->hosts[j->host_of[r]];
		struct mr_strvec env = MR_STRVEC_INIT;
		struct mr_spawn sp = { 0 };
		int rc;

		if (mr_launch_env_for_rank(&j->plan->env, r, h->dir, &env) < 0) {
			mr_strvec_release(&env);
			return mr_err_errno(err, errno, MESHRUN_E_SYS, "environment of rank %zu on '%s'",
					    r, h->name);
		}
		sp.host = h->name;
		sp.argv = j->plan->argv.v;
		sp.env = env.v;
		sp.cwd = j->o->cwd ? j->o->cwd : h->cwd_ok ? j->cwd : NULL;
		rc = mr_sup_start(sup, r, &sp, err);
		mr_strvec_release(&env);
		if (rc < 0) {
			mr_err_prefix(err, "start rank %zu on '%s'", r, h->name);
			return rc;
		}
	}
	return 0;
}

static void log_plan(const struct job *j)
{
	struct mr_buf b = MR_BUF_INIT;

	mr_shquote_argv(&b, j->plan->argv.v);
	mr_info("running %zu rank%s on %zu host%s (%s backend, %s hal): %s", j->plan->hf->nhosts,
		j->plan->hf->nhosts == 1 ? "" : "s", j->nhosts, j->nhosts == 1 ? "" : "s",
		mr_backend_name(j->plan->backend), mr_hal_name(j->hal), mr_buf_cstr(&b));
	mr_buf_release(&b);
}

/*
 * The job directories go with meshrun even when it is killed (SIGKILL leaves
 * no cleanup of ours): each host's hal watchdog removes them. All-local jobs
 * share one directory.
 */
static void guard_dirs(struct job *j)
{
	for (size_t k = 0; k < j->nhosts && !(j->plan->all_local && k > 0); k++)
		guard_dir(j, &j->hosts[k], false); /* those setup_done could not hand over */
}

int mr_launch_run(const struct mr_launch_opts *o, struct mr_launch_plan *plan)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct job j = { 0 };
	struct mr_sup sup;
	bool sup_ok = false;
	int code = MR_LAUNCH_EXIT_FAIL;

	j.o = o;
	j.plan = plan;
	if (o->timeout_ms > 0)
		j.deadline_ms = mr_now_ms() + o->timeout_ms;
	if (!getcwd(j.cwd, sizeof(j.cwd)))
		j.cwd[0] = '\0';
	if (plan->launcher != MR_LAUNCHER_MESHRUN) {
		if (plan->addr_note.len)
			mr_warn("%s", mr_buf_cstr(&plan->addr_note));
		return mr_launch_run_extern(o, plan); /* srun or mpirun starts the ranks */
	}
	if (distinct_hosts(&j) < 0) {
		mr_error("out of memory");
		goto out;
	}
	if (new_hal(&j, &err) < 0 ||
	    (plan->all_local ? prepare_local(&j, &err) : prepare_hosts(&j, &err)) < 0) {
		mr_error("%s", err.msg);
		for (size_t i = 0; i < j.report.nr; i++)
			mr_error("  %s", j.report.v[i]);
		goto out;
	}
	guard_dirs(&j);
	if (plan->addr_note.len) /* the hosts are reached: only the ring's address is amiss */
		mr_warn("%s", mr_buf_cstr(&plan->addr_note));
	if (o->verbose)
		log_plan(&j);
	if (mr_sup_init(&sup, j.hal, plan->hf->nhosts, o->tag_output, plan->stdin_mode,
			j.deadline_ms > 0 ? MR_MAX(mr_ms_left(j.deadline_ms), (int64_t)1) : 0, &err) < 0) {
		mr_error("%s", err.msg);
		goto out;
	}
	sup_ok = true;
	sup.verbose = o->verbose;
	if (start_ranks(&j, &sup, &err) < 0) {
		mr_error("%s", err.msg);
		mr_sup_abort(&sup);
	}
	code = mr_sup_wait(&sup);
	/* a rank's own failure (not a signal, --timeout or 127 "not found") in a
	 * job whose ranks talk over the network between hosts */
	if (code > 0 && code < 127 && j.nhosts > 1 && plan->backend != MR_BACKEND_MPI)
		mr_warn("hint: " MR_HINT_DOCTOR_RANKS, doctor_opt(o), doctor_arg(o));
	for (size_t r = 0; r < plan->hf->nhosts; r++)
		if (sup.ranks[r].started && (!sup.ranks[r].done || sup.ranks[r].hal_rc < 0))
			j.hosts[j.host_of[r]].lost = true;
out:
	if (sup_ok)
		mr_sup_release(&sup);
	if (j.hal && j.hosts && plan->all_local)
		cleanup_local(&j);
	else if (j.hal && j.hosts)
		cleanup_hosts(&j);
	if (j.hal)
		mr_hal_free(j.hal);
	for (size_t k = 0; k < j.nhosts; k++)
		free(j.hosts[k].dir);
	free(j.hosts);
	free(j.host_of);
	mr_strvec_release(&j.report);
	return code;
}
