#!/bin/bash
# run.sh - the RDMA benchmark: boots the soft-RoCE guest (scripts/rxe-guest.sh)
# and runs bench/rdma/guest_bench.sh in it: all_sum latency (4 KiB) and
# bandwidth (16 MiB) of jaccl and jaccl-ring against the ring backend over the
# same veth cables, printed as ratios (TCG emulation: the absolute figures mean
# little, the ratios are what is recorded).
# Usage: bench/rdma/run.sh [--build DIR] [guest_bench.sh options...]
#   e.g. bench/rdma/run.sh --build build --bw-size 4M --bw-iters 3
#   libmeshrun-mpi (MLX's mpi calls) against libmeshrun's own jaccl:
#   bench/rdma/run.sh --build build --rows jaccl,shim --lat-size 1M --bw-size 16M --lat-iters 5
#   UC against RC queue pairs and the frame sizes (MESHRUN_JACCL_QP, _FRAME):
#   bench/rdma/run.sh --build build --qps uc,rc --frames 4K,16K,64K,128K,256K,512K --bw-size 4M
# Needs root (QEMU with the host's / shared into the guest); DIR must hold
# bin/meshrun, bin/bench-rdma-allsum (cmake --build DIR --target meshrun_cli
# bench-rdma-allsum; the shim row also mpishim-mlx-test and lib/libmeshrun-mpi).
# Exit status: the guest's (0: every run passed).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=$SRC/build
if [ "${1:-}" = --build ]; then BUILD=$(readlink -f "$2"); shift 2; fi
case "${1:-}" in -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0;; esac
for p in meshrun bench-rdma-allsum; do
	[ -x "$BUILD/bin/$p" ] || { echo "run.sh: $BUILD/bin/$p is not built" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "run.sh: needs root (QEMU, rdma_rxe in the guest)" >&2; exit 2; }
exec "$SRC/scripts/rxe-guest.sh" --workdir "${TMPDIR:-/tmp}/meshrun-rxe-bench" --no-setup \
	--share "$BUILD" --timeout 1500 -- bash "$HERE/guest_bench.sh" "$BUILD/bin" "$@"
