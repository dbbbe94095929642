#include "common/compat.h"
#include "sim/login.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/xalloc.h"
#include "sim/launchd.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * $1 passwd copy, $2 host name, $3 sshd, $4 its config, $5 its log, $6 the host's
 * folder, $7 meshsim-launchd (empty: none, and no /Library of its own). The
 * hostname goes through /proc: it names the UTS namespace of the writer.
 * meshsim-launchd host gives the host its root and /Library, boots its launchd
 * and execs sshd (mr_sim_login_enter_root(), launchd.h).
 */
static const char sshd_script[] =
	"mount --bind \"$1\" /etc/passwd && printf '%s\\n' \"$2\" >/proc/sys/kernel/hostname || exit 1\n"
	"[ -z \"$7\" ] || exec \"$7\" host \"$6\" \"$3\" -f \"$4\" -E \"$5\"\n"
	"exec \"$3\" -f \"$4\" -E \"$5\"";

int mr_sim_login_write_passwd(const char *state_dir, struct meshrun_err *err)
{
	struct mr_buf in = MR_BUF_INIT, out = MR_BUF_INIT;
	char *zsh = mr_sim_which("zsh"), *path = NULL;
	const char *p;
	bool root = false;
	int rc;

	if (!zsh)
		return mr_err_set(err, MESHRUN_E_NOTFOUND,
				  "zsh not found (install zsh: the simulated Macs log in with it, as macOS does)");
	rc = mr_read_file("/etc/passwd", 4 << 20, &in, err);
	if (rc < 0)
		goto out;
	/* name:passwd:uid:gid:gecos:home:shell, one per line; only root's shell changes */
	for (p = mr_buf_cstr(&in); *p;) {
		const char *nl = strchr(p, '\n'), *end = nl ? nl : p + strlen(p);
		const char *shell = end;

		while (shell > p && shell[-1] != ':')
			shell--;
		if (!strncmp(p, "root:", 5) && shell > p) {
			mr_buf_append(&out, p, (size_t)(shell - p));
			mr_buf_puts(&out, zsh);
			root = true;
		} else {
			mr_buf_append(&out, p, (size_t)(end - p));
		}
		mr_buf_putc(&out, '\n');
		p = nl ? nl + 1 : end;
	}
	if (!root) {
		rc = mr_err_set(err, MESHRUN_E_PARSE, "/etc/passwd: no entry for root");
		goto out;
	}
	path = xasprintf("%s/passwd", state_dir);
	rc = mr_write_file(path, out.p, out.len, 0644, err);
out:
	free(path);
	free(zsh);
	mr_buf_release(&in);
	mr_buf_release(&out);
	return rc;
}

void mr_sim_login_sshd_job(struct mr_sim_job *j, const char *label, const char *ns,
			   const char *host, const char *state_dir, const char *host_dir,
			   const char *sshd)
{
	char *passwd = xasprintf("%s/passwd", state_dir);
	char *cfg = xasprintf("%s/sshd_config", host_dir);
	char *log = xasprintf("%s/sshd.log", host_dir);
	char *launchd = mr_launchd_program_path();

	/* --propagation private: the bind mounts never reach the machine's namespace */
	mr_sim_job_set(j, label, "ip", "netns", "exec", ns, "unshare", "--mount", "--uts",
		       "--propagation", "private", "/bin/sh", "-c", sshd_script, "meshsim-sshd",
		       passwd, host, sshd, cfg, log, host_dir, launchd ? launchd : "", NULL);
	free(launchd);
	free(passwd);
	free(cfg);
	free(log);
}

int mr_sim_login_enter_root(const char *host_dir, struct meshrun_err *err)
{
	char self[64] = "", parent[64] = "", init[64] = "", pp[64];
	char *root = xasprintf("%s/root", host_dir), *p = NULL;
	ssize_t n1 = readlink("/proc/self/ns/mnt", self, sizeof(self) - 1), n2, n3;
	DIR *d = NULL;
	struct dirent *e;
	int rc = 0;

	/* The binds below would be the machine's own in its mount namespace: ours
	 * must differ from the one of meshsim, which started `ip netns exec ...
	 * unshare --mount` (one process, exec after exec: our parent is meshsim),
	 * and from init's where it can be read (a container may refuse that). */
	snprintf(pp, sizeof(pp), "/proc/%ld/ns/mnt", (long)getppid());
	n2 = readlink(pp, parent, sizeof(parent) - 1);
	n3 = readlink("/proc/1/ns/mnt", init, sizeof(init) - 1);
	if (n1 <= 0 || n2 <= 0 || !strcmp(self, parent) || (n3 > 0 && !strcmp(self, init))) {
		rc = mr_err_set(err, MESHRUN_E_INVAL, "not in a mount namespace of its own: no root made");
		goto out;
	}
	/* the root a mount of its own, as the real one is: `ip -n NS` (iproute2's
	 * netns_switch) remounts "/" rslave, which fails on a plain folder */
	if ((mkdir(root, 0755) < 0 && errno != EEXIST) || mount(root, root, NULL, MS_BIND, NULL) < 0) {
		rc = mr_err_sys(err, "bind '%s' on itself", root);
		goto out;
	}
	d = opendir("/");
	if (!d) {
		rc = mr_err_sys(err, "opendir '/'");
		goto out;
	}
	while (rc == 0 && (e = readdir(d))) {
		struct stat st;
		char src[300], target[4096];

		if (e->d_name[0] == '.' || !strcmp(e->d_name, "Library"))
			continue;
		snprintf(src, sizeof(src), "/%s", e->d_name);
		free(p);
		p = xasprintf("%s/%s", root, e->d_name);
		if (lstat(src, &st) < 0)
			continue; /* gone meanwhile */
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(src, target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			unlink(p);
			if (symlink(target, p) < 0)
				rc = mr_err_sys(err, "symlink '%s'", p);
		} else if (S_ISDIR(st.st_mode)) {
			if ((mkdir(p, 0755) < 0 && errno != EEXIST) ||
			    mount(src, p, NULL, MS_BIND | MS_REC, NULL) < 0)
				rc = mr_err_sys(err, "bind '%s' on '%s'", src, p);
		}
	}
	free(p);
	p = xasprintf("%s/Library", host_dir);
	{
		char *dst = xasprintf("%s/Library", root);
		if (rc == 0 && ((mkdir(dst, 0755) < 0 && errno != EEXIST) ||
				mount(p, dst, NULL, MS_BIND, NULL) < 0))
			rc = mr_err_sys(err, "bind '%s' on '%s'", p, dst);
		free(dst);
	}
	if (rc == 0 && (chdir(root) < 0 || chroot(".") < 0 || chdir("/") < 0))
		rc = mr_err_sys(err, "chroot '%s'", root);
out:
	if (d)
		closedir(d);
	free(p);
	free(root);
	return rc;
}

int mr_sim_login_enter_uts(pid_t sshd_pid)
{
	char path[64];
	int fd, rc;

	if (sshd_pid <= 0 || kill(sshd_pid, 0) < 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/ns/uts", (long)sshd_pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = setns(fd, CLONE_NEWUTS);
	close(fd);
	return rc;
}
