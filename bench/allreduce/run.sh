#!/bin/bash
# bench/allreduce/run.sh - all-reduce bus bandwidth and latency of libmeshrun's
# ring backend vs Open MPI's MPI_Allreduce vs Gloo's ring and ring-chunked
# all-reduce vs raw TCP, in ONE run, on the same links.
#
#   bench/allreduce/run.sh [--ranks 2,4] [--sizes 4K,...,128M] [--repeats 5]
#       [--passes 2] [--out DIR] [--build DIR] [--mode netns|loopback]
#       [--peers ours,openmpi,meshrun-mpi,mlx-shim,mlx-openmpi,gloo,tcp-raw]
#       [--conns 1] [--no-deps] [--no-build] [--cc NAME] [--sndbuf SIZE]
#       [--legacy] [--ring-cc NAME] [--ring-sndbuf SIZE] [--sys-cc NAME] [--nice N]
#       [--dtype float32|float16|bfloat16]
#
# Topology (--mode netns, the default; root): per rank count n, a ring of n
# network namespaces mrb-r0..mrb-r<n-1> with one rank each; neighbours are
# joined by a veth pair (one pair for n = 2) with a /30 from 10.233.0.0/16:
# link k joins rank k (10.233.k.1, "mrr") and rank k+1 (10.233.k.2, "mrl").
# Rank r's address is its end of the link to its left neighbour, which is what
# an MLX ring hostfile lists. Host routes send traffic for a neighbour over the
# direct link and for other ranks (connection setup, and the data of any
# Open MPI algorithm that talks to non-neighbours) through the ring, with
# forwarding on. Everything is removed by a trap (also a half-made ring).
# --mode loopback: every rank on 127.0.0.1 in the current namespace (no root).
#
# Peers: ours = bench-ar-ours (libmeshrun ring backend, MLX_RANK/MLX_HOSTFILE,
# --conns connections per address); openmpi = bench-ar-mpi under mpirun
# --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1
# --mca btl tcp,self --mca btl_tcp_if_include 10.233.0.0/16 (lo in loopback
# mode), each rank exec'd into its namespace by mpi_netns_wrap.sh;
# meshrun-mpi = bench-meshrun-mpi (bench/mpi: libmeshrun's mpi backend, i.e.
# Open MPI's MPI_Allreduce through libmeshrun) launched the same way, whose
# figures should match openmpi's (the same engine); gloo =
# bench-ar-gloo (FileStore rendezvous, TCP device on the rank's ring address);
# tcp-raw = bench-tcp-raw; mlx-shim and mlx-openmpi = bench-ar-mlxmpi, MLX's
# mpi backend reduced to its dlopen pattern (issue 18), once through
# libmeshrun-mpi (MLX_MPI_LIBNAME = the build's libmeshrun-mpi, ranks started
# as for ours, with the same ring settings: libmeshrun's ring underneath) and
# once through Open MPI's libmpi.so (ranks started as for openmpi). Packages the bench needs (libgloo-dev, gnuplot-nox,
# g++, socat) are installed here if missing (--no-deps: don't); none of this
# is part of the test command.
#
# Method (same for every peer, see bench_common.h): per size a warm-up round,
# then --repeats timed rounds of back-to-back in-place float32 sums after a
# barrier; --passes runs every peer that many times, rotating the order,
# and the medians are over all rounds. busbw = bytes/t * 2(n-1)/n. tcp-raw:
# every rank sends and receives bytes * 2(n-1)/n over its two ring links at
# once (half each way per link); its "busbw" is the per-rank TCP throughput,
# the bound for a ring all-reduce.
#
# Fair by default: every peer runs with the same TCP congestion control
# and the same send buffer, and env.txt says which.
#  --cc NAME (default reno): netns mode sets NAME as every rank namespace's
#    default (net.ipv4.tcp_congestion_control), which is what Open MPI and
#    Gloo get, and gives it to ours (MESHRUN_RING_TCP_CC) and tcp-raw (--cc)
#    explicitly. reno because BBR, a common system default, paces every
#    socket from a timer and costs a fifth to a quarter of the CPU per byte
#    here, and the kernel lets a namespace default only to a name in
#    net.ipv4.tcp_allowed_congestion_control. "system": every peer keeps the
#    system's default. Loopback mode cannot change what Open MPI and Gloo
#    get, so there the default is "system" for every peer.
#  --sndbuf SIZE (default 512K, libmeshrun's MESHRUN_RING_SNDBUF default):
#    SO_SNDBUF of every peer's data sockets, where the peer lets us set it:
#    ours (MESHRUN_RING_SNDBUF), tcp-raw (--sndbuf), Open MPI and
#    meshrun-mpi (--mca btl_tcp_sndbuf). "system": autotuned for those.
#    Gloo has no setting: it sets SO_SNDBUF itself before each send larger
#    than the buffer, to the message size (at most 32 MiB; the kernel caps
#    it at net.core.wmem_max), whatever the system says; env.txt says so.
#    A fixed buffer matters here: autotuned, MiBs queue per connection and
#    the receive copies come from memory, not cache.
#  --legacy: the old default (ours and tcp-raw: reno and 512K; Open MPI and
#    Gloo: the system's congestion control and their own buffers), to see
#    what the congestion control and buffers alone are worth.
#  --ring-cc NAME / --ring-sndbuf SIZE override ours and tcp-raw only,
#  --sys-cc NAME the namespaces' default (Open MPI, Gloo) only.
# --dtype NAME: the element type of ours' sums (default float32). float16 and
# bfloat16 are MLX's training types; no other peer sums them (MPI has no such
# type), so with them --peers may name only ours and tcp-raw (which moves
# bytes: the same bound). busbw counts bytes, so rows compare across types.
# --nice N runs every peer's ranks at that niceness (all peers alike, so that
# a busy shared machine decides less of the numbers). links.txt records, per
# peer run, the congestion control and send buffer that rank 0's established
# connections on the ring links had during the run (bench-socks, sock_diag), as a check.
#
# Output in --out (default <build>/bench-out/allreduce-<time>):
# raw.csv (every round), summary.csv (medians), compare.csv (ratios),
# busbw.png (busbw vs size, one panel per rank count), env.txt (machine/load),
# links.txt (bytes rank 0 sent on its ring links per peer run), logs/.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ranks_list=2,4
sizes=4K,16K,64K,256K,1M,4M,16M,64M,128M
repeats=5
passes=2
out=""
build=$root/build-bench
mode=netns
peers=ours,openmpi,meshrun-mpi,mlx-shim,mlx-openmpi,gloo,tcp-raw
conns=1
cc=""
sndbuf=""
legacy=0
ring_cc=""
ring_sndbuf=""
sys_cc=""
nice_n=0
dtype=float32
deps=1
do_build=1
port_base=29500
prefix=mrb-

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
	exit "${1:-0}"
}
die() { echo "[ERROR] $*" >&2; exit 1; }
info() { echo "[INFO] $*" >&2; }

