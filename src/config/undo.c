/*
 * undo.c - meshconfig --undo (boot.h): on every host, one constant script under
 * `sudo -n /bin/sh -c` removes what meshconfig set up and gives the
 * Thunderbolt ports back to bridge0. The script learns the ports on the host
 * itself (networksetup -listallhardwareports), so nothing from a host goes into
 * a command. It prints one line per change ("did ...") or failure ("fail ..."),
 * then "done"; meshconfig reports them per host.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/shquote.h"
#include "common/xalloc.h"
#include "config/boot.h"

#define STR_(x) #x
#define STR(x) STR_(x)

const char cfg_undo_script[] =
	"did() { echo \"did $*\"; }\n"
	"fail() { echo \"fail $*\"; }\n"
	"mtu_in() { printf '%s\\n' \"$1\" | sed -n '1s/.* mtu \\([0-9][0-9]*\\).*/\\1/p'; }\n"
	"# 1. the LaunchDaemon, its script and its log (--at-boot)\n"
	"if launchctl print system/" CFG_BOOT_LABEL " >/dev/null 2>&1; then\n"
	"\tlaunchctl bootout system/" CFG_BOOT_LABEL " >&2 && did 'unloaded " CFG_BOOT_LABEL "' ||\n"
	"\t\tfail 'launchctl bootout system/" CFG_BOOT_LABEL "'\n"
	"fi\n"
	"set --\n"
	"for f in '" CFG_BOOT_PLIST "' '" CFG_BOOT_DIR "' '" CFG_BOOT_LOGDIR "'; do\n"
	"\t[ ! -e \"$f\" ] || set -- \"$@\" \"$f\"\n"
	"done\n"
	"if [ $# -gt 0 ]; then\n"
	"\tif rm -rf \"$@\"; then for f; do did \"removed $f\"; done; else fail \"rm -rf $*\"; fi\n"
	"fi\n"
	"# 2. every Thunderbolt port: meshconfig's routes and addresses, the MTU, back in bridge0\n"
	"ports=$(networksetup -listallhardwareports | awk '\n"
	"\t/^Hardware Port: / { tb = ($0 ~ /^Hardware Port: Thunderbolt [0-9]+$/); next }\n"
	"\ttb && /^Device: / { print $2; tb = 0 }')\n"
	"routes=$(netstat -rn -f inet)\n"
	"bridge=$(ifconfig bridge0 2>/dev/null)\n"
	"members=\" $(printf '%s\\n' \"$bridge\" | awk '$1 == \"member:\" { printf \"%s \", $2 }')\"\n"
	"for i in $ports; do\n"
	"\tcur=$(ifconfig \"$i\" 2>/dev/null) || continue\n"
	"\tfor r in $(printf '%s\\n' \"$routes\" | awk -v i=\"$i\" '$4 == i && $3 ~ /H/ && $3 ~ /S/ &&\n"
	"\t\t$1 ~ /^192\\.168\\.[0-9]+\\.[0-9]+$/ { print $1 }'); do\n"
	"\t\troute -n delete \"$r\" >&2 && did \"$i: route to $r removed\" || fail \"route -n delete $r\"\n"
	"\tdone\n"
	"\tfor a in $(printf '%s\\n' \"$cur\" | awk '$1 == \"inet\" && $4 == \"0xfffffffc\" && $2 ~ /^192\\.168\\./ { print $2 }'); do\n"
	"\t\tifconfig \"$i\" inet \"$a\" delete >&2 && did \"$i: $a removed\" || fail \"ifconfig $i inet $a delete\"\n"
	"\tdone\n"
	"\tm=$(mtu_in \"$cur\")\n"
	"\tif [ -n \"$m\" ] && [ \"$m\" != " STR(CFG_MTU_DEFAULT) " ]; then\n"
	"\t\tifconfig \"$i\" mtu " STR(CFG_MTU_DEFAULT) " >&2\n"
	"\t\t[ \"$(mtu_in \"$(ifconfig \"$i\")\")\" = " STR(CFG_MTU_DEFAULT) " ] && did \"$i: mtu $m -> " STR(CFG_MTU_DEFAULT) "\" ||\n"
	"\t\t\tfail \"ifconfig $i mtu " STR(CFG_MTU_DEFAULT) "\"\n"
	"\tfi\n"
	"\tcase $members in\n"
	"\t*\" $i \"*) ;;\n"
	"\t*) ifconfig bridge0 addm \"$i\" >&2 && did \"$i: back in bridge0\" || fail \"ifconfig bridge0 addm $i\" ;;\n"
	"\tesac\n"
	"done\n"
	"case $(printf '%s\\n' \"$bridge\" | sed -n 1p) in\n"
	"''|*'<UP'*) ;;\n"
	"*) ifconfig bridge0 up >&2 && did 'bridge0 up' || fail 'ifconfig bridge0 up' ;;\n"
	"esac\n"
	"echo done\n";

