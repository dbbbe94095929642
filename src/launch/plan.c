/*
 * launch/plan.c - meshrun's job plan from the options (launch.h; not topo/plan.c,
 * the IP plan): the host list (-n applied), the backend, the checked environment,
 * the command as it will run (resolved as mlx.launch does), the job token and the
 * ranks' environment.
 */
#include "common/compat.h"
#include "launch/launch.h"
#include "launch/hints.h"
#include "hal/hal.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/log.h"
#include "common/num.h"
#include "common/port.h"
#include "common/spawn.h"

#include <errno.h>
#include <limits.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *mr_launch_python(const struct mr_launch_opts *o, char *buf, size_t n)
{
	char *found;

	if (o->python)
		return o->python;
	found = mr_which("python3", NULL);
	if (!found || (size_t)snprintf(buf, n, "%s", found) >= n) {
		free(found);
		return "python3";
	}
	free(found);
	return buf;
}

/* What py reports as sys.executable (a pyenv shim or a venv link resolves to
 * the real interpreter), in buf; false when it does not run or says nothing. */
static bool python_executable(const char *py, char *buf, size_t n)
{
	char *argv[] = { (char *)py, "-c", "import sys; print(sys.executable)", NULL };
	struct mr_spawn_opts so = { .argv = argv, .fds = { -1, -1, -1 } };
	struct meshrun_err e = MESHRUN_ERR_INIT;
	int fds[2], status = 0;
	ssize_t got = 0, r;
	pid_t pid;

	if (mr_pipe_cloexec(fds) < 0)
		return false;
	so.fds[1] = fds[1];
	if (mr_spawn_child(&so, &pid, &e) < 0) {
		close(fds[0]);
		close(fds[1]);
		return false;
	}
	close(fds[1]);
	while ((size_t)got < n - 1 && (r = mr_read_some(fds[0], buf + got, n - 1 - (size_t)got)) > 0)
		got += r;
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	buf[got > 0 ? got : 0] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 && buf[0] == '/';
}

int mr_launch_print_python(const struct mr_launch_opts *o, FILE *out, FILE *how)
{
	char cand[PATH_MAX], real[PATH_MAX];
	const char *py = mr_launch_python(o, cand, sizeof(cand));
	const char *why = o->python ? "--python" : strchr(py, '/') ? "python3 on PATH" : NULL;

	if (!why) {
		fprintf(how, "meshrun: no python3 on PATH; use --python PATH\n");
		return 1;
	}
	/* MLX prints the interpreter running it (sys.executable): ask ours the same */
	if (python_executable(py, real, sizeof(real))) {
		fprintf(out, "%s\n", real);
		if (strcmp(real, py))
			fprintf(how, "meshrun: %s: %s, whose sys.executable is %s\n", why, py, real);
		else
			fprintf(how, "meshrun: %s: %s\n", why, py);
		return 0;
	}
	fprintf(out, "%s\n", py);
	fprintf(how, "meshrun: %s: %s (it did not run here: not checked)\n", why, py);
	return 0;
}

static int nomem(struct meshrun_err *err)
{
	return mr_err_set(err, MESHRUN_E_NOMEM, "out of memory");
}

/* --hosts a,b with -n N: each host N times in a row, as mlx.launch's from_list. */
static int hosts_from_list(const struct mr_launch_opts *o, struct mr_hostfile **out,
			   struct meshrun_err *err)
{
	struct mr_hostfile *list = NULL, *hf = NULL;
	int rc;

