#include "common/compat.h"
#include "sim/render.h"

#include "common/shquote.h"

const char *const mr_sim_shim_names[] = {
	"system_profiler", "networksetup", "ibv_devices", "ipconfig",
	"ifconfig", "route", "sudo", NULL,
};

/* Shared sh helpers for the shims that act on the namespace. */
static const char sh_helpers[] =
	"die() { echo \"$ME: $*\" >&2; exit 1; }\n"
	"valid_if() {\n"
	"\tcase \"$1\" in ''|-*|.|..|*[!A-Za-z0-9_.-]*) return 1 ;; esac\n"
	"\t[ ${#1} -le 15 ]\n"
	"}\n"
	"valid_ip() {\n"
	"\tcase \"$1\" in ''|*[!0-9.]*|.*|*.|*..*) return 1 ;; esac\n"
	"\t_old=$IFS; IFS=.; set -- $1; IFS=$_old\n"
	"\t[ $# -eq 4 ] || return 1\n"
	"\tfor _o; do\n"
	"\t\tcase \"$_o\" in 0?*) return 1 ;; esac\n"
	"\t\t[ ${#_o} -le 3 ] && [ \"$_o\" -le 255 ] || return 1\n"
	"\tdone\n"
	"}\n"
	"# netmask (dotted quad or 0xffffff00) -> prefix length on stdout\n"
	"mask_len() {\n"
	"\t_m=$1\n"
	"\tcase \"$_m\" in\n"
	"\t0x[0-9a-fA-F]*)\n"
	"\t\tcase \"$_m\" in 0x*[!0-9a-fA-F]*) return 1 ;; esac\n"
	"\t\t[ ${#_m} -eq 10 ] || return 1\n"
	"\t\t_v=$(printf '%d' \"$_m\") || return 1\n"
	"\t\t_m=$(( (_v >> 24) & 255 )).$(( (_v >> 16) & 255 )).$(( (_v >> 8) & 255 )).$(( _v & 255 ))\n"
	"\t\t;;\n"
	"\tesac\n"
	"\tvalid_ip \"$_m\" || return 1\n"
	"\t_old=$IFS; IFS=.; set -- $_m; IFS=$_old\n"
	"\t_len=0; _end=0\n"
	"\tfor _o; do\n"
	"\t\tif [ $_end -eq 1 ]; then [ \"$_o\" -eq 0 ] || return 1; continue; fi\n"
	"\t\tcase \"$_o\" in\n"
	"\t\t255) _len=$((_len + 8)) ;;\n"
	"\t\t254) _len=$((_len + 7)); _end=1 ;;\n"
	"\t\t252) _len=$((_len + 6)); _end=1 ;;\n"
	"\t\t248) _len=$((_len + 5)); _end=1 ;;\n"
	"\t\t240) _len=$((_len + 4)); _end=1 ;;\n"
	"\t\t224) _len=$((_len + 3)); _end=1 ;;\n"
	"\t\t192) _len=$((_len + 2)); _end=1 ;;\n"
	"\t\t128) _len=$((_len + 1)); _end=1 ;;\n"
	"\t\t0) _end=1 ;;\n"
	"\t\t*) return 1 ;;\n"
	"\t\tesac\n"
	"\tdone\n"
	"\techo $_len\n"
	"}\n"
	"has_if() { ip link show dev \"$1\" >/dev/null 2>&1 || die \"interface $1 does not exist\"; }\n";

static const char body_system_profiler[] =
	"case \"$*\" in\n"
	"'SPThunderboltDataType -json'|'-json SPThunderboltDataType')\n"
	"\texec cat \"$D/live/system_profiler.json\" ;;\n"
	"esac\n"
	"echo \"system_profiler: meshsim replays only 'SPThunderboltDataType -json'\" >&2\n"
	"exit 1\n";

static const char body_networksetup[] =
	"if [ $# -eq 1 ] && [ \"$1\" = -listallhardwareports ]; then\n"
	"\texec cat \"$D/fixture/networksetup.txt\"\n"
	"fi\n"
	"echo \"networksetup: meshsim replays only -listallhardwareports\" >&2\n"
	"exit 1\n";

