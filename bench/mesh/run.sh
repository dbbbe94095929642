#!/bin/bash
# bench/mesh/run.sh - all-reduce where the links, not the processors, bind
# (issue 19 part 4), in one run, root:
#
#   bench/mesh/run.sh [--bin DIR] [--hosts 4,8|none] [--rate 4=300mbit,8=100mbit]
#       [--sizes 1M,16M,128M] [--repeats 3] [--peers ring,mesh,openmpi,raw]
#       [--limits rate,none] [--passes 1]
#       [--no-stripe] [--out DIR]
#
# For each host count n: `meshsim up mesh:n` (a full mesh, one cable per pair
# of hosts), meshconfig --auto-setup, every cable's rate limited with
# `meshsim fault rate` (tc tbf on both ends: --rate per direction; one rate
# for all, or N=RATE per host count), then the all-reduce of each size by
#   ring     libmeshrun's ring (bench-ar-ours; 2 of each host's n-1 cables)
#   mesh     libmeshrun's TCP mesh backend (every cable), when this build has
#            one: meshconfig's hostfile with mesh_ips, meshrun's choice,
#            bench-ar-ours --backend any (its log names the backend, checked);
#            else skipped, said so
#   openmpi  Open MPI's MPI_Allreduce (bench-ar-mpi under mpirun, each rank
#            exec'd into its host's namespace, btl tcp on the cables only)
#   raw      plain TCP over the mesh's own cables, no collective
#            (bench-tcp-raw --mesh, needs the mesh hostfile): "mesh-raw",
#            every rank 2S/n to and from every peer at once (the bytes of a
#            mesh all-reduce); "flow-raw", S each way between ranks 0 and 1
#            only (one flow per direction on one shaped cable; 16M only)
# and the same again with the rates removed (--limits rate,none). --passes P
# runs the peers of a case P times in turn, the order reversed every other
# pass, and takes the medians over all their rounds: this machine drifts by
# 10-20% over minutes, and a ratio of two rows run one after the other
# carries all of it (mesh/ring at 16 MiB unlimited, mesh:4: 0.88 in one
# pass, 0.97-1.01 in four more). Every peer
# gets the same TCP congestion control (reno: each host namespace's default,
# and libmeshrun's own default) and the same 512K send buffer (libmeshrun's
# default; Open MPI's btl_tcp_sndbuf), as in bench/allreduce.
#
# Link bound: an all-reduce of S bytes on n ranks must send (and receive) at
# least 2(n-1)/n * S bytes per rank; spread over a host's n-1 cables at R
# bytes/s each, that takes 2S/(nR): "bound". The ring can use only 2 cables:
# (n-1)S/(nR), "ring bound". R is the tbf rate; TCP's payload is about 95% of
# it at MTU 1500 (headers), so 95% of the bound is the practical best.
#
# The rate: the default keeps the processors from binding on a 2-core
# machine: a mesh of n moves n(n-1) flows at the rate at once (12 on mesh:4,
# 56 on mesh:8), all through the one kernel; at 1gbit the mesh:4's 12 Gbit/s
# of veth TCP is the processors' limit, not the cables'. flow-raw near 95% of
# the rate and mesh-raw near the bound show the cables bind.
#
# Striping (--no-stripe skips it): `meshsim up ring:2,cables=2`, two hosts
# joined by two cables, both rate limited; the 2-rank ring with both cables
# (the hostfile lists both addresses: one connection per address) against
# the same ring with one (the first address only), limited and unlimited.
#
# Output: a table per case on stdout and in OUT/report.txt, then the
# schedule the mesh row's MESHRUN_MESH_SCHEDULE=auto chose per size class
# (its ranks run with MLX_RING_VERBOSE; OUT/verdicts.txt), every row in
# OUT/raw.csv (case,impl,ranks,bytes,round,seconds), OUT/env.txt (machine,
# load before and after, policy). Medians of --repeats rounds (bench_common.h:
# a warm-up, then timed rounds). A benchmark, not a test: needs root, sshd
# and network namespaces; leaves nothing behind (trap). Run it under
# `flock /tmp/meshrun-ns.lock` on a shared machine.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$root/build/plain/bin
hosts_list=4,8
rate=4=300mbit,8=100mbit
sizes=1M,16M,128M
repeats=3
passes=1
peers=ring,mesh,openmpi,raw
limits=rate,none
stripe=1
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
	--hosts) hosts_list=$2; shift ;;
	--rate) rate=$2; shift ;;
	--sizes) sizes=$2; shift ;;
	--repeats) repeats=$2; shift ;;
	--passes) passes=$2; shift ;;
	--peers) peers=$2; shift ;;
	--limits) limits=$2; shift ;;
	--no-stripe) stripe=0 ;;
	--out) out=$2; shift ;;
	-h|--help) usage 0 ;;
	*) echo "run.sh: unknown option '$1'" >&2; usage 2 ;;
	esac
	shift
