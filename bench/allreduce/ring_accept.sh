#!/bin/bash
# bench/allreduce/ring_accept.sh - the ring's acceptance figures (issue 19
# part 5) in one command: run.sh in its fair default mode (the same
# congestion control and send buffer for every peer), --runs times in a row,
# 2 and 4 ranks, 1M..128M, ours vs Open MPI vs Gloo vs raw TCP; then one
# table of every run's "x best" (ours / best peer busbw) and "%raw" (ours /
# tcp-raw), and the verdict:
#   - every run, 2 and 4 ranks, every size: x best >= 1.2
#   - every run, 2 ranks, 1M..16M: %raw >= 75
#
#   bench/allreduce/ring_accept.sh [--runs 3] [--out DIR] [--build DIR]
#       [--passes 1] [--repeats 5] [--sizes 1M,4M,16M,64M,128M] [--ranks 2,4]
#       [--no-build] [--no-deps]
#
# Root (network namespaces); run it under the shared lock when others run
# tests: flock /tmp/meshrun-ns.lock bench/allreduce/ring_accept.sh
# Takes about 5 minutes on the 2-core bench machine when it is quiet.
# Output: DIR/run<k>/ (run.sh's files) and DIR/accept.txt (the table).
# Exit status: 0 when every figure meets its bar, 1 when one does not.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
runs=3
out=""
build=$root/build-bench
passes=1
repeats=5
sizes=1M,4M,16M,64M,128M
ranks=2,4
extra=()

while [ $# -gt 0 ]; do
	case $1 in
	--runs) runs=$2; shift ;;
	--out) out=$2; shift ;;
	--build) build=$2; shift ;;
	--passes) passes=$2; shift ;;
	--repeats) repeats=$2; shift ;;
	--sizes) sizes=$2; shift ;;
	--ranks) ranks=$2; shift ;;
	--no-build|--no-deps) extra+=("$1") ;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "ring_accept.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
	shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "ring_accept.sh: --runs: expected a positive number, got '$runs'" >&2; exit 2; }
[ -n "$out" ] || out=$build/bench-out/ring-accept-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"

t0=$(date +%s)
for ((k = 1; k <= runs; k++)); do
	echo "[INFO] run $k of $runs (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	"$here/run.sh" --build "$build" --ranks "$ranks" --sizes "$sizes" --passes "$passes" \
		--repeats "$repeats" --peers ours,openmpi,gloo,tcp-raw --out "$out/run$k" \
		"${extra[@]}" >"$out/run$k.log" 2>&1 ||
		{ echo "[ERROR] run $k failed, see $out/run$k.log" >&2; exit 1; }
	extra=(--no-build --no-deps) # built (and installed) once
done

# compare.csv: ranks,bytes,...,ours_over_best (8),tcpraw_busbw,ours_over_raw (10),...
for ((k = 1; k <= runs; k++)); do
	awk -F, -v k="$k" 'NR > 1 { print k, $1, $2, $8, $10 }' "$out/run$k/compare.csv"
done | awk -v runs="$runs" -v took=$(($(date +%s) - t0)) '
function human(b) { return b >= 1048576 ? (b / 1048576) "M" : (b / 1024) "K" }
{
	key = $2 " " $3; x[key, $1] = $4; raw[key, $1] = $5
	if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
}
END {
	printf "%-5s %-6s", "ranks", "size"
	for (k = 1; k <= runs; k++) printf " %8s %6s", "x best" k, "%raw" k
	printf "  verdict\n"
	fail = 0
	for (i = 1; i <= nk; i++) {
		split(keys[i], f, " "); n = f[1]; b = f[2]
		ok = 1
		printf "%-5s %-6s", n, human(b)
		for (k = 1; k <= runs; k++) {
			xv = x[keys[i], k]; rv = raw[keys[i], k]
			printf " %8s %6s", xv, rv
			if (xv == "-" || xv + 0 < 1.2) ok = 0
			if (n == 2 && b <= 16777216 && (rv == "-" || rv + 0 < 75)) ok = 0
		}
		printf "  %s\n", ok ? "ok" : "NOT MET"
		if (!ok) fail = 1
	}
	printf "\nbars: x best (ours / best of openmpi, gloo-ring, gloo-ring-chunked busbw) >= 1.2 in every run;\n"
	printf "%%raw (ours / tcp-raw busbw) >= 75 for 2 ranks 1M..16M in every run. %d runs took %d s.\n", runs, took
	print (fail ? "NOT MET" : "MET")
	exit fail
}' | tee "$out/accept.txt"
status=${PIPESTATUS[1]}
for ((k = 1; k <= runs; k++)); do
	grep -E '^(policy|load)' "$out/run$k/env.txt" | sed "s/^/run $k: /"
done | tee -a "$out/accept.txt"
echo "results: $out (accept.txt, run<k>/)"
exit "$status"