while [ $# -gt 0 ]; do
	case $1 in
	--ranks) ranks_list=$2; shift ;;
	--sizes) sizes=$2; shift ;;
	--repeats) repeats=$2; shift ;;
	--passes) passes=$2; shift ;;
	--out) out=$2; shift ;;
	--build) build=$2; shift ;;
	--mode) mode=$2; shift ;;
	--peers) peers=$2; shift ;;
	--conns) conns=$2; shift ;;
	--cc) cc=$2; shift ;;
	--sndbuf) sndbuf=$2; shift ;;
	--legacy) legacy=1 ;;
	--ring-cc) ring_cc=$2; shift ;;
	--ring-sndbuf) ring_sndbuf=$2; shift ;;
	--sys-cc) sys_cc=$2; shift ;;
	--nice) nice_n=$2; shift ;;
	--dtype) dtype=$2; shift ;;
	--no-deps) deps=0 ;;
	--no-build) do_build=0 ;;
	-h|--help) usage 0 ;;
	*) echo "run.sh: unknown option '$1'" >&2; usage 2 ;;
	esac
	shift
done
[[ $ranks_list =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--ranks: expected a list like 2,4, got '$ranks_list'"
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats: expected a positive number, got '$repeats'"
[[ $passes =~ ^[1-9][0-9]*$ ]] || die "--passes: expected a positive number, got '$passes'"
[[ $conns =~ ^[1-8]$ ]] || die "--conns: expected 1..8, got '$conns'"
[[ -z $cc || $cc =~ ^[a-z0-9_-]{1,15}$ ]] || die "--cc: expected a congestion control name like reno, or 'system', got '$cc'"
[[ -z $sndbuf || $sndbuf = system || $sndbuf =~ ^[0-9]+[KMkm]?$ ]] || die "--sndbuf: expected a size like 512K or 'system', got '$sndbuf'"
[[ -z $ring_cc || $ring_cc =~ ^[a-z0-9_-]{1,15}$ ]] || die "--ring-cc: expected a congestion control name like reno, got '$ring_cc'"
[[ -z $ring_sndbuf || $ring_sndbuf = system || $ring_sndbuf =~ ^[0-9]+[KMkm]?$ ]] || die "--ring-sndbuf: expected a size like 512K or 'system', got '$ring_sndbuf'"
[[ -z $sys_cc || $sys_cc =~ ^[a-z0-9_-]{1,15}$ ]] || die "--sys-cc: expected a congestion control name like reno, got '$sys_cc'"
[[ $nice_n =~ ^-?[0-9]+$ ]] && [ "$nice_n" -ge -20 ] && [ "$nice_n" -le 19 ] || die "--nice: expected -20..19, got '$nice_n'"
if [ "$legacy" = 1 ] && [ -n "$cc$sndbuf" ]; then
	die "--legacy is the old default: it takes no --cc or --sndbuf"
fi
case $mode in netns|loopback) ;; *) die "--mode: netns or loopback, got '$mode'" ;; esac
if [ -n "$sys_cc" ] && [ "$mode" != netns ]; then
	die "--sys-cc needs --mode netns (it sets the rank namespaces' default)"
