/*
 * shims_doctor.c - the shims `meshconfig doctor` reads on a simulated Mac that
 * the other shims do not give: rdma_ctl, ibv_devinfo, date (see doctor.h).
 */
#include "common/compat.h"
#include "sim/doctor.h"

#include "common/shquote.h"

const char *const mr_sim_doctor_shim_names[] = { "rdma_ctl", "ibv_devinfo", "date", NULL };

static const char body_rdma_ctl[] =
	"case \"$*\" in\n"
	"status)\n"
	"\tif awk 'f && $1 ~ /^rdma_/ { found = 1 } /^ *------/ { f = 1 } END { exit !found }' \\\n"
	"\t\t\"$D/fixture/ibv_devices.txt\" 2>/dev/null; then echo enabled; else echo disabled; fi ;;\n"
	"enable|disable)\n"
	"\techo \"rdma_ctl: $1 works only from Recovery (meshsim does not change it)\" >&2; exit 1 ;;\n"
	"*) echo 'usage: rdma_ctl status|enable|disable' >&2; exit 64 ;;\n"
	"esac\n";

/*
 * The devices of live/ibv_devices.txt as a Mac's ibv_devinfo prints them (the
 * layout of fixtures-upstream/two-macbook-pro-one-cable/peer/ibv_devinfo.txt,
 * rdma-core's tool); real ones (soft-RoCE) are the real tool's.
 */
static const char body_ibv_devinfo[] =
	"v=; want=\n"
	"while [ $# -gt 0 ]; do\n"
	"\tcase $1 in\n"
	"\t-v|--verbose) v=1; shift ;;\n"
	"\t-d) [ $# -ge 2 ] || { echo 'ibv_devinfo: -d needs a device' >&2; exit 1; }; want=$2; shift 2 ;;\n"
	"\t*) echo \"ibv_devinfo: meshsim simulates only [-v] [-d DEVICE]\" >&2; exit 1 ;;\n"
	"\tesac\n"
	"done\n"
	"list=$(awk 'f && NF { print $1, $2 } /^ *------/ { f = 1 }' \"$D/live/ibv_devices.txt\" 2>/dev/null)\n"
	"if [ -z \"$list\" ]; then echo 'No IB devices found'; exit 0; fi\n"
	"for dev in $(printf '%s\\n' \"$list\" | awk '{ print $1 }'); do\n"
	"\tif [ -e \"/sys/class/infiniband/$dev\" ]; then\n"
	"\t\tPATH=${PATH#\"$D/bin:\"}; exec ibv_devinfo ${v:+-v} ${want:+-d \"$want\"}\n"
	"\tfi\n"
	"done\n"
	"n=0\n"
	"printf '%s\\n' \"$list\" | while read -r dev guid; do\n"
	"\tn=$((n + 1))\n"
	"\t[ -z \"$want\" ] || [ \"$want\" = \"$dev\" ] || continue\n"
	"\tifn=${dev#rdma_}\n"
	"\tl=$(ip -o link show dev \"$ifn\" 2>/dev/null)\n"
	"\ta=$(ip -4 -o addr show dev \"$ifn\" 2>/dev/null | awk '{ sub(\"/.*\", \"\", $4); print $4; exit }')\n"
	"\t[ -f \"$D/live/unplugged/$ifn\" ] && l=\n"
	"\tst='PORT_DOWN (1)'\n"
	"\tcase $l in *LOWER_UP*) [ -z \"$a\" ] || st='PORT_ACTIVE (4)' ;; esac\n"
	"\tg=$(printf '%s' \"$guid\" | sed 's/\\(....\\)\\(....\\)\\(....\\)\\(....\\)/\\1:\\2:\\3:\\4/')\n"
	"\tprintf 'hca_id:\\t%s\\n\\ttransport:\\t\\t\\tThunderbolt (100)\\n\\tnode_guid:\\t\\t\\t%s\\n' \"$dev\" \"$g\"\n"
	"\tprintf '\\tsys_image_guid:\\t\\t\\t0000:0000:0000:0001\\n\\tvendor_id:\\t\\t\\t0x0000\\n\\tvendor_part_id:\\t\\t\\t0\\n'\n"
	"\tprintf '\\thw_ver:\\t\\t\\t\\t0x0\\n\\tphys_port_cnt:\\t\\t\\t1\\n\\t\\tport:\\t1\\n\\t\\t\\tstate:\\t\\t\\t%s\\n' \"$st\"\n"
	"\tprintf '\\t\\t\\tmax_mtu:\\t\\t4096 (5)\\n\\t\\t\\tactive_mtu:\\t\\t4096 (5)\\n\\t\\t\\tsm_lid:\\t\\t\\t%s\\n' \"$n\"\n"
	"\tprintf '\\t\\t\\tport_lid:\\t\\t%s\\n\\t\\t\\tport_lmc:\\t\\t0x00\\n\\t\\t\\tlink_layer:\\t\\tThunderbolt\\n' \"$n\"\n"
	"\tif [ -n \"$v\" ]; then\n"
	"\t\tm=$(cat \"/sys/class/net/$ifn/address\" 2>/dev/null)\n"
	"\t\tm=${m:-02:00:00:00:00:00}\n"
	"\t\t_o=$IFS; IFS=:; set -- $m; IFS=$_o\n"
	"\t\tprintf '\\t\\t\\tGID[  0]:\\t\\tfe80::%x:%x:%x:%x\\n' $(( (0x$1 ^ 2) * 256 + 0x$2 )) \\\n"
	"\t\t\t$(( 0x$3 * 256 + 255 )) $(( 254 * 256 + 0x$4 )) $(( 0x$5 * 256 + 0x$6 ))\n"
	"\t\t[ -z \"$a\" ] || printf '\\t\\t\\tGID[  1]:\\t\\t::ffff:%s\\n' \"$a\"\n"
	"\tfi\n"
	"\techo\n"
	"done\n";

/* `meshsim fault clock`: the shift in clock_offset (seconds); GNU date prints
 * any moment with -d @S, in any format asked. */
static const char body_date[] =
	"off=0\n"
	"[ -f \"$D/clock_offset\" ] && read -r off <\"$D/clock_offset\"\n"
	"PATH=${PATH#\"$D/bin:\"}\n"
	"case $off in ''|0|*[!0-9-]*) exec date \"$@\" ;; esac\n"
	"exec date -d \"@$(( $(date +%s) + off ))\" \"$@\"\n";

static const struct {
	const char *name, *body;
} shims[] = {
	{ "rdma_ctl", body_rdma_ctl },
	{ "ibv_devinfo", body_ibv_devinfo },
	{ "date", body_date },
};

int mr_sim_render_doctor_shim(const char *which, const char *host, const char *host_dir,
			      struct mr_buf *out)
{
	const char *body = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(shims); i++)
		if (!strcmp(shims[i].name, which))
			body = shims[i].body;
	if (!body || !mr_is_shell_safe(host_dir) || !mr_is_shell_safe(host)) {
		errno = EINVAL;
		return -1;
	}
	if (mr_buf_printf(out, "#!/bin/sh\n# meshsim shim '%s' of host '%s' (generated)\nME=%s\nD='%s'\n",
			  which, host, which, host_dir) < 0)
		return -1;
	return mr_buf_puts(out, body);
}
