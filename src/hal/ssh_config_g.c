/*
 * ssh_config_g.c - the `ssh -G` resolver: runs of `ssh -G [-F FILE] DEST` (up to
 * SSH_G_PARALLEL at once, each bounded by SSH_G_TIMEOUT_MS), their answers or
 * errors cached in cfg->g, and an answer's "key value" lines read into raw
 * values. Apart from ssh_config.c because it is the one part that runs
 * processes and polls their pipes.
 */
#include "common/compat.h"
#include "common/array.h"
#include "hal/ssh_config_impl.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/spawn.h"
#include "common/timeutil.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define SSH_G_PARALLEL 32          /* `ssh -G` processes at once */
#define SSH_G_TIMEOUT_MS 10000     /* Match exec may run anything: do not wait forever */
#define SSH_G_OUT_MAX (1u << 20)

/* `ssh -G`'s lines ("key value", keys in lower case) into r; values point into text. */
int mr_sshcfg_collect_g(char *text, struct mr_ssh_host_cfg *h, struct raw_opts *r, const char **why)
{
	for (char *line = text, *next; line && *line; line = next) {
		char *v;
		struct cfg_opt o;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		v = strchr(line, ' ');
		if (!v)
			continue;
		*v++ = '\0';
		memset(&o, 0, sizeof(o));
		if (!strcmp(line, "hostname")) {
			r->hostname = v;
		} else if (!strcmp(line, "user")) {
			if (!h->user && !(h->user = strdup(v)))
				return -1;
		} else if (!strcmp(line, "port")) {
			o.key = K_PORT;
			if (mr_sshcfg_parse_value(&o, v, why) < 0)
				return -1;
			r->port = o.ival;
		} else if (!strcmp(line, "identityfile")) {
			if (mr_strvec_push(&r->ids, v) < 0)
				return -1;
		} else if (!strcmp(line, "certificatefile")) {
			if (mr_strvec_push(&r->certs, v) < 0)
				return -1;
		} else if (!strcmp(line, "userknownhostsfile")) {
			r->kh_set = true;
			if (mr_strvec_split(&r->kh, v, ' ', true) < 0)
				return -1;
		} else if (!strcmp(line, "stricthostkeychecking") || !strcmp(line, "connecttimeout") ||
			   !strcmp(line, "addressfamily") || !strcmp(line, "identitiesonly")) {
			o.key = line[0] == 's' ? K_STRICT : line[0] == 'c' ? K_TIMEOUT : line[0] == 'a' ? K_AF : K_IDONLY;
			if (mr_sshcfg_parse_value(&o, v, why) < 0)
				return -1;
			if (o.key == K_STRICT)
				r->strict = o.ival;
			else if (o.key == K_TIMEOUT)
				r->timeout_ms = o.ival;
			else if (o.key == K_AF)
				r->af = o.ival;
			else
				r->idonly = o.ival;
		} else if (!strcmp(line, "proxyjump")) {
			r->jump = v;
		} else if (!strcmp(line, "proxycommand")) {
			r->cmd = v;
		} else if (!strcmp(line, "identityagent")) {
			r->agent = v;
		} else if (!strcmp(line, "gssapiauthentication")) {
			r->gssapi = !strcmp(v, "yes") || !strcmp(v, "true");
		} else if (!strcmp(line, "pkcs11provider")) {
			r->pkcs11 = v;
		}
	}
	return 0;
}

struct g_entry *mr_sshcfg_g_find(struct mr_ssh_config *cfg, const char *dest)
{
	for (size_t i = 0; i < cfg->ng; i++)
		if (!strcmp(cfg->g[i].dest, dest))
			return &cfg->g[i];
	return NULL;
}

/* Appends an entry for dest; returns its index, or -1 when out of memory. */
static ssize_t g_add(struct mr_ssh_config *cfg, const char *dest)
{
	struct g_entry *ng = mr_array_grow(cfg->g, cfg->ng + 1, &cfg->g_alloc, sizeof(*ng));

	if (!ng)
		return -1;
	cfg->g = ng;
	memset(&cfg->g[cfg->ng], 0, sizeof(cfg->g[0]));
	if (!(cfg->g[cfg->ng].dest = strdup(dest)))
		return -1;
	return (ssize_t)cfg->ng++;
}

/*
 * One `ssh -G` in flight. It names its entry by index, not pointer: g_add for the
 * next destination may move cfg->g while earlier runs are still being collected.
 */
struct g_run {
	size_t e;
	pid_t pid;
	int fd[2];             /* stdout, stderr (read ends); -1 when closed */
	struct mr_buf out, err;
};

