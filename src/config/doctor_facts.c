/*
 * doctor_facts.c - what `meshconfig doctor` learns from each host in one round
 * trip: the facts script (one /bin/sh -c per host, BSD or GNU userland, never
 * /proc: it runs on Macs) and the parsers of its output. Pure apart from the
 * script text: no I/O here.
 *
 * The script prints sections, each after a line "@@doctor NAME":
 *   os           uname -s
 *   id           $USER (else id -un); $SHELL (the login shell sshd started)
 *   sw_vers      sw_vers: ProductVersion, BuildVersion (Macs)
 *   tmp          ${TMPDIR:-/tmp} (where meshrun puts its job directory) and
 *                `df -P -k` of it
 *   jobdirs      "stale NAME" / "live NAME" per meshrun.* directory there with a
 *                watchdog mark naming this host (hal.h, MR_HAL_WATCHDOG_MARK):
 *                live while the mark's pid is a meshrun-watchdog (the rule of
 *                launch.h's sweep)
 *   tools        "probe PATH" (meshconfig there: the path check runs it),
 *                "meshrun PATH", "meshrun_version"
 *   python       with --python: "python X", "mlx Y" or the import error
 *   hwports, sp  networksetup -listallhardwareports, system_profiler
 *                SPThunderboltDataType -json (where networksetup exists)
 *   if NAME      ifconfig NAME, for every Thunderbolt port and bridge0
 *   addrs        "en0 ADDR", "en1 ADDR" (ipconfig getifaddr, where not a
 *                Thunderbolt port): the addresses a jaccl hostfile's ips name
 *   routes       netstat -rn -f inet (Macs)
 *   rdma_ctl, ibv_devices, ibv_devinfo, rdma_link, rdma_qp
 *                with RDMA asked: `rdma_ctl status` ("-" without rdma_ctl),
 *                ibv_devices, ibv_devinfo -v, and on Linux `rdma link show` and
 *                `rdma resource show qp` (queue pairs in use)
 *   end          the script ran to its end
 * A command that is missing leaves its section out (or says "-"); nothing
 * there is an error of the script.
 */
#include "common/compat.h"
#include "common/err.h"
#include "common/shquote.h"
#include "common/xalloc.h"
#include "config/doctor_impl.h"
#include "hal/hal.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <limits.h>

