/*
 * launchd.c - see launchd.h: the simulated hosts' launchd and launchctl.
 *
 * One supervisor process per loaded job (setsid, stdio on /dev/null): it runs
 * the job at load (RunAtLoad), on every StartInterval tick and on kickstart,
 * never twice at once, and records its state; SIGTERM (bootout) stops the job
 * and the supervisor. It waits with sigtimedwait() on its blocked signals, so
 * no signal is lost between two waits (Linux only, as meshsim is).
 */
#include "common/compat.h"
#include "sim/launchd.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/shquote.h"
#include "common/timeutil.h"
#include "common/xalloc.h"

#define PLIST_MAX ((size_t)1 << 20)
#define EX_CONFIG_STATUS 78
/* launchd's PATH for daemons; the host's shims go first, as in its ssh sessions */
#define LAUNCHD_PATH "/usr/bin:/bin:/usr/sbin:/sbin"
#define DEFAULT_EXIT_TIMEOUT 20

/* ---- the job a plist describes ------------------------------------------------ */

static int want_type(const struct mr_plist *v, const char *key, enum mr_plist_type t,
		     struct meshrun_err *err)
{
	if (v->type == t)
		return 0;
	return mr_err_set(err, MESHRUN_E_INVAL, "%s: expected a %s, got a %s", key,
			  mr_plist_type_name(t), mr_plist_type_name(v->type));
}

static int opt_string(const struct mr_plist *p, const char *key, char **out, struct meshrun_err *err)
{
	const struct mr_plist *v = mr_plist_get(p, key);

	if (!v)
		return 0;
	if (want_type(v, key, MR_PLIST_STRING, err) < 0)
		return MESHRUN_E_INVAL;
	if (!v->text[0])
		return mr_err_set(err, MESHRUN_E_INVAL, "%s: empty", key);
	*out = xstrdup(v->text);
	return 0;
}

static int opt_bool(const struct mr_plist *p, const char *key, bool *out, struct meshrun_err *err)
{
	const struct mr_plist *v = mr_plist_get(p, key);

	if (!v)
		return 0;
	if (want_type(v, key, MR_PLIST_BOOL, err) < 0)
		return MESHRUN_E_INVAL;
	*out = v->b;
	return 0;
}

static int opt_seconds(const struct mr_plist *p, const char *key, long long *out,
		       struct meshrun_err *err)
{
	const struct mr_plist *v = mr_plist_get(p, key);

	if (!v)
		return 0;
	if (want_type(v, key, MR_PLIST_INTEGER, err) < 0)
		return MESHRUN_E_INVAL;
	if (v->num < 1 || v->num > 365LL * 24 * 3600)
		return mr_err_set(err, MESHRUN_E_INVAL, "%s: %lld is not a number of seconds", key, v->num);
	*out = v->num;
	return 0;
}

/* The labels meshsim can keep state files for (a label names a file). */
static bool label_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 200 || s[0] == '.')
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
			return false;
	return true;
}

int mr_launchd_job_from_plist(const struct mr_plist *p, struct mr_launchd_job *job,
			      struct meshrun_err *err)
{
	/* keys meshsim simulates, or knows to be harmless here */
	static const char *const known[] = {
		"Label", "Program", "ProgramArguments", "RunAtLoad", "StartInterval",
		"StandardOutPath", "StandardErrorPath", "WorkingDirectory", "EnvironmentVariables",
		"Disabled", "AbandonProcessGroup", "ExitTimeOut", "ThrottleInterval", "ProcessType",
		"Nice", "LowPriorityIO", "UserName", "GroupName",
	};
	const struct mr_plist *v;
	int rc;