static const char body_ibv_devices[] =
	"[ $# -eq 0 ] || { echo \"ibv_devices: meshsim takes no arguments\" >&2; exit 1; }\n"
	"exec cat \"$D/live/ibv_devices.txt\"\n";

static const char body_ipconfig[] =
	"[ $# -eq 2 ] && [ \"$1\" = getifaddr ] || die 'meshsim supports only: ipconfig getifaddr INTERFACE'\n"
	"valid_if \"$2\" || die \"bad interface name '$2'\"\n"
	"out=$(ip -4 -o addr show dev \"$2\" 2>/dev/null) || exit 1\n"
	"[ -n \"$out\" ] || exit 1\n"
	"set -- $out\n"
	"echo \"${4%%/*}\"\n";

/*
 * ifconfig: macOS's forms over iproute2. A pulled cable (live/unplugged/IF, see
 * live.h) stays pulled: `up` and a new address only record the administrative
 * state the interface gets back when the cable is plugged in, so no traffic
 * flows and `ifconfig IF` says "status: inactive" as a Mac does.
 */
static const char body_ifconfig[] =
	"usage='meshsim supports: ifconfig IF | ifconfig IF inet ADDR netmask MASK | ifconfig IF inet ADDR delete|-alias | ifconfig IF up|down | ifconfig IF mtu N | ifconfig bridge0 addm|deletem IF'\n"
	"# Thunderbolt ports of the fixture with no cable (no interface here): members of\n"
	"# bridge0, as on a Mac, unless deletem or bridge0 down took them out (live/bridge-out/IF,\n"
	"# until a reboot)\n"
	"idle_ports() {\n"
	"\tawk '/^Hardware Port: /{ tb = ($0 ~ /^Hardware Port: Thunderbolt [0-9]+$/) } /^Device: /{ if (tb) print $2 }' \\\n"
	"\t\t\"$D/fixture/networksetup.txt\" 2>/dev/null | while read -r _p; do\n"
	"\t\tip link show dev \"$_p\" >/dev/null 2>&1 || [ -e \"$D/live/bridge-out/$_p\" ] || echo \"$_p\"\n"
	"\tdone\n"
	"}\n"
	"bridge_out() { mkdir -p \"$D/live/bridge-out\" && : >\"$D/live/bridge-out/$1\"; }\n"
	"# a Thunderbolt port with no cable (no interface here): what a Mac shows for it\n"
	"show_port() {\n"
	"\t_m=$(awk -v d=\"$1\" '/^Hardware Port: /{ tb = ($0 ~ /^Hardware Port: Thunderbolt [0-9]+$/) }\n"
	"\t\t/^Device: /{ hit = (tb && $2 == d); if (hit) f = 1 }\n"
	"\t\t/^Ethernet Address: /{ if (hit) m = $3 }\n"
	"\t\tEND { if (!f) exit 1; print m }' \"$D/fixture/networksetup.txt\" 2>/dev/null) ||\n"
	"\t\tdie \"interface $1 does not exist\"\n"
	"\techo \"$1: flags=8822<BROADCAST,SMART,SIMPLEX,MULTICAST> mtu 1500\"\n"
	"\t[ -z \"$_m\" ] || printf '\\tether %s\\n' \"$_m\"\n"
	"\tprintf '\\tmedia: autoselect\\n\\tstatus: inactive\\n'\n"
	"}\n"
	"show() {\n"
	"\t_l=$(ip -o link show dev \"$1\" 2>/dev/null) || { show_port \"$1\"; return; }\n"
	"\t_fl=${_l#*<}; _fl=${_fl%%>*}\n"
	"\t_mtu=${_l#* mtu }; _mtu=${_mtu%% *}\n"
	"\t_up=0; _run=0\n"
	"\tcase \",$_fl,\" in *,UP,*) _up=1 ;; esac\n"
	"\tcase \",$_fl,\" in *,LOWER_UP,*) _run=1 ;; esac\n"
	"\tif [ -f \"$D/live/unplugged/$1\" ]; then\n"
	"\t\t_run=0; _up=0\n"
	"\t\t[ \"$(cat \"$D/live/unplugged/$1\")\" = up ] && _up=1\n"
	"\tfi\n"
	"\tif [ \"$1\" = lo ]; then\n"
	"\t\techo \"lo: flags=8049<UP,LOOPBACK,RUNNING,MULTICAST> mtu $_mtu\"\n"
	"\telse\n"
	"\t\t_n=; [ $_up = 1 ] && _n=UP,\n"
	"\t\t_n=${_n}BROADCAST,SMART,; [ $_run = 1 ] && _n=${_n}RUNNING,\n"
	"\t\tprintf '%s: flags=%x<%sSIMPLEX,MULTICAST> mtu %s\\n' \"$1\" $((0x8822 + _up + 64 * _run)) \"$_n\" \"$_mtu\"\n"
	"\tfi\n"
	"\tcase $_l in *'link/ether '*) _m=${_l#*link/ether }; printf '\\tether %s\\n' \"${_m%% *}\" ;; esac\n"
	"\tip -4 -o addr show dev \"$1\" 2>/dev/null | while read -r _ _ _ _a _b _c _; do\n"
	"\t\t_k=$(( (0xffffffff << (32 - ${_a#*/})) & 0xffffffff ))\n"
	"\t\tif [ \"$_b\" = brd ]; then\n"
	"\t\t\tprintf '\\tinet %s netmask 0x%08x broadcast %s\\n' \"${_a%/*}\" $_k \"$_c\"\n"
	"\t\telse\n"
	"\t\t\tprintf '\\tinet %s netmask 0x%08x\\n' \"${_a%/*}\" $_k\n"
	"\t\tfi\n"
	"\tdone\n"
	"\t[ \"$1\" = lo ] && return 0\n"
	"\t# a bridge's members, as macOS's ifconfig lists them (ifbridge.c bridge_interfaces)\n"
	"\tcase $1 in bridge*) ip -o link show master \"$1\" 2>/dev/null | while read -r _i _n _; do\n"
	"\t\t_n=${_n%%@*}; _n=${_n%:}\n"
	"\t\tprintf '\\tmember: %s flags=3<LEARNING,DISCOVER>\\n\\t        ifmaxaddr 0 port %s priority 0 path cost 0\\n' \"$_n\" \"${_i%:}\"\n"
	"\tdone ;; esac\n"
	"\t[ \"$1\" != bridge0 ] || idle_ports | while read -r _n; do\n"
	"\t\tprintf '\\tmember: %s flags=3<LEARNING,DISCOVER>\\n\\t        ifmaxaddr 0 port 0 priority 0 path cost 0\\n' \"$_n\"\n"
	"\tdone\n"
	"\tcase $1 in en*) printf '\\tmedia: autoselect\\n' ;; esac\n"
	"\t[ $_run = 1 ] && echo '\tstatus: active' || echo '\tstatus: inactive'\n"
	"}\n"
	"[ $# -ge 1 ] || die \"$usage\"\n"
	"IF=$1; shift\n"
	"valid_if \"$IF\" || die \"bad interface name '$IF'\"\n"
	"U=\"$D/live/unplugged/$IF\"\n"
	"if [ $# -eq 0 ]; then show \"$IF\"; exit 0; fi\n"
	"has_if \"$IF\"\n"
	"if [ $# -eq 1 ] && [ \"$1\" = down ]; then\n"
	"\tif [ \"$IF\" = bridge0 ]; then\n"
	"\t\t# a Mac's Thunderbolt interfaces work on their own once bridge0 is down\n"
	"\t\tip -o link show master bridge0 | while read -r _ n _; do\n"
	"\t\t\tn=${n%%@*}; n=${n%:}\n"
	"\t\t\tip link set dev \"$n\" nomaster || exit 1\n"
	"\t\tdone || exit 1\n"
	"\t\tidle_ports | while read -r n; do bridge_out \"$n\" || exit 1; done || exit 1\n"
	"\tfi\n"
	"\t[ ! -f \"$U\" ] || echo down >\"$U\"\n"
	"\texec ip link set dev \"$IF\" down\n"
	"fi\n"
	"if [ $# -eq 1 ] && [ \"$1\" = up ]; then\n"
	"\tif [ -f \"$U\" ]; then echo up >\"$U\"; exit 0; fi\n"
	"\texec ip link set dev \"$IF\" up\n"
	"fi\n"
	"# macOS's setifmtu() only warn()s when the driver refuses: ifconfig still exits 0\n"
	"# (network_cmds ifconfig.tproj/ifconfig.c); live/maxmtu/IF is such a refusal (meshsim fault maxmtu)\n"
	"if [ $# -eq 2 ] && [ \"$1\" = mtu ]; then\n"
	"\tcase $2 in ''|*[!0-9]*) die \"bad mtu '$2'\" ;; esac\n"
	"\tif { [ -f \"$D/live/maxmtu/$IF\" ] && [ \"$2\" -gt \"$(cat \"$D/live/maxmtu/$IF\")\" ]; } ||\n"
	"\t   ! ip link set dev \"$IF\" mtu \"$2\" 2>/dev/null; then\n"
	"\t\techo 'ifconfig: ioctl (set mtu): Invalid argument' >&2\n"
	"\tfi\n"
	"\texit 0\n"
	"fi\n"
	"# bridge members: macOS's errors (BRDGADD: EEXIST, BRDGDEL: ENOENT) and exit 1;\n"
	"# a Thunderbolt port without a cable (no interface here) exists on a Mac: its\n"
	"# membership is live/bridge-out/IF's absence (idle_ports)\n"
	"if [ $# -eq 2 ] && { [ \"$1\" = addm ] || [ \"$1\" = deletem ]; }; then\n"
	"\tvalid_if \"$2\" || die \"bad interface name '$2'\"\n"
	"\tif ! ip link show dev \"$2\" >/dev/null 2>&1; then\n"
	"\t\tshow_port \"$2\" >/dev/null\n"
	"\t\tif [ \"$1\" = addm ]; then\n"
	"\t\t\t[ -e \"$D/live/bridge-out/$2\" ] || { echo \"ifconfig: BRDGADD $2: File exists\" >&2; exit 1; }\n"
	"\t\t\texec rm -f \"$D/live/bridge-out/$2\"\n"
	"\t\tfi\n"
	"\t\t[ ! -e \"$D/live/bridge-out/$2\" ] || { echo \"ifconfig: BRDGDEL $2: No such file or directory\" >&2; exit 1; }\n"
	"\t\tbridge_out \"$2\"; exit\n"
	"\tfi\n"
	"\t_m=$(ip -o link show dev \"$2\"); case $_m in *\" master $IF \"*) _in=1 ;; *) _in=0 ;; esac\n"
	"\tif [ \"$1\" = addm ]; then\n"
	"\t\t[ $_in = 0 ] || { echo \"ifconfig: BRDGADD $2: File exists\" >&2; exit 1; }\n"
	"\t\texec ip link set dev \"$2\" master \"$IF\"\n"
	"\tfi\n"
	"\t[ $_in = 1 ] || { echo \"ifconfig: BRDGDEL $2: No such file or directory\" >&2; exit 1; }\n"
	"\texec ip link set dev \"$2\" nomaster\n"
	"fi\n"
	"if [ $# -eq 3 ] && [ \"$1\" = inet ] && { [ \"$3\" = delete ] || [ \"$3\" = -alias ]; }; then\n"
	"\tvalid_ip \"$2\" || die \"bad address '$2'\"\n"
	"\t_a=$(ip -4 -o addr show dev \"$IF\" | awk -v a=\"$2\" '{ split($4, p, \"/\"); if (p[1] == a) { print $4; exit } }')\n"
	"\t[ -n \"$_a\" ] || { echo 'ifconfig: ioctl (SIOCDIFADDR): Can'\\''t assign requested address' >&2; exit 1; }\n"
	"\texec ip addr del \"$_a\" dev \"$IF\"\n"
	"fi\n"
	"[ $# -eq 4 ] && [ \"$1\" = inet ] && [ \"$3\" = netmask ] || die \"unsupported form: ifconfig $IF $*\"\n"
	"valid_ip \"$2\" || die \"bad address '$2'\"\n"
	"len=$(mask_len \"$4\") || die \"bad netmask '$4'\"\n"
	"[ \"$IF\" = bridge0 ] || ip link set dev \"$IF\" nomaster || exit 1\n"
	"ip -4 addr flush dev \"$IF\" || exit 1\n"
	"# brd +: macOS gives the subnet's broadcast address, as ifconfig then shows\n"
	"if [ \"$len\" -le 30 ]; then\n"
	"\tip addr add \"$2/$len\" brd + dev \"$IF\" || exit 1\n"
	"else\n"
	"\tip addr add \"$2/$len\" dev \"$IF\" || exit 1\n"
	"fi\n"
	"if [ -f \"$U\" ]; then echo up >\"$U\"; exit 0; fi\n"
	"exec ip link set dev \"$IF\" up\n";

