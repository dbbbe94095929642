/*
 * sim/cmds.c - `meshsim down | status | exec | gen` and the helpers every
 * subcommand shares (`meshsim fault` is cmd_fault.c, `up` is up.c).
 */
#include "common/compat.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/num.h"
#include "common/opt.h"
#include "common/shquote.h"
#include "common/timeutil.h"
#include "common/xalloc.h"
#include "sim/cmd.h"
#include "sim/cmdopts.h"
#include "sim/faults.h"
#include "sim/live.h"
#include "sim/login.h"
#include "sim/net.h"
#include "sim/plan.h"
#include "sim/proc.h"
#include "sim/render.h"
#include "sim/state.h"
#include "fixture/fixture.h"

int mr_sim_parse_args(enum mr_sim_sub sub, struct mr_sim_args *a, int argc, char **argv,
		      struct mr_strvec *rest, size_t min_pos, size_t max_pos, unsigned flags,
		      bool *done)
{
	const struct mr_optdoc_cmd *doc = mr_sim_sub_doc(sub);
	const char *cmd = doc->name;
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_opt opts[MR_SIM_MAX_OPTS];
	int rc;

	mr_sim_sub_opts(sub, a, opts);
	rc = mr_opt_parse(opts, argc, argv, flags, NULL, rest, &err);

	*done = false;
	if (rc == MR_OPT_VERSION) {
		printf("meshsim %s\n", MESHRUN_VERSION);
		*done = true;
		return 0;
	}
	if (rc == MR_OPT_HELP) {
		mr_opt_usage(stdout, doc->usage, opts, doc->trailer);
		*done = true;
		return 0;
	}
	if (rc == 0 && (rest->nr < min_pos || rest->nr > max_pos))
		rc = mr_err_set(&err, MESHRUN_E_USAGE, "wrong number of arguments");
	if (rc < 0) {
		mr_error("meshsim %s: %s", cmd, err.msg);
		mr_error("meshsim %s: try 'meshsim %s --help'", cmd, cmd);
		return MR_SIM_EXIT_USAGE;
	}
	return 0;
}

int mr_sim_need_root(const char *cmd)
{
	if (geteuid() == 0)
		return 0;
	mr_error("meshsim %s: needs root (network namespaces)", cmd);
	return MR_SIM_EXIT_FAIL;
}

/* ------------------------------------------------------------------ down */

int mr_sim_cmd_down(int argc, char **argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec rest = MR_STRVEC_INIT;
	struct mr_sim_args a = MR_SIM_ARGS_INIT;
	const char *name = MR_SIM_DEFAULT_NAME;
	size_t removed = 0;
	bool done;
	int code;

	code = mr_sim_parse_args(MR_SIM_DOWN, &a, argc, argv, &rest, 0, 1, 0, &done);
	if (code || done)
		goto out;
	if (rest.nr)
		name = rest.v[0];
	if (mr_sim_check_name(name, &err) < 0) {
		mr_error("meshsim down: %s", err.msg);
		code = MR_SIM_EXIT_USAGE;
		goto out;
	}
	code = mr_sim_need_root("down");
	if (code)
		goto out;
	if (mr_sim_teardown(name, &removed, &err) < 0) {
		mr_error("meshsim down: %s", err.msg);
		code = MR_SIM_EXIT_FAIL;
		goto out;
	}
	if (removed)
		printf("meshsim: cluster '%s' is down\n", name);
	else
		printf("meshsim: nothing of cluster '%s' was found\n", name);
out:
	mr_strvec_release(&rest);
	return code;
}

/* ---------------------------------------------------------------- status */

/*
 * The pid in <host>/sshd.pid, or 0 while there is none. sshd creates the file
 * and writes "PID\n" into it a moment later, so an empty file or one without
 * its newline yet is "not written yet", never a pid (and the buffer, which
 * may be the read-only "" of mr_buf_cstr(), is only read).
 */
