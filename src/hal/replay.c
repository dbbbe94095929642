/*
 * replay.c - the replay hal backend: commands answered from a fixture folder
 * and scripted answers (replay.h has the contract and the fixture layout).
 */
#include "common/compat.h"
#include "common/array.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/json.h"
#include "common/shquote.h"
#include "common/timeutil.h"
#include "hal/hal_impl.h"
#include "hal/replay.h"

#include <dirent.h>
#include <poll.h>
#include <sys/stat.h>

#define REPLAY_MAX_FILE ((size_t)16 << 20)
#define REPLAY_MAX_CLUSTER ((size_t)4 << 20)

struct replay_rule {
	char *host;          /* NULL: every host */
	char *pattern;       /* without the trailing '*' when prefix */
	bool prefix;
	int status;          /* < 0: -signal */
	char *out, *errout;  /* may be NULL */
	int delay_ms;
	int fail_code;
};

struct replay_log {
	char *host;
	char *cmd;
};

struct mr_replay {
	char *dir;           /* fixture folder or NULL */
	bool closed;         /* host set closed: unknown hosts fail */
	char **hosts;
	size_t nhosts, hosts_alloc;
	struct replay_rule *rules;
	size_t nrules, rules_alloc;
	struct replay_log *log;
	size_t nlog, log_alloc;
};

/* One fixture command: the joined command and the file that answers it. */
static const struct {
	const char *cmd;
	const char *file;
} fixture_cmds[] = {
	{ "system_profiler SPThunderboltDataType -json", "system_profiler.json" },
	{ "networksetup -listallhardwareports", "networksetup.txt" },
	{ "ibv_devices", "ibv_devices.txt" },
};

/* --- the script --- */

int mr_replay_new(struct mr_replay **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : MESHRUN_E_NOMEM;
}

void mr_replay_log_clear(struct mr_replay *rp)
{
	for (size_t i = 0; i < rp->nlog; i++) {
		free(rp->log[i].host);
		free(rp->log[i].cmd);
	}
	rp->nlog = 0;
}

void mr_replay_free(struct mr_replay *rp)
{
	if (!rp)
		return;
	mr_replay_log_clear(rp);
	free(rp->log);
	for (size_t i = 0; i < rp->nrules; i++) {
		free(rp->rules[i].host);
		free(rp->rules[i].pattern);
		free(rp->rules[i].out);
		free(rp->rules[i].errout);
	}
	free(rp->rules);
	for (size_t i = 0; i < rp->nhosts; i++)
		free(rp->hosts[i]);
	free(rp->hosts);
	free(rp->dir);
	free(rp);
}

/* Make room for one more element of size sz in *v (nr used, *alloc allocated). */
static int grow(void **v, size_t nr, size_t *alloc, size_t sz)
{
	void *p = mr_array_grow(*v, nr + 1, alloc, sz);

	if (!p)
		return -1;
	*v = p;
	return 0;
}

static bool host_known(const struct mr_replay *rp, const char *host)
{
	if (!rp->closed)
		return true;
	for (size_t i = 0; i < rp->nhosts; i++)
		if (strcmp(rp->hosts[i], host) == 0)
			return true;
	return false;
}

int mr_replay_add_host(struct mr_replay *rp, const char *host)
{
	char *s;

	if (!host || !mr_is_hostname(host))
		return MESHRUN_E_INVAL;
	rp->closed = true;
	for (size_t i = 0; i < rp->nhosts; i++)
		if (strcmp(rp->hosts[i], host) == 0)
			return 0;
	if (grow((void **)&rp->hosts, rp->nhosts, &rp->hosts_alloc, sizeof(*rp->hosts)) < 0)
		return MESHRUN_E_NOMEM;
	s = strdup(host);
	if (!s)
		return MESHRUN_E_NOMEM;
	rp->hosts[rp->nhosts++] = s;
	return 0;
}

size_t mr_replay_host_count(const struct mr_replay *rp)
{
	return rp->nhosts;
}