const char dr_facts_script[] =
	/* as few programs as will do: a simulated cluster runs every host's on one machine */
	"S() { printf '\n@@doctor %s\n' \"$*\"; }\n"
	"os=$(uname -s)\n"
	"S os; echo \"$os\"\n"
	"S id; printf '%s\n%s\n' \"${USER:-$(id -un)}\" \"${SHELL:-}\"\n"
	"if command -v sw_vers >/dev/null 2>&1; then S sw_vers; sw_vers; fi\n"
	"t=${TMPDIR:-/tmp}\n"
	"S tmp; printf '%s\n' \"$t\"; df -P -k \"$t\" 2>/dev/null | { read -r _; read -r l; echo \"$l\"; }\n"
	"S jobdirs; me=\n"
	"for o in \"$t\"/meshrun.*; do\n"
	"  [ -O \"$o\" ] && ! [ -L \"$o\" ] && read -r oh op <\"$o/" MR_HAL_WATCHDOG_MARK "\" || continue\n"
	"  [ -n \"$me\" ] || " MR_HAL_SH_HOSTNAME("me") "\n"
	"  [ \"$oh\" = \"$me\" ] || continue\n"
	"  case $op in ''|*[!0-9]*) continue;; esac\n"
	"  case $(ps -ww -o args= -p \"$op\" 2>/dev/null) in\n"
	"  *meshrun-watchdog*) echo \"live ${o##*/}\";; *) echo \"stale ${o##*/}\";; esac\n"
	"done 2>/dev/null\n"
	"S tools; p=\n"
	"for c in \"$1\" \"$(command -v meshconfig 2>/dev/null)\" /opt/homebrew/bin/meshconfig /usr/local/bin/meshconfig; do\n"
	"  if [ -n \"$c\" ] && [ -x \"$c\" ]; then p=$c; break; fi\n"
	"done\n"
	"echo \"probe $p\"\n"
	"r=; [ -n \"$p\" ] && [ -x \"${p%/*}/meshrun\" ] && r=${p%/*}/meshrun\n"
	"[ -n \"$r\" ] || r=$(command -v meshrun 2>/dev/null)\n"
	"echo \"meshrun $r\"\n"
	"[ -z \"$r\" ] || \"$r\" --version 2>/dev/null | { read -r v; echo \"meshrun_version $v\"; }\n"
	"if [ -n \"$2\" ]; then S python\n"
	"  \"$2\" -c 'import sys; print(\"python \" + sys.version.split()[0]); import mlx.core as mx; print(\"mlx \" + mx.__version__)' 2>&1 | tail -n 4\n"
	"fi\n"
	"if command -v networksetup >/dev/null 2>&1; then\n"
	"  hw=$(networksetup -listallhardwareports 2>/dev/null)\n"
	"  S hwports; printf '%s\n' \"$hw\"\n"
	"  S sp; system_profiler SPThunderboltDataType -json 2>/dev/null\n"
	/* the Thunderbolt ports' devices, then bridge0: ifconfig each; en0 and en1
	 * (the hostfile's ips on a jaccl one) by their address alone */
	"  tbs= tb=\n"
	"  while IFS= read -r l; do case $l in\n"
	"    'Hardware Port: Thunderbolt '*[!0-9]*) tb= ;; 'Hardware Port: Thunderbolt '[0-9]*) tb=1 ;;\n"
	"    'Hardware Port: '*) tb= ;; 'Device: '*) [ -z \"$tb\" ] || tbs=\"$tbs ${l#Device: }\" ;; esac\n"
	"  done <<EOF\n"
	"$hw\n"
	"EOF\n"
	"  for i in $tbs bridge0; do\n"
	"    case $i in ''|-*|*[!A-Za-z0-9_.-]*) continue;; esac\n"
	"    S if \"$i\"; ifconfig \"$i\" 2>/dev/null\n"
	"  done\n"
	"  S addrs\n"
	"  for i in en0 en1; do case \" $tbs \" in *\" $i \"*) ;; *) echo \"$i $(ipconfig getifaddr \"$i\" 2>/dev/null)\";; esac; done\n"
	"  if [ \"$os\" = Darwin ]; then S routes; netstat -rn -f inet 2>/dev/null; fi\n"
	"fi\n"
	"if [ \"$3\" = 1 ]; then\n"
	"  S rdma_ctl\n"
	"  if command -v rdma_ctl >/dev/null 2>&1; then rdma_ctl status 2>&1 | { read -r l; echo \"$l\"; }; else echo -; fi\n"
	"  if command -v ibv_devices >/dev/null 2>&1; then S ibv_devices; ibv_devices 2>&1; fi\n"
	"  if command -v ibv_devinfo >/dev/null 2>&1; then S ibv_devinfo; ibv_devinfo -v 2>/dev/null; fi\n"
	"  if [ \"$os\" = Linux ] && command -v rdma >/dev/null 2>&1; then\n"
	"    S rdma_link; rdma link show 2>/dev/null\n"
	"    S rdma_qp; rdma resource show qp 2>/dev/null; fi\n"
	"fi\n"
	"S end\n";

/* ---- small helpers ------------------------------------------------------------ */

bool dr_ipv4(const char *s, uint32_t *out)
{
	struct in_addr a;

	if (!s || !mr_is_ipv4(s) || inet_pton(AF_INET, s, &a) != 1)
		return false;
	*out = ntohl(a.s_addr);
	return true;
}