pid_t mr_sim_read_sshd_pid(const char *state, const char *host)
{
	char *p = xasprintf("%s/%s/sshd.pid", state, host);
	struct mr_buf b = MR_BUF_INIT;
	char line[32];
	size_t n;
	int64_t v = 0;

	if (mr_read_file(p, 64, &b, NULL) == 0) {
		const char *s = mr_buf_cstr(&b);
		n = strcspn(s, "\r\n");
		if (s[n] && n < sizeof(line)) {
			memcpy(line, s, n);
			line[n] = '\0';
			if (mr_parse_i64(line, 2, INT32_MAX, &v) < 0)
				v = 0;
		}
	}
	mr_buf_release(&b);
	free(p);
	return (pid_t)v;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* `meshsim status` without NAME: one line per cluster that is up, by name. */
static int list_clusters(void)
{
	const char *base = mr_sim_state_base();
	struct mr_strvec names = MR_STRVEC_INIT;
	DIR *d = opendir(base);
	struct dirent *e;
	size_t n = 0;

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && mr_sim_check_name(e->d_name, NULL) == 0 &&
		    mr_strvec_push(&names, e->d_name) < 0) {
			closedir(d);
			mr_strvec_release(&names);
			mr_error("meshsim status: out of memory");
			return MR_SIM_EXIT_FAIL;
		}
	if (d)
		closedir(d);
	if (names.nr > 1)
		qsort(names.v, names.nr, sizeof(*names.v), cmp_name);
	for (size_t i = 0; i < names.nr; i++) {
		struct mr_sim_state *st = NULL;

		if (mr_sim_state_load(names.v[i], &st, NULL) == 0) {
			printf("%s: %zu hosts, %zu cables, management 10.230.%u.0/%u, from %s\n", st->name,
			       st->cluster->nhosts, st->cluster->ncables, st->subnet,
			       mr_sim_prefix_len(st->cluster->nhosts), st->fixture);
			n++;
		}
		mr_sim_state_free(st);
	}
	if (n)
		printf("(meshsim status NAME shows one: hosts, cables, addresses, faults)\n");
	else
		printf("meshsim: no cluster is up (state in %s)\n", base);
	mr_strvec_release(&names);
	return 0;
}

int mr_sim_cmd_status(int argc, char **argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec rest = MR_STRVEC_INIT, faults = MR_STRVEC_INIT;
	struct mr_sim_args a = MR_SIM_ARGS_INIT;
	const char *name = MR_SIM_DEFAULT_NAME;
	struct mr_sim_state *st = NULL;
	char *state = NULL;
	bool done;
	int code;

	code = mr_sim_parse_args(MR_SIM_STATUS, &a, argc, argv, &rest, 0, 1, 0, &done);
	if (code || done)
		goto out;
	if (!rest.nr) {
		code = list_clusters();
		goto out;
	}
	name = rest.v[0];
	if (mr_sim_check_name(name, &err) < 0 || mr_sim_state_load(name, &st, &err) < 0) {
		mr_error("meshsim status: %s", err.msg);
		code = MR_SIM_EXIT_FAIL;
		goto out;
	}
	state = mr_sim_state_dir(name);
	mr_sim_faults_load(state, &faults, NULL);
	printf("cluster %s: %zu hosts, %zu cables, management 10.230.%u.0/%u (bridge %s-br)\n",
	       st->name, st->cluster->nhosts, st->cluster->ncables, st->subnet,
	       mr_sim_prefix_len(st->cluster->nhosts), st->name);
	printf("source: %s\nstate: %s\nssh: ssh -F %s/ssh_config HOST\n", st->fixture, state, state);
	printf("soft-RoCE: %s%s\n", st->rxe ? "rdma_<if> devices on the cables of RDMA hosts"
					     : st->rxe_note ? st->rxe_note : "no",
	       st->pretend_rdma ? " (--pretend-rdma: ibv_devices lists the fixture's devices anyway)" : "");
	printf("hosts:\n");
	for (size_t i = 0; i < st->cluster->nhosts; i++) {
		const char *h = st->cluster->hosts[i].name;
		char *ns = mr_sim_ns_name(name, h);
		pid_t pid = mr_sim_read_sshd_pid(state, h);
		bool alive = pid > 0 && mr_sim_pid_in_netns(pid, ns);
		struct mr_buf addrs = MR_BUF_INIT;
		struct stat sb;
		char *nosudo = xasprintf("%s/%s/nosudo", state, h);

		printf("  %-8s netns %s  sshd %s", h, ns, alive ? "running" : "stopped");
		if (alive)
			printf(" (pid %d)", (int)pid);
		printf("%s\n", stat(nosudo, &sb) == 0 ? "  no passwordless sudo" : "");
		if (geteuid() == 0 &&
		    mr_sim_run(&addrs, NULL, "addresses", "ip", "-n", ns, "-br", "-4", "addr", NULL) == 0) {
			struct mr_strvec lines = MR_STRVEC_INIT;
			mr_strvec_split(&lines, mr_buf_cstr(&addrs), '\n', true);
			for (size_t l = 0; l < lines.nr; l++)
				if (strncmp(lines.v[l], "lo ", 3))
					printf("           %s\n", lines.v[l]);
			mr_strvec_release(&lines);
		}
		mr_buf_release(&addrs);
		free(nosudo);
		free(ns);
	}
	printf("cables:\n");
	for (size_t c = 0; c < st->cluster->ncables; c++) {
		const struct mr_sim_cable *k = &st->cluster->cables[c];
		printf("  %s:%s <-> %s:%s\n", st->cluster->hosts[k->a].name, k->a_if,
		       st->cluster->hosts[k->b].name, k->b_if);
	}
	printf("faults:%s\n", faults.nr ? "" : " none");
	for (size_t f = 0; f < faults.nr; f++)
		printf("  %s\n", faults.v[f]);
out:
	free(state);
	mr_sim_state_free(st);
	mr_strvec_release(&faults);
	mr_strvec_release(&rest);
	return code;
}