/* Start `ssh -G [-F FILE] DEST` for e (a failure goes into e->err). */
static void g_start(struct mr_ssh_config *cfg, struct g_run *r)
{
	struct g_entry *e = &cfg->g[r->e];
	char *argv[6];
	size_t a = 0;
	struct mr_spawn_opts so;
	int fds[3];

	r->pid = -1;
	r->fd[0] = r->fd[1] = -1;
	argv[a++] = (char *)"ssh";
	argv[a++] = (char *)"-G";
	if (cfg->file) {
		argv[a++] = (char *)"-F";
		argv[a++] = cfg->file;
	}
	argv[a++] = e->dest; /* validated by mr_ssh_dest_split: no leading '-' */
	argv[a] = NULL;
	memset(&so, 0, sizeof(so));
	so.file = cfg->ssh_bin;
	so.argv = argv;
	so.what = "ssh -G";
	if (mr_spawn_piped(&so, false, &r->pid, fds, &e->err) < 0) {
		r->pid = -1;
		e->done = true;
		return;
	}
	r->fd[0] = fds[1];
	r->fd[1] = fds[2];
}

/* Collect every started run's output and exit (they run at the same time). */
static void g_collect(struct mr_ssh_config *cfg, struct g_run *runs, size_t n)
{
	int64_t end = mr_now_ms() + SSH_G_TIMEOUT_MS;
	struct pollfd pfd[2 * SSH_G_PARALLEL];
	struct g_run *who[2 * SSH_G_PARALLEL];
	int which[2 * SSH_G_PARALLEL];

	for (;;) {
		nfds_t np = 0;
		int rc;

		for (size_t i = 0; i < n; i++)
			for (int k = 0; k < 2; k++)
				if (runs[i].fd[k] >= 0) {
					pfd[np].fd = runs[i].fd[k];
					pfd[np].events = POLLIN;
					who[np] = &runs[i];
					which[np++] = k;
				}
		if (!np || mr_now_ms() >= end)
			break;
		rc = poll(pfd, np, mr_ms_left(end));
		if (rc < 0 && errno != EINTR)
			break;
		for (nfds_t i = 0; rc > 0 && i < np; i++) {
			struct g_run *r = who[i];
			struct mr_buf *b = which[i] ? &r->err : &r->out;
			char buf[8192];
			ssize_t got;

			if (!pfd[i].revents)
				continue;
			got = read(pfd[i].fd, buf, sizeof(buf));
			if (got > 0 && b->len < SSH_G_OUT_MAX)
				mr_buf_append(b, buf, (size_t)got);
			else if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN))
				mr_close(&r->fd[which[i]]);
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct g_run *r = &runs[i];
		struct g_entry *e = &cfg->g[r->e];
		int status = 0;
		bool late = r->fd[0] >= 0 || r->fd[1] >= 0;

		mr_close(&r->fd[0]);
		mr_close(&r->fd[1]);
		if (r->pid > 0) {
			if (late)
				kill(r->pid, SIGKILL);
			while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR)
				;
		}
		if (e->done) {
			/* failed to start: e->err holds why */
		} else if (late) {
			mr_err_set(&e->err, MESHRUN_E_TIMEOUT, "ssh -G for '%s': no answer within %d ms "
				   "(a 'Match exec' that hangs?)", e->dest, SSH_G_TIMEOUT_MS);
		} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			const char *m = mr_buf_cstr(&r->err);
			int len = (int)strcspn(m, "\n");

			/* getopt's words: "unknown" (OpenSSH's own), "illegal" (BSD), "invalid" (glibc) */
			e->no_g = strstr(m, "option -- G") || strstr(m, "option -- 'G'");

			mr_err_set(&e->err, MESHRUN_E_PARSE, "ssh -G for '%s' failed%s%.*s", e->dest,
				   len ? ": " : "", len, m);
		} else if (!(e->text = mr_buf_detach(&r->out, NULL))) {
			mr_err_set(&e->err, MESHRUN_E_NOMEM, "ssh -G for '%s': out of memory", e->dest);
		}
		e->done = true;
		mr_buf_release(&r->out);
		mr_buf_release(&r->err);
	}
}

void mr_ssh_config_prefetch(struct mr_ssh_config *cfg, const char *const *dests, size_t n)
{
	struct g_run runs[SSH_G_PARALLEL];
	size_t i = 0;

	if (!cfg || !cfg->ssh_bin)
		return;
	while (i < n) {
		size_t k = 0;

		memset(runs, 0, sizeof(runs));
		for (; i < n && k < SSH_G_PARALLEL; i++) {
			struct meshrun_err e = MESHRUN_ERR_INIT;
			ssize_t idx;

			if (mr_ssh_dest_split(dests[i], NULL, NULL, &e) < 0 || mr_sshcfg_g_find(cfg, dests[i]))
				continue; /* the lookup reports a bad destination */
			idx = g_add(cfg, dests[i]);
			if (idx < 0) {
				i = n; /* out of memory: the lookups try one by one */
				break;
			}
			runs[k].e = (size_t)idx;
			g_start(cfg, &runs[k]);
			k++;
		}
		g_collect(cfg, runs, k);
	}
}
