#!/bin/bash
# guest_bench.sh - runs INSIDE the soft-RoCE guest (bench/rdma/run.sh boots it):
# all_sum latency and bandwidth of jaccl (4-rank mesh), jaccl-ring (1 cable per
# neighbour) and the ring backend (TCP), all over the SAME 6 veth cables, and
# their ratios. Usage: guest_bench.sh BIN_DIR [--lat-size S] [--bw-size S]
#                      [--lat-iters N] [--bw-iters N] [--rows LIST]
#                      [--qps LIST] [--frames LIST]
# --rows: comma-separated, default jaccl,jaccl-ring,ring; "shim" adds MLX's mpi
# calls through libmeshrun-mpi on the jaccl mesh (mpishim-mlx-test --bench
# under meshrun --backend mpi --mpi-impl meshrun: the issue 18 row, its time
# the mean MPI_Allreduce call on rank 0, with no barrier between calls).
# --qps uc,rc and --frames 4K,16K,...: instead of the rows, the jaccl mesh
# with each queue-pair type (MESHRUN_JACCL_QP) and frame size
# (MESHRUN_JACCL_FRAME), with ratios against UC in 4 KiB frames (the default)
# and of RC against UC per frame size. A run that fails (soft-RoCE's UC loses
# a message of more than 64 packets now and then, which jaccl reports as lost
# frames) is reported as such, the others still run.
# The ring backend's ranks are bound to IPv4 addresses on the cables (rank r
# listens on its end of the cable to its left neighbour); guest_lib.sh's
# mesh_ipv4 makes that TCP cross the veths instead of lo, which is checked
# here with the veths' byte counters. Under TCG only the ratios mean anything.
set -u
BIN=$1; shift
LAT=4K; BW=16M; LATIT=100; BWIT=3; ROWS=jaccl,jaccl-ring,ring QPS="" FRAMES=""
while [ $# -gt 0 ]; do
	case $1 in
	--lat-size) LAT=$2;; --bw-size) BW=$2;; --lat-iters) LATIT=$2;; --bw-iters) BWIT=$2;;
	--rows) ROWS=$2;; --qps) QPS=$2;; --frames) FRAMES=$2;;
	*) echo "guest_bench.sh: unknown option '$1'" >&2; exit 2;;
	esac
	shift 2
done
HERE=$(cd "$(dirname "$0")" && pwd)
T=/tmp/rdma-bench; mkdir -p "$T"
. "$HERE/../../tests/integration/rdma/guest_lib.sh"
PORT=31000

what="rows $ROWS"; [ -n "$QPS$FRAMES" ] && what="jaccl mesh, queue pairs ${QPS:-uc}, frames ${FRAMES:-4K}"
echo "== rdma bench: 4 ranks, all_sum float32 in place, latency $LAT x $LATIT, bandwidth $BW x $BWIT, $what (kernel $(uname -r), $(nproc) vCPUs)"
mesh_cables 4 || exit 1
mesh_ipv4 4 || exit 1
RING_N=4
ring_mesh_cell() { # I J: the mesh cable to a ring neighbour
	if [ "$2" = $((($1 + 1) % RING_N)) ] || [ "$2" = $((($1 + RING_N - 1) % RING_N)) ]; then echo "\"rxe_$1_$2\""; else echo null; fi
}
hostfile "$T/jaccl.json" jaccl 4 mesh_cell
hostfile "$T/jaccl-ring.json" jaccl-ring 4 ring_mesh_cell
HOSTFILE_IPS=ring_ip_json hostfile "$T/ring.json" ring 4 null_cell