const char *mr_replay_host(const struct mr_replay *rp, size_t i)
{
	return i < rp->nhosts ? rp->hosts[i] : NULL;
}

static int dup_or_null(char **dst, const char *src)
{
	*dst = NULL;
	if (!src)
		return 0;
	*dst = strdup(src);
	return *dst ? 0 : -1;
}

int mr_replay_add(struct mr_replay *rp, const char *host, const char *pattern, int status,
		  const char *out, const char *errout, int delay_ms, int fail_code)
{
	struct replay_rule r;
	size_t plen;

	if (!rp || !host || !pattern || fail_code > 0 || status > 255 || status < -64)
		return MESHRUN_E_INVAL;
	memset(&r, 0, sizeof(r));
	plen = strlen(pattern);
	r.prefix = plen > 0 && pattern[plen - 1] == '*';
	r.status = status;
	r.delay_ms = delay_ms > 0 ? delay_ms : 0;
	r.fail_code = fail_code;
	if (grow((void **)&rp->rules, rp->nrules, &rp->rules_alloc, sizeof(*rp->rules)) < 0 ||
	    (strcmp(host, "*") != 0 && dup_or_null(&r.host, host) < 0) ||
	    !(r.pattern = strndup(pattern, r.prefix ? plen - 1 : plen)) ||
	    dup_or_null(&r.out, out) < 0 || dup_or_null(&r.errout, errout) < 0) {
		free(r.host);
		free(r.pattern);
		free(r.out);
		free(r.errout);
		return MESHRUN_E_NOMEM;
	}
	rp->rules[rp->nrules++] = r;
	return 0;
}

size_t mr_replay_log_count(const struct mr_replay *rp, const char *host)
{
	size_t n = 0;

	for (size_t i = 0; i < rp->nlog; i++)
		if (!host || strcmp(rp->log[i].host, host) == 0)
			n++;
	return n;
}

const char *mr_replay_log_cmd(const struct mr_replay *rp, const char *host, size_t i,
			      const char **host_out)
{
	for (size_t k = 0; k < rp->nlog; k++) {
		if (host && strcmp(rp->log[k].host, host) != 0)
			continue;
		if (i-- == 0) {
			if (host_out)
				*host_out = rp->log[k].host;
			return rp->log[k].cmd;
		}
	}
	if (host_out)
		*host_out = NULL;
	return NULL;
}

static int log_cmd(struct mr_replay *rp, const char *host, const char *cmd)
{
	struct replay_log e;

	if (grow((void **)&rp->log, rp->nlog, &rp->log_alloc, sizeof(*rp->log)) < 0)
		return -1;
	e.host = strdup(host);
	e.cmd = strdup(cmd);
	if (!e.host || !e.cmd) {
		free(e.host);
		free(e.cmd);
		return -1;
	}
	rp->log[rp->nlog++] = e;
	return 0;
}

/* --- loading a fixture folder --- */

static int load_cluster_hosts(struct mr_replay *rp, const char *path, const char *text,
			      size_t len, struct meshrun_err *err)
{
	struct mr_json_path jp = MR_JSON_PATH_INIT;
	const cJSON *hosts, *item;
	cJSON *root = NULL;
	size_t i = 0;
	int rc;

	rc = mr_json_parse(text, len, path, &root, err);
	if (rc < 0)
		return rc;
	hosts = root;
	if (cJSON_IsObject(root)) {
		hosts = mr_json_member(root, "hosts");
		if (!hosts) {
			rc = mr_json_missing(err, path, &jp, "hosts");
			goto out;
		}
		mr_json_path_key(&jp, "hosts");
	}
	rc = mr_json_want_array(hosts, path, &jp, err);
	if (rc < 0)
		goto out;
	cJSON_ArrayForEach(item, hosts) {
		const char *name = NULL;

		mr_json_path_index(&jp, i++);
		if (cJSON_IsObject(item)) {
			const cJSON *n = mr_json_member(item, "name");

			if (!n) {
				rc = mr_json_missing(err, path, &jp, "name");
				goto out;
			}
			mr_json_path_key(&jp, "name");
			rc = mr_json_want_string(n, path, &jp, &name, err);
			if (rc < 0)
				goto out;
		} else {
			rc = mr_json_want_string(item, path, &jp, &name, err);
			if (rc < 0)
				goto out;
		}
		rc = mr_replay_add_host(rp, name);
		if (rc == MESHRUN_E_INVAL) {
			rc = mr_json_err(err, path, &jp, "'%s' is not a valid host name", name);
			goto out;
		}
		if (rc < 0) {
			rc = mr_err_set(err, rc, "%s: out of memory", path);
			goto out;
		}
		if (cJSON_IsObject(item))
			mr_json_path_pop(&jp);
		mr_json_path_pop(&jp);
	}
	if (i == 0)
		rc = mr_json_err(err, path, &jp, "no hosts");
out:
	cJSON_Delete(root);
	return rc;
}