static const char body_route[] =
	"usage='meshsim supports: route [-n] change|add [-host] ADDR -interface IF | route [-n] delete [-host] ADDR'\n"
	"[ \"$1\" = -n ] && shift\n"
	"[ $# -ge 2 ] || die \"$usage\"\n"
	"cmd=$1; shift\n"
	"case \"$cmd\" in add|change|delete) ;; *) die \"$usage\" ;; esac\n"
	"[ \"$1\" = -host ] && shift\n"
	"A=$1; shift\n"
	"valid_ip \"$A\" || die \"bad address '$A'\"\n"
	"if [ \"$cmd\" = delete ]; then\n"
	"\t[ $# -eq 0 ] || die \"$usage\"\n"
	"\tip route del \"$A/32\" || exit 1\n"
	"\techo \"delete host $A\"\n"
	"\texit 0\n"
	"fi\n"
	"[ $# -eq 2 ] && [ \"$1\" = -interface ] || die \"$usage\"\n"
	"valid_if \"$2\" || die \"bad interface name '$2'\"\n"
	"has_if \"$2\"\n"
	"if [ \"$cmd\" = add ]; then\n"
	"\tip route add \"$A/32\" dev \"$2\" || exit 1\n"
	"else\n"
	"\tip route replace \"$A/32\" dev \"$2\" || exit 1\n"
	"fi\n"
	"echo \"$cmd host $A: gateway $2\"\n";