# the traffic went over the cables: the bandwidth calls alone move
# 2*(n-1)/n * size per rank and call
check_tx() { # LABEL TX0 TX1
	echo "$1: $((($3 - $2) / 1048576)) MiB sent over the veth cables"
	if [ $(($3 - $2)) -lt $(($(numfmt --from=iec "$BW") * BWIT)) ]; then
		echo "$1: too few bytes crossed the veths: the traffic did not go over the cables"; return 1
	fi
}

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
	echo "$1: meshrun exit $rc"
	[ $rc = 0 ] || { tail -20 "$T/$1.err"; return 1; }
	check_tx "$1" "$tx0" "$tx1"
}

# MLX's calls through libmeshrun-mpi on the jaccl mesh: one launch per size,
# its line turned into the RESULT format (algbw = bytes / seconds per call)
run_shim() {
	local tx0 tx1 rc size iters line
	tx0=$(mesh_tx_bytes)
	: >"$T/shim.out"
	for size in "$LAT:$LATIT" "$BW:$BWIT"; do
		iters=${size#*:}; size=$(numfmt --from=iec "${size%:*}")
		PORT=$((PORT + 10))
		"$BIN/meshrun" --hostfile "$T/jaccl.json" --backend mpi --mpi-impl meshrun -p $PORT --stdin none \
			--timeout 1200 --env MESHRUN_IB_GID_INDEX=0 --env MESHRUN_TIMEOUT=300 \
			-- "$BIN/mpishim-mlx-test" --bench "$size" "$iters" >"$T/shim.1.out" 2>"$T/shim.err"
		rc=$?
		line=$(grep '^mlx-mpi-bench:' "$T/shim.1.out")
		echo "$line"
		[ $rc = 0 ] || { echo "shim: meshrun exit $rc"; tail -20 "$T/shim.err"; return 1; }
		[[ $line =~ \(jaccl\)\)?$ ]] || { echo "shim: the shim did not run on jaccl"; return 1; }
		echo "$line" | awk -v b="$size" -v n="$iters" '{ for (i = 1; i <= NF; i++) if ($i == "mean") t = $(i + 1) / 1e3 }
			END { printf "RESULT shim 4 %d %d %.9f %.4f\n", b, n, t, b / t / 1e9 }' | tee -a "$T/shim.out"
	done
	tx1=$(mesh_tx_bytes)
	check_tx shim "$tx0" "$tx1"
}

# One jaccl mesh run per queue-pair type and frame size; RESULT lines labelled
# <qp>-<frame>, then the ratios.
run_sweep() {
	local q f rc qs=() fs=()
	IFS=, read -ra qs <<<"${QPS:-uc}"
	IFS=, read -ra fs <<<"${FRAMES:-4K}"
	: >"$T/sweep.out"
	for q in "${qs[@]}"; do
		for f in "${fs[@]}"; do
			PORT=$((PORT + 10))
			"$BIN/meshrun" --hostfile "$T/jaccl.json" --backend jaccl -p $PORT --stdin none --timeout 1200 \
				--env MESHRUN_IB_GID_INDEX=0 --env MESHRUN_TIMEOUT=120 --env MESHRUN_JACCL_QP=$q \
				--env MESHRUN_JACCL_FRAME=$f \
				-- "$BIN/bench-rdma-allsum" --label "$q-$f" --lat-size "$LAT" --bw-size "$BW" \
				--lat-iters "$LATIT" --bw-iters "$BWIT" >"$T/$q-$f.out" 2>"$T/$q-$f.err"
			rc=$?
			if [ $rc = 0 ]; then
				grep RESULT "$T/$q-$f.out" | tee -a "$T/sweep.out"
			else
				# the cause (a rank that saw a gap, a stall, an error completion), not
				# the departures of those that failed first
				echo "$q-$f: meshrun exit $rc: $(grep -vE 'closed its side channel|has left the group|^\[(WARN|INFO)\]' "$T/$q-$f.err" | grep -m1 -E '[a-z]')"
				echo "FAILED $q-$f" >>"$T/sweep.out"
			fi
		done
	done
	awk -v qs="${QPS:-uc}" -v fs="${FRAMES:-4K}" '
		$1 == "RESULT" { t[$2 "," $4] = $6; sz[$4] = 1 }
		$1 == "FAILED" { failed[$2] = 1 }
		END {
			nq = split(qs, q, ","); nf = split(fs, f, ",")
			n = 0; for (s in sz) size[n++] = s + 0
			small = size[0] < size[1] ? size[0] : size[1]; big = size[0] < size[1] ? size[1] : size[0]
			base = q[1] "-" f[1]
			for (i = 1; i <= nq; i++) for (j = 1; j <= nf; j++) {
				l = q[i] "-" f[j]
				if (l in failed) { printf "%-10s failed (see above)\n", l; continue }
				printf "%-10s all_sum %d B %.3f ms, %d B %.3f ms (busbw %.2f MB/s)", l, small, t[l "," small] * 1e3, big, t[l "," big] * 1e3, 1.5 * big / t[l "," big] / 1e6
				if ((base "," big) in t && l != base)
					printf "; RATIO vs %s: latency %.2f, bandwidth %.2f", base, t[base "," small] / t[l "," small], t[base "," big] / t[l "," big]
				printf "\n"
			}
			for (j = 1; j <= nf; j++) {
				u = "uc-" f[j]; r = "rc-" f[j]
				if ((u "," big) in t && (r "," big) in t)
					printf "RATIO rc/uc at %s frames: latency (uc time / rc time) %.2f, bandwidth (rc / uc) %.2f\n", f[j], t[u "," small] / t[r "," small], t[u "," big] / t[r "," big]
			}
		}' "$T/sweep.out"
}