	/* its messages start with "--hosts" */
	if ((rc = mr_hostfile_from_list(o->hosts ? o->hosts : "127.0.0.1", &list, err)) < 0) {
		err->code = MESHRUN_E_USAGE;
		return MESHRUN_E_USAGE;
	}
	if (!(hf = mr_hostfile_new())) {
		rc = nomem(err);
		goto out;
	}
	for (size_t i = 0; i < list->nhosts; i++) {
		for (int k = 0; k < o->repeat; k++) {
			int idx = mr_hostfile_add_host(hf, list->hosts[i].ssh, err);

			if (idx < 0) {
				rc = idx;
				goto out;
			}
			if (mr_strvec_pushv(&hf->hosts[idx].ips, list->hosts[i].ips.v) < 0) {
				rc = nomem(err);
				goto out;
			}
		}
	}
	*out = hf;
	hf = NULL;
	rc = 0;
out:
	mr_hostfile_free(hf);
	mr_hostfile_free(list);
	return rc;
}

/*
 * A file that is neither executable nor a .py runs with python3 (MLX 0.31's
 * rule, kept): said, not silent, and refused when its #! line names another
 * interpreter (an `echo hi` script would end in a Python SyntaxError).
 */
static int check_not_executable(const char *path, struct meshrun_err *err)
{
	char line[256] = "";
	FILE *f = fopen(path, "r");

	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
	}
	line[strcspn(line, "\r\n")] = '\0';
	if (!strncmp(line, "#!", 2) && !strstr(line, "python"))
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "'%s' is not executable, and its first line '%.100s' names no Python, which "
				  "meshrun would run it with: " MR_HINT_NOT_EXECUTABLE, path, line);
	mr_warn("'%s' is not executable and not a .py: running it with python3 (as mlx.launch 0.31); %s",
		path, MR_HINT_NOT_EXECUTABLE);
	return 0;
}

/* Resolve the command's first word as mlx.launch does (see usage_trailer):
 * --python goes in front of every command (MLX 0.32); without it a .py or a
 * non-executable file runs with python3 (MLX 0.31, kept: see docs/migration.md). */
static int resolve_command(const struct mr_launch_opts *o, struct mr_strvec *argv,
			   struct meshrun_err *err)
{
	const char *cmd0 = o->command.v[0];
	char pybuf[PATH_MAX];
	struct stat st;

	if (o->python && mr_strvec_push(argv, o->python) < 0)
		return nomem(err);
	if (!stat(cmd0, &st) && S_ISREG(st.st_mode)) {
		size_t n = strlen(cmd0);
		char *abs = realpath(cmd0, NULL);
		bool py = !o->python && ((n > 3 && !strcmp(cmd0 + n - 3, ".py")) || access(cmd0, X_OK));
		int rc = 0;

		if (!abs)
			return mr_err_sys(err, "realpath '%s'", cmd0);
		if (py && !(n > 3 && !strcmp(cmd0 + n - 3, ".py")) && (rc = check_not_executable(cmd0, err)) < 0) {
			free(abs);
			return rc;
		}
		if ((py && mr_strvec_push(argv, mr_launch_python(o, pybuf, sizeof(pybuf))) < 0) ||
		    mr_strvec_push(argv, abs) < 0)
			rc = nomem(err);
		free(abs);
		if (rc)
			return rc;
	} else if (o->python) {
		/* an argument of the Python (a module's -m, a remote path): as given */
		if (mr_strvec_push(argv, cmd0) < 0)
			return nomem(err);
	} else {
		/* not here: the check on every host (or exec) says whether it exists there */
		char *found = mr_which(cmd0, NULL);
		int rc = mr_strvec_push(argv, found ? found : cmd0);

		free(found);
		if (rc < 0)
			return nomem(err);
	}
	if (mr_strvec_pushv(argv, o->command.v + 1) < 0)
		return nomem(err);
	return 0;
}

/* shutil.get_terminal_size() as mlx.launch calls it: $COLUMNS/$LINES, else the
 * size of our stdout's terminal; nothing when neither is known. */
static void terminal_size(int *cols, int *lines)
{
	const char *c = getenv("COLUMNS"), *l = getenv("LINES");
	struct winsize ws;

	if (!c || mr_parse_int(c, 1, 100000, cols) < 0)
		*cols = 0;
	if (!l || mr_parse_int(l, 1, 100000, lines) < 0)
		*lines = 0;
	if ((*cols <= 0 || *lines <= 0) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) {
		if (*cols <= 0)
			*cols = ws.ws_col;
		if (*lines <= 0)
			*lines = ws.ws_row;
	}
}

