/*
 * login.h - how a simulated host's sshd starts, so that ssh into it looks like
 * ssh into a Mac: the login shell is zsh and `hostname` is the fixture's name.
 *
 * Mechanism: each host's sshd runs in a mount namespace and a UTS namespace of
 * its own (unshare --mount --uts, inside the host's network namespace). In that
 * mount namespace <state>/passwd, a copy of /etc/passwd whose root entry has
 * zsh as its shell, is bind-mounted over /etc/passwd; in that UTS namespace the
 * host name is set. Every session sshd starts (meshrun's ranks, meshconfig's
 * commands) inherits both. The host also has a /Library of its own (a Mac's
 * LaunchDaemons, launchd.h): `meshsim-launchd host` chroots into <host>/root,
 * made of bind mounts of every top-level folder of / plus <host>/Library as
 * /Library (mr_sim_login_enter_root), loads the host's /Library/LaunchDaemons
 * there and then execs sshd, as a Mac's launchd starts sshd. Why this and not a per-cluster user: the shims
 * (ifconfig, route, sudo) change the network namespace and need root, and
 * meshsim must leave the machine as it found it: nothing is written under /etc,
 * the mount and the name exist only in namespaces that end with that sshd (also
 * when meshsim crashes or the cluster is torn down by hand).
 */
#ifndef MR_SIM_LOGIN_H
#define MR_SIM_LOGIN_H

#include "common/compat.h"
#include "meshrun/err.h"
#include "sim/proc.h"

/* Write <state_dir>/passwd: /etc/passwd with root's shell set to zsh (found on
 * PATH; an error naming the package when it is missing). */
int mr_sim_login_write_passwd(const char *state_dir, struct meshrun_err *err);

/*
 * The job that starts host's sshd (it daemonizes; the job ends when the parent
 * returns): in network namespace ns, a new mount and UTS namespace, passwd from
 * state_dir, host name host, config and log in host_dir, its own /Library and
 * its launchd's boot (launchd.h, logged to host_dir/launchd.log). sshd is its
 * path.
 */
void mr_sim_login_sshd_job(struct mr_sim_job *j, const char *label, const char *ns,
			   const char *host, const char *state_dir, const char *host_dir,
			   const char *sshd);

/*
 * Inside the host's mount namespace (refused in the machine's own): make
 * host_dir/root of bind mounts (MS_REC) of every top-level folder of /, its
 * symlinks as they are, host_dir/Library bound on its /Library, then chroot
 * there. Nothing is made under the machine's /; the mounts end with the
 * namespace. 0, or an error naming the call and path.
 */
int mr_sim_login_enter_root(const char *host_dir, struct meshrun_err *err);

/* Join the UTS namespace of the host's sshd (pid; 0 or not running: nothing), so
 * that `meshsim exec HOST -- hostname` prints HOST as ssh does. 0 or -1 (errno). */
int mr_sim_login_enter_uts(pid_t sshd_pid);

#endif
