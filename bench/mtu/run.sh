#!/bin/bash
# bench/mtu/run.sh - all-reduce at MTU 1500 against 9000 on the same simulated
# cables, in one run (issue 36), root:
#
#   bench/mtu/run.sh [--bin DIR] [--hosts 4] [--sizes 1M,16M,128M] [--repeats 5]
#       [--passes 2] [--rate RATE] [--out DIR]
#
# One `meshsim up mesh:N` (a full mesh, one cable per pair of hosts), then for
# each MTU, `meshconfig --auto-setup --mtu M` on the same cables (it sets both
# ends of every cable and checks each with a don't-fragment ping of M bytes),
# and the all-reduce of each size by
#   ring   libmeshrun's ring (bench-ar-ours; 2 of each host's n-1 cables)
#   mesh   libmeshrun's TCP mesh backend over every cable (the hostfile with
#          mesh_ips that meshconfig writes for a full mesh; bench-ar-ours
#          --backend any, its log names the backend, checked)
# --passes P: the MTUs alternate within each pass (1500 then 9000, the other
# way round every other pass) and the medians are over all rounds: this
# machine drifts by 10-20% over minutes, and two rows measured one after the
# other would carry all of it. --rate RATE shapes every cable (meshsim fault
# rate, tc tbf on both ends), where the header overhead per packet is what the
# MTU changes; without it the cables are veth pairs bound by the processors,
# where it is the per-packet work (veth passes TCP's 64 KiB GSO segments
# whole, so less of that changes than on a NIC).
# Every peer gets reno and libmeshrun's 512K send buffer, as in bench/mesh.
#
# Output: a table on stdout and in OUT/report.txt (median ms per impl and MTU,
# and the ratio 1500/9000: > 1 means 9000 is faster), every row in
# OUT/raw.csv (mtu,impl,ranks,bytes,round,seconds), OUT/env.txt. A benchmark,
# not a test: needs root, sshd and network namespaces; leaves nothing behind
# (trap). Run it under `flock /tmp/meshrun-ns.lock` on a shared machine.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$root/build/plain/bin
nhosts=4
sizes=1M,16M,128M
repeats=5
passes=2
rate=""
out=""

usage() {
	sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
	exit "${1:-0}"
}
die() { echo "[ERROR] $*" >&2; exit 1; }
info() { echo "[INFO] $*" >&2; }

while [ $# -gt 0 ]; do
	case $1 in
	--bin) bin=$2; shift ;;
	--hosts) nhosts=$2; shift ;;
	--sizes) sizes=$2; shift ;;
	--repeats) repeats=$2; shift ;;
	--passes) passes=$2; shift ;;
	--rate) rate=$2; shift ;;
	--out) out=$2; shift ;;
	-h|--help) usage 0 ;;
	*) echo "run.sh: unknown option '$1'" >&2; usage 2 ;;
	esac
	shift
done
[[ $nhosts =~ ^[0-9]+$ ]] && [ "$nhosts" -ge 3 ] && [ "$nhosts" -le 8 ] || die "--hosts: expected 3..8, got '$nhosts'"
[[ $sizes =~ ^[0-9]+[KMG]?(,[0-9]+[KMG]?)*$ ]] || die "--sizes: expected a list like 16M,128M, got '$sizes'"
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats: expected a positive number, got '$repeats'"
[[ $passes =~ ^[1-9][0-9]*$ ]] || die "--passes: expected a positive number, got '$passes'"
[ -z "$rate" ] || [[ $rate =~ ^[0-9]+(k|m|g)bit$ ]] || die "--rate: expected a rate like 2gbit, got '$rate'"
[ "$(id -u)" -eq 0 ] || die "meshsim needs root"
[ -x /usr/sbin/sshd ] || die "sshd is not installed (openssh-server)"
bin=$(cd "$bin" && pwd) || die "--bin: no such folder"
for p in meshsim meshconfig meshrun bench-ar-ours; do
	[ -x "$bin/$p" ] || die "$bin/$p is not built"
done
[ -n "$out" ] || out=$root/build-bench/bench-out/mtu-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out/logs" || die "cannot create $out"
out=$(cd "$out" && pwd)
: >"$out/raw.csv"

export MESHSIM_STATE_DIR=$out/state
name=bu$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n' | cut -c1-7)
up=0
cleanup() { [ "$up" = 0 ] || "$bin/meshsim" down "$name" >/dev/null 2>&1; return 0; }
trap cleanup EXIT
trap 'exit 130' INT TERM