/* COLUMNS and LINES for the ranks (their output goes to our terminal), unless the
 * hostfile's envs or --env set COLUMNS. */
static int add_terminal_size(struct mr_strvec *envs, struct meshrun_err *err)
{
	char kv[32];
	int cols, lines;

	if (mr_strvec_getenv(envs, "COLUMNS"))
		return 0;
	terminal_size(&cols, &lines);
	if (cols <= 0)
		return 0;
	snprintf(kv, sizeof(kv), "COLUMNS=%d", cols);
	if (mr_launch_env_add(envs, kv, "terminal", err) < 0)
		return nomem(err);
	snprintf(kv, sizeof(kv), "LINES=%d", lines > 0 ? lines : 0);
	if (mr_launch_env_add(envs, kv, "terminal", err) < 0)
		return nomem(err);
	return 0;
}

static void make_token(char out[33])
{
	unsigned char r[16];

	if (mr_random_bytes(r, sizeof(r)) < 0) { /* time and pid are still unique per job */
		uint64_t x = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
		memcpy(r, &x, sizeof(x));
	}
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
}

/* jaccl's ranks need the hostfile's rdma matrix: without any (--hosts, -n, a ring
 * hostfile) say so and how to make one, rather than what a matrix check finds. */
static int need_rdma_matrix(const struct mr_launch_opts *o, const struct mr_launch_plan *plan,
			    struct meshrun_err *err)
{
	const char *b = mr_backend_name(plan->backend);

	if (plan->backend != MR_BACKEND_JACCL && plan->backend != MR_BACKEND_JACCL_RING)
		return 0;
	if (plan->topo.any_rdma)
		return 0;
	if (!o->hostfile)
		return mr_err_set(err, MESHRUN_E_USAGE,
				  "--backend %s needs a hostfile with an rdma matrix (--hosts and -n give "
				  "none): " MR_HINT_RDMA_FROM_LIST, b, b);
	return mr_err_set(err, MESHRUN_E_USAGE,
			  "%s: no host has an rdma matrix, which --backend %s needs: " MR_HINT_RDMA_FROM_FILE,
			  o->hostfile, b, b, o->hostfile);
}

#ifndef MESHRUN_MPI_SHIM_NAME /* the build defines them (src/launch/CMakeLists.txt) */
#define MESHRUN_MPI_SHIM_NAME "libmeshrun-mpi.so"
#define MESHRUN_INSTALL_LIBDIR "lib"
#define MESHRUN_MPI_SHIM_INSTALLED "/usr/local/lib/libmeshrun-mpi.so"
#endif

/*
 * libmeshrun-mpi for --mpi-impl meshrun: next to the meshrun that runs, in
 * <its prefix>/<libdir>/ (installed) or <build>/lib/ (the build tree, where
 * programs land in bin/ and libraries in lib/), else where `cmake --install`
 * puts it. Ranks on other hosts need it at the same path (or --env
 * MLX_MPI_LIBNAME=...).
 */
static void find_mpi_shim(const char *self, char *out, size_t cap)
{
	static const char *const libdirs[] = { MESHRUN_INSTALL_LIBDIR, "lib" };
	char *found = self && !strchr(self, '/') ? mr_which(self, NULL) : NULL;
	char real[PATH_MAX];
	struct stat st;

	snprintf(out, cap, "%s", MESHRUN_MPI_SHIM_INSTALLED);
	if (self && realpath(found ? found : self, real)) {
		char *slash = strrchr(real, '/'); /* .../bin/meshrun -> .../bin */
		if (slash)
			*slash = '\0';
		slash = strrchr(real, '/'); /* -> the prefix */
		if (slash)
			*slash = '\0';
		for (size_t i = 0; slash && i < ARRAY_SIZE(libdirs); i++) {
			char p[PATH_MAX + 64];
			snprintf(p, sizeof(p), "%s/%s/%s", real, libdirs[i], MESHRUN_MPI_SHIM_NAME);
			if (stat(p, &st) == 0 && strlen(p) < cap) {
				snprintf(out, cap, "%s", p);
				break;
			}
		}
	}
	free(found);
}

