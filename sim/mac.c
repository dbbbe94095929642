#include "common/compat.h"
#include "sim/mac.h"

#include <ctype.h>
#include <cjson/cJSON.h>

#include "common/err.h"
#include "common/json.h"
#include "common/shquote.h"
#include "fixture/fixture.h"
#include "topo/topo.h"

#define DEF_MODEL "Mac15,14"
#define DEF_VERSION "26.2"
#define DEF_BUILD "25C56"
#define DEF_NCPU 12

static const struct {
	const char *device, *model;
	unsigned ncpu;
} known[] = {
	{ "Mac Studio", "Mac15,14", 32 },  /* M3 Ultra */
	{ "Mac mini", "Mac16,11", 14 },    /* M4 Pro */
	{ "MacBook Pro", "Mac16,6", 16 },  /* M4 Max */
};

const char *const mr_sim_mac_shim_names[] = { "uname", "sw_vers", "sysctl", "ping", "netstat", NULL };

static bool chars_ok(const char *s, const char *extra)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr(extra, *s))
			return false;
	return true;
}

/* Copy cluster.json hosts[i].key (a string of [A-Za-z0-9] and extra) into dst. */
static int json_str(const cJSON *h, size_t i, const char *key, const char *extra, char *dst,
		    size_t n, struct meshrun_err *err)
{
	const cJSON *v = h ? mr_json_member(h, key) : NULL;

	if (!v)
		return 0;
	if (!cJSON_IsString(v) || !chars_ok(v->valuestring, extra) || strlen(v->valuestring) >= n)
		return mr_err_set(err, MESHRUN_E_PARSE,
				  "cluster.json: hosts[%zu].%s: expected a string of [A-Za-z0-9%s], at most %zu characters",
				  i, key, extra, n - 1);
	snprintf(dst, n, "%s", v->valuestring);
	return 1;
}

int mr_sim_mac_of_host(const struct mr_sim_cluster *c, size_t i, struct mr_sim_mac *out,
		       struct meshrun_err *err)
{
	const cJSON *hosts = c->fx ? mr_json_member(c->fx->json, "hosts") : NULL;
	const cJSON *h = cJSON_IsArray(hosts) ? cJSON_GetArrayItem(hosts, (int)i) : NULL;
	const char *device = NULL;
	const cJSON *ncpu;
	int rc, have_version, have_build;

	memset(out, 0, sizeof(*out));
	snprintf(out->model, sizeof(out->model), "%s", DEF_MODEL);
	out->ncpu = DEF_NCPU;
	if (c->fx && c->fx->cluster) {
		ssize_t ti = mr_topo_host_index(c->fx->cluster, c->hosts[i].name);
		if (ti >= 0)
			device = c->fx->cluster->hosts[ti].model;
	}
	for (size_t k = 0; device && k < ARRAY_SIZE(known); k++)
		if (!strcmp(device, known[k].device)) {
			snprintf(out->model, sizeof(out->model), "%s", known[k].model);
			out->ncpu = known[k].ncpu;
		}
	if ((rc = json_str(h, i, "model", ",", out->model, sizeof(out->model), err)) < 0)
		return rc;
	if (rc > 0) {
		out->ncpu = DEF_NCPU;
		for (size_t k = 0; k < ARRAY_SIZE(known); k++)
			if (!strcmp(out->model, known[k].model))
				out->ncpu = known[k].ncpu;
	}
	if ((have_version = json_str(h, i, "macos", ".", out->version, sizeof(out->version), err)) < 0)
		return have_version;
	if ((have_build = json_str(h, i, "build", "", out->build, sizeof(out->build), err)) < 0)
		return have_build;
	if (have_version && !have_build)
		return mr_err_set(err, MESHRUN_E_PARSE,
				  "cluster.json: hosts[%zu]: \"macos\" without \"build\" (sw_vers prints both)", i);
	if (!have_version)
		snprintf(out->version, sizeof(out->version), "%s", DEF_VERSION);
	if (!have_build)
		snprintf(out->build, sizeof(out->build), "%s", DEF_BUILD);
	if (!isdigit((unsigned char)out->version[0]))
		return mr_err_set(err, MESHRUN_E_PARSE, "cluster.json: hosts[%zu].macos: '%s' is not a version",
				  i, out->version);
	ncpu = h ? mr_json_member(h, "ncpu") : NULL;
	if (ncpu) {
		if (!cJSON_IsNumber(ncpu) || ncpu->valuedouble < 1 || ncpu->valuedouble > 1024 ||
		    ncpu->valuedouble != (double)(int)ncpu->valuedouble)
			return mr_err_set(err, MESHRUN_E_PARSE,
					  "cluster.json: hosts[%zu].ncpu: expected a whole number 1..1024", i);
		out->ncpu = (unsigned)ncpu->valueint;
	}
	return 0;
}

