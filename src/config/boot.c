/*
 * boot.c - --at-boot (boot.h): the LaunchDaemon that applies this host's part
 * of the plan again at boot and every CFG_BOOT_INTERVAL seconds.
 *
 * Why a LaunchDaemon, and why these paths (sources):
 *   - A Mac forgets what `ifconfig`/`route` set at the next boot, and its
 *     Thunderbolt Bridge takes the ports again; mlx.distributed_config keeps
 *     it that way on purpose (ml-explore/mlx #1902), exo ships a LaunchDaemon
 *     with RunAtLoad and a StartInterval of ~30 min that disables the bridge
 *     again (exo-explore/exo #1270, #1309). We do the same for the whole
 *     setup, and offer the undo exo lacked (exo #2279: a daemon left behind
 *     kept rewriting the network for months).
 *   - /Library/LaunchDaemons: system-wide daemons, run as root at boot, no
 *     login needed (launchd.plist(5)). The plist must be root-owned and not
 *     group/world writable or launchctl refuses it ("Path had bad
 *     ownership/permissions"; `man launchctl`): written as root:wheel 0644 by
 *     numeric ids (0:0), which mean root and wheel on macOS.
 *   - The script in /Library/Application Support/meshrun (root-owned, as exo
 *     keeps its script in /Library/Application Support/EXO): not /usr/local,
 *     which Homebrew on Intel Macs makes writable by the admin user, so that a
 *     root daemon would run a script a user can change.
 *   - StartInterval 300: a run that finds nothing to change only reads
 *     `ifconfig` and `netstat`; a port the bridge took back (a cable plugged
 *     again) works again within 5 minutes instead of exo's 30.
 *   - The log in /Library/Logs/meshrun (launchd opens StandardOutPath; its
 *     folder must exist); the script logs only changes and failures and keeps
 *     the log under 1 MiB.
 *   - Only tools in launchd's PATH for daemons (/usr/bin:/bin:/usr/sbin:/sbin),
 *     POSIX sh (ProgramArguments runs /bin/sh explicitly, not a login shell).
 * The ports leave bridge0 by `ifconfig bridge0 deletem`, not by switching the
 * Thunderbolt Bridge service off with networksetup: that is written to the
 * system's preferences and outlives the daemon, and --undo would have to know
 * how the service was before; deletem lasts until the next boot, as the rest
 * of the setup, and the daemon does it again then.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/shquote.h"
#include "common/xalloc.h"
#include "config/boot.h"
#include "topo/topo.h"

#ifndef MESHRUN_VERSION
#define MESHRUN_VERSION "unknown"
#endif

#define STR_(x) #x
#define STR(x) STR_(x)

const char cfg_boot_plist[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" "
	"\"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n"
	"<plist version=\"1.0\">\n"
	"<dict>\n"
	"\t<key>Label</key>\n"
	"\t<string>" CFG_BOOT_LABEL "</string>\n"
	"\t<key>ProgramArguments</key>\n"
	"\t<array>\n"
	"\t\t<string>/bin/sh</string>\n"
	"\t\t<string>" CFG_BOOT_SCRIPT "</string>\n"
	"\t</array>\n"
	"\t<key>RunAtLoad</key>\n"
	"\t<true/>\n"
	"\t<key>StartInterval</key>\n"
	"\t<integer>" STR(CFG_BOOT_INTERVAL) "</integer>\n"
	"\t<key>StandardOutPath</key>\n"
	"\t<string>" CFG_BOOT_LOG "</string>\n"
	"\t<key>StandardErrorPath</key>\n"
	"\t<string>" CFG_BOOT_LOG "</string>\n"
	"</dict>\n"
	"</plist>\n";

/* What the script does with its data (HOST, MTU, LINKS): see boot.h. */
static const char boot_body[] =
	"LOG='" CFG_BOOT_LOG "'\n"
	"changed=0\n"
	"failed=0\n"
	"log() { echo \"$(date '+%Y-%m-%d %H:%M:%S') meshconfig-at-boot ($HOST): $*\"; }\n"
	"# act WHAT CMD...: run CMD (its output goes to the log), then log WHAT\n"
	"act() {\n"
	"\t_what=$1\n"
	"\tshift\n"
	"\tif \"$@\" 2>&1; then log \"$_what\"; changed=$((changed + 1))\n"
	"\telse log \"FAILED ($?): $_what\"; failed=$((failed + 1)); fi\n"
	"}\n"
	"set_route() { route -n change \"$1\" -interface \"$2\" || route -n add -host \"$1\" -interface \"$2\"; }\n"
	"mtu_in() { printf '%s\\n' \"$1\" | sed -n '1s/.* mtu \\([0-9][0-9]*\\).*/\\1/p'; }\n"
	"[ ! -f \"$LOG\" ] || [ \"$(wc -c <\"$LOG\")\" -lt 1048576 ] || : >\"$LOG\"\n"
	"PORTS=\n"
	"set -- $LINKS\n"
	"while [ $# -ge 3 ]; do PORTS=\"$PORTS $1\"; shift 3; done\n"
	"# 1. at boot the Thunderbolt interfaces may come after launchd starts this\n"
	"n=0\n"
	"while :; do\n"
	"\tmissing=\n"
	"\tfor i in $PORTS; do ifconfig \"$i\" >/dev/null 2>&1 || missing=\"$missing $i\"; done\n"
	"\t[ -n \"$missing\" ] || break\n"
	"\tif [ $n -ge 60 ]; then log \"FAILED: no interface$missing after 60 s\"; failed=$((failed + 1)); break; fi\n"
	"\tsleep 1\n"
	"\tn=$((n + 1))\n"
	"done\n"
	"# 2. the ports out of the Thunderbolt Bridge, which takes them at boot\n"
	"members=\" $(ifconfig bridge0 2>/dev/null | awk '$1 == \"member:\" { printf \"%s \", $2 }')\"\n"
	"for i in $PORTS; do\n"
	"\tcase $members in *\" $i \"*) act \"$i out of bridge0\" ifconfig bridge0 deletem \"$i\" ;; esac\n"
	"done\n"
	"case $(ifconfig bridge0 2>/dev/null | sed -n 1p) in *'<UP'*) act 'bridge0 down' ifconfig bridge0 down ;; esac\n"
	"# 3. each link: its address, the host route to its peer, its MTU\n"
	"routes=$(netstat -rn -f inet)\n"
	"set -- $LINKS\n"
	"while [ $# -ge 3 ]; do\n"
	"\ti=$1 a=$2 p=$3\n"
	"\tshift 3\n"
	"\tcur=$(ifconfig \"$i\" 2>/dev/null)\n"
	"\tcase $cur in\n"
	"\t*\"inet $a netmask 0xfffffffc\"*) ;;\n"
	"\t*) act \"$i inet $a/30\" ifconfig \"$i\" inet \"$a\" netmask 255.255.255.252 ;;\n"
	"\tesac\n"
	"\tprintf '%s\\n' \"$routes\" | awk -v d=\"$p\" -v i=\"$i\" '$1 == d && $4 == i { f = 1 } END { exit !f }' ||\n"
	"\t\tact \"route to $p through $i\" set_route \"$p\" \"$i\"\n"
	"\t[ -n \"$MTU\" ] && [ \"$(mtu_in \"$cur\")\" != \"$MTU\" ] || continue\n"
	"\tifconfig \"$i\" mtu \"$MTU\" 2>&1\n"
	"\t# macOS's ifconfig exits 0 when the port refuses: read it back\n"
	"\tm=$(mtu_in \"$(ifconfig \"$i\" 2>/dev/null)\")\n"
	"\tif [ \"$m\" = \"$MTU\" ]; then log \"$i mtu $MTU\"; changed=$((changed + 1))\n"
	"\telse log \"FAILED: $i mtu $MTU (it has ${m:-none})\"; failed=$((failed + 1)); fi\n"
	"done\n"
	"[ $changed -eq 0 ] && [ $failed -eq 0 ] || log \"$changed change(s), $failed failure(s)\"\n"
	"[ $failed -eq 0 ]\n";