/* --mpi-impl: "" / NULL / openmpi -> false, meshrun -> true */
static int pick_mpi_impl(const struct mr_launch_opts *o, enum mr_backend b, bool *shim,
			 struct meshrun_err *err)
{
	*shim = o->mpi_impl && !strcmp(o->mpi_impl, "meshrun");
	if (*shim && b != MR_BACKEND_MPI)
		return mr_err_set(err, MESHRUN_E_USAGE, "--mpi-impl meshrun: only with --backend mpi (the backend is %s)", mr_backend_name(b));
	return 0;
}

int mr_launch_plan(const struct mr_launch_opts *o, struct mr_launch_plan *plan,
		   struct meshrun_err *err)
{
	struct mr_launch_env_opts eo = { 0 };
	const char *backend = o->backend;
	int rc, b;

	memset(plan, 0, sizeof(*plan));
	/* as mlx.launch (and meshconfig): the hostfile wins; said, not silent */
	if (o->hostfile && o->hosts)
		mr_warn("both --hosts and --hostfile given: using the hosts of '%s'", o->hostfile);
	if (o->hostfile) {
		if ((rc = mr_hostfile_load(o->hostfile, &plan->hf, err)) < 0) {
			if (err) {
				mr_err_prefix(err, "--hostfile");
				err->code = MESHRUN_E_USAGE;
			}
			return MESHRUN_E_USAGE;
		}
		if (o->repeat != 1)
			mr_warn("-n %d: hostfile entries are not repeated (as in mlx.launch); it only sets CUDA_VISIBLE_DEVICES for nccl",
				o->repeat);
		if (!plan->hf->nhosts) {
			rc = mr_err_set(err, MESHRUN_E_USAGE, "%s: no hosts", o->hostfile);
			goto out_release;
		}
	} else if ((rc = hosts_from_list(o, &plan->hf, err)) < 0) {
		goto out_release;
	}

	/* the hostfile's topology, asked here once (mr_launch_host_addrs below adds
	 * only "ips", which no question reads) */
	mr_launch_topo_of(plan->hf, &plan->topo);
	plan->all_local = true;
	for (size_t i = 0; i < plan->hf->nhosts; i++)
		plan->all_local &= mr_hal_host_is_local(plan->hf->hosts[i].ssh);