done
[ "$hosts_list" = none ] && hosts_list=""
[[ -z $hosts_list || $hosts_list =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--hosts: expected a list like 4,8 or 'none', got '$hosts_list'"
for n in ${hosts_list//,/ }; do
	[ "$n" -ge 3 ] && [ "$n" -le 16 ] || die "--hosts: $n is not in 3..16"
done
# the rate for n hosts: RATE, or the N=RATE entry (else the last entry's)
rate_for() {
	local e r=""
	for e in ${rate//,/ }; do
		case $e in "$1="*) echo "${e#*=}"; return ;; *=*) r=${e#*=} ;; *) r=$e ;; esac
	done
	echo "$r"
}
[[ $rate =~ ^([0-9]+=)?[0-9]+(k|m|g)bit(,([0-9]+=)?[0-9]+(k|m|g)bit)*$ ]] || die "--rate: expected a rate like 500mbit or 2gbit, or 4=300mbit,8=100mbit, got '$rate'"
[[ $sizes =~ ^[0-9]+[KMG]?(,[0-9]+[KMG]?)*$ ]] || die "--sizes: expected a list like 16M,128M, got '$sizes'"
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats: expected a positive number, got '$repeats'"
[[ $passes =~ ^[1-9][0-9]*$ ]] || die "--passes: expected a positive number, got '$passes'"
for p in ${peers//,/ }; do
	case $p in ring|mesh|openmpi|raw) ;; *) die "--peers: unknown peer '$p'" ;; esac
done
for l in ${limits//,/ }; do
	case $l in rate|none) ;; *) die "--limits: rate or none, got '$l'" ;; esac
done
[ "$(id -u)" -eq 0 ] || die "meshsim needs root"
[ -x /usr/sbin/sshd ] || die "sshd is not installed (openssh-server)"
bin=$(cd "$bin" && pwd) || die "--bin: no such folder"
for p in meshsim meshconfig meshrun bench-ar-ours; do
	[ -x "$bin/$p" ] || die "$bin/$p is not built"
done
has_peer() { [[ ",$peers," == *",$1,"* ]]; }
if has_peer mesh && ! "$bin/meshrun" --help 2>&1 | grep -q 'mesh_ips'; then
	info "this build's meshrun knows no mesh backend (mesh_ips): skipping mesh"
	peers=${peers//mesh/}
	peers=${peers//raw/}
fi
if has_peer raw && [ ! -x "$bin/bench-tcp-raw" ]; then
	info "$bin/bench-tcp-raw is not built: skipping raw"
	peers=${peers//raw/}
fi
if has_peer openmpi && { [ ! -x "$bin/bench-ar-mpi" ] || ! command -v mpirun >/dev/null || ! command -v socat >/dev/null; }; then
	info "Open MPI cannot be measured (bench-ar-mpi, mpirun or socat missing): skipping it"
	peers=${peers//openmpi/}
fi
[ -n "$out" ] || out=$root/build-bench/bench-out/mesh-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out/logs" || die "cannot create $out"
out=$(cd "$out" && pwd)
: >"$out/raw.csv"
echo "case,rate_bytes_per_s" >"$out/rates.csv" # never empty: the report reads it first

export MESHSIM_STATE_DIR=$out/state
name=bm$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n' | cut -c1-7)
up=0
mpi_st=$out/logs/mpi-state
cleanup() {
	local f
	for f in "$mpi_st"/relay-*.pid; do
		[ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	[ "$up" = 0 ] || "$bin/meshsim" down "$name" >/dev/null 2>&1
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

{
	echo "date: $(date -Is)"
	echo "host: $(uname -srm), $(nproc) cpus: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
	echo "hosts: $hosts_list; rate per cable and direction: $rate (tc tbf, meshsim fault rate: a bucket of 10 ms at the rate, at least 64K; queue 100 ms); sizes: $sizes; repeats: $repeats; passes: $passes"
	echo "policy: every peer reno (each host namespace's default; libmeshrun's own) and a 512K send buffer (libmeshrun's default; Open MPI --mca btl_tcp_sndbuf 524288)"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	mpirun --version 2>/dev/null | head -1
} >"$out/env.txt"

# bytes/s of a tc rate
rate_bytes() {
	local v=${1%bit} m
	case $v in *k) m=1000 ;; *m) m=1000000 ;; *g) m=1000000000 ;; esac
	echo $((${v%?} * m / 8))
}

# the cluster's cables as "hA:enX" (one end each), from meshsim status
cables() {
	"$bin/meshsim" status "$name" | awk '/^cables:/ {c = 1; next} /^[a-z]/ {c = 0} c && $2 == "<->" {print $1}'
}

cluster_up() { # spec
	local spec=$1 h
	info "meshsim up $spec"
	"$bin/meshsim" up "$spec" --name "$name" >"$out/logs/up-$spec.log" 2>&1 || {
		tail -5 "$out/logs/up-$spec.log" >&2
		die "meshsim up $spec failed"
	}
	up=1
	cfg=$MESHSIM_STATE_DIR/$name/ssh_config
	hosts=$(awk '$1 == "Host" { printf "%s%s", sep, $2; sep = "," }' "$cfg")
	# the same congestion control for every peer: each host's default
	for h in ${hosts//,/ }; do
		ip netns exec "$name-$h" sysctl -qw net.ipv4.tcp_congestion_control=reno ||
			die "cannot set reno in $name-$h"
	done
	"$bin/meshconfig" --hosts "$hosts" --backend ring --auto-setup --ssh-config "$cfg" \
		--output-hostfile "$out/logs/ring-$spec.json" >"$out/logs/cfg-$spec.log" 2>&1 ||
		die "meshconfig on $spec failed, see $out/logs/cfg-$spec.log"
	hf_ring=$out/logs/ring-$spec.json
	hf_mesh=""
	if has_peer mesh && [[ $spec == mesh:* ]]; then
		# meshconfig's own choice on a full mesh: a hostfile with mesh_ips
		"$bin/meshconfig" --hosts "$hosts" --ssh-config "$cfg" \
			--output-hostfile "$out/logs/mesh-$spec.json" >>"$out/logs/cfg-$spec.log" 2>&1 ||
			die "meshconfig (mesh) on $spec failed, see $out/logs/cfg-$spec.log"
		if jq -e '.hosts[0].mesh_ips' "$out/logs/mesh-$spec.json" >/dev/null 2>&1; then
			hf_mesh=$out/logs/mesh-$spec.json
		else
			info "meshconfig wrote no mesh_ips for $spec: no mesh rows"
		fi
	fi
	# only where each pair of hosts has one cable (two cables between the
	# same hosts would each get routes to the other's address: crossed)
	[[ $spec == mesh:* ]] && direct_routes
	return 0
}

# Open MPI connects to any address a peer publishes and gives up on one it
# cannot reach: route every other address of a cabled neighbour over the
# direct cable (one cable per pair on a full mesh), so every connection
# between two hosts takes the cable that joins them.
direct_routes() {
	local a ia b ib aa ab x
	cables_both | while read -r a ia b ib; do
		aa=$(ip -n "$name-$a" -4 -o addr show dev "$ia" | awk '{sub(/\/.*/, "", $4); print $4; exit}')
		ab=$(ip -n "$name-$b" -4 -o addr show dev "$ib" | awk '{sub(/\/.*/, "", $4); print $4; exit}')
		[ -n "$aa" ] && [ -n "$ab" ] || continue
		for x in $(host_addrs "$b"); do
			[ "$x" = "$ab" ] || ip -n "$name-$a" route replace "$x/32" via "$ab" dev "$ia"
		done
		for x in $(host_addrs "$a"); do
			[ "$x" = "$aa" ] || ip -n "$name-$b" route replace "$x/32" via "$aa" dev "$ib"
		done
	done
}
# every cable as "hA enX hB enY"
cables_both() {
	"$bin/meshsim" status "$name" | awk '/^cables:/ {c = 1; next} /^[a-z]/ {c = 0}
		c && $2 == "<->" { split($1, x, ":"); split($3, y, ":"); print x[1], x[2], y[1], y[2] }'
}
# a host's cable addresses (not en0, the management network)
host_addrs() {
	ip -n "$name-$1" -4 -o addr show | awk '$2 ~ /^en[1-9]/ {sub(/\/.*/, "", $4); print $4}'
}

cluster_down() {
	"$bin/meshsim" down "$name" >/dev/null 2>&1
	up=0
}

set_rates() { # rate|off
	local c
	for c in $(cables); do
		"$bin/meshsim" fault --name "$name" rate "$c" "$1" >/dev/null ||
			die "meshsim fault rate $c $1 failed"
	done
}

# run_ours CASE LABEL HOSTFILE [bench args]: rank 0's rows to raw.csv
run_ours() {
	local cs=$1 label=$2 hf=$3 log
	shift 3
	log=$out/logs/$cs-$label${pass_tag:-}
	info "$cs: $label"
	# the mesh logs (MLX_RING_VERBOSE) which schedule auto chose per size class
	local verbose=()
	[ "$label" = mesh ] && verbose=(--env MLX_RING_VERBOSE=1)
	if "$bin/meshrun" "${verbose[@]}" --hostfile "$hf" --ssh-config "$cfg" -- "$bin/${prog:-bench-ar-ours}" \
		--sizes "$sizes" --repeats "$repeats" --label "$label" "$@" >"$log.out" 2>"$log.err" </dev/null; then
		if [ "$label" = mesh ] && ! grep -q 'backend mesh' "$log.err"; then
			info "$cs: the mesh run used $(grep -o 'backend [a-z-]*' "$log.err" | head -1): rows dropped"
			return 0
		fi
		[ "$label" = mesh ] && echo "$cs: $(grep '^\[mesh\] rank 0: .*schedule from now on' "$log.err" |
			sed 's/.*(class \(2^[0-9]*\)).* the \([a-z]*\) schedule from now on.*/\1 \2/' | tr '\n' ';')" >>"$out/verdicts.txt"
		grep "^$label," "$log.out" | sed "s/^/$cs,/" >>"$out/raw.csv"
	else
		info "$cs: $label failed: $(head -3 "$log.err")"
	fi
}

# Open MPI: rank r in host h(r+1)'s namespace (mpi_netns_wrap.sh), btl tcp
# on the cables' addresses only (meshconfig gives them 192.168.0.0/16).
run_mpi() { # case n
	local cs=$1 n=$2 log=$out/logs/$1-openmpi${pass_tag:-} f
	info "$cs: openmpi"
	rm -rf "$mpi_st"
	mkdir -p "$mpi_st"
	if MPI_NETNS_RANK_BASE=1 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" \
		--mca mpi_yield_when_idle 1 --mca btl tcp,self --mca btl_tcp_if_include 192.168.0.0/16 \
		--mca btl_tcp_sndbuf 524288 -x MPI_NETNS_RANK_BASE \
		"$root/bench/allreduce/mpi_netns_wrap.sh" "$name-h" "$mpi_st" \
		"$bin/bench-ar-mpi" --sizes "$sizes" --repeats "$repeats" >"$log.out" 2>"$log.err" </dev/null; then
		grep '^openmpi,' "$log.out" | sed "s/^/$cs,/" >>"$out/raw.csv"
	else
		info "$cs: openmpi failed: $(head -3 "$log.err")"
	fi
	for f in "$mpi_st"/relay-*.pid; do
		[ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	rm -f "$mpi_st"/*.sock "$mpi_st"/*.pid
}

# --- the meshes ---
for n in ${hosts_list//,/ }; do
	cluster_up "mesh:$n"
	for lim in ${limits//,/ }; do
		cs=mesh$n-$lim
		[ "$lim" = rate ] && set_rates "$(rate_for "$n")" && echo "$cs,$(rate_bytes "$(rate_for "$n")")" >>"$out/rates.csv"
		for ((pass = 1; pass <= passes; pass++)); do
			pass_tag=""
			[ "$passes" = 1 ] || pass_tag=-p$pass
			order=(ring mesh openmpi raw)
			[ $((pass % 2)) = 1 ] || order=(raw openmpi mesh ring)
			for p in "${order[@]}"; do
				case $p in
				ring) has_peer ring && run_ours "$cs" ring "$hf_ring" ;;
				# meshrun picks the mesh on a hostfile with mesh_ips; the program
				# takes what the environment configures and says which (checked)
				mesh) [ -n "$hf_mesh" ] && run_ours "$cs" mesh "$hf_mesh" --backend any ;;
				openmpi) has_peer openmpi && run_mpi "$cs" "$n" ;;
				raw)
					if has_peer raw && [ -n "$hf_mesh" ]; then
						prog=bench-tcp-raw run_ours "$cs" mesh-raw "$hf_mesh" --mesh
						# one size is enough to see what a cable gives (128M takes 10 s at 100mbit)
						sizes=16M prog=bench-tcp-raw run_ours "$cs" flow-raw "$hf_mesh" --mesh --pair
					fi ;;
				esac
			done
		done
		[ "$lim" = rate ] && set_rates off
	done
	cluster_down
done

# --- one hop over two cables vs one ---
if [ "$stripe" = 1 ]; then
	cluster_up "ring:2,cables=2"
	hf2=$hf_ring
	hf1=$out/logs/ring-one-cable.json
	# the same hostfile with each host's first address only
	jq '.hosts |= map(.ips |= .[:1])' "$hf2" >"$hf1" || die "jq failed on $hf2"
	[ "$(jq '.hosts[0].ips | length' "$hf2")" = 2 ] || die "meshconfig gave $(jq -c '.hosts[0].ips' "$hf2") for two cables"
	for lim in ${limits//,/ }; do
		cs=hop-$lim
		[ "$lim" = rate ] && set_rates "$(rate_for 2)" && echo "$cs,$(rate_bytes "$(rate_for 2)")" >>"$out/rates.csv"
		for ((pass = 1; pass <= passes; pass++)); do
			pass_tag=""
			[ "$passes" = 1 ] || pass_tag=-p$pass
			if [ $((pass % 2)) = 1 ]; then
				run_ours "$cs" two-cables "$hf2"
				run_ours "$cs" one-cable "$hf1"
			else
				run_ours "$cs" one-cable "$hf1"
				run_ours "$cs" two-cables "$hf2"
			fi
		done
		[ "$lim" = rate ] && set_rates off
	done
	cluster_down
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/env.txt"

# --- report ---
awk -F, '
function median(key,   n, i, j, v, a) {
	n = cnt[key]
	for (i = 1; i <= n; i++) a[i] = val[key, i]
	for (i = 2; i <= n; i++) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function human(b) { return b >= 1048576 ? (b / 1048576) "M" : (b / 1024) "K" }
function ms(t) { return t > 0 ? sprintf("%.1f", t * 1000) : "-" }
function ratio(a, b) { return (a > 0 && b > 0) ? sprintf("%.2f", a / b) : "-" }
function pct(a, b) { return (a > 0 && b > 0) ? sprintf("%.0f%%", 100 * a / b) : "-" }
function rname(b) { return b >= 125000000 ? (b * 8 / 1e9) "gbit" : (b * 8 / 1e6) "mbit" }
FNR == NR { rbs[$1] = $2; next }
{
	key = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4
	if (!(key in cnt)) cnt[key] = 0
	val[key, ++cnt[key]] = $6
	cases[$1] = $3; sizes[$4] = 1
}
END {
	ns = 0; for (s in sizes) sl[++ns] = s + 0
	for (i = 2; i <= ns; i++) { v = sl[i]; for (j = i - 1; j >= 1 && sl[j] > v; j--) sl[j + 1] = sl[j]; sl[j + 1] = v }
	nc = 0; for (c in cases) cl[++nc] = c
	for (i = 2; i <= nc; i++) { v = cl[i]; for (j = i - 1; j >= 1 && cl[j] > v; j--) cl[j + 1] = cl[j]; cl[j + 1] = v }
	for (i = 1; i <= nc; i++) {
		c = cl[i]; n = cases[c]; lim = c ~ /-rate$/; rb = rbs[c]; rate = rname(rb)
		if (c ~ /^hop/) {
			printf "\n%s: 2 ranks, one hop over two cables vs one%s\n", c, lim ? " (each cable " rate ")" : " (unlimited)"
			printf "%-6s %12s %12s %9s %14s\n", "size", "2 cables ms", "1 cable ms", "x 1 cable", "1-cable bound"
			for (j = 1; j <= ns; j++) {
				b = sl[j]
				t2 = median(c SUBSEP "two-cables" SUBSEP n SUBSEP b); t1 = median(c SUBSEP "one-cable" SUBSEP n SUBSEP b)
				bnd = b / rb
				printf "%-6s %12s %12s %9s %14s\n", human(b), ms(t2), ms(t1), ratio(t1, t2), lim ? ms(bnd) : "-"
			}
			continue
		}
		printf "\n%s: %d ranks on a full mesh%s\n", c, n, lim ? " (every cable " rate " per direction)" : " (unlimited cables)"
		printf "%-6s %10s %10s %10s %9s %9s %10s %10s %8s %8s %10s %9s %9s\n", "size", "ring ms", "mesh ms", "ompi ms",
		       "mesh/ring", "ring/ompi", "bound ms", "ring bnd", "mesh %bd", "ring %rb", "raw ms", "mesh %raw", "flow %rt"
		for (j = 1; j <= ns; j++) {
			b = sl[j]
			tr = median(c SUBSEP "ring" SUBSEP n SUBSEP b)
			tm = median(c SUBSEP "mesh" SUBSEP n SUBSEP b)
			to = median(c SUBSEP "openmpi" SUBSEP n SUBSEP b)
			tw = median(c SUBSEP "mesh-raw" SUBSEP n SUBSEP b)
			tf = median(c SUBSEP "flow-raw" SUBSEP n SUBSEP b)
			bnd = 2 * b / (n * rb); rbnd = (n - 1) * b / (n * rb)
			printf "%-6s %10s %10s %10s %9s %9s %10s %10s %8s %8s %10s %9s %9s\n", human(b), ms(tr), ms(tm), ms(to),
			       ratio(tr, tm), ratio(to, tr), lim ? ms(bnd) : "-", lim ? ms(rbnd) : "-",
			       lim ? pct(bnd, tm) : "-", lim ? pct(rbnd, tr) : "-", ms(tw), pct(tw, tm), lim ? pct(b / rb, tf) : "-"
		}
	}
	print "\nms: median time of one all-reduce; mesh/ring and ring/ompi: speed-up (time ratio, >1 = first is faster);"
	print "bound: 2(n-1)/n x size per rank over its n-1 cables; ring bnd: the same over the ring'"'"'s 2 cables;"
	print "%bd / %rb: bound / time (TCP payload is ~95% of a tbf rate at MTU 1500)."
	print "raw: plain TCP, 2S/n to and from every peer at once over the mesh cables (mesh-raw); mesh %raw: raw / mesh time;"
	print "flow %rt: S/rate / the time of S each way over one cable alone (flow-raw): what TCP gets of one shaped cable."
}' "$out/rates.csv" "$out/raw.csv" | tee "$out/report.txt"
if [ -s "$out/verdicts.txt" ]; then
	echo "mesh row, the schedule MESHRUN_MESH_SCHEDULE=auto chose per size class (rank 0's log):"
	cat "$out/verdicts.txt"
fi | tee -a "$out/report.txt"
grep -E '^(policy|load)' "$out/env.txt"
echo "results: $out (raw.csv report.txt env.txt logs/)"