static int filter_dirs(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

static int load_subdir_hosts(struct mr_replay *rp, const char *dir, struct meshrun_err *err)
{
	struct dirent **names = NULL;
	int n = scandir(dir, &names, filter_dirs, alphasort);
	int rc = 0, found = 0;

	if (n < 0)
		return mr_err_sys(err, "read replay fixture folder '%s'", dir);
	for (int i = 0; i < n; i++) {
		char *sub = NULL;
		struct stat st;

		if (rc == 0 && asprintf(&sub, "%s/%s", dir, names[i]->d_name) < 0)
			rc = mr_err_set(err, MESHRUN_E_NOMEM, "read '%s': out of memory", dir);
		if (rc == 0 && stat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (!mr_is_hostname(names[i]->d_name))
				rc = mr_err_set(err, MESHRUN_E_PARSE,
						"replay fixture '%s': folder '%s' is not a valid host name",
						dir, names[i]->d_name);
			else if (mr_replay_add_host(rp, names[i]->d_name) < 0)
				rc = mr_err_set(err, MESHRUN_E_NOMEM, "read '%s': out of memory", dir);
			else
				found++;
		}
		free(sub);
		free(names[i]);
	}
	free(names);
	if (rc == 0 && found == 0)
		rc = mr_err_set(err, MESHRUN_E_NOTFOUND,
				"replay fixture '%s': no cluster.json and no host folders", dir);
	return rc;
}

int mr_replay_load(struct mr_replay *rp, const char *dir, struct meshrun_err *err)
{
	struct mr_buf text = MR_BUF_INIT;
	char *path = NULL;
	struct stat st;
	int rc;

	if (stat(dir, &st) < 0)
		return mr_err_sys(err, "open replay fixture folder '%s'", dir);
	if (!S_ISDIR(st.st_mode))
		return mr_err_set(err, MESHRUN_E_INVAL, "replay fixture '%s' is not a folder", dir);
	if (asprintf(&path, "%s/cluster.json", dir) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "load '%s': out of memory", dir);
	if (stat(path, &st) == 0) {
		rc = mr_read_file(path, REPLAY_MAX_CLUSTER, &text, err);
		if (rc == 0)
			rc = load_cluster_hosts(rp, path, mr_buf_cstr(&text), text.len, err);
	} else if (errno == ENOENT) {
		rc = load_subdir_hosts(rp, dir, err);
	} else {
		rc = mr_err_sys(err, "open '%s'", path);
	}
	if (rc == 0) {
		free(rp->dir);
		rp->dir = strdup(dir);
		if (!rp->dir)
			rc = mr_err_set(err, MESHRUN_E_NOMEM, "load '%s': out of memory", dir);
	}
	mr_buf_release(&text);
	free(path);
	return rc;
}

/* --- answering --- */

/* What a command gets: a result, or a failure. */
struct answer {
	int hal_rc;          /* 0, or a fail code / NOTFOUND / CONNECT */
	int status, sig;
	struct mr_buf out, errout;
	int delay_ms;
	bool scripted_fail;
};

static bool rule_matches(const struct replay_rule *r, const char *host, bool want_star,
			 const char *cmd)
{
	if (want_star ? r->host != NULL : (r->host == NULL || strcmp(r->host, host) != 0))
		return false;
	if (r->prefix)
		return strncmp(cmd, r->pattern, strlen(r->pattern)) == 0;
	return strcmp(cmd, r->pattern) == 0;
}

static const struct replay_rule *find_rule(const struct mr_replay *rp, const char *host,
					   bool want_star, const char *cmd)
{
	for (size_t i = rp->nrules; i-- > 0;)
		if (rule_matches(&rp->rules[i], host, want_star, cmd))
			return &rp->rules[i];
	return NULL;
}

static int answer_from_rule(const struct replay_rule *r, struct answer *a)
{
	a->hal_rc = r->fail_code;
	a->scripted_fail = r->fail_code < 0;
	a->status = r->status >= 0 ? r->status : 0;
	a->sig = r->status < 0 ? -r->status : 0;
	a->delay_ms = r->delay_ms;
	if ((r->out && mr_hal_append_capped(&a->out, r->out, strlen(r->out)) < 0) ||
	    (r->errout && mr_hal_append_capped(&a->errout, r->errout, strlen(r->errout)) < 0))
		return MESHRUN_E_NOMEM;
	return 0;
}

/*
 * Find the answer to cmd on host. Returns 0 with a filled (hal_rc may be < 0,
 * then err says why), or < 0 when the hal itself fails (out of memory, an
 * unreadable fixture file).
 */
static int find_answer(struct mr_replay *rp, const char *host, const char *cmd,
		       struct answer *a, struct meshrun_err *err)
{
	const struct replay_rule *r;

	r = find_rule(rp, host, false, cmd);
	if (r)
		return answer_from_rule(r, a);
	for (size_t i = 0; rp->dir && i < ARRAY_SIZE(fixture_cmds); i++) {
		char *path = NULL;
		struct stat st;
		int rc;

		if (strcmp(cmd, fixture_cmds[i].cmd) != 0)
			continue;
		if (asprintf(&path, "%s/%s/%s", rp->dir, host, fixture_cmds[i].file) < 0)
			return mr_err_set(err, MESHRUN_E_NOMEM, "replay: out of memory");
		if (stat(path, &st) < 0) {
			free(path);
			break; /* no such fixture file: try the defaults */
		}
		rc = mr_read_file(path, REPLAY_MAX_FILE, &a->out, err);
		free(path);
		if (rc < 0)
			a->hal_rc = rc; /* an unreadable fixture fails this command only */
		return 0;
	}
	r = find_rule(rp, host, true, cmd);
	if (r)
		return answer_from_rule(r, a);
	a->hal_rc = mr_err_set(err, MESHRUN_E_NOTFOUND, "replay: no answer for '%s' on host '%s'",
			       cmd, host);
	return 0;
}

/* The error text of a scripted failure. */
static void scripted_error(struct meshrun_err *err, int code, const char *cmd, const char *host,
			   int timeout_ms)
{
	switch (code) {
	case MESHRUN_E_CONNECT:
		mr_err_set(err, code, "connect to '%s' failed (replay)", host);
		break;
	case MESHRUN_E_TIMEOUT:
		mr_err_set(err, code, "command '%s' on '%s' timed out after %d ms (replay)", cmd, host,
			   timeout_ms);
		break;
	case MESHRUN_E_NOEXIT:
		mr_err_set(err, code, "command '%s' on '%s': no exit status received (replay)", cmd, host);
		break;
	default:
		mr_err_set(err, code, "command '%s' on '%s': %s (replay)", cmd, host, meshrun_strerror(code));
		break;
	}
}

/*
 * Decide what cmd (joined) on host gets: fills a (with a->hal_rc and err on a
 * failure) and logs the command when it reached the host. timeout_ms < 0: no
 * deadline (spawn). Returns < 0 only when the hal fails.
 */
static int replay_answer(struct mr_replay *rp, const char *host, const char *cmd,
			 int timeout_ms, struct answer *a, struct meshrun_err *err)
{
	int rc;

	if (!host_known(rp, host)) {
		a->hal_rc = mr_err_set(err, MESHRUN_E_CONNECT, "host '%s' is not in the replay fixture", host);
		return 0;
	}
	rc = find_answer(rp, host, cmd, a, err);
	if (rc < 0)
		return rc;
	if (a->hal_rc == MESHRUN_E_CONNECT && a->scripted_fail) {
		scripted_error(err, a->hal_rc, cmd, host, timeout_ms);
		return 0; /* never reached the host: not logged */
	}
	if (log_cmd(rp, host, cmd) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "replay: out of memory");
	if (a->scripted_fail)
		scripted_error(err, a->hal_rc, cmd, host, timeout_ms);
	else if (a->hal_rc == 0 && timeout_ms >= 0 && a->delay_ms > timeout_ms) {
		a->delay_ms = timeout_ms;
		a->hal_rc = mr_err_set(err, MESHRUN_E_TIMEOUT, "command '%s' on '%s' timed out after %d ms",
				       cmd, host, timeout_ms);
	}
	return 0;
}

/* --- the backend --- */

struct replay_hal {
	struct mr_hal base;
	struct mr_replay *rp;
};

struct replay_proc {
	struct mr_proc base;
	struct answer a;
	struct meshrun_err err;
	int64_t due;         /* output and exit are delivered from then on */
	int sig_sent;        /* a signal sent before due: exit with it at once */
};

#define to_replay_hal(h) mr_container_of(h, struct replay_hal, base)
#define to_replay_proc(p) mr_container_of(p, struct replay_proc, base)

static int joined(char *const *argv, struct mr_buf *b, struct meshrun_err *err)
{
	if (mr_shquote_argv(b, argv) < 0)
		return mr_err_set(err, MESHRUN_E_NOMEM, "replay: out of memory");
	return 0;
}

/*
 * The answered commands "run" in parallel: sleep until the longest delay is
 * over, reporting each command (mr_hal_cmd_done) once its own delay has passed,
 * shortest first, equal delays in batch order.
 */
static void report_in_time(struct mr_hal *hal, struct mr_hal_cmd *cmds, size_t n)
{
	int64_t slept = 0, cur = -1;

	for (;;) {
		int64_t next = -1;

		for (size_t i = 0; i < n; i++)
			if (cmds[i].elapsed_ms > cur && (next < 0 || cmds[i].elapsed_ms < next))
				next = cmds[i].elapsed_ms;
		if (next < 0)
			break;
		if (next > slept) {
			mr_sleep_ms((int)(next - slept));
			slept = next;
		}
		for (size_t i = 0; i < n; i++)
			if (cmds[i].elapsed_ms == next)
				mr_hal_cmd_done(hal, &cmds[i]);
		cur = next;
	}
}

static int replay_run(struct mr_hal *hal, struct mr_hal_cmd *cmds, size_t n,
		      struct meshrun_err *err)
{
	struct mr_replay *rp = to_replay_hal(hal)->rp;
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++) {
		struct mr_hal_cmd *c = &cmds[i];
		struct answer a = { 0 };
		struct mr_buf cmd = MR_BUF_INIT;
		const char *host = mr_hal_host_name(c->host);

		if (c->hal_rc < 0)
			continue;
		a.out.max = c->out.max;
		a.errout.max = c->errout.max;
		rc = joined(c->argv, &cmd, err);
		if (rc == 0)
			rc = replay_answer(rp, host, mr_buf_cstr(&cmd), mr_hal_cmd_timeout_ms(hal, c),
					   &a, &c->err);
		mr_buf_release(&cmd);
		if (rc < 0) {
			if (err && !err->code && c->err.code)
				*err = c->err;
			c->hal_rc = rc;
			mr_buf_release(&a.out);
			mr_buf_release(&a.errout);
			break;
		}
		c->hal_rc = a.hal_rc;
		if (a.hal_rc == 0) {
			c->status = a.status;
			c->signal = a.sig;
			c->out = a.out;
			c->errout = a.errout;
		} else {
			mr_buf_release(&a.out);
			mr_buf_release(&a.errout);
		}
		c->elapsed_ms = a.delay_ms;
	}
	if (rc == 0)
		report_in_time(hal, cmds, n); /* the commands "ran" in parallel */
	return rc;
}