fi
if [ "$mode" = loopback ] && [ -n "$cc" ] && [ "$cc" != system ]; then
	die "--cc $cc needs --mode netns (Open MPI and Gloo get the namespace's default; loopback mode cannot change it)"
fi
# Resolve what each peer gets. ring_*: ours and tcp-raw; sys_cc: the rank
# namespaces' default ("" = leave the system's); peer_sndbuf: Open MPI's
# btl_tcp_sndbuf, "" = its own (autotuned).
if [ "$legacy" = 1 ]; then
	: "${ring_cc:=reno}" "${ring_sndbuf:=512K}"
	peer_sndbuf=""
else
	[ -n "$cc" ] || { if [ "$mode" = netns ]; then cc=reno; else cc=system; fi; }
	[ -n "$sndbuf" ] || sndbuf=512K
	: "${ring_cc:=$cc}" "${ring_sndbuf:=$sndbuf}"
	[ "$cc" = system ] || [ "$mode" != netns ] || : "${sys_cc:=$cc}"
	peer_sndbuf=$sndbuf
	[ "$peer_sndbuf" = system ] && peer_sndbuf=""
fi
# the size in bytes (K/M suffixes) that setsockopt gets
to_bytes() {
	local v=$1 m=1
	case $v in *[Kk]) m=1024; v=${v%?} ;; *[Mm]) m=1048576; v=${v%?} ;; esac
	echo $((v * m))
}
peer_sndbuf_bytes=""
[ -n "$peer_sndbuf" ] && peer_sndbuf_bytes=$(to_bytes "$peer_sndbuf")
if [ -n "$sys_cc" ] && ! grep -qw -- "$sys_cc" /proc/sys/net/ipv4/tcp_available_congestion_control; then
	modprobe "tcp_$sys_cc" 2>/dev/null || true
	grep -qw -- "$sys_cc" /proc/sys/net/ipv4/tcp_available_congestion_control ||
		die "congestion control '$sys_cc' is not available (tcp_available_congestion_control: $(cat /proc/sys/net/ipv4/tcp_available_congestion_control))"
