#include "common/compat.h"
#include "sim/login.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/xalloc.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

/* $1 passwd copy, $2 host name, $3 sshd, $4 its config, $5 its log. The
 * hostname goes through /proc: it names the UTS namespace of the writer. */
static const char sshd_script[] =
	"mount --bind \"$1\" /etc/passwd && printf '%s\\n' \"$2\" >/proc/sys/kernel/hostname && "
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

	/* --propagation private: the bind mount never reaches the machine's namespace */
	mr_sim_job_set(j, label, "ip", "netns", "exec", ns, "unshare", "--mount", "--uts",
		       "--propagation", "private", "/bin/sh", "-c", sshd_script, "meshsim-sshd",
		       passwd, host, sshd, cfg, log, NULL);
	free(passwd);
	free(cfg);
	free(log);
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