static int replay_connect(struct mr_hal *hal, const char *const *hosts, size_t n,
			  struct meshrun_err *errs)
{
	struct mr_replay *rp = to_replay_hal(hal)->rp;
	int failed = 0;

	for (size_t i = 0; i < n; i++) {
		const char *host = mr_hal_host_name(hosts[i]);
		const struct replay_rule *r = NULL;

		if (!host_known(rp, host)) {
			mr_err_set(&errs[i], MESHRUN_E_CONNECT, "host '%s' is not in the replay fixture", host);
			failed++;
			continue;
		}
		for (size_t k = rp->nrules; k-- > 0 && !r;)
			if (rp->rules[k].prefix && rp->rules[k].pattern[0] == '\0' &&
			    rp->rules[k].fail_code == MESHRUN_E_CONNECT &&
			    (!rp->rules[k].host || strcmp(rp->rules[k].host, host) == 0))
				r = &rp->rules[k];
		if (r) {
			mr_err_set(&errs[i], MESHRUN_E_CONNECT, "connect to '%s' failed (replay)", host);
			failed++;
		}
	}
	return failed;
}

static int replay_spawn(struct mr_hal *hal, const struct mr_spawn *sp, struct mr_proc **out,
			struct meshrun_err *err)
{
	struct mr_replay *rp = to_replay_hal(hal)->rp;
	struct replay_proc *p = calloc(1, sizeof(*p));
	struct mr_buf cmd = MR_BUF_INIT;
	const char *host = mr_hal_host_name(sp->host);
	int rc;