	memset(job, 0, sizeof(*job));
	job->exit_timeout = DEFAULT_EXIT_TIMEOUT;
	if (p->type != MR_PLIST_DICT)
		return mr_err_set(err, MESHRUN_E_INVAL, "the plist holds a %s, not a dictionary",
				  mr_plist_type_name(p->type));
	for (size_t i = 0; i < p->nkids; i++) {
		bool ok = false;
		for (size_t k = 0; k < ARRAY_SIZE(known) && !ok; k++)
			ok = !strcmp(p->kids[i].key, known[k]);
		if (!ok)
			return mr_err_set(err, MESHRUN_E_INVAL, "key '%.64s' is not simulated by meshsim",
					  p->kids[i].key);
	}
	v = mr_plist_get(p, "Label");
	if (!v)
		return mr_err_set(err, MESHRUN_E_INVAL, "no Label (required)");
	if ((rc = want_type(v, "Label", MR_PLIST_STRING, err)) < 0)
		return MESHRUN_E_INVAL;
	if (!label_ok(v->text))
		return mr_err_set(err, MESHRUN_E_INVAL,
				  "Label '%.64s': meshsim simulates labels of [A-Za-z0-9._-] only",
				  v->text);
	job->label = xstrdup(v->text);
	if ((rc = opt_string(p, "Program", &job->program, err)) < 0)
		goto fail;
	v = mr_plist_get(p, "ProgramArguments");
	if (v) {
		if ((rc = want_type(v, "ProgramArguments", MR_PLIST_ARRAY, err)) < 0)
			goto fail;
		for (size_t i = 0; i < v->nkids; i++) {
			if (v->kids[i].type != MR_PLIST_STRING) {
				rc = mr_err_set(err, MESHRUN_E_INVAL,
						"ProgramArguments[%zu]: expected a string, got a %s", i,
						mr_plist_type_name(v->kids[i].type));
				goto fail;
			}
			mr_strvec_push(&job->argv, v->kids[i].text);
		}
	}
	if (!job->program && !job->argv.nr) {
		rc = mr_err_set(err, MESHRUN_E_INVAL,
				"neither Program nor ProgramArguments (one is required)");
		goto fail;
	}
	if (!job->program) {
		if (!job->argv.v[0][0]) {
			rc = mr_err_set(err, MESHRUN_E_INVAL, "ProgramArguments[0]: empty");
			goto fail;
		}
		job->program = xstrdup(job->argv.v[0]);
	}
	if (!job->argv.nr)
		mr_strvec_push(&job->argv, job->program);
	if ((rc = opt_bool(p, "RunAtLoad", &job->run_at_load, err)) < 0 ||
	    (rc = opt_bool(p, "Disabled", &job->disabled, err)) < 0 ||
	    (rc = opt_seconds(p, "StartInterval", &job->start_interval, err)) < 0 ||
	    (rc = opt_seconds(p, "ExitTimeOut", &job->exit_timeout, err)) < 0 ||
	    (rc = opt_string(p, "StandardOutPath", &job->stdout_path, err)) < 0 ||
	    (rc = opt_string(p, "StandardErrorPath", &job->stderr_path, err)) < 0 ||
	    (rc = opt_string(p, "WorkingDirectory", &job->workdir, err)) < 0)
		goto fail;
	/* the simulated hosts run every job as root */
	for (int k = 0; k < 2; k++) {
		const char *key = k ? "GroupName" : "UserName", *want = k ? "wheel" : "root";
		v = mr_plist_get(p, key);
		if (v && (v->type != MR_PLIST_STRING || strcmp(v->text, want))) {
			rc = mr_err_set(err, MESHRUN_E_INVAL, "%s: only \"%s\" is simulated", key, want);
			goto fail;
		}
	}
	v = mr_plist_get(p, "EnvironmentVariables");
	if (v) {
		if ((rc = want_type(v, "EnvironmentVariables", MR_PLIST_DICT, err)) < 0)
			goto fail;
		for (size_t i = 0; i < v->nkids; i++) {
			if (v->kids[i].type != MR_PLIST_STRING || !v->kids[i].key[0] ||
			    strchr(v->kids[i].key, '=')) {
				rc = mr_err_set(err, MESHRUN_E_INVAL,
						"EnvironmentVariables: '%.64s' is not NAME with a string value",
						v->kids[i].key);
				goto fail;
			}
			mr_strvec_pushf(&job->env, "%s=%s", v->kids[i].key, v->kids[i].text);
		}
	}
	return 0;
fail:
	mr_launchd_job_release(job);
	return rc < 0 ? rc : MESHRUN_E_INVAL;
}