void mr_sim_mac_darwin_release(const char *version, char *buf, size_t n)
{
	unsigned major = 0, minor = 0;

	/* macOS 11..15 are Darwin 20..24; macOS 26 (Tahoe) is Darwin 25 */
	if (sscanf(version, "%u.%u", &major, &minor) < 1)
		major = 26;
	snprintf(buf, n, "%u.%u.0", major >= 26 ? major - 1 : major + 9, minor);
}

static const char body_uname[] =
	"usage() { echo 'usage: uname [-amnprsv]' >&2; exit 1; }\n"
	"s=; n=; r=; v=; m=; p=; any=\n"
	"while [ $# -gt 0 ]; do\n"
	"\tcase $1 in\n"
	"\t--) shift; break ;;\n"
	"\t-?*) ;;\n"
	"\t*) usage ;;\n"
	"\tesac\n"
	"\trest=${1#-}; shift\n"
	"\twhile [ -n \"$rest\" ]; do\n"
	"\t\tc=${rest%\"${rest#?}\"}; rest=${rest#?}; any=1\n"
	"\t\tcase $c in\n"
	"\t\ta) s=1; n=1; r=1; v=1; m=1 ;;\n"
	"\t\ts) s=1 ;; n) n=1 ;; r) r=1 ;; v) v=1 ;; m) m=1 ;; p) p=1 ;;\n"
	"\t\t*) echo \"uname: illegal option -- $c\" >&2; usage ;;\n"
	"\t\tesac\n"
	"\tdone\n"
	"done\n"
	"[ $# -eq 0 ] || usage\n"
	"[ -n \"$any\" ] || s=1\n"
	"out=\n"
	"add() { out=${out:+$out }$1; }\n"
	"[ -z \"$s\" ] || add Darwin\n"
	"[ -z \"$n\" ] || add \"$(cat /proc/sys/kernel/hostname)\"\n"
	"[ -z \"$r\" ] || add \"$REL\"\n"
	"[ -z \"$v\" ] || add \"Darwin Kernel Version $REL: Tue Nov 18 21:07:48 PST 2025; root:xnu-12377.61.12~1/RELEASE_ARM64_T6031\"\n"
	"[ -z \"$m\" ] || add arm64\n"
	"[ -z \"$p\" ] || add arm\n"
	"printf '%s\\n' \"$out\"\n";

static const char body_sw_vers[] =
	"if [ $# -eq 0 ]; then\n"
	"\tprintf 'ProductName:\\t\\tmacOS\\nProductVersion:\\t\\t%s\\nBuildVersion:\\t\\t%s\\n' \"$VER\" \"$BUILD\"\n"
	"\texit 0\n"
	"fi\n"
	"if [ $# -eq 1 ]; then\n"
	"\tcase $1 in\n"
	"\t-productName|--productName) echo macOS; exit 0 ;;\n"
	"\t-productVersion|--productVersion) echo \"$VER\"; exit 0 ;;\n"
	"\t-buildVersion|--buildVersion) echo \"$BUILD\"; exit 0 ;;\n"
	"\tesac\n"
	"fi\n"
	"echo 'usage: sw_vers [--productName|--productVersion|--buildVersion]' >&2\n"
	"exit 1\n";