int cfg_boot_script(const struct mr_topo_plan *p, size_t i, const char *host, int mtu,
		    struct mr_buf *out, struct meshrun_err *err)
{
	if (!mr_is_hostname(host))
		return mr_err_set(err, MESHRUN_E_INVAL, "--at-boot: refusing host name '%.64s'", host);
	mr_buf_printf(out,
		      "#!/bin/sh\n"
		      "# meshconfig --at-boot (meshrun %s) for host %s: its Thunderbolt links, applied\n"
		      "# again by launchd at boot and every %d s (" CFG_BOOT_PLIST ").\n"
		      "# Generated: run meshconfig again to change it, meshconfig --undo to remove it.\n"
		      "# Changes and failures are logged to " CFG_BOOT_LOG ".\n"
		      "HOST='%s'\n", MESHRUN_VERSION, host, CFG_BOOT_INTERVAL, host);
	if (mtu)
		mr_buf_printf(out, "MTU=%d\n", mtu);
	else
		mr_buf_puts(out, "MTU=\n");
	mr_buf_puts(out, "# interface, its address (/30), the peer's address; one link a line\nLINKS='\n");
	for (size_t l = 0; l < p->nlinks; l++) {
		const struct mr_topo_link *lk = &p->links[l];

		for (int s = 0; s < 2; s++) {
			if (lk->host[s] != i)
				continue;
			if (!mr_is_ifname(lk->ifname[s]) || !mr_is_ipv4(lk->ip[s]) || !mr_is_ipv4(lk->ip[1 - s]))
				return mr_err_set(err, MESHRUN_E_INVAL,
						  "%s: --at-boot: refusing '%.40s %.40s %.40s' (not an interface name and two IPv4 addresses)",
						  host, lk->ifname[s], lk->ip[s], lk->ip[1 - s]);
			mr_buf_printf(out, "%s %s %s\n", lk->ifname[s], lk->ip[s], lk->ip[1 - s]);
		}
	}
	mr_buf_puts(out, "'\n");
	return mr_buf_puts(out, boot_body) < 0 ? mr_err_set(err, MESHRUN_E_NOMEM, "out of memory") : 0;
}

