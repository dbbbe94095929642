#!/bin/bash
# run_rdma.sh - ctest driver of the JACCL soft-RoCE tests (see guest_jaccl.sh).
# Usage: run_rdma.sh BUILD_DIR ASAN(ON/OFF) [CASE[@CONFIG]...]
# CASE and CONFIG: see guest_jaccl.sh (default: its list, every case in the
# configurations the issue asks for), so one part can be run alone, e.g.
# `run_rdma.sh build/plain OFF shim@apple` (MLX's mpi calls through
# libmeshrun-mpi on jaccl under the Apple RDMA layer).
# MESHRUN_RXE_MAX_SIZE (default 128K): largest buffer of the mesh4, ring4x2
# and rc runs (every op and dtype up to it; see meshrun-allreduce-test --help).
# This machine's kernel has no rdma_rxe, so the cases run inside a QEMU guest
# with a Debian kernel that has it (scripts/rxe-guest.sh, which installs its
# packages idempotently). Exit 77 (skip) with a one-line reason where that
# cannot be had: not root, an ASan build (ASan under TCG emulation is far too
# slow), or no QEMU/kernel packages obtainable.
set -u
BUILD=$(readlink -f "$1"); ASAN=$2; shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../../.." && pwd)
CASES=("$@") # none: guest_jaccl.sh's default list

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
	-- bash "$HERE/guest_jaccl.sh" "$BUILD/bin" --max-size "${MESHRUN_RXE_MAX_SIZE:-128K}" "${CASES[@]}"
rc=$?
case $rc in
	102|103) echo "skip: no QEMU or no guest kernel with rdma_rxe could be installed (rxe-guest.sh exit $rc)"; exit 77;;
esac
# our own work directory (kernel copy, initramfs, serial log: ~40 MB) stays
# only when something failed, for its serial.log; a MESHRUN_RXE_WORKDIR is yours
if [ $rc != 0 ]; then echo "guest files kept for a look: $WORK"
elif [ -z "${MESHRUN_RXE_WORKDIR:-}" ]; then rm -rf "$WORK"; fi
exit $rc