static const char body_sudo[] =
	"if [ -e \"$D/nosudo\" ]; then\n"
	"\techo 'sudo: a password is required' >&2\n"
	"\texit 1\n"
	"fi\n"
	"while [ $# -gt 0 ]; do\n"
	"\tcase \"$1\" in\n"
	"\t-n|-E|-H) shift ;;\n"
	"\t--) shift; break ;;\n"
	"\t-*) die \"option '$1' is not simulated\" ;;\n"
	"\t*) break ;;\n"
	"\tesac\n"
	"done\n"
	"[ $# -gt 0 ] || die 'usage: sudo [-n] COMMAND...'\n"
	"# the shims' stand-in for uid 0 (ping's limits differ for root, mac.h)\n"
	"MESHSIM_ROOT=1\n"
	"export MESHSIM_ROOT\n"
	"exec \"$@\"\n";

struct shim {
	const char *name;
	const char *body;
	bool helpers;
};

static const struct shim shims[] = {
	{ "system_profiler", body_system_profiler, false },
	{ "networksetup", body_networksetup, false },
	{ "ibv_devices", body_ibv_devices, false },
	{ "ipconfig", body_ipconfig, true },
	{ "ifconfig", body_ifconfig, true },
	{ "route", body_route, true },
	{ "sudo", body_sudo, true },
};