static const char body_sysctl[] =
	"usage() { printf 'usage: sysctl [-bdehiNnoqx] name[=value] ...\\n       sysctl [-bdehNnoqx] -a\\n' >&2; exit 1; }\n"
	"quiet=\n"
	"while [ $# -gt 0 ]; do\n"
	"\tcase $1 in\n"
	"\t--) shift; break ;;\n"
	"\t-n) quiet=1; shift ;;\n"
	"\t-[abdehiNoqxw]*) echo \"sysctl: meshsim simulates only: sysctl [-n] NAME...\" >&2; exit 1 ;;\n"
	"\t-?*) c=${1#-}; c=${c%\"${c#?}\"}; echo \"sysctl: illegal option -- $c\" >&2; usage ;;\n"
	"\t*) break ;;\n"
	"\tesac\n"
	"done\n"
	"[ $# -gt 0 ] || usage\n"
	"rc=0\n"
	"for name; do\n"
	"\tcase $name in\n"
	"\thw.model) val=$MODEL ;;\n"
	"\thw.ncpu|hw.logicalcpu|hw.physicalcpu|hw.activecpu) val=$NCPU ;;\n"
	"\thw.machine) val=arm64 ;;\n"
	"\tkern.ostype) val=Darwin ;;\n"
	"\tkern.osrelease) val=$REL ;;\n"
	"\tkern.osproductversion) val=$VER ;;\n"
	"\tkern.osversion) val=$BUILD ;;\n"
	"\tkern.hostname) val=$(cat /proc/sys/kernel/hostname) ;;\n"
	"\t*=*) echo \"sysctl: meshsim does not set values ('$name')\" >&2; rc=1; continue ;;\n"
	"\t*) echo \"sysctl: unknown oid '$name'\" >&2; rc=1; continue ;;\n"
	"\tesac\n"
	"\tif [ -n \"$quiet\" ]; then printf '%s\\n' \"$val\"; else printf '%s: %s\\n' \"$name\" \"$val\"; fi\n"
	"done\n"
	"exit $rc\n";

/*
 * macOS's ping options, run by iputils' ping (the next one on the PATH): -D sets
 * don't-fragment (iputils -M do), -s the payload size. As on a Mac, a user's ping
 * (no MESHSIM_ROOT: not under sudo, render.h) sends through a datagram socket
 * whose send buffer, net.inet.raw.maxdgram, is 8192 bytes: a larger packet fails
 * with "sendto: Message too long"; as root it raises SO_SNDBUF first (network_cmds
 * ping.tproj/ping.c: `if (uid == 0) setsockopt(s, SOL_SOCKET, SO_SNDBUF, ...)`).
 */
static const char body_ping[] =
	"usage() { echo 'usage: ping [-Dnq] [-b boundif] [-c count] [-I iface] [-i wait] [-s packetsize] [-t timeout] [-W waittime] host' >&2; exit 64; }\n"
	"set -- \"$@\" --end\n"
	"host=; size=56\n"
	"while [ \"$1\" != --end ]; do\n"
	"\tcase $1 in\n"
	"\t-n|-q) set -- \"$@\" \"$1\"; shift ;;\n"
	"\t-D) set -- \"$@\" -M do; shift ;;\n"
	"\t-c|-i|-I) [ \"$2\" != --end ] || usage; set -- \"$@\" \"$1\" \"$2\"; shift 2 ;;\n"
	"\t-b) [ \"$2\" != --end ] || usage; set -- \"$@\" -I \"$2\"; shift 2 ;;\n"
	"\t-s) case $2 in ''|--end|*[!0-9]*) echo \"ping: invalid packet size: \\`$2'\" >&2; exit 64 ;; esac\n"
	"\t\tsize=$2; set -- \"$@\" -s \"$2\"; shift 2 ;;\n"
	"\t-t) [ \"$2\" != --end ] || usage; set -- \"$@\" -w \"$2\"; shift 2 ;;\n"
	"\t-W) [ \"$2\" != --end ] || usage; set -- \"$@\" -W $(( ($2 + 999) / 1000 )); shift 2 ;;\n"
	"\t-?*) c=${1#-}; c=${c%\"${c#?}\"}; echo \"ping: illegal option -- $c\" >&2; usage ;;\n"
	"\t*) [ -z \"$host\" ] || usage; host=$1; shift ;;\n"
	"\tesac\n"
	"done\n"
	"shift\n"
	"[ -n \"$host\" ] || usage\n"
	"if [ -z \"$MESHSIM_ROOT\" ] && [ $((size + 8)) -gt 8192 ]; then\n"
	"\tprintf 'PING %s (%s): %s data bytes\\nping: sendto: Message too long\\n\\n--- %s ping statistics ---\\n' \"$host\" \"$host\" \"$size\" \"$host\"\n"
	"\techo '1 packets transmitted, 0 packets received, 100.0% packet loss'\n"
	"\texit 2\n"
	"fi\n"
	"PATH=${PATH#\"$D/bin:\"}\n"
	"exec ping \"$@\" \"$host\"\n";