if [ -n "$QPS$FRAMES" ]; then
	run_sweep
	exit 0
fi

bad=0 rows=()
IFS=, read -ra rows <<<"$ROWS"
for b in "${rows[@]}"; do
	case $b in
	jaccl|jaccl-ring|ring) run_one $b $b || bad=1;;
	shim) run_shim || bad=1;;
	*) echo "guest_bench.sh: unknown row '$b' (jaccl, jaccl-ring, ring, shim)"; exit 2;;
	esac
done
[ $bad = 0 ] || { echo "rdma bench: a run failed"; exit 1; }
for b in "${rows[@]}"; do cat "$T/$b.out"; done | awk -v rows="$ROWS" '
	$1 == "RESULT" { t[$2 "," $4] = $6; sz[$4] = 1 }
	END {
		nr = split(rows, row, ",")
		n = 0; for (s in sz) size[n++] = s + 0
		small = size[0] < size[1] ? size[0] : size[1]; big = size[0] < size[1] ? size[1] : size[0]
		for (i = 0; i < 2; i++) {
			s = i ? big : small
			line = sprintf("all_sum %d B:", s)
			for (k = 1; k <= nr; k++)
				line = line sprintf(" %s %.3f ms (busbw %.3f GB/s)%s", row[k], t[row[k] "," s] * 1e3,
					1.5 * s / t[row[k] "," s] / 1e9, k < nr ? "," : "")
			print line " per call"
		}
		if (("ring," small) in t) {
			for (k = 1; k <= nr; k++) if (row[k] != "ring" && row[k] != "shim")
				printf "RATIO latency (%d B, ring time / time): %s %.2f\n", small, row[k], t["ring," small] / t[row[k] "," small]
			for (k = 1; k <= nr; k++) if (row[k] != "ring" && row[k] != "shim")
				printf "RATIO bandwidth (%d B, bandwidth / ring bandwidth): %s %.2f\n", big, row[k], t["ring," big] / t[row[k] "," big]
		}
		if (("shim," big) in t && ("jaccl," big) in t)
			for (i = 0; i < 2; i++) {
				s = i ? big : small
				printf "RATIO shim (%d B, libmeshrun-mpi bandwidth / libmeshrun jaccl bandwidth): %.2f\n", s, t["jaccl," s] / t["shim," s]
			}
	}'