void dr_ipv4_str(uint32_t a, char *out, size_t n)
{
	snprintf(out, n, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

/* The line at *p (without its newline) into dst, trimmed; *p moves past it. */
static void next_line(const char **p, char *dst, size_t n)
{
	const char *s = *p, *e;
	size_t len;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strcspn(s, "\n");
	*p = *e ? e + 1 : e;
	len = (size_t)(e - s);
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\r'))
		len--;
	snprintf(dst, n, "%.*s", (int)MR_MIN(len, (size_t)INT_MAX), s);
}

static bool blank(const char *s)
{
	return !s[strspn(s, " \t\r\n")];
}

/* "prefix rest" -> rest (after the blanks that follow prefix), else NULL. */
static const char *after(const char *line, const char *prefix)
{
	size_t n = strlen(prefix);

	if (strncmp(line, prefix, n) || (line[n] != ' ' && line[n] != '\t' && line[n]))
		return NULL;
	line += n;
	while (*line == ' ' || *line == '\t')
		line++;
	return line;
}

const struct dr_if *dr_facts_if(const struct dr_facts *f, const char *name)
{
	for (size_t i = 0; i < f->nifs; i++)
		if (!strcmp(f->ifs[i].name, name))
			return &f->ifs[i];
	return NULL;
}

const struct dr_if *dr_facts_if_of_addr(const struct dr_facts *f, uint32_t addr, unsigned *len)
{
	for (size_t i = 0; i < f->nifs; i++)
		for (size_t k = 0; k < f->ifs[i].ninet; k++)
			if (f->ifs[i].inet[k].addr == addr) {
				if (len)
					*len = f->ifs[i].inet[k].len;
				return &f->ifs[i];
			}
	return NULL;
}

const struct dr_dev *dr_facts_dev(const struct dr_facts *f, const char *name)
{
	for (size_t i = 0; i < f->ndevs; i++)
		if (!strcmp(f->devs[i].name, name))
			return &f->devs[i];
	return NULL;
}

void dr_dev_ifname(const struct dr_dev *d, const char *devname, char *out, size_t n)
{
	if (d && d->netdev[0])
		snprintf(out, n, "%s", d->netdev);
	else if (!strncmp(devname, "rdma_", 5) && mr_is_ifname(devname + 5))
		snprintf(out, n, "%s", devname + 5); /* Apple's rdma_enX is enX's */
	else
		snprintf(out, n, "%s", "");
}

/* ---- ifconfig ------------------------------------------------------------------- */

static unsigned mask_len(uint32_t m)
{
	unsigned n = 0;

	while (n < 32 && (m & (0x80000000u >> n)))
		n++;
	return n;
}

/*
 * macOS's `ifconfig IF`:
 *   en2: flags=8863<UP,BROADCAST,SMART,RUNNING,SIMPLEX,MULTICAST> mtu 1500
 *   	inet 192.168.0.1 netmask 0xfffffffc broadcast 192.168.0.3
 *   	member: en3 flags=3<LEARNING,DISCOVER>
 *   	status: active
 * -1 when the first line is not this interface's.
 */
int dr_parse_ifconfig(const char *name, const char *text, struct dr_if *out)
{
	const char *p = text;
	char line[512];
	size_t nl = strlen(name);

	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", name);
	while (*p && blank(p) && strchr(p, '\n'))
		p = strchr(p, '\n') + 1;
	if (strncmp(p, name, nl) || p[nl] != ':')
		return -1;
	next_line(&p, line, sizeof(line));
	{
		const char *lt = strchr(line, '<'), *gt = lt ? strchr(lt, '>') : NULL, *mtu;
		char flags[256];

		if (lt && gt) {
			snprintf(flags, sizeof(flags), ",%.*s,", (int)MR_MIN((size_t)(gt - lt - 1), (size_t)200), lt + 1);
			out->up = strstr(flags, ",UP,") != NULL;
			out->running = strstr(flags, ",RUNNING,") != NULL;
		}
		mtu = strstr(line, " mtu ");
		if (mtu)
			out->mtu = (unsigned)strtoul(mtu + 5, NULL, 10);
	}
	while (*p) {
		const char *v;
		char w[4][64];
		int nw;

		next_line(&p, line, sizeof(line));
		if ((v = after(line, "status:"))) {
			out->status_known = true;
			out->active = !strcmp(v, "active");
		} else if ((v = after(line, "member:"))) {
			char m[32];
			if (sscanf(v, "%31s", m) == 1 && mr_is_ifname(m))
				mr_strvec_push(&out->members, m);
		} else if (after(line, "inet") && out->ninet < DR_MAX_INET &&
			   (nw = sscanf(line, "%63s %63s %63s %63s", w[0], w[1], w[2], w[3])) >= 2) {
			struct dr_inet *in = &out->inet[out->ninet];
			char *slash = strchr(w[1], '/');
			unsigned long m;

			if (slash)
				*slash = '\0';
			if (!dr_ipv4(w[1], &in->addr))
				continue;
			in->len = 32;
			if (slash)
				in->len = (unsigned)strtoul(slash + 1, NULL, 10) & 63;
			else if (nw == 4 && !strcmp(w[2], "netmask") && !strncmp(w[3], "0x", 2) &&
				 (m = strtoul(w[3] + 2, NULL, 16)) <= 0xffffffffUL)
				in->len = mask_len((uint32_t)m);
			if (in->len > 32)
				in->len = 32;
			out->ninet++;
		}
	}
	return 0;
}

/* ---- RDMA ----------------------------------------------------------------------- */

bool dr_parse_gid(const char *s, unsigned char raw[16])
{
	char buf[80];
	size_t n = strcspn(s, ", \t");
	struct in6_addr a;
	unsigned g[8];

	if (n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (inet_pton(AF_INET6, buf, &a) == 1) {
		memcpy(raw, &a, 16);
		return true;
	}
	/* rdma-core before inet_ntop: eight groups of four hex digits */
	if (sscanf(buf, "%4x:%4x:%4x:%4x:%4x:%4x:%4x:%4x", &g[0], &g[1], &g[2], &g[3], &g[4],
		   &g[5], &g[6], &g[7]) == 8) {
		for (int i = 0; i < 8; i++) {
			raw[2 * i] = (unsigned char)(g[i] >> 8);
			raw[2 * i + 1] = (unsigned char)(g[i] & 255);
		}
		return true;
	}
	return false;
}

static bool gid_is_v4(const unsigned char raw[16])
{
	static const unsigned char pre[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(raw, pre, 12);
}

static bool gid_is_zero(const unsigned char raw[16])
{
	for (int i = 0; i < 16; i++)
		if (raw[i])
			return false;
	return true;
}

/*
 * ibv_devinfo -v: "hca_id:\tNAME" blocks; within one, "max_qp:", the first
 * port's "state:" and its "GID[ N]:" lines (rdma-core; Apple's ibv_devinfo
 * may print none). Fills the devs named by ibv_devices; unknown names are
 * skipped.
 */
int dr_parse_devinfo(const char *text, struct dr_dev *devs, size_t ndevs)
{
	const char *p = text;
	struct dr_dev *cur = NULL;
	int port = 0;
	char line[512];

	while (*p) {
		const char *v;

		next_line(&p, line, sizeof(line));
		if ((v = after(line, "hca_id:"))) {
			char name[64];
			cur = NULL;
			port = 0;
			if (sscanf(v, "%63s", name) == 1)
				for (size_t i = 0; i < ndevs; i++)
					if (!strcmp(devs[i].name, name))
						cur = &devs[i];
			if (cur)
				cur->described = true;
			continue;
		}
		if (!cur)
			continue;
		if ((v = after(line, "port:"))) {
			port = (int)strtol(v, NULL, 10);
		} else if ((v = after(line, "max_qp:"))) {
			char *end;
			long q = strtol(v, &end, 10);
			if (end != v && q >= 0)
				cur->max_qp = q;
		} else if (port == 1 && (v = after(line, "state:"))) {
			snprintf(cur->state, sizeof(cur->state), "%s", v);
			cur->active = !strncmp(v, "PORT_ACTIVE", 11);
		} else if (port == 1 && !strncmp(line, "GID[", 4) && cur->ngid < DR_MAX_GID) {
			const char *c = strchr(line, ':');
			unsigned char raw[16];
			char *end;
			long idx = strtol(line + 4, &end, 10);

			if (!c || end == line + 4 || idx < 0 || idx > 255)
				continue;
			c++;
			while (*c == ' ' || *c == '\t')
				c++;
			cur->gids_listed = true;
			if (!dr_parse_gid(c, raw) || gid_is_zero(raw))
				continue;
			cur->gids[cur->ngid].index = (int)idx;
			cur->gids[cur->ngid].v4 = gid_is_v4(raw);
			cur->ngid++;
		}
	}
	return 0;
}

/* ibv_devices: the first word of each line after the "------" rule (rdma-core's
 * and Apple's layout); "No IB devices found" lists none. */
static void parse_ibv_devices(const char *text, struct dr_facts *f)
{
	const char *p = text;
	bool rule = false;
	char line[256];

	while (*p) {
		char name[64];

		next_line(&p, line, sizeof(line));
		if (!rule) {
			rule = !strncmp(line, "------", 6);
			continue;
		}
		if (sscanf(line, "%63s", name) != 1 || !mr_is_shell_safe(name))
			continue;
		f->devs = xreallocarray(f->devs, f->ndevs + 1, sizeof(*f->devs));
		memset(&f->devs[f->ndevs], 0, sizeof(*f->devs));
		snprintf(f->devs[f->ndevs].name, sizeof(f->devs[f->ndevs].name), "%s", name);
		f->devs[f->ndevs].max_qp = -1;
		f->devs[f->ndevs].qp_used = -1;
		f->ndevs++;
	}
}

/* Linux `rdma link show`: "link rxe0/1 state ACTIVE ... netdev veth0". */
static void parse_rdma_link(const char *text, struct dr_facts *f)
{
	const char *p = text;
	char line[512];

	while (*p) {
		char dev[64], *slash;
		const char *nd;

		next_line(&p, line, sizeof(line));
		if (sscanf(line, "link %63s", dev) != 1 || !(slash = strchr(dev, '/')))
			continue;
		*slash = '\0';
		nd = strstr(line, " netdev ");
		for (size_t i = 0; nd && i < f->ndevs; i++) {
			char ifn[16];
			if (strcmp(f->devs[i].name, dev) || sscanf(nd + 8, "%15s", ifn) != 1 || !mr_is_ifname(ifn))
				continue;
			snprintf(f->devs[i].netdev, sizeof(f->devs[i].netdev), "%s", ifn);
		}
	}
}

/* Linux `rdma resource show qp`: one line per QP, "link DEV/PORT ... type T ...";
 * the kernel's own GSI/SMI queue pairs are not counted. */
static void parse_rdma_qp(const char *text, struct dr_facts *f)
{
	const char *p = text;
	char line[512];

	f->rdma_tool = true;
	for (size_t i = 0; i < f->ndevs; i++)
		f->devs[i].qp_used = 0;
	while (*p) {
		char dev[64], *slash;

		next_line(&p, line, sizeof(line));
		if (sscanf(line, "link %63s", dev) != 1 || !(slash = strchr(dev, '/')) ||
		    strstr(line, " type GSI") || strstr(line, " type SMI"))
			continue;
		*slash = '\0';
		for (size_t i = 0; i < f->ndevs; i++)
			if (!strcmp(f->devs[i].name, dev))
				f->devs[i].qp_used++;
	}
}

/* df -P -k's data line: "FS 1024-blocks Used Available Capacity Mounted-on";
 * the filesystem name or mount point may hold spaces: Available is the field
 * before the one ending in '%'. */
static void parse_df(const char *line, struct dr_facts *f)
{
	struct mr_strvec w = MR_STRVEC_INIT;

	mr_strvec_split(&w, line, ' ', true);
	for (size_t i = 2; i < w.nr; i++) {
		size_t l = strlen(w.v[i]);
		char *end;
		long long kb;

		if (!l || w.v[i][l - 1] != '%')
			continue;
		kb = strtoll(w.v[i - 1], &end, 10);
		if (*end || kb < 0)
			break;
		f->avail_kb = kb;
		snprintf(f->fs, sizeof(f->fs), "%s", w.v[0]);
		break;
	}
	mr_strvec_release(&w);
}

static void parse_kv(const char *line, const char *key, char *dst, size_t n)
{
	const char *v = after(line, key);

	if (v)
		snprintf(dst, n, "%s", v);
}

/* One section of the script's output. */
static void section(struct dr_facts *f, const char *name, const char *body, bool *end)
{
	const char *p = body, *v;
	char line[1024];

	if (!strcmp(name, "os")) {
		next_line(&p, f->os, sizeof(f->os));
	} else if (!strcmp(name, "id")) {
		next_line(&p, f->user, sizeof(f->user));
		next_line(&p, f->shell, sizeof(f->shell));
	} else if (!strcmp(name, "sw_vers")) {
		/* "ProductVersion:\t\t26.2" lines, or (tests) the two values alone */
		for (int k = 0; *p; k++) {
			next_line(&p, line, sizeof(line));
			if ((v = after(line, "ProductVersion:")))
				snprintf(f->macos, sizeof(f->macos), "%.31s", v);
			else if ((v = after(line, "BuildVersion:")))
				snprintf(f->build, sizeof(f->build), "%.31s", v);
			else if (!strchr(line, ':') && k < 2)
				snprintf(k ? f->build : f->macos, sizeof(f->macos), "%.31s", line);
		}
	} else if (!strcmp(name, "tmp")) {
		next_line(&p, f->tmpdir, sizeof(f->tmpdir));
		next_line(&p, line, sizeof(line));
		parse_df(line, f);
	} else if (!strcmp(name, "jobdirs")) {
		while (*p) {
			next_line(&p, line, sizeof(line));
			if ((v = after(line, "stale")) && *v)
				mr_strvec_push(&f->stale_dirs, v);
			else if ((v = after(line, "live")) && *v)
				mr_strvec_push(&f->live_dirs, v);
		}
	} else if (!strcmp(name, "tools")) {
		while (*p) {
			next_line(&p, line, sizeof(line));
			parse_kv(line, "probe", f->probe, sizeof(f->probe));
			parse_kv(line, "meshrun", f->meshrun, sizeof(f->meshrun));
			parse_kv(line, "meshrun_version", f->meshrun_version, sizeof(f->meshrun_version));
		}
	} else if (!strcmp(name, "python")) {
		f->python_asked = true;
		while (*p) {
			next_line(&p, line, sizeof(line));
			if ((v = after(line, "python")) && *v && !strchr(v, ' '))
				snprintf(f->python_version, sizeof(f->python_version), "%s", v);
			else if ((v = after(line, "mlx")) && *v && !strchr(v, ' '))
				snprintf(f->mlx_version, sizeof(f->mlx_version), "%s", v);
			else if (line[0])
				snprintf(f->python_err, sizeof(f->python_err), "%.199s", line);
		}
	} else if (!strcmp(name, "hwports")) {
		f->tb = true;
		free(f->hwports);
		f->hwports = xstrdup(body);
	} else if (!strcmp(name, "sp")) {
		free(f->sp);
		f->sp = xstrdup(body);
		f->sp_len = strlen(body);
	} else if ((v = after(name, "if")) && mr_is_ifname(v)) {
		struct dr_if ifc;
		if (dr_parse_ifconfig(v, body, &ifc) == 0) {
			f->ifs = xreallocarray(f->ifs, f->nifs + 1, sizeof(*f->ifs));
			f->ifs[f->nifs++] = ifc;
		}
	} else if (!strcmp(name, "addrs")) {
		/* "en0 10.0.1.1" (ipconfig getifaddr): an interface known by its address alone */
		while (*p) {
			char ifn[16], ip[64];
			uint32_t a;

			next_line(&p, line, sizeof(line));
			if (sscanf(line, "%15s %63s", ifn, ip) != 2 || !mr_is_ifname(ifn) || !dr_ipv4(ip, &a) ||
			    dr_facts_if(f, ifn))
				continue;
			f->ifs = xreallocarray(f->ifs, f->nifs + 1, sizeof(*f->ifs));
			memset(&f->ifs[f->nifs], 0, sizeof(*f->ifs));
			snprintf(f->ifs[f->nifs].name, sizeof(f->ifs[f->nifs].name), "%s", ifn);
			f->ifs[f->nifs].inet[0].addr = a;
			f->ifs[f->nifs].inet[0].len = 32;
			f->ifs[f->nifs++].ninet = 1;
		}
	} else if (!strcmp(name, "routes")) {
		struct meshrun_err e = MESHRUN_ERR_INIT;
		mr_topo_routes_release(&f->routes);
		f->routes_known = mr_topo_parse_routes("routes", body, &f->routes, &e) == 0;
	} else if (!strcmp(name, "rdma_ctl")) {
		f->rdma_asked = true;
		next_line(&p, line, sizeof(line));
		snprintf(f->rdma_ctl_text, sizeof(f->rdma_ctl_text), "%.63s", line);
		f->rdma_ctl = !strcmp(line, "-") ? -1 : !strcmp(line, "enabled") ? 1
			    : !strcmp(line, "disabled") ? 0 : 2;
	} else if (!strcmp(name, "ibv_devices")) {
		f->ibv_ran = true;
		parse_ibv_devices(body, f);
	} else if (!strcmp(name, "ibv_devinfo")) {
		f->devinfo_ran = true;
		dr_parse_devinfo(body, f->devs, f->ndevs);
	} else if (!strcmp(name, "rdma_link")) {
		parse_rdma_link(body, f);
	} else if (!strcmp(name, "rdma_qp")) {
		parse_rdma_qp(body, f);
	} else if (!strcmp(name, "end")) {
		*end = true;
	}
}

int dr_facts_parse(const char *text, struct dr_facts *f, struct meshrun_err *err)
{
	static const char mark[] = "@@doctor ";
	char *buf = xstrdup(text), *p = buf, *name = NULL, *body = NULL;
	bool end = false;

	dr_facts_release(f);
	f->avail_kb = -1;
	/* each marker starts a line; the body before it ends there */
	for (;;) {
		char *m = NULL, *nl;

		if (p == buf && !strncmp(p, mark, sizeof(mark) - 1)) {
			m = p;
		} else if ((m = strstr(p, "\n@@doctor "))) {
			*m++ = '\0'; /* ends the previous body */
		}
		if (name)
			section(f, name, body, &end);
		if (!m)
			break;
		name = m + sizeof(mark) - 1;
		nl = strchr(name, '\n');
		if (nl)
			*nl = '\0';
		body = nl ? nl + 1 : name + strlen(name);
		p = body;
	}
	free(buf);
	if (!end)
		return mr_err_set(err, MESHRUN_E_PARSE, "the facts script did not run to its end");
	f->ok = true;
	return 0;
}

void dr_facts_release(struct dr_facts *f)
{
	for (size_t i = 0; i < f->nifs; i++)
		mr_strvec_release(&f->ifs[i].members);
	free(f->ifs);
	free(f->devs);
	free(f->hwports);
	free(f->sp);
	mr_strvec_release(&f->stale_dirs);
	mr_strvec_release(&f->live_dirs);
	mr_topo_routes_release(&f->routes);
	memset(f, 0, sizeof(*f));
	f->avail_kb = -1;
	f->rdma_ctl = -1;
}