	if (!p)
		return mr_err_set(err, MESHRUN_E_NOMEM, "replay: out of memory");
	rc = joined(sp->argv, &cmd, err);
	if (rc == 0)
		rc = replay_answer(rp, host, mr_buf_cstr(&cmd), -1, &p->a, &p->err);
	if (rc == 0 && (p->a.hal_rc == MESHRUN_E_NOTFOUND ||
			(p->a.hal_rc == MESHRUN_E_CONNECT && !p->a.scripted_fail)))
		rc = mr_err_set(err, p->a.hal_rc, "%s", p->err.msg); /* fails at once */
	if (rc == 0)
		rc = mr_proc_init(&p->base, hal, sp);
	mr_buf_release(&cmd);
	if (rc < 0) {
		if (err && !err->code && p->err.code)
			*err = p->err;
		mr_buf_release(&p->a.out);
		mr_buf_release(&p->a.errout);
		free(p);
		return rc;
	}
	p->due = mr_now_ms() + p->a.delay_ms;
	*out = &p->base;
	return 0;
}

static int replay_proc_write(struct mr_proc *p, const void *data, size_t len,
			     struct meshrun_err *err)
{
	return 0; /* a scripted process reads nothing: the bytes are dropped */
}

static int replay_proc_close_stdin(struct mr_proc *p, struct meshrun_err *err)
{
	return 0;
}