/* Runs as root (sudo -n /bin/sh -c) with the boot script on stdin. */
static void install_script(struct mr_buf *b)
{
	mr_buf_printf(b,
		"umask 022\n"
		"d='" CFG_BOOT_DIR "'\n"
		"s='" CFG_BOOT_SCRIPT "'\n"
		"p='" CFG_BOOT_PLIST "'\n"
		"mkdir -p \"$d\" '" CFG_BOOT_LOGDIR "' || exit 1\n"
		"cat >\"$s.new\" && chown 0:0 \"$s.new\" && chmod 0755 \"$s.new\" && mv -f \"$s.new\" \"$s\" || exit 1\n"
		"cat >\"$p.new\" <<'MESHRUN_PLIST_END' || exit 1\n"
		"%s"
		"MESHRUN_PLIST_END\n"
		"chown 0:0 \"$p.new\" && chmod 0644 \"$p.new\" || exit 1\n"
		"# running meshconfig again replaces the job\n"
		"launchctl bootout system/" CFG_BOOT_LABEL " >/dev/null 2>&1\n"
		"mv -f \"$p.new\" \"$p\" || exit 1\n"
		"# launchd may still be removing the old job: bootstrap fails with 5 then\n"
		"t=0\n"
		"until launchctl bootstrap system \"$p\"; do\n"
		"\tt=$((t + 1)); [ $t -lt 5 ] || exit 1; sleep 1\n"
		"done\n"
		"launchctl print system/" CFG_BOOT_LABEL " >/dev/null || exit 1\n"
		"echo done\n", cfg_boot_plist);
}

/* Without --at-boot: hosts that still have the LaunchDaemon of an earlier run. */
static const char stale_check[] = "[ -e '" CFG_BOOT_PLIST "' ]";