/* ------------------------------------------------------------------ exec */

int mr_sim_cmd_exec(int argc, char **argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec rest = MR_STRVEC_INIT;
	struct mr_sim_args a = MR_SIM_ARGS_INIT;
	const char *name;
	struct mr_sim_state *st = NULL;
	struct mr_buf path = MR_BUF_INIT;
	char *ns = NULL, *nspath = NULL, *state = NULL, *hdir = NULL;
	int fd = -1;
	bool done;
	int code;

	code = mr_sim_parse_args(MR_SIM_EXEC, &a, argc, argv, &rest, 2, SIZE_MAX, MR_OPT_STOP_AT_NONOPT, &done);
	if (code || done)
		goto out;
	name = a.name;
	code = MR_SIM_EXIT_FAIL;
	if (mr_sim_need_root("exec"))
		goto out;
	if (mr_sim_check_name(name, &err) < 0 || mr_sim_state_load(name, &st, &err) < 0) {
		mr_error("meshsim exec: %s", err.msg);
		goto out;
	}
	if (mr_sim_cluster_find_host(st->cluster, rest.v[0]) < 0) {
		mr_error("meshsim exec: no host '%s' in cluster '%s'", rest.v[0], name);
		goto out;
	}
	/* "HOST -- cmd": the parser keeps everything after HOST; drop a leading "--" */
	size_t first = 1;
	if (first < rest.nr && !strcmp(rest.v[first], "--"))
		first++;
	if (first >= rest.nr) {
		mr_error("meshsim exec: no command given");
		code = MR_SIM_EXIT_USAGE;
		goto out;
	}
	ns = mr_sim_ns_name(name, rest.v[0]);
	nspath = xasprintf("/run/netns/%s", ns);
	state = mr_sim_state_dir(name);
	hdir = xasprintf("%s/%s", state, rest.v[0]);
	fd = open(nspath, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		mr_error("meshsim exec: enter namespace '%s': %s", nspath, strerror(errno));
		goto out;
	}
	if (mr_sim_pid_in_netns(mr_sim_read_sshd_pid(state, rest.v[0]), ns)) /* its hostname, as over ssh */
		(void)mr_sim_login_enter_uts(mr_sim_read_sshd_pid(state, rest.v[0]));
	mr_sim_render_path(hdir, &path);
	setenv("PATH", mr_buf_cstr(&path), 1);
	setenv("SHLVL", "1", 1);
	fflush(NULL);
	signal(SIGPIPE, SIG_DFL);
	execvp(rest.v[first], &rest.v[first]);
	mr_error("meshsim exec: run '%s' in host '%s': %s", rest.v[first], rest.v[0], strerror(errno));
	code = 127;
out:
	mr_close(&fd);
	free(ns);
	free(nspath);
	free(state);
	free(hdir);
	mr_buf_release(&path);
	mr_sim_state_free(st);
	mr_strvec_release(&rest);
	return code;
}

/* ------------------------------------------------------------------- gen */

int mr_sim_cmd_gen(int argc, char **argv)
{
	struct meshrun_err err = MESHRUN_ERR_INIT;
	struct mr_strvec rest = MR_STRVEC_INIT;
	struct mr_sim_args a = MR_SIM_ARGS_INIT;
	const char *outdir;
	struct mr_fixture_set *g = NULL;
	bool done;
	int code;

	code = mr_sim_parse_args(MR_SIM_GEN, &a, argc, argv, &rest, 1, 1, 0, &done);
	if (code || done)
		goto out;
	outdir = a.output;
	if (!outdir) {
		mr_error("meshsim gen: missing -o DIR");
		code = MR_SIM_EXIT_USAGE;
		goto out;
	}
	if (mr_fixture_gen(rest.v[0], &g, &err) < 0 || mr_fixture_gen_write(g, outdir, &err) < 0) {
		mr_error("meshsim gen: %s", err.msg);
		code = err.code == MESHRUN_E_USAGE || err.code == MESHRUN_E_PARSE ||
		       err.code == MESHRUN_E_INVAL ? MR_SIM_EXIT_USAGE : MR_SIM_EXIT_FAIL;
		goto out;
	}
	printf("meshsim: wrote %zu hosts of '%s' to %s\n", g->nhosts, rest.v[0], outdir);
out:
	mr_fixture_set_free(g);
	mr_strvec_release(&rest);
	return code;
}