static const char body_netstat[] =
	"case \"$*\" in\n"
	"'-rn -f inet'|'-nr -f inet'|'-r -n -f inet'|'-n -r -f inet'|-rn|-nr) ;;\n"
	"*) echo \"netstat: meshsim simulates only: netstat -rn [-f inet]\" >&2; exit 1 ;;\n"
	"esac\n"
	"printf 'Routing tables\\n\\nInternet:\\n'\n"
	"printf '%-18s %-18s %-14s %6s %s\\n' Destination Gateway Flags Netif Expire\n"
	"ip -4 -o route show | while read -r dst rest; do\n"
	"\tset -- $rest; gw=; dev=\n"
	"\twhile [ $# -gt 0 ]; do\n"
	"\t\tcase $1 in via) gw=$2; shift ;; dev) dev=$2; shift ;; esac\n"
	"\t\tshift\n"
	"\tdone\n"
	"\t[ -n \"$dev\" ] || continue\n"
	"\tcase $dst in\n"
	"\tdefault) flags=UGScg ;;\n"
	"\t*/32) dst=${dst%/32}; flags=UHS ;;\n"
	"\t*/*) flags=UCS ;;\n"
	"\t*) flags=UHS ;;\n"
	"\tesac\n"
	"\t_i=; { read -r _i <\"/sys/class/net/$dev/ifindex\"; } 2>/dev/null\n"
	"\t[ -n \"$gw\" ] || gw=link#$_i\n"
	"\tprintf '%-18s %-18s %-14s %6s\\n' \"$dst\" \"$gw\" \"$flags\" \"$dev\"\n"
	"done\n";

static const struct {
	const char *name, *body;
} shims[] = {
	{ "uname", body_uname },   { "sw_vers", body_sw_vers }, { "sysctl", body_sysctl },
	{ "ping", body_ping },     { "netstat", body_netstat },
};

int mr_sim_render_mac_shim(const char *which, const char *host, const char *host_dir,
			   const struct mr_sim_mac *mac, struct mr_buf *out)
{
	const char *body = NULL;
	char rel[32];

	for (size_t i = 0; i < ARRAY_SIZE(shims); i++)
		if (!strcmp(shims[i].name, which))
			body = shims[i].body;
	if (!body || !mr_is_shell_safe(host_dir) || !mr_is_shell_safe(host) ||
	    !chars_ok(mac->model, ",") || !chars_ok(mac->version, ".") || !chars_ok(mac->build, "")) {
		errno = EINVAL;
		return -1;
	}
	mr_sim_mac_darwin_release(mac->version, rel, sizeof(rel));
	if (mr_buf_printf(out, "#!/bin/sh\n# meshsim shim '%s' of host '%s' (generated)\n"
			  "ME=%s\nD='%s'\nMODEL='%s'\nNCPU=%u\nVER='%s'\nBUILD='%s'\nREL='%s'\n",
			  which, host, which, host_dir, mac->model, mac->ncpu, mac->version,
			  mac->build, rel) < 0)
		return -1;
	return mr_buf_puts(out, body);
}