void mr_launchd_job_release(struct mr_launchd_job *job)
{
	free(job->label);
	free(job->program);
	free(job->stdout_path);
	free(job->stderr_path);
	free(job->workdir);
	mr_strvec_release(&job->argv);
	mr_strvec_release(&job->env);
	memset(job, 0, sizeof(*job));
}

int mr_launchd_check_file(const char *path, struct meshrun_err *err)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return mr_err_sys(err, "'%s'", path);
	if (!S_ISREG(st.st_mode))
		return mr_err_set(err, MESHRUN_E_INVAL, "'%s': not a regular file", path);
	if (st.st_uid != 0 || st.st_gid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)))
		return mr_err_set(err, MESHRUN_E_INVAL,
				  "'%s': Path had bad ownership/permissions (owner %ld:%ld, mode %04o; "
				  "a LaunchDaemon must be root:wheel and not group- or world-writable)",
				  path, (long)st.st_uid, (long)st.st_gid, (unsigned)(st.st_mode & 07777));
	return 0;
}

int mr_launchd_load_file(const char *path, struct mr_launchd_job *job, struct meshrun_err *err)
{
	struct mr_buf text = MR_BUF_INIT;
	struct mr_plist *p = NULL;
	int rc;

	rc = mr_launchd_check_file(path, err);
	if (rc == 0)
		rc = mr_read_file(path, PLIST_MAX, &text, err);
	if (rc == 0 && (rc = mr_plist_parse(mr_buf_cstr(&text), text.len, &p, err)) < 0)
		mr_err_prefix(err, "'%s'", path);
	if (rc == 0 && (rc = mr_launchd_job_from_plist(p, job, err)) < 0)
		mr_err_prefix(err, "'%s'", path);
	mr_plist_free(p);
	mr_buf_release(&text);
	return rc;
}

/* ---- state files ---------------------------------------------------------------- */

struct launchd {
	const char *dir;   /* HOST_DIR */
	char *jobs;        /* HOST_DIR/live/launchd */
	int lockfd;
};

static int ld_open(struct launchd *ld, const char *host_dir, struct meshrun_err *err)
{
	char *live = xasprintf("%s/live", host_dir), *lock;

	ld->dir = host_dir;
	ld->jobs = xasprintf("%s/launchd", live);
	ld->lockfd = -1;
	if ((mkdir(live, 0755) < 0 && errno != EEXIST) || (mkdir(ld->jobs, 0755) < 0 && errno != EEXIST)) {
		free(live);
		return mr_err_sys(err, "mkdir '%s'", ld->jobs);
	}
	free(live);
	lock = xasprintf("%s/.lock", ld->jobs);
	ld->lockfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	free(lock);
	if (ld->lockfd < 0 || flock(ld->lockfd, LOCK_EX) < 0)
		return mr_err_sys(err, "lock '%s/.lock'", ld->jobs);
	return 0;
}

static void ld_close(struct launchd *ld)
{
	mr_close(&ld->lockfd);
	MR_FREE(ld->jobs);
}

/* A loaded job's record: its plist and its supervisor. */
struct record {
	char path[4096];
	pid_t pid;
};

static bool read_record(const struct launchd *ld, const char *label, struct record *rec)
{
	char *p = xasprintf("%s/%s", ld->jobs, label);
	struct mr_buf b = MR_BUF_INIT;
	bool ok = false;

	memset(rec, 0, sizeof(*rec));
	if (label_ok(label) && mr_read_file(p, 8192, &b, NULL) == 0) {
		const char *s = mr_buf_cstr(&b), *nl = strchr(s, '\n');
		long pid = 0;

		if (!strncmp(s, "path ", 5) && nl && sscanf(nl + 1, "pid %ld", &pid) == 1 && pid > 0) {
			snprintf(rec->path, sizeof(rec->path), "%.*s", (int)(nl - s - 5), s + 5);
			rec->pid = (pid_t)pid;
			ok = true;
		}
	}
	mr_buf_release(&b);
	free(p);
	return ok;
}

/* The supervisor's state file: "runs N", "pid P" (0: not running), "last E" (-1: never). */
struct jstate {
	unsigned long runs;
	long pid;
	int last;
};