	if (!backend && plan->hf->backend && *plan->hf->backend)
		backend = plan->hf->backend;
	if (!backend)
		backend = mr_have_nvidia_gpu() ? "nccl" : "ring";
	if ((b = mr_backend_parse(backend)) < 0) {
		rc = mr_err_set(err, MESHRUN_E_USAGE,
				"%s: backend: unknown backend '%s' (ring, mesh, jaccl, jaccl-ring, nccl, mpi)",
				o->hostfile ? o->hostfile : "--backend", backend);
		goto out_release;
	}
	plan->backend = (enum mr_backend)b;
	/* a full mesh (meshconfig wrote "mesh_ips" on every host) runs the mesh,
	 * every cable busy, unless --backend says ring */
	if (!o->backend && plan->backend == MR_BACKEND_RING && plan->topo.full_mesh)
		plan->backend = MR_BACKEND_MESH;
	if ((rc = need_rdma_matrix(o, plan, err)) < 0)
		goto out_release;
	bool shim = false;
	if ((rc = pick_mpi_impl(o, plan->backend, &shim, err)) < 0)
		goto out_release;
	/* libmeshrun-mpi runs on libmeshrun's ring: its ranks start as ring's do */
	if ((rc = mr_launch_pick_launcher(o->launcher, getenv("MESHRUN_LAUNCHER"), getenv("SLURM_JOB_ID"),
					  shim ? MR_BACKEND_RING : plan->backend, &plan->launcher, err)) < 0)
		goto out_release;
	if (shim && plan->launcher == MR_LAUNCHER_MPIRUN) {
		rc = mr_err_set(err, MESHRUN_E_USAGE, "--mpi-impl meshrun: the ranks load libmeshrun-mpi, which mpirun cannot start (use --launcher meshrun or srun)");
		goto out_release;
	}
	if (shim)
		find_mpi_shim(o->self, plan->mpi_libname, sizeof(plan->mpi_libname));
	/* stop NULL: MESHRUN_SSH_PERSIST=stop is an error, --persist stop is main.c's */
	if ((rc = mr_ssh_opts_apply(&o->ssh, &plan->ho, NULL, err)) < 0)
		goto out_release;
	plan->stdin_mode = !strcmp(o->stdin_mode, "0")	  ? MR_STDIN_RANK0
			   : !strcmp(o->stdin_mode, "none") ? MR_STDIN_NONE
							    : MR_STDIN_ALL;

	if ((rc = mr_launch_env_inherit(mr_environ(), &plan->envs, err)) < 0)
		goto out_release;
	for (size_t i = 0; i < plan->hf->envs.nr; i++) {
		char where[PATH_MAX + 32];

		snprintf(where, sizeof(where), "%s: envs[%zu]", o->hostfile, i);
		if ((rc = mr_launch_env_add(&plan->envs, plan->hf->envs.v[i], where, err)) < 0)
			goto out_release;
	}
	for (size_t i = 0; i < o->envs.nr; i++) {
		/* as meshconfig's --env (MLX would set NAME to "" without a word) */
		if (!strchr(o->envs.v[i], '=')) {
			rc = mr_err_set(err, MESHRUN_E_USAGE,
					"invalid value '%s' for '--env': expected NAME=VALUE ('%s=' for an empty value)",
					o->envs.v[i], o->envs.v[i]);
			goto out_release;
		}
		if ((rc = mr_launch_env_add(&plan->envs, o->envs.v[i], "--env", err)) < 0)
			goto out_release;
	}

	if ((rc = add_terminal_size(&plan->envs, err)) < 0)
		goto out_release;
	if ((rc = resolve_command(o, &plan->argv, err)) < 0)
		goto out_release;
	make_token(plan->token);

	/* every backend but Open MPI's reaches its peers by the hosts' addresses */
	if ((plan->backend != MR_BACKEND_MPI || shim) &&
	    (rc = mr_launch_host_addrs(plan->hf, plan->all_local, o->ssh.config, &plan->addr_note, err)) < 0)
		goto out_release;
	eo.backend = plan->backend;
	eo.topo = &plan->topo;
	eo.starting_port = o->starting_port;
	eo.connections_per_ip = o->connections_per_ip;
	eo.nccl_port = o->nccl_port;
	eo.repeat = o->repeat;
	eo.verbose = o->verbose;
	eo.job_token = plan->token;
	eo.user_env = &plan->envs;
	eo.mpi_libname = plan->mpi_libname[0] ? plan->mpi_libname : NULL;
	if ((rc = mr_launch_env_build(plan->hf, &eo, &plan->env, err)) < 0)
		goto out_release;
	return 0;

out_release:
	mr_launch_plan_release(plan);
	return rc;
}

void mr_launch_plan_release(struct mr_launch_plan *plan)
{
	mr_hostfile_free(plan->hf);
	plan->hf = NULL;
	mr_strvec_release(&plan->envs);
	mr_strvec_release(&plan->argv);
	mr_launch_env_release(&plan->env);
	mr_buf_release(&plan->addr_note);
}
