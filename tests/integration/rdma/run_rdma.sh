#!/bin/bash
# run_rdma.sh - ctest driver of the JACCL soft-RoCE tests (see guest_jaccl.sh).
# Usage: run_rdma.sh BUILD_DIR ASAN(ON/OFF) [CASE...]
# CASE: mesh4 ring4x2 shim kill pull baddev doctor (guest_jaccl.sh; default: all), so
# one part can be run alone, e.g. `run_rdma.sh build/plain OFF shim` (about a
# minute: MLX's mpi calls through libmeshrun-mpi on jaccl).
# MESHRUN_RXE_MAX_SIZE (default 16M): largest buffer of the mesh4 and ring4x2
# runs (every op and dtype up to 1 MiB, then float32/bfloat16/int32 sums,
# all_gather and sum_scatter at this size; see meshrun-allreduce-test --help).
# This machine's kernel has no rdma_rxe, so the cases run inside a QEMU guest
# with a Debian kernel that has it (scripts/rxe-guest.sh, which installs its
# packages idempotently). Exit 77 (skip) with a one-line reason where that
# cannot be had: not root, an ASan build (ASan under TCG emulation is far too
# slow), or no QEMU/kernel packages obtainable.
set -u
BUILD=$(readlink -f "$1"); ASAN=$2; shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../../.." && pwd)
CASES=("$@")
if [ ${#CASES[@]} = 0 ]; then
	CASES=(mesh4 ring4x2 shim kill pull baddev doctor)
	# libmeshrun-mpi's check needs the C++ test program (no C++ compiler: not built)
	if [ ! -x "$BUILD/bin/mpishim-mlx-test" ] || [ ! -e "$BUILD/lib/libmeshrun-mpi.so" ]; then
		echo "note: case shim left out: $BUILD/bin/mpishim-mlx-test or lib/libmeshrun-mpi.so is not built"
		CASES=(mesh4 ring4x2 kill pull baddev doctor)
	fi
fi

case "$ASAN" in ON|on|1|TRUE|true)
	echo "skip: the soft-RoCE guest tests run in the plain build only (ASan under QEMU TCG is too slow)"; exit 77;;
esac
if [ "$(id -u)" != 0 ]; then
	echo "skip: the soft-RoCE tests need root (apt-get, QEMU with the host's / shared into the guest)"; exit 77
fi
for p in meshrun meshconfig meshrun-allreduce-test; do
	[ -x "$BUILD/bin/$p" ] || { echo "error: $BUILD/bin/$p not built"; exit 1; }
done
# one guest per work directory at a time: one per build directory (named by a
# hash of its whole path: two checkouts' build/plain must not share one)
WORK=${MESHRUN_RXE_WORKDIR:-${TMPDIR:-/tmp}/meshrun-rxe-ctest-$(basename "$BUILD")-$(printf '%s' "$BUILD" | cksum | cut -d' ' -f1)}
# --share "$HERE": the guest mounts a tmpfs over /tmp, so a checkout under /tmp
# (a CI clone) would hide these scripts from it
"$SRC/scripts/rxe-guest.sh" --workdir "$WORK" --no-setup --share "$BUILD" --share "$HERE" --timeout 1700 \
	-- bash "$HERE/guest_jaccl.sh" "$BUILD/bin" --max-size "${MESHRUN_RXE_MAX_SIZE:-16M}" "${CASES[@]}"
rc=$?
case $rc in
	102|103) echo "skip: no QEMU or no guest kernel with rdma_rxe could be installed (rxe-guest.sh exit $rc)"; exit 77;;
esac
# our own work directory (kernel copy, initramfs, serial log: ~40 MB) stays
# only when something failed, for its serial.log; a MESHRUN_RXE_WORKDIR is yours
if [ $rc != 0 ]; then echo "guest files kept for a look: $WORK"
elif [ -z "${MESHRUN_RXE_WORKDIR:-}" ]; then rm -rf "$WORK"; fi
exit $rc