fi
[[ $sizes =~ ^[0-9]+[KMG]?(,[0-9]+[KMG]?)*$ ]] || die "--sizes: expected a list like 4K,1M, got '$sizes'"
for n in ${ranks_list//,/ }; do
	[ "$n" -ge 2 ] && [ "$n" -le 16 ] || die "--ranks: $n is not in 2..16"
done
case $dtype in float32|float16|bfloat16) ;; *) die "--dtype: float32, float16 or bfloat16, got '$dtype'" ;; esac
for p in ${peers//,/ }; do
	case $p in ours|openmpi|meshrun-mpi|mlx-shim|mlx-openmpi|gloo|tcp-raw) ;; *) die "--peers: unknown peer '$p'" ;; esac
	case $dtype:$p in float32:* | *:ours | *:tcp-raw) ;; *) die "--dtype $dtype: only ours and tcp-raw take it, --peers names '$p'" ;; esac
done
if [ "$mode" = netns ] && [ "$(id -u)" -ne 0 ]; then
	die "--mode netns needs root (network namespaces); use --mode loopback"
fi
[ -n "$out" ] || out=$build/bench-out/allreduce-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
out=$(cd "$out" && pwd)

# --- what the bench needs: installed idempotently, never part of the tests ---
if [ $deps = 1 ]; then
	"$root/scripts/deps.sh" libgloo-dev gnuplot-nox g++ socat
fi
if [ $do_build = 1 ]; then
	cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/cmake.log" 2>&1 ||
		die "cmake configure failed, see $out/cmake.log"
	targets=(bench-ar-ours bench-tcp-raw bench-socks)
	known=$(cmake --build "$build" --target help 2>/dev/null || true)
	grep -qw 'bench-ar-mpi' <<<"$known" && targets+=(bench-ar-mpi)
	grep -qw 'bench-meshrun-mpi' <<<"$known" && targets+=(bench-meshrun-mpi)
	grep -qw 'bench-ar-gloo' <<<"$known" && targets+=(bench-ar-gloo)
	grep -qw 'bench-ar-mlxmpi' <<<"$known" && targets+=(bench-ar-mlxmpi meshrun_mpi)
	cmake --build "$build" -j2 --target "${targets[@]}" >>"$out/cmake.log" 2>&1 ||
		die "build failed, see $out/cmake.log"