spec=mesh:$nhosts
info "meshsim up $spec"
"$bin/meshsim" up "$spec" --name "$name" >"$out/logs/up.log" 2>&1 || { tail -5 "$out/logs/up.log" >&2; die "meshsim up $spec failed"; }
up=1
cfg=$MESHSIM_STATE_DIR/$name/ssh_config
hosts=$(awk '$1 == "Host" { printf "%s%s", sep, $2; sep = "," }' "$cfg")
for h in ${hosts//,/ }; do
	ip netns exec "$name-$h" sysctl -qw net.ipv4.tcp_congestion_control=reno || die "cannot set reno in $name-$h"
done
if [ -n "$rate" ]; then
	"$bin/meshsim" status "$name" | awk '/^cables:/ {c = 1; next} /^[a-z]/ {c = 0} c && $2 == "<->" {print $1}' |
		while read -r c; do
			"$bin/meshsim" fault --name "$name" rate "$c" "$rate" >/dev/null || die "meshsim fault rate $c $rate failed"
		done
fi
# the hostfiles (the plan is the same at either MTU): ring, and mesh_ips for the mesh
"$bin/meshconfig" --hosts "$hosts" --ssh-config "$cfg" --backend ring \
	--output-hostfile "$out/logs/ring.json" >"$out/logs/cfg.log" 2>&1 || die "meshconfig (ring) failed, see $out/logs/cfg.log"
"$bin/meshconfig" --hosts "$hosts" --ssh-config "$cfg" \
	--output-hostfile "$out/logs/mesh.json" >>"$out/logs/cfg.log" 2>&1 || die "meshconfig (mesh) failed, see $out/logs/cfg.log"
grep -q '"mesh_ips"' "$out/logs/mesh.json" || die "meshconfig wrote no mesh_ips for $spec"

{
	echo "date: $(date -Is)"
	echo "host: $(uname -srm), $(nproc) cpus: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
	echo "cluster: $spec, cables ${rate:-unlimited (veth)}; sizes: $sizes; repeats: $repeats; passes: $passes"
	echo "policy: reno everywhere, 512K send buffers (libmeshrun's default), as bench/mesh"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/env.txt"

set_mtu() {
	info "meshconfig --auto-setup --mtu $1"
	"$bin/meshconfig" --hosts "$hosts" --ssh-config "$cfg" --backend ring --auto-setup --mtu "$1" \
		--output-hostfile "$out/logs/ring-$1.json" >>"$out/logs/cfg.log" 2>&1 ||
		die "meshconfig --mtu $1 failed, see $out/logs/cfg.log"
	# what the kernel has on a cable end, as a check of the check
	echo "mtu $1: h1 $(ip -n "$name-h1" -o link show dev en2 2>/dev/null | grep -o 'mtu [0-9]*')" >>"$out/env.txt"
}

run() { # mtu impl hostfile [args]
	local m=$1 impl=$2 hf=$3 log
	shift 3
	log=$out/logs/$impl-$m-p$pass
	info "mtu $m: $impl (pass $pass)"
	if "$bin/meshrun" --hostfile "$hf" --ssh-config "$cfg" -- "$bin/bench-ar-ours" \
		--sizes "$sizes" --repeats "$repeats" --label "$impl" "$@" >"$log.out" 2>"$log.err" </dev/null; then
		if [ "$impl" = mesh ] && ! grep -q 'backend mesh' "$log.err"; then
			info "mtu $m: the mesh run used $(grep -o 'backend [a-z-]*' "$log.err" | head -1): rows dropped"
			return 0
		fi
		grep "^$impl," "$log.out" | sed "s/^/$m,/" >>"$out/raw.csv"
	else
		info "mtu $m: $impl failed: $(head -3 "$log.err")"
	fi
}

for ((pass = 1; pass <= passes; pass++)); do
	mtus=(1500 9000)
	[ $((pass % 2)) = 1 ] || mtus=(9000 1500)
	for m in "${mtus[@]}"; do
		set_mtu "$m"
		run "$m" ring "$out/logs/ring.json"
		run "$m" mesh "$out/logs/mesh.json" --backend any
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/env.txt"

awk -F, -v n="$nhosts" -v spec="$spec" -v cab="${rate:-unlimited}" '
function median(key,   k, i, j, v, a) {
	k = cnt[key]
	for (i = 1; i <= k; i++) a[i] = val[key, i]
	for (i = 2; i <= k; i++) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
	return k ? (k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2) : 0
}
function human(b) { return b >= 1048576 ? (b / 1048576) "M" : (b / 1024) "K" }
function ms(t) { return t > 0 ? sprintf("%.1f", t * 1000) : "-" }
function ratio(a, b) { return (a > 0 && b > 0) ? sprintf("%.2f", a / b) : "-" }
{
	key = $1 SUBSEP $2 SUBSEP $4
	val[key, ++cnt[key]] = $6
	sizes[$4] = 1
}
END {
	ns = 0; for (s in sizes) sl[++ns] = s + 0
	for (i = 2; i <= ns; i++) { v = sl[i]; for (j = i - 1; j >= 1 && sl[j] > v; j--) sl[j + 1] = sl[j]; sl[j + 1] = v }
	printf "%s, %d ranks, cables %s: all-reduce at MTU 1500 and 9000\n", spec, n, cab
	printf "%-6s %12s %12s %9s %12s %12s %9s\n", "size", "ring 1500", "ring 9000", "ring x", "mesh 1500", "mesh 9000", "mesh x"
	for (j = 1; j <= ns; j++) {
		b = sl[j]
		r1 = median(1500 SUBSEP "ring" SUBSEP b); r9 = median(9000 SUBSEP "ring" SUBSEP b)
		m1 = median(1500 SUBSEP "mesh" SUBSEP b); m9 = median(9000 SUBSEP "mesh" SUBSEP b)
		printf "%-6s %12s %12s %9s %12s %12s %9s\n", human(b), ms(r1), ms(r9), ratio(r1, r9), ms(m1), ms(m9), ratio(m1, m9)
	}
	print "\nms: median time of one all-reduce over all passes; x: time at 1500 / time at 9000 (> 1: 9000 is faster)."
}' "$out/raw.csv" | tee "$out/report.txt"
grep -E '^(mtu|load)' "$out/env.txt"
echo "results: $out (raw.csv report.txt env.txt logs/)"
