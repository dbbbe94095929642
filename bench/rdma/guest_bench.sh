#!/bin/bash
# guest_bench.sh - runs INSIDE the soft-RoCE guest (bench/rdma/run.sh boots it):
# all_sum latency and bandwidth of jaccl (4-rank mesh), jaccl-ring (1 cable per
# neighbour) and the ring backend (TCP), all over the SAME 6 veth cables, and
# their ratios. Usage: guest_bench.sh BIN_DIR [--lat-size S] [--bw-size S]
#                      [--lat-iters N] [--bw-iters N]
# The ring backend's ranks are bound to IPv4 addresses on the cables (rank r
# listens on its end of the cable to its left neighbour); guest_lib.sh's
# mesh_ipv4 makes that TCP cross the veths instead of lo, which is checked
# here with the veths' byte counters. Under TCG only the ratios mean anything.
set -u
BIN=$1; shift
LAT=4K; BW=16M; LATIT=100; BWIT=3
while [ $# -gt 0 ]; do
	case $1 in
	--lat-size) LAT=$2;; --bw-size) BW=$2;; --lat-iters) LATIT=$2;; --bw-iters) BWIT=$2;;
	*) echo "guest_bench.sh: unknown option '$1'" >&2; exit 2;;
	esac
	shift 2
done
HERE=$(cd "$(dirname "$0")" && pwd)
T=/tmp/rdma-bench; mkdir -p "$T"
. "$HERE/../../tests/integration/rdma/guest_lib.sh"
PORT=31000

echo "== rdma bench: 4 ranks, all_sum float32 in place, latency $LAT x $LATIT, bandwidth $BW x $BWIT (kernel $(uname -r), $(nproc) vCPUs)"
mesh_cables 4 || exit 1
mesh_ipv4 4 || exit 1
RING_N=4
ring_mesh_cell() { # I J: the mesh cable to a ring neighbour
	if [ "$2" = $((($1 + 1) % RING_N)) ] || [ "$2" = $((($1 + RING_N - 1) % RING_N)) ]; then echo "\"rxe_$1_$2\""; else echo null; fi
}
hostfile "$T/jaccl.json" jaccl 4 mesh_cell
hostfile "$T/jaccl-ring.json" jaccl-ring 4 ring_mesh_cell
HOSTFILE_IPS=ring_ip_json hostfile "$T/ring.json" ring 4 null_cell

run_one() { # LABEL BACKEND
	local tx0 tx1 rc
	PORT=$((PORT + 10))
	tx0=$(mesh_tx_bytes)
	"$BIN/meshrun" --hostfile "$T/$1.json" --backend "$2" -p $PORT --stdin none --timeout 1200 \
		--env MESHRUN_IB_GID_INDEX=0 --env MESHRUN_TIMEOUT=300 \
		-- "$BIN/bench-rdma-allsum" --label "$1" --lat-size "$LAT" --bw-size "$BW" \
		--lat-iters "$LATIT" --bw-iters "$BWIT" >"$T/$1.out" 2>"$T/$1.err"
	rc=$?
	tx1=$(mesh_tx_bytes)
	grep RESULT "$T/$1.out"
	echo "$1: meshrun exit $rc, $(((tx1 - tx0) / 1048576)) MiB sent over the veth cables"
	[ $rc = 0 ] || { tail -20 "$T/$1.err"; return 1; }
	# the bandwidth calls alone move 2*(n-1)/n * size per rank and call
	if [ $((tx1 - tx0)) -lt $(($(numfmt --from=iec "$BW") * BWIT)) ]; then
		echo "$1: too few bytes crossed the veths: the traffic did not go over the cables"; return 1
	fi
}

bad=0
for b in jaccl jaccl-ring ring; do run_one $b $b || bad=1; done
[ $bad = 0 ] || { echo "rdma bench: a run failed"; exit 1; }
cat "$T"/{jaccl,jaccl-ring,ring}.out | awk '
	$1 == "RESULT" { t[$2 "," $4] = $6; sz[$4] = 1 }
	END {
		n = 0; for (s in sz) size[n++] = s + 0
		small = size[0] < size[1] ? size[0] : size[1]; big = size[0] < size[1] ? size[1] : size[0]
		for (i = 0; i < 2; i++) {
			s = i ? big : small
			printf "all_sum %d B: jaccl %.3f ms, jaccl-ring %.3f ms, ring %.3f ms per call\n", s, t["jaccl," s] * 1e3, t["jaccl-ring," s] * 1e3, t["ring," s] * 1e3
		}
		printf "RATIO latency (%d B, ring time / time): jaccl %.2f, jaccl-ring %.2f\n", small, t["ring," small] / t["jaccl," small], t["ring," small] / t["jaccl-ring," small]
		printf "RATIO bandwidth (%d B, bandwidth / ring bandwidth): jaccl %.2f, jaccl-ring %.2f\n", big, t["ring," big] / t["jaccl," big], t["ring," big] / t["jaccl-ring," big]
	}'