fi
bin=$build/bin
has_peer() { [[ ",$peers," == *",$1,"* ]]; }
has_peer ours && { [ -x "$bin/bench-ar-ours" ] || die "missing $bin/bench-ar-ours"; }
has_peer tcp-raw && { [ -x "$bin/bench-tcp-raw" ] || die "missing $bin/bench-tcp-raw"; }
[ "$mode" != netns ] || [ -x "$bin/bench-socks" ] || die "missing $bin/bench-socks (the connections sampler)"
if has_peer openmpi && { [ ! -x "$bin/bench-ar-mpi" ] || ! command -v mpirun >/dev/null; }; then
	info "Open MPI is not available: skipping it"
	peers=${peers//openmpi/}
fi
if has_peer meshrun-mpi && { [ ! -x "$bin/bench-meshrun-mpi" ] || ! command -v mpirun >/dev/null; }; then
	info "libmeshrun's mpi backend cannot be measured (no bench-meshrun-mpi or mpirun): skipping it"
	peers=${peers//meshrun-mpi/}
fi
shim=$build/lib/libmeshrun-mpi.so
[ -e "$shim" ] || shim=$build/lib/libmeshrun-mpi.dylib
if has_peer mlx-shim && { [ ! -x "$bin/bench-ar-mlxmpi" ] || [ ! -e "$shim" ]; }; then
	info "no bench-ar-mlxmpi or libmeshrun-mpi in $build: skipping mlx-shim"
	peers=${peers//mlx-shim/}
fi
if has_peer mlx-openmpi && { [ ! -x "$bin/bench-ar-mlxmpi" ] || ! command -v mpirun >/dev/null; }; then
	info "no bench-ar-mlxmpi or mpirun: skipping mlx-openmpi"
	peers=${peers//mlx-openmpi/}
fi
if has_peer gloo && [ ! -x "$bin/bench-ar-gloo" ]; then
	info "Gloo is not available (libgloo-dev): skipping it"
	peers=${peers//gloo/}
fi

# --- topology ---
cur_n=0
cleanup_ring() {
	local ns
	for ns in $(ip netns list 2>/dev/null | awk -v p="$prefix" 'index($1, p) == 1 {print $1}'); do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
		ip netns del "$ns" 2>/dev/null || true
	done
	# veth ends still in our namespace (a half-made ring)
	for l in $(ip -o link show 2>/dev/null | awk -F': ' -v p="$prefix" 'index($2, p) == 1 {sub(/@.*/, "", $2); print $2}'); do
		ip link del "$l" 2>/dev/null || true
	done
	cur_n=0
}
rank_pids=()
cleanup() {
	local p
	for p in "${rank_pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	[ "$mode" = netns ] && cleanup_ring
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ns_of() { echo "${prefix}r$1"; }
# rank r's listen address (its end of the link to the left neighbour)
addr_of() {
	local n=$1 r=$2
	if [ "$mode" = loopback ]; then echo 127.0.0.1
	elif [ "$n" = 2 ]; then echo "10.233.0.$((r + 1))"
	else echo "10.233.$(((r - 1 + n) % n)).2"
	fi
}

setup_ring() {
	local n=$1 nlinks k a b r o d via dev
	cleanup_ring
	for ((r = 0; r < n; r++)); do
		ip netns add "$(ns_of $r)"
		ip -n "$(ns_of $r)" link set lo up
		ip netns exec "$(ns_of $r)" sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 \
			net.ipv4.conf.default.rp_filter=0
		[ -z "$sys_cc" ] || ip netns exec "$(ns_of $r)" sysctl -qw "net.ipv4.tcp_congestion_control=$sys_cc" ||
			die "congestion control $sys_cc: a namespace may only default to one in net.ipv4.tcp_allowed_congestion_control ($(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control))"
	done
	nlinks=$n
	[ "$n" = 2 ] && nlinks=1
	for ((k = 0; k < nlinks; k++)); do
		a=$k b=$(((k + 1) % n))
		ip link add "${prefix}${k}a" type veth peer name "${prefix}${k}b"
		ip link set "${prefix}${k}a" netns "$(ns_of $a)"
		ip link set "${prefix}${k}b" netns "$(ns_of $b)"
		ip -n "$(ns_of $a)" link set "${prefix}${k}a" name mrr
		ip -n "$(ns_of $b)" link set "${prefix}${k}b" name mrl
		ip -n "$(ns_of $a)" addr add "10.233.$k.1/30" dev mrr
		ip -n "$(ns_of $b)" addr add "10.233.$k.2/30" dev mrl
		ip -n "$(ns_of $a)" link set mrr up
		ip -n "$(ns_of $b)" link set mrl up
	done
	# host routes to the addresses of ranks that are not on a shared link
	if [ "$n" -gt 2 ]; then
		for ((r = 0; r < n; r++)); do
			for ((o = 0; o < n; o++)); do
				d=$(((o - r + n) % n))
				[ $d = 0 ] && continue
				for a in "10.233.$(((o - 1 + n) % n)).2" "10.233.$o.1"; do
					# on a link of r: connected route already
					[ "$a" = "10.233.$r.2" ] || [ "$a" = "10.233.$(((r - 1 + n) % n)).1" ] && continue
					if [ $d -le $((n / 2)) ]; then via=10.233.$r.2 dev=mrr
					else via=10.233.$(((r - 1 + n) % n)).1 dev=mrl
					fi
					ip -n "$(ns_of $r)" route add "$a/32" via "$via" dev "$dev"
				done
			done
		done
	fi
	cur_n=$n
}

# in_rank R cmd...: run cmd as rank R's process (in its namespace)
in_rank() {
	local r=$1; shift
	if [ "$mode" = netns ]; then nice -n "$nice_n" ip netns exec "$(ns_of "$r")" "$@"; else nice -n "$nice_n" "$@"; fi
}

write_hostfile() { # n port file
	local n=$1 port=$2 f=$3 r c line
	{
		echo "["
		for ((r = 0; r < n; r++)); do
			line="    ["
			for ((c = 0; c < conns; c++)); do
				[ $c -gt 0 ] && line+=", "
				if [ "$mode" = loopback ]; then
					line+="\"127.0.0.1:$((port + r * conns + c))\""
				else
					line+="\"$(addr_of "$n" "$r"):$((port + c))\""
				fi
			done
			line+="]"
			[ $r -lt $((n - 1)) ] && line+=","
			echo "$line"
		done
		echo "]"
	} >"$f"
}

# run_ranks LABEL N cmd...: one process per rank with MLX_RANK/MLX_HOSTFILE;
# rank 0's stdout appended to raw.csv, stderr of all kept in the log dir.
run_ranks() {
	local label=$1 n=$2 r s status=0; shift 2
	local log=$out/logs/$label-n$n-p$pass
	rank_pids=()
	for ((r = 0; r < n; r++)); do
		MLX_RANK=$r MLX_HOSTFILE=$hf MESHRUN_JOB_TOKEN=bench-$$ \
			in_rank "$r" "$@" >"$log.r$r.out" 2>"$log.r$r.err" &
		rank_pids+=($!)
	done
	for ((r = 0; r < n; r++)); do
		wait "${rank_pids[$r]}" || { s=$?; [ $status = 0 ] && status=$s; }
	done
	rank_pids=()
	if [ $status != 0 ]; then
		info "$label with $n ranks failed (status $status): $(cat "$log".r*.err | head -5)"
		return 0
	fi
	cat "$log.r0.out" >>"$out/raw.csv"
}

# bytes sent by rank 0 on its ring links (proof that a peer used them)
link_tx() {
	[ "$mode" = netns ] || { echo 0; return; }
	ip netns exec "$(ns_of 0)" sh -c 'cat /sys/class/net/mr[lr]/statistics/tx_bytes' 2>/dev/null |
		awk '{s += $1} END {printf "%.0f\n", s}'
}

# What rank 0's established TCP connections to other ranks had (congestion
# control, send buffer: skmem tb) during a peer's run, the sample that saw
# the most of them kept, as "reno/tb1048576 x2": proof that the peer ran with
# the policy env.txt states. bench-socks asks the kernel from one process
# started once (every 20 ms until the ranks have connected, then every
# second): an `ss` every 0.2 s (4 execs, ~40 ms of CPU a sample here) slowed
# the first timed rounds of the peer that starts fastest.
sock_sample() { # file
	exec ip netns exec "$(ns_of 0)" "$bin/bench-socks" --dst 10.233.0.0/16 "$1"
}

run_peer() { # peer n
	local peer=$1 n=$2 log=$out/logs/$1-n$2-p$pass tx0 sp="" socks=""
	port=$((port + 16))
	tx0=$(link_tx)
	if [ "$mode" = netns ]; then
		sock_sample "$log.socks" &
		sp=$!
	fi
	run_peer_inner "$@"
	if [ "$mode" = netns ]; then
		kill "$sp" 2>/dev/null || true
		wait "$sp" 2>/dev/null || true
		socks=$(cat "$log.socks" 2>/dev/null || true)
		echo "$peer n=$n pass=$pass: rank 0 sent $((($(link_tx) - tx0) / 1048576)) MiB on its ring links; its connections (cc/send buffer): ${socks:-none seen}" >>"$out/links.txt"
	fi
	return 0
}

run_peer_inner() { # peer n
	local peer=$1 n=$2 log=$out/logs/$1-n$2-p$pass
	write_hostfile "$n" "$port" "$hf"
	info "n=$n pass $pass: $peer"
	case $peer in
	ours) MESHRUN_RING_TCP_CC=$ring_cc MESHRUN_RING_SNDBUF=$ring_sndbuf run_ranks ours "$n" "$bin/bench-ar-ours" --sizes "$sizes" --repeats "$repeats" --dtype "$dtype" ;;
	# MESHRUN_MESH_HOSTFILE= : the shim compared on libmeshrun's ring, as ours (its
	# version line in the log names the backend it got)
	mlx-shim) MLX_MPI_LIBNAME=$shim MESHRUN_MESH_HOSTFILE= MESHRUN_RING_TCP_CC=$ring_cc MESHRUN_RING_SNDBUF=$ring_sndbuf \
		run_ranks mlx-shim "$n" "$bin/bench-ar-mlxmpi" --sizes "$sizes" --repeats "$repeats" --label mlx-shim ;;
	tcp-raw) run_ranks tcp-raw "$n" "$bin/bench-tcp-raw" --sizes "$sizes" --repeats "$repeats" --cc "${ring_cc:-reno}" ${ring_sndbuf:+--sndbuf "$ring_sndbuf"} ;;
	gloo)
		local store=$out/logs/gloo-store-n$n-p$pass r status=0 s
		rm -rf "$store"; mkdir -p "$store"
		rank_pids=()
		for ((r = 0; r < n; r++)); do
			in_rank "$r" "$bin/bench-ar-gloo" --rank $r --size "$n" --store "$store" \
				--addr "$(addr_of "$n" "$r")" --sizes "$sizes" --repeats "$repeats" \
				>"$log.r$r.out" 2>"$log.r$r.err" &
			rank_pids+=($!)
		done
		for ((r = 0; r < n; r++)); do
			wait "${rank_pids[$r]}" || { s=$?; [ $status = 0 ] && status=$s; }
		done
		rank_pids=()
		if [ $status = 0 ]; then cat "$log.r0.out" >>"$out/raw.csv"
		else info "gloo with $n ranks failed (status $status): $(cat "$log".r*.err | head -5)"
		fi
		;;
	openmpi|meshrun-mpi|mlx-openmpi)
		local ifs=10.233.0.0/16 wrap=() st=$out/logs/$peer-state-n$n-p$pass f prog=bench-ar-mpi
		[ "$peer" = meshrun-mpi ] && prog=bench-meshrun-mpi
		[ "$peer" = mlx-openmpi ] && prog=bench-ar-mlxmpi # MLX_MPI_LIBNAME unset: libmpi.so, as MLX
		rm -rf "$st"; mkdir -p "$st"
		if [ "$mode" = netns ]; then
			wrap=("$here/mpi_netns_wrap.sh" "${prefix}r" "$st")
		else
			ifs=lo
		fi
		if nice -n "$nice_n" mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" \
			--mca mpi_yield_when_idle 1 --mca btl tcp,self --mca btl_tcp_if_include "$ifs" \
			${peer_sndbuf_bytes:+--mca btl_tcp_sndbuf "$peer_sndbuf_bytes"} \
			"${wrap[@]}" "$bin/$prog" --sizes "$sizes" --repeats "$repeats" \
			>"$log.out" 2>"$log.err" </dev/null; then
			cat "$log.out" >>"$out/raw.csv"
		else
			info "$peer with $n ranks failed: $(head -5 "$log.err")"
		fi
		for f in "$st"/relay-*.pid; do
			[ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
		done
		rm -f "$st"/*.sock
		;;
	esac
}

mkdir -p "$out/logs"
: >"$out/raw.csv"
hf=$out/logs/hostfile.json
port=$port_base
{
	echo "date: $(date -Is)"
	echo "host: $(uname -srm), $(nproc) cpus: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
	echo "mode: $mode; ranks: $ranks_list; sizes: $sizes; repeats: $repeats; passes: $passes; conns per ip: $conns; dtype of ours: $dtype"
	sys_default=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
	if [ "$legacy" = 1 ]; then
		echo "policy: --legacy (NOT the same for every peer)"
	elif [ "$ring_cc" = "${sys_cc:-system}" ] && [ "$ring_sndbuf" = "$sndbuf" ]; then
		echo "policy: the same TCP congestion control and send buffer for every peer (--cc ${cc}, --sndbuf ${sndbuf})"
	else
		echo "policy: overridden per peer (--ring-cc/--ring-sndbuf/--sys-cc): NOT the same for every peer"
	fi
	ring_cc_txt=$ring_cc
	[ "$ring_cc" = system ] && ring_cc_txt="the system default, $sys_default"
	peer_cc_txt="the system default, $sys_default"
	[ -z "$sys_cc" ] || peer_cc_txt="$sys_cc (the rank namespaces' default)"
	echo "tcp congestion control: ours, mlx-shim and tcp-raw ${ring_cc_txt}; openmpi, meshrun-mpi, mlx-openmpi and gloo: $peer_cc_txt; nice: $nice_n"
	if [ "$ring_sndbuf" = system ]; then
		echo "send buffer of ours, mlx-shim and tcp-raw: autotuned by the kernel (net.ipv4.tcp_wmem $(tr '\t' ' ' </proc/sys/net/ipv4/tcp_wmem))"
	else
		echo "send buffer of ours, mlx-shim and tcp-raw: SO_SNDBUF $ring_sndbuf (kernel: twice that, at most net.core.wmem_max $(cat /proc/sys/net/core/wmem_max))"
	fi
	if [ -n "$peer_sndbuf_bytes" ]; then
		echo "send buffer of openmpi, meshrun-mpi and mlx-openmpi: SO_SNDBUF $peer_sndbuf_bytes (--mca btl_tcp_sndbuf)"
	else
		echo "send buffer of openmpi, meshrun-mpi and mlx-openmpi: their own choice (autotuned: net.ipv4.tcp_wmem $(tr '\t' ' ' </proc/sys/net/ipv4/tcp_wmem))"
	fi
	echo "send buffer of gloo: its own, not settable (SO_SNDBUF = the message size before a larger send, at most 32 MiB, capped at net.core.wmem_max $(cat /proc/sys/net/core/wmem_max))"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	mpirun --version 2>/dev/null | head -1 || true
	dpkg-query -W -f='gloo: ${Version}\n' libgloo-dev 2>/dev/null || true
} >"$out/env.txt"

t_start=$(date +%s)
for n in ${ranks_list//,/ }; do
	[ "$mode" = netns ] && setup_ring "$n"
	order=(${peers//,/ })
	for ((pass = 1; pass <= passes; pass++)); do
		# rotate the order by one each pass and reverse it every other
		# pass, so that no peer always runs first (or last) or always
		# right after the same peer (with the order as given, the shim
		# ran after an Open MPI job in every pass)
		rot=()
		for ((i = 0; i < ${#order[@]}; i++)); do
			rot+=("${order[$(((i + pass - 1) % ${#order[@]}))]}")
		done
		if [ $((pass % 2)) = 0 ]; then
			seq_peers=()
			for ((i = ${#rot[@]} - 1; i >= 0; i--)); do seq_peers+=("${rot[$i]}"); done
		else
			seq_peers=("${rot[@]}")
		fi
		for p in "${seq_peers[@]}"; do
			[ -n "$p" ] && run_peer "$p" "$n"
		done
	done
	[ "$mode" = netns ] && cleanup_ring
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); took $(($(date +%s) - t_start)) s" >>"$out/env.txt"

"$here/report.sh" "$out"