static void read_jstate(const struct launchd *ld, const char *label, struct jstate *js)
{
	char *p = xasprintf("%s/%s.state", ld->jobs, label);
	struct mr_buf b = MR_BUF_INIT;

	js->runs = 0;
	js->pid = 0;
	js->last = -1;
	if (mr_read_file(p, 4096, &b, NULL) == 0 &&
	    sscanf(mr_buf_cstr(&b), "runs %lu pid %ld last %d", &js->runs, &js->pid, &js->last) != 3) {
		js->runs = 0;
		js->pid = 0;
		js->last = -1;
	}
	mr_buf_release(&b);
	free(p);
}

static void write_jstate(const char *jobs, const char *label, const struct jstate *js)
{
	char *p = xasprintf("%s/%s.state", jobs, label);
	char line[128];
	int n = snprintf(line, sizeof(line), "runs %lu pid %ld last %d\n", js->runs, js->pid, js->last);

	mr_write_file(p, line, (size_t)n, 0644, NULL);
	free(p);
}

static void remove_record(const struct launchd *ld, const char *label)
{
	char *p = xasprintf("%s/%s", ld->jobs, label), *s = xasprintf("%s.state", p);

	unlink(p);
	unlink(s);
	free(s);
	free(p);
}

/* ---- the supervisor ------------------------------------------------------------- */

/* fd of path opened for appending, else of /dev/null when path is NULL; -1 on failure. */
static int open_out(const char *path)
{
	return open(path ? path : "/dev/null", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

/* The job's process (in the child of fork): never returns. */
static void __attribute__((noreturn)) exec_job(const struct mr_launchd_job *job, const char *host_dir)
{
	struct mr_strvec env = MR_STRVEC_INIT;
	extern char **environ;
	sigset_t none;
	int in, out, errfd;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	setpgid(0, 0);
	in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	out = open_out(job->stdout_path);
	errfd = job->stderr_path ? open_out(job->stderr_path) : open_out(NULL);
	if (in < 0 || out < 0 || errfd < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0)
		_exit(EX_CONFIG_STATUS);
	if (chdir(job->workdir ? job->workdir : "/") < 0)
		_exit(EX_CONFIG_STATUS);
	mr_strvec_pushf(&env, "PATH=%s/bin:" LAUNCHD_PATH, host_dir);
	mr_strvec_pushf(&env, "XPC_SERVICE_NAME=%s", job->label);
	/* the shims' stand-in for uid 0 (render.h: sudo): daemons run as root */
	mr_strvec_push(&env, "MESHSIM_ROOT=1");
	for (size_t i = 0; i < job->env.nr; i++) {
		const char *eq = strchr(job->env.v[i], '=');
		char *name = xstrndup(job->env.v[i], (size_t)(eq - job->env.v[i]));
		mr_strvec_setenv(&env, name, eq + 1);
		free(name);
	}
	environ = env.v;
	execvp(job->program, job->argv.v);
	_exit(EX_CONFIG_STATUS);
}

/* SIGTERM to the job's process group, SIGKILL after timeout_s; reaps it. */
static int stop_job(pid_t pid, long long timeout_s)
{
	int64_t deadline = mr_now_ms() + timeout_s * 1000;
	int status = 0;

	kill(-pid, SIGTERM);
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (mr_ms_left(deadline) <= 0) {
			kill(-pid, SIGKILL);
			waitpid(pid, &status, 0);
			break;
		}
		mr_sleep_ms(10);
	}
	return status;
}

static int exit_code(int status)
{
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void __attribute__((noreturn)) supervise(const char *jobs, const char *host_dir,
				  const struct mr_launchd_job *job)
{
	struct jstate js = { 0, 0, -1 };
	int64_t next = job->start_interval ? mr_now_ms() + job->start_interval * 1000 : -1;
	bool run_now = job->run_at_load, rerun = false;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigprocmask(SIG_BLOCK, &set, NULL);
	write_jstate(jobs, job->label, &js);
	for (;;) {
		struct timespec ts;
		siginfo_t si;
		int sig;

		if (run_now && !js.pid) {
			pid_t pid = fork();
			if (pid == 0)
				exec_job(job, host_dir);
			if (pid > 0) {
				js.pid = pid;
				js.runs++;
			}
			write_jstate(jobs, job->label, &js);
		}
		run_now = false;
		if (next >= 0) {
			int64_t left = MR_MAX(mr_ms_left(next), 0);
			ts.tv_sec = (time_t)(left / 1000);
			ts.tv_nsec = (long)(left % 1000) * 1000000L;
		}
		sig = sigtimedwait(&set, &si, next >= 0 ? &ts : NULL);
		if (sig < 0 && errno == EAGAIN) {
			/* a tick: run unless still running (launchd never runs two) */
			run_now = true;
			next += job->start_interval * 1000;
			if (mr_ms_left(next) <= 0)
				next = mr_now_ms() + job->start_interval * 1000;
		} else if (sig == SIGCHLD) {
			int status;
			pid_t pid;
			while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
				if (pid == js.pid) {
					js.pid = 0;
					js.last = exit_code(status);
					write_jstate(jobs, job->label, &js);
				}
			if (rerun) {
				run_now = true;
				rerun = false;
			}
		} else if (sig == SIGUSR1) {
			run_now = true;
		} else if (sig == SIGUSR2) { /* kickstart -k */
			if (js.pid) {
				kill(-(pid_t)js.pid, SIGTERM);
				rerun = true;
			} else {
				run_now = true;
			}
		} else if (sig == SIGTERM) {
			if (js.pid)
				stop_job((pid_t)js.pid, job->exit_timeout);
			_exit(0);
		}
	}
}

/* Start the supervisor of job (detached) and record it. */
static int start_job(const struct launchd *ld, const char *path, const struct mr_launchd_job *job,
		     struct meshrun_err *err)
{
	char *rec = xasprintf("%s/%s", ld->jobs, job->label), *text;
	pid_t pid;
	int rc;

	pid = fork();
	if (pid < 0) {
		free(rec);
		return mr_err_sys(err, "fork");
	}
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);
		setsid();
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
		}
		for (int i = 3; i < 1024; i++)
			close(i);
		supervise(ld->jobs, ld->dir, job);
	}
	text = xasprintf("path %s\npid %ld\n", path, (long)pid);
	rc = mr_write_file(rec, text, strlen(text), 0644, err);
	free(text);
	free(rec);
	return rc;
}

