#include "common/compat.h"
#include "sim/login.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/fdio.h"
#include "common/xalloc.h"
#include "sim/launchd.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

/*
 * $1 passwd copy, $2 host name, $3 sshd, $4 its config, $5 its log, $6 the host's
 * folder, $7 meshsim-launchd (empty: none). The hostname goes through /proc: it
 * names the UTS namespace of the writer.
 *
 * The host's own /Library (a Mac's LaunchDaemons, Application Support, Logs):
 * a root made in $6/root of bind mounts of every top-level folder of / but
 * /Library, plus $6/Library as /Library, and sshd (and the host's launchd,
 * launchd.h) chrooted into it. Nothing is made under the machine's /: the
 * mounts live in this mount namespace only, which ends with the host's
 * processes. The first check refuses to mount anything in the machine's own
 * mount namespace (were unshare to have failed).
 */
static const char sshd_script[] =
	"PATH=$PATH:/usr/sbin:/sbin\n"
	"[ \"$(readlink /proc/self/ns/mnt)\" != \"$(readlink /proc/1/ns/mnt)\" ] || "
	"{ echo 'meshsim: not in a mount namespace of its own' >&2; exit 1; }\n"
	"mount --bind \"$1\" /etc/passwd && printf '%s\\n' \"$2\" >/proc/sys/kernel/hostname || exit 1\n"
	"R=$6/root\n"
	"mkdir -p \"$R\" || exit 1\n"
	"for e in /*; do\n"
	"\tn=${e#/}\n"
	"\tcase $n in Library|'*') continue ;; esac\n"
	"\tif [ -L \"$e\" ]; then ln -sfn \"$(readlink \"$e\")\" \"$R/$n\" || exit 1\n"
	"\telif [ -d \"$e\" ]; then mkdir -p \"$R/$n\" && mount --rbind \"$e\" \"$R/$n\" || exit 1\n"
	"\tfi\n"
	"done\n"
	"mkdir -p \"$R/Library\" && mount --bind \"$6/Library\" \"$R/Library\" || exit 1\n"
	"cd \"$R\" && exec chroot \"$R\" /bin/sh -c '\n"
	"\t[ -z \"$4\" ] || PATH=\"$5/bin:/usr/bin:/bin:/usr/sbin:/sbin\" MESHSIM_ROOT=1 \"$4\" boot \"$5\" \\\n"
	"\t\t>>\"$5/launchd.log\" 2>&1 </dev/null\n"
	"\texec \"$1\" -f \"$2\" -E \"$3\"' meshsim-host \"$3\" \"$4\" \"$5\" \"$7\" \"$6\"\n";

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