static void warn_stale(struct cfg_run *c)
{
	size_t n = c->nhosts;
	struct mr_hal_cmd *cmds = xcalloc(n, sizeof(*cmds));
	static char *const argv[] = { MR_SH_PATH, "-c", (char *)stale_check, NULL };
	struct meshrun_err e = MESHRUN_ERR_INIT;

	for (size_t i = 0; i < n; i++)
		cfg_cmd(c, &cmds[i], c->hosts[i].name, argv);
	if (cfg_hal_run(c, cmds, n, &e) == 0)
		for (size_t i = 0; i < n; i++)
			if (mr_hal_cmd_ok(&cmds[i]))
				cfg_warn(c, "%s: the LaunchDaemon of an earlier 'meshconfig --at-boot' (" CFG_BOOT_PLIST
					 ") applies that setup again at boot and every %d s: run with --at-boot to "
					 "replace it, or --undo to remove it",
					 c->hosts[i].name, CFG_BOOT_INTERVAL);
	cfg_cmds_release(cmds, n);
	free(cmds);
}

int cfg_at_boot(struct cfg_run *c, const struct mr_topo_plan *p, bool apply)
{
	size_t n = c->nhosts;
	struct mr_hal_cmd *cmds;
	struct mr_buf *scripts, install = MR_BUF_INIT;
	struct meshrun_err e = MESHRUN_ERR_INIT;
	char *argv[6];
	int rc = 0;

	if (!c->o->at_boot) {
		if (apply)
			warn_stale(c);
		return 0;
	}
	if (!apply) {
		cfg_error(c, "--at-boot: the LaunchDaemon was not installed on any host (it needs "
			  "passwordless sudo on every host)");
		return MR_CONFIG_EXIT_SETUP;
	}
	cmds = xcalloc(n, sizeof(*cmds));
	scripts = xcalloc(n, sizeof(*scripts));
	cfg_step(c, "installing the LaunchDaemon on every host (--at-boot)");
	install_script(&install);
	/* sudo -n /bin/sh -c INSTALL, the host's script on stdin */
	argv[0] = "sudo";
	argv[1] = "-n";
	argv[2] = MR_SH_PATH;
	argv[3] = "-c";
	argv[4] = install.p;
	argv[5] = NULL;
	for (size_t i = 0; i < n; i++) {
		if (cfg_boot_script(p, i, c->hosts[i].name, c->o->mtu, &scripts[i], &e) < 0) {
			cfg_error(c, "%s", e.msg);
			rc = MR_CONFIG_EXIT_DISCOVERY;
			goto out;
		}
		cfg_cmd(c, &cmds[i], c->hosts[i].name, argv);
		cmds[i].stdin_data = scripts[i].p;
		cmds[i].stdin_len = scripts[i].len;
	}
	if (cfg_hal_run(c, cmds, n, &e) < 0) {
		cfg_error(c, "--at-boot: %s", e.msg);
		rc = MR_CONFIG_EXIT_SETUP;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		char desc[256], line[256];

		cfg_first_line(&cmds[i].out, line, sizeof(line));
		if (mr_hal_cmd_ok(&cmds[i]) && !strcmp(line, "done"))
			continue;
		cfg_first_line(&cmds[i].errout, line, sizeof(line));
		cfg_error(c, "%s: --at-boot: installing the LaunchDaemon failed: %s%s%s", c->hosts[i].name,
			  cmds[i].hal_rc < 0 ? cmds[i].err.msg : mr_hal_cmd_describe(&cmds[i], desc, sizeof(desc)),
			  line[0] ? ": " : "", line);
		rc = MR_CONFIG_EXIT_SETUP;
	}
	if (rc == 0) {
		cfg_say(c, "LaunchDaemon " CFG_BOOT_LABEL " installed on %zu host%s: the setup is applied again at boot",
			n, n == 1 ? "" : "s");
		cfg_step_done(c, "%s on %zu hosts", CFG_BOOT_PLIST, n);
	}
out:
	cfg_cmds_release(cmds, n);
	for (size_t i = 0; i < n; i++)
		mr_buf_release(&scripts[i]);
	mr_buf_release(&install);
	free(scripts);
	free(cmds);
	return rc;
}