/* Whether pid runs: an exited supervisor is not ours to reap (its parent is
 * whoever adopted it), so a zombie counts as gone. */
static bool alive(pid_t pid)
{
	char path[64], st[256];
	FILE *f;
	bool zombie = false;

	if (kill(pid, 0) < 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	f = fopen(path, "r");
	if (f && fgets(st, sizeof(st), f)) {
		const char *rp = strrchr(st, ')'); /* "pid (comm) S ..." */
		zombie = rp && rp[1] == ' ' && rp[2] == 'Z';
	}
	if (f)
		fclose(f);
	return !zombie;
}

/* Stop a loaded job (its supervisor stops the job first) and forget it. */
static void stop_supervisor(const struct launchd *ld, const char *label, const struct record *rec)
{
	int64_t deadline = mr_now_ms() + (DEFAULT_EXIT_TIMEOUT + 5) * 1000;

	if (kill(rec->pid, SIGTERM) == 0)
		while (alive(rec->pid) && mr_ms_left(deadline) > 0)
			mr_sleep_ms(10);
	remove_record(ld, label);
}

/* ---- launchctl ------------------------------------------------------------------ */

static const char usage[] =
	"meshsim simulates: launchctl bootstrap system PATH... | bootout system/LABEL | "
	"bootout system PATH... | print system/LABEL | kickstart [-k] system/LABEL | list";

/* "system/LABEL" -> LABEL, else NULL. */
static const char *system_target(const char *arg)
{
	return !strncmp(arg, "system/", 7) && arg[7] ? arg + 7 : NULL;
}

static int bootstrap(struct launchd *ld, int argc, char **argv)
{
	int code = 0;

	for (int i = 0; i < argc; i++) {
		struct meshrun_err e = MESHRUN_ERR_INIT;
		struct mr_launchd_job job;
		struct record rec;

		if (mr_launchd_load_file(argv[i], &job, &e) < 0) {
			fprintf(stderr, "Bootstrap failed: 5: Input/output error\nmeshsim launchd: %s\n", e.msg);
			code = 5;
			continue;
		}
		if (read_record(ld, job.label, &rec)) {
			fprintf(stderr, "Bootstrap failed: 5: Input/output error\n"
				"meshsim launchd: service '%s' is already loaded (from %s)\n", job.label,
				rec.path);
			code = 5;
		} else if (start_job(ld, argv[i], &job, &e) < 0) {
			fprintf(stderr, "Bootstrap failed: 5: Input/output error\nmeshsim launchd: %s\n", e.msg);
			code = 5;
		}
		mr_launchd_job_release(&job);
	}
	return code;
}

/* The label loaded from path, or NULL (static buffer). */
static const char *label_of_path(const struct launchd *ld, const char *path)
{
	static char label[256];
	DIR *d = opendir(ld->jobs);
	struct dirent *e;
	const char *found = NULL;

	while (d && !found && (e = readdir(d))) {
		struct record rec;
		size_t n = strlen(e->d_name);
		if (e->d_name[0] == '.' || (n > 6 && !strcmp(e->d_name + n - 6, ".state")))
			continue;
		if (read_record(ld, e->d_name, &rec) && !strcmp(rec.path, path)) {
			snprintf(label, sizeof(label), "%s", e->d_name);
			found = label;
		}
	}
	if (d)
		closedir(d);
	return found;
}

static int bootout(struct launchd *ld, int argc, char **argv)
{
	int code = 0;

	if (argc == 1 && !system_target(argv[0])) {
		fprintf(stderr, "launchctl: %s\n", usage);
		return 64;
	}
	for (int i = argc == 1 ? 0 : 1; i < argc; i++) {
		const char *label = argc == 1 ? system_target(argv[0]) : label_of_path(ld, argv[i]);
		struct record rec;

		if (!label || !read_record(ld, label, &rec)) {
			fprintf(stderr, "Boot-out failed: 113: Could not find specified service\n");
			code = 113;
			continue;
		}
		stop_supervisor(ld, label, &rec);
	}
	return code;
}

static int print_job(struct launchd *ld, const char *label)
{
	struct mr_launchd_job job;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct record rec;
	struct jstate js;

	if (!read_record(ld, label, &rec)) {
		fprintf(stderr, "Could not find service \"%s\" in domain for system\n", label);
		return 113;
	}
	read_jstate(ld, label, &js);
	printf("system/%s = {\n\tactive count = %d\n\tpath = %s\n\tstate = %s\n\n", label,
	       js.pid ? 1 : 0, rec.path, js.pid ? "running" : "not running");
	/* what the plist says now (launchd keeps what it loaded; meshsim rereads it) */
	if (mr_launchd_load_file(rec.path, &job, &e) == 0) {
		printf("\tprogram = %s\n\targuments = {\n", job.program);
		for (size_t i = 0; i < job.argv.nr; i++)
			printf("\t\t%s\n", job.argv.v[i]);
		printf("\t}\n\n");
		if (job.stdout_path)
			printf("\tstdout path = %s\n", job.stdout_path);
		if (job.stderr_path)
			printf("\tstderr path = %s\n", job.stderr_path);
		if (job.start_interval)
			printf("\trun interval = %lld seconds\n", job.start_interval);
		mr_launchd_job_release(&job);
	}
	printf("\truns = %lu\n", js.runs);
	if (js.pid)
		printf("\tpid = %ld\n", js.pid);
	if (js.last < 0)
		printf("\tlast exit code = (never exited)\n}\n");
	else
		printf("\tlast exit code = %d\n}\n", js.last);
	return 0;
}

static int list_jobs(struct launchd *ld)
{
	struct dirent **names = NULL;
	int n = scandir(ld->jobs, &names, NULL, alphasort);

	printf("PID\tStatus\tLabel\n");
	for (int i = 0; i < n; i++) {
		struct record rec;
		struct jstate js;

		if (read_record(ld, names[i]->d_name, &rec)) {
			read_jstate(ld, names[i]->d_name, &js);
			if (js.pid)
				printf("%ld\t-\t%s\n", js.pid, names[i]->d_name);
			else
				printf("-\t%d\t%s\n", js.last < 0 ? 0 : js.last, names[i]->d_name);
		}
		free(names[i]);
	}
	free(names);
	return 0;
}

static int kickstart(struct launchd *ld, int argc, char **argv)
{
	bool kill_first = argc == 2 && !strcmp(argv[0], "-k");
	const char *label = argc >= 1 ? system_target(argv[argc - 1]) : NULL;
	struct record rec;

	if (!label || argc > 2 || (argc == 2 && !kill_first)) {
		fprintf(stderr, "launchctl: %s\n", usage);
		return 64;
	}
	if (!read_record(ld, label, &rec)) {
		fprintf(stderr, "Could not find service \"%s\" in domain for system\n", label);
		return 113;
	}
	kill(rec.pid, kill_first ? SIGUSR2 : SIGUSR1);
	return 0;
}

int mr_launchd_launchctl(const char *host_dir, int argc, char **argv)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct launchd ld;
	const char *verb = argc ? argv[0] : "";
	int code;

	if (argc == 0) {
		fprintf(stderr, "Usage: launchctl <subcommand> ... | help [subcommand]\n%s\n", usage);
		return 64;
	}
	if (!strcmp(verb, "load") || !strcmp(verb, "unload")) {
		fprintf(stderr, "launchctl: the legacy '%s' is not simulated; %s\n", verb, usage);
		return 1;
	}
	if (strcmp(verb, "bootstrap") && strcmp(verb, "bootout") && strcmp(verb, "print") &&
	    strcmp(verb, "kickstart") && strcmp(verb, "list")) {
		fprintf(stderr, "Unrecognized subcommand: %s\n%s\n", verb, usage);
		return 64;
	}
	if ((!strcmp(verb, "bootstrap") && (argc < 3 || strcmp(argv[1], "system"))) ||
	    (!strcmp(verb, "bootout") && (argc < 2 || (argc > 2 && strcmp(argv[1], "system")))) ||
	    (!strcmp(verb, "print") && (argc != 2 || !system_target(argv[1]))) ||
	    (!strcmp(verb, "list") && argc != 1)) {
		fprintf(stderr, "launchctl %s: %s\n", verb, usage);
		return 64;
	}
	if (ld_open(&ld, host_dir, &e) < 0) {
		fprintf(stderr, "meshsim launchd: %s\n", e.msg);
		ld_close(&ld);
		return 1;
	}
	if (!strcmp(verb, "bootstrap"))
		code = bootstrap(&ld, argc - 2, argv + 2);
	else if (!strcmp(verb, "bootout"))
		code = bootout(&ld, argc - 1, argv + 1);
	else if (!strcmp(verb, "print"))
		code = print_job(&ld, system_target(argv[1]));
	else if (!strcmp(verb, "kickstart"))
		code = kickstart(&ld, argc - 1, argv + 1);
	else
		code = list_jobs(&ld);
	ld_close(&ld);
	return code;
}