int cfg_undo(struct cfg_run *c)
{
	size_t n = c->nhosts, nno = 0, ndid = 0;
	struct mr_hal_cmd *cmds;
	static char *const argv[] = { "sudo", "-n", MR_SH_PATH, "-c", (char *)cfg_undo_script, NULL };
	struct meshrun_err e = MESHRUN_ERR_INIT;
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		nno += !c->hosts[i].has_sudo;
	if (nno) {
		cfg_error(c, "--undo needs passwordless sudo on every host; %zu host%s none (nothing was changed):",
			  nno, nno == 1 ? " has" : "s have");
		for (size_t i = 0; i < n; i++)
			if (!c->hosts[i].has_sudo)
				cfg_error(c, "  - %s", c->hosts[i].name);
		return MR_CONFIG_EXIT_SETUP;
	}
	cmds = xcalloc(n, sizeof(*cmds));
	cfg_step(c, "undoing the setup on every host");
	for (size_t i = 0; i < n; i++) {
		cfg_cmd(c, &cmds[i], c->hosts[i].name, argv);
		/* some twenty commands in one: its own deadline (boot.h) */
		cmds[i].timeout_ms = CFG_UNDO_DEADLINE_FACTOR * (c->timeout_ms > 0 ? c->timeout_ms : 30000);
	}
	if (cfg_hal_run(c, cmds, n, &e) < 0) {
		cfg_error(c, "--undo: %s", e.msg);
		rc = MR_CONFIG_EXIT_SETUP;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct mr_strvec lines = MR_STRVEC_INIT;
		const char *host = c->hosts[i].name;
		char desc[256], why[256];
		size_t nhost = 0;

		mr_strvec_split(&lines, mr_buf_cstr(&cmds[i].out), '\n', true);
		cfg_first_line(&cmds[i].errout, why, sizeof(why));
		for (size_t k = 0; k < lines.nr; k++) {
			if (!strncmp(lines.v[k], "did ", 4)) {
				cfg_info(c, "%s: %s", host, lines.v[k] + 4);
				nhost++;
			} else if (!strncmp(lines.v[k], "fail ", 5)) {
				cfg_error(c, "%s: --undo: '%s' failed%s%s", host, lines.v[k] + 5,
					  why[0] ? ": " : "", why);
				rc = MR_CONFIG_EXIT_SETUP;
			}
		}
		if (!mr_hal_cmd_ok(&cmds[i]) || !lines.nr || strcmp(lines.v[lines.nr - 1], "done")) {
			cfg_error(c, "%s: --undo did not finish: %s%s%s", host,
				  cmds[i].hal_rc < 0 ? cmds[i].err.msg
						     : mr_hal_cmd_describe(&cmds[i], desc, sizeof(desc)),
				  why[0] ? ": " : "", why);
			rc = MR_CONFIG_EXIT_SETUP;
		}
		ndid += nhost;
		mr_strvec_release(&lines);
	}
	if (rc == 0) {
		cfg_say(c, "undone on %zu host%s (%zu change%s; --verbose lists them)", n, n == 1 ? "" : "s",
			ndid, ndid == 1 ? "" : "s");
		cfg_step_done(c, "%zu changes", ndid);
	}
out:
	cfg_cmds_release(cmds, n);
	free(cmds);
	return rc;
}
