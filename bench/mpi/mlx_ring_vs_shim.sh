#!/bin/bash
# mlx_ring_vs_shim.sh BUILD_DIR [--ranks 4] [--sizes 1M,16M] [--repeats 5]
#     [--passes 3] [--out DIR] [--meshsim] [-- MESHRUN_ARGS...]
# Issue 18's acceptance figure: a real MLX program (mlx-allsum, built with
# -DMLX_DIR=...) timing all_sum of float32, run by meshrun on the same links
# two ways, alternating (pass 1 ring first, pass 2 shim first, ...):
#   mlx-ring  meshrun --backend ring: MLX's own ring (MLX_HOSTFILE)
#   mlx-shim  meshrun --backend mpi --mpi-impl meshrun: MLX's mpi backend on
#             libmeshrun-mpi (libmeshrun's ring)
# Ranks are local (-n RANKS, loopback) unless MESHRUN_ARGS name hosts (e.g.
# `-- --hostfile hosts.json --ssh-config cfg`). --meshsim (root; take
# /tmp/meshrun-ns.lock): RANKS simulated Macs cabled in a ring (`meshsim up
# ring:RANKS`), meshconfig's hostfile (--auto-setup), ranks over ssh and the
# simulated cables, the setting; the cluster is taken down after. Prints
# per size the median seconds per all_sum (over every round of every pass),
# busbw (bytes/t * 2(n-1)/n) and the ratio mlx-ring time / mlx-shim time.
# Not a test.
set -eu
build=${1:?usage: mlx_ring_vs_shim.sh BUILD_DIR [--ranks N] [--sizes LIST] [--repeats N] [--passes N] [--out DIR] [-- MESHRUN_ARGS...]}
shift
ranks=4 sizes=1M,16M repeats=5 passes=3 out="" meshsim=0
while [ $# -gt 0 ]; do
	case $1 in
	--ranks) ranks=$2; shift ;;
	--sizes) sizes=$2; shift ;;
	--repeats) repeats=$2; shift ;;
	--passes) passes=$2; shift ;;
	--out) out=$2; shift ;;
	--meshsim) meshsim=1 ;;
	--) shift; break ;;
	*) echo "mlx_ring_vs_shim.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
hosts=("$@")
[ ${#hosts[@]} -gt 0 ] || hosts=(-n "$ranks")
bin=$build/bin
for p in meshrun mlx-allsum; do
	[ -x "$bin/$p" ] || { echo "mlx_ring_vs_shim.sh: $bin/$p not built (mlx-allsum: configure with -DMLX_DIR=<MLX prefix>/share/cmake/MLX)" >&2; exit 2; }
done
[ -n "$out" ] || out=$build/bench-out/mlx-ring-vs-shim-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
if [ $meshsim = 1 ]; then
	[ "$(id -u)" -eq 0 ] || { echo "mlx_ring_vs_shim.sh: --meshsim needs root" >&2; exit 2; }
	export MESHSIM_STATE_DIR=$out/meshsim
	cluster=mrv$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
	trap '"$bin/meshsim" down "$cluster" >/dev/null 2>&1' EXIT
	"$bin/meshsim" up "ring:$ranks" --name "$cluster" >"$out/meshsim-up.log" 2>&1 ||
		{ cat "$out/meshsim-up.log" >&2; exit 1; }
	cfg=$MESHSIM_STATE_DIR/$cluster/ssh_config
	hl=$(seq -s, -f 'h%g' 1 "$ranks")
	"$bin/meshconfig" --hosts "$hl" --over thunderbolt --backend ring --auto-setup --ssh-config "$cfg" \
		--output-hostfile "$out/hosts.json" >"$out/meshconfig.log" 2>&1 ||
		{ cat "$out/meshconfig.log" >&2; exit 1; }
	hosts=(--hostfile "$out/hosts.json" --ssh-config "$cfg")
fi
rows=$out/raw.csv
: >"$rows"
run() { # label meshrun-args...
	local label=$1 log=$out/$1-p$pass.log
	shift
	echo "[INFO] pass $pass: $label" >&2
	if ! timeout -k 5 600 "$bin/meshrun" "$@" "${hosts[@]}" -- "$bin/mlx-allsum" --sizes "$sizes" \
		--repeats "$repeats" --label "$label" >"$log" 2>&1; then
		echo "mlx_ring_vs_shim.sh: $label failed (pass $pass):" >&2
		tail -20 "$log" >&2
		exit 1
	fi
	grep -E "^$label,[0-9]+,[0-9]+,[0-9]+,[0-9.e-]+$" "$log" >>"$rows"
}
for ((pass = 1; pass <= passes; pass++)); do
	if ((pass % 2)); then
		run mlx-ring --backend ring
		run mlx-shim --backend mpi --mpi-impl meshrun
	else
		run mlx-shim --backend mpi --mpi-impl meshrun
		run mlx-ring --backend ring
	fi
done
{
	echo "load: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime); passes $passes, repeats $repeats"
	sort -t, -k1,1 -k2,2n -k3,3n -k5,5g "$rows" | awk -F, '
		{ k = $1 "," $2 "," $3; t[k, ++c[k]] = $5; if (!(($2 "," $3) in seen)) { seen[$2 "," $3] = 1; ks[++n] = $2 "," $3 } }
		function median(k,   m) { m = c[k]; return m % 2 ? t[k, (m + 1) / 2] : (t[k, m / 2] + t[k, m / 2 + 1]) / 2 }
		END {
			printf "%-6s %-10s %12s %12s %12s %12s %10s\n", "ranks", "bytes", "ring_ms", "shim_ms", "ring_GB/s", "shim_GB/s", "ring/shim"
			for (i = 1; i <= n; i++) {
				split(ks[i], a, ",")
				r = median("mlx-ring," ks[i]); s = median("mlx-shim," ks[i])
				f = 2 * (a[1] - 1) / a[1]
				printf "%-6d %-10d %12.2f %12.2f %12.3f %12.3f %10.2f\n", a[1], a[2], r * 1e3, s * 1e3,
				       a[2] / r * f / 1e9, a[2] / s * f / 1e9, r / s
			}
		}'
} | tee "$out/summary.txt"
echo "rows: $rows; logs: $out"