static int replay_proc_signal(struct mr_proc *p, int sig, struct meshrun_err *err)
{
	struct replay_proc *rpp = to_replay_proc(p);

	if (!rpp->sig_sent)
		rpp->sig_sent = sig;
	return 0;
}

static void replay_proc_finish(struct replay_proc *p)
{
	if (p->sig_sent) {
		mr_proc_deliver_exit(&p->base, 0, 0, p->sig_sent, NULL);
		return;
	}
	mr_proc_deliver_stdout(&p->base, p->a.out.p, p->a.out.len);
	mr_proc_deliver_stderr(&p->base, p->a.errout.p, p->a.errout.len);
	if (p->a.hal_rc < 0)
		mr_proc_deliver_exit(&p->base, p->a.hal_rc, 0, 0, &p->err);
	else
		mr_proc_deliver_exit(&p->base, 0, p->a.status, p->a.sig, NULL);
}

static int replay_poll(struct mr_hal *hal, int timeout_ms, struct meshrun_err *err)
{
	struct mr_pollset ps = MR_POLLSET_INIT;
	int64_t until = timeout_ms < 0 ? -1 : mr_now_ms() + timeout_ms;
	size_t first = 0;
	int rc = 0;

	for (;;) {
		int64_t next_due = -1, now;
		bool happened = false;
		int wait, pr;

		for (struct mr_proc *p = hal->procs; p; p = p->next) {
			struct replay_proc *rpp = to_replay_proc(p);
			int64_t due = rpp->sig_sent ? 0 : rpp->due;

			if (!p->exited && (next_due < 0 || due < next_due))
				next_due = due;
		}
		mr_pollset_reset(&ps);
		if (mr_hal_watch_add_pollfds(hal, &ps, &first) < 0) {
			rc = mr_err_set(err, MESHRUN_E_NOMEM, "replay poll: out of memory");
			break;
		}
		if (next_due < 0 && ps.nr == 0)
			break; /* nothing could ever happen */
		wait = mr_ms_left(until);
		if (next_due >= 0 && (wait < 0 || mr_ms_left(next_due) < wait))
			wait = mr_ms_left(next_due);
		pr = poll(ps.fds, ps.nr, wait);
		if (pr < 0) {
			if (errno != EINTR)
				rc = mr_err_sys(err, "poll over %zu watched fds", ps.nr);
			break;
		}
		happened = pr > 0;
		now = mr_now_ms();
		for (struct mr_proc *p = hal->procs; p; p = p->next) {
			struct replay_proc *rpp = to_replay_proc(p);

			if (!p->exited && (rpp->sig_sent || rpp->due <= now)) {
				replay_proc_finish(rpp);
				happened = true;
			}
		}
		mr_hal_watch_dispatch(hal, &ps, first);
		if (happened || mr_ms_left(until) == 0)
			break;
	}
	mr_pollset_release(&ps);
	return rc;
}