/* ---- boot ----------------------------------------------------------------------- */

static void boot_log(const char *fmt, ...) MR_PRINTF(1, 2);
static void boot_log(const char *fmt, ...)
{
	char when[32];
	time_t now = time(NULL);
	struct tm tm;
	va_list ap;

	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
	printf("%s launchd: ", when);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static int plist_name(const struct dirent *e)
{
	size_t n = strlen(e->d_name);

	return e->d_name[0] != '.' && n > 6 && !strcmp(e->d_name + n - 6, ".plist");
}

int mr_launchd_boot_dir(const char *host_dir, const char *daemons)
{
	struct meshrun_err e = MESHRUN_ERR_INIT;
	struct dirent **names = NULL;
	struct launchd ld;
	DIR *d;
	int n, loaded = 0;

	if (ld_open(&ld, host_dir, &e) < 0) {
		boot_log("%s", e.msg);
		ld_close(&ld);
		return 1;
	}
	/* a boot starts with nothing loaded */
	d = opendir(ld.jobs);
	for (struct dirent *de; d && (de = readdir(d));)
		if (de->d_name[0] != '.') {
			char *p = xasprintf("%s/%s", ld.jobs, de->d_name);
			unlink(p);
			free(p);
		}
	if (d)
		closedir(d);
	n = scandir(daemons, &names, plist_name, alphasort);
	boot_log("boot: %d plist%s in %s", n < 0 ? 0 : n, n == 1 ? "" : "s", daemons);
	for (int i = 0; i < n; i++) {
		char *path = xasprintf("%s/%s", daemons, names[i]->d_name);
		struct mr_launchd_job job;
		struct record rec;

		mr_err_clear(&e);
		if (mr_launchd_load_file(path, &job, &e) < 0) {
			boot_log("%s: not loaded: %s", path, e.msg);
		} else {
			if (job.disabled)
				boot_log("%s: not loaded: Disabled", path);
			else if (read_record(&ld, job.label, &rec))
				boot_log("%s: not loaded: service '%s' is already loaded from %s", path,
					 job.label, rec.path);
			else if (start_job(&ld, path, &job, &e) < 0)
				boot_log("%s: not loaded: %s", path, e.msg);
			else {
				boot_log("loaded %s from %s", job.label, path);
				loaded++;
			}
			mr_launchd_job_release(&job);
		}
		free(path);
		free(names[i]);
	}
	free(names);
	boot_log("boot: %d loaded", loaded);
	ld_close(&ld);
	return 0;
}

int mr_launchd_boot(const char *host_dir)
{
	return mr_launchd_boot_dir(host_dir, "/Library/LaunchDaemons");
}

char *mr_launchd_program_path(void)
{
	char exe[4096], *dir, *p;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const char *const rel[] = { "meshsim-launchd", "../libexec/meshrun/meshsim-launchd" };

	if (n <= 0)
		return NULL;
	exe[n] = '\0';
	dir = strrchr(exe, '/');
	if (!dir)
		return NULL;
	*dir = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(rel); i++) {
		p = xasprintf("%s/%s", exe, rel[i]);
		if (access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
}

int mr_launchd_host_files(const char *host, const char *host_dir, struct meshrun_err *err)
{
	static const char *const dirs[] = { "Library", "Library/LaunchDaemons", "Library/LaunchAgents",
					    "Library/Logs", "Library/Application Support",
					    "Library/Preferences" };
	struct mr_buf b = MR_BUF_INIT;
	char *program = mr_launchd_program_path(), *p;
	int rc = 0;

	for (size_t i = 0; i < ARRAY_SIZE(dirs) && rc == 0; i++) {
		p = xasprintf("%s/%s", host_dir, dirs[i]);
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			rc = mr_err_sys(err, "mkdir '%s'", p);
		free(p);
	}
	if (rc == 0 && program)
		rc = mr_launchd_render_shim(host, host_dir, program, &b) < 0
			     ? mr_err_set(err, MESHRUN_E_INVAL, "launchctl shim of host '%s': unsafe path '%s'",
					  host, program)
			     : 0;
	else if (rc == 0)
		mr_buf_printf(&b, "#!/bin/sh\necho 'launchctl: meshsim-launchd was not found next to "
			      "meshsim (build the meshsim-launchd target)' >&2\nexit 1\n");
	p = xasprintf("%s/bin/launchctl", host_dir);
	if (rc == 0)
		rc = mr_write_file(p, b.p, b.len, 0755, err);
	free(p);
	free(program);
	mr_buf_release(&b);
	return rc;
}

int mr_launchd_render_shim(const char *host, const char *host_dir, const char *program,
			   struct mr_buf *out)
{
	if (!mr_is_shell_safe(host) || !mr_is_shell_safe(host_dir) || !mr_is_shell_safe(program)) {
		errno = EINVAL;
		return -1;
	}
	return mr_buf_printf(out, "#!/bin/sh\n# meshsim shim 'launchctl' of host '%s' (generated; sim/launchd.h)\n"
			     "exec '%s' launchctl '%s' \"$@\"\n", host, program, host_dir);
}
