#!/bin/bash
# run.sh BUILD_DIR [RANKS...] - libmeshrun's mpi backend vs Open MPI's
# MPI_Allreduce, both under mpirun on this machine, in one run: per rank count
# and size the median (of --repeats rounds) latency and bus bandwidth
# (algbw x 2(n-1)/n) of each, and the ratio meshrun-mpi / openmpi.
# SIZES and REPEATS in the environment override the defaults.
set -eu
build=${1:?usage: run.sh BUILD_DIR [RANKS...]}
shift
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(2 4)
sizes=${SIZES:-4K,64K,1M,16M,64M}
repeats=${REPEATS:-5}
for p in bench-ar-mpi bench-meshrun-mpi; do
	[ -x "$build/bin/$p" ] || { echo "run.sh: $build/bin/$p not built" >&2; exit 2; }
done
rows=$(mktemp /tmp/mr-bench-mpi-XXXXXX)
trap 'rm -f "$rows"' EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1)
for n in "${ranks[@]}"; do
	"${mpi[@]}" -n "$n" "$build/bin/bench-ar-mpi" --sizes "$sizes" --repeats "$repeats" >>"$rows"
	"${mpi[@]}" -n "$n" "$build/bin/bench-meshrun-mpi" --sizes "$sizes" --repeats "$repeats" >>"$rows"
done
# rows: impl,ranks,bytes,round,seconds
sort -t, -k1,1 -k2,2n -k3,3n -k5,5g "$rows" | awk -F, '
	{ k = $1 "," $2 "," $3; t[k, ++c[k]] = $5; if (!(($2 "," $3) in seen)) { seen[$2 "," $3] = 1; ks[++n] = $2 "," $3 } }
	function median(k,   m) { m = c[k]; return m % 2 ? t[k, (m + 1) / 2] : (t[k, m / 2] + t[k, m / 2 + 1]) / 2 }
	END {
		printf "%-6s %-10s %14s %14s %14s %14s %8s\n", "ranks", "bytes", "openmpi_us", "meshrun_us", "openmpi_GB/s", "meshrun_GB/s", "ratio"
		for (i = 1; i <= n; i++) {
			split(ks[i], a, ",")
			o = median("openmpi," ks[i]); m = median("meshrun-mpi," ks[i])
			f = 2 * (a[1] - 1) / a[1]
			printf "%-6d %-10d %14.1f %14.1f %14.3f %14.3f %8.2f\n", a[1], a[2], o * 1e6, m * 1e6,
			       a[2] / o * f / 1e9, a[2] / m * f / 1e9, o / m
		}
	}'