int mr_sim_render_shim(const char *which, const char *host, const char *host_dir, struct mr_buf *out)
{
	const struct shim *s = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(shims); i++)
		if (!strcmp(shims[i].name, which))
			s = &shims[i];
	if (!s || !mr_is_shell_safe(host_dir) || !mr_is_shell_safe(host)) {
		errno = EINVAL;
		return -1;
	}
	if (mr_buf_printf(out, "#!/bin/sh\n# meshsim shim '%s' of host '%s' (generated)\n"
			  "ME=%s\nD='%s'\n", s->name, host, s->name, host_dir) < 0)
		return -1;
	if (s->helpers && mr_buf_puts(out, sh_helpers) < 0)
		return -1;
	return mr_buf_puts(out, s->body);
}

int mr_sim_render_path(const char *host_dir, struct mr_buf *out)
{
	return mr_buf_printf(out, "%s/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			     host_dir);
}

int mr_sim_render_sshd_config(const char *state_dir, const char *host_dir, const char *addr,
			      const char *env, struct mr_buf *out)
{
	int rc = mr_buf_printf(out,
		"# meshsim: sshd of one simulated host (generated)\n"
		"ListenAddress %s:22\n"
		"HostKey %s/ssh_host_ed25519_key\n"
		"PidFile %s/sshd.pid\n"
		"AuthorizedKeysFile %s/authorized_keys\n"
		"PermitRootLogin yes\n"
		"PubkeyAuthentication yes\n"
		"PasswordAuthentication no\n"
		"KbdInteractiveAuthentication no\n"
		"UsePAM no\n"
		"StrictModes no\n"
		"UseDNS no\n"
		"PrintMotd no\n"
		"MaxSessions 30\n"
		"MaxStartups 100:30:200\n"
		"ClientAliveInterval 2\n"
		"ClientAliveCountMax 3\n"
		"LogLevel ERROR\n"
		"Subsystem sftp internal-sftp\n"
		"# SHLVL=1: bash skips ~/.bashrc for commands (a root .bashrc can cost 80 ms each)\n"
		"SetEnv SHLVL=1 PATH=",
		addr, host_dir, host_dir, state_dir);

	if (rc < 0 || mr_sim_render_path(host_dir, out) < 0)
		return -1;
	/* a TMPDIR of each host's own, as each Mac has its /tmp: the hosts' job
	 * directories stay apart and survive a stopped host (tests look there) */
	if (mr_buf_printf(out, " TMPDIR=%s/tmp", host_dir) < 0)
		return -1;
	if (env && (!mr_is_shell_safe(env) || mr_buf_printf(out, " %s", env) < 0))
		return -1;
	return mr_buf_putc(out, '\n');
}

int mr_sim_render_ssh_host(const char *state_dir, const char *alias, const char *addr,
			   struct mr_buf *out)
{
	return mr_buf_printf(out,
		"Host %s\n"
		"  HostName %s\n"
		"  User root\n"
		"  IdentityFile %s/id_ed25519\n"
		"  IdentitiesOnly yes\n"
		"  UserKnownHostsFile %s/known_hosts\n"
		"  StrictHostKeyChecking yes\n"
		"  BatchMode yes\n"
		"  LogLevel ERROR\n\n",
		alias, addr, state_dir, state_dir);
}

int mr_sim_render_known_host(const char *alias, const char *addr, const char *pubkey_text,
			     struct mr_buf *out)
{
	const char *p = pubkey_text, *type, *key;
	size_t tlen, klen;

	while (*p == ' ' || *p == '\t')
		p++;
	type = p;
	tlen = strcspn(p, " \t\r\n");
	p += tlen;
	while (*p == ' ' || *p == '\t')
		p++;
	key = p;
	klen = strcspn(p, " \t\r\n");
	if (!tlen || !klen) {
		errno = EINVAL;
		return -1;
	}
	return mr_buf_printf(out, "%s,%s %.*s %.*s\n", alias, addr, (int)tlen, type, (int)klen, key);
}