static void replay_proc_release(struct mr_proc *p)
{
	struct replay_proc *rpp = to_replay_proc(p);

	mr_buf_release(&rpp->a.out);
	mr_buf_release(&rpp->a.errout);
	mr_proc_release_common(p);
	free(rpp);
}

static void replay_free(struct mr_hal *hal)
{
	struct replay_hal *rh = to_replay_hal(hal);

	while (hal->procs)
		replay_proc_release(hal->procs);
	mr_replay_free(rh->rp);
	mr_hal_release_common(hal);
	free(rh);
}

static const struct mr_hal_ops replay_ops = {
	.name = "replay",
	.kind = MR_HAL_REPLAY,
	.run = replay_run,
	.connect = replay_connect,
	.spawn = replay_spawn,
	.proc_write = replay_proc_write,
	.proc_close_stdin = replay_proc_close_stdin,
	.proc_signal = replay_proc_signal,
	.poll = replay_poll,
	.proc_release = replay_proc_release,
	.free = replay_free,
};

int mr_hal_new_replay(struct mr_hal **out, struct mr_replay *rp, const struct mr_hal_opts *opts,
		      struct meshrun_err *err)
{
	struct replay_hal *rh;
	int rc;

	*out = NULL;
	if (!rp)
		return mr_err_set(err, MESHRUN_E_INVAL, "replay hal: no script given");
	rh = calloc(1, sizeof(*rh));
	if (!rh) {
		mr_replay_free(rp);
		return mr_err_set(err, MESHRUN_E_NOMEM, "replay hal: out of memory");
	}
	rc = mr_hal_init(&rh->base, &replay_ops, opts);
	if (rc < 0) {
		mr_replay_free(rp);
		free(rh);
		return mr_err_set(err, rc, "replay hal: out of memory");
	}
	rh->rp = rp;
	*out = &rh->base;
	return 0;
}

struct mr_replay *mr_hal_replay(struct mr_hal *hal)
{
	return hal && hal->ops == &replay_ops ? to_replay_hal(hal)->rp : NULL;
}
