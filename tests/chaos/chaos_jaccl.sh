#!/bin/bash
# chaos_jaccl.sh - the jaccl part of the fault campaign (issue 16): boots the
# soft-RoCE QEMU guest (scripts/rxe-guest.sh) and runs jaccl_guest.sh in it
# (jaccl jobs over 12 rxe devices, one seeded fault per job; see there). Its
# rows and summary are chaos.sh's (chaos_lib.sh); the table is copied to
# --table FILE, and to FILE minus .txt plus .named the lines of each failed
# job's stderr that name its fault. Not in the test command: the guest is emulated (TCG), a job
# takes 20-60 s. bench/chaos/run.sh --jaccl N runs it after the meshsim part.
#
#   chaos_jaccl.sh BIN_DIR [--workdir DIR] [--table FILE] [--jobs N] [--seed N]
#                  [--budget S] [jaccl_guest.sh options...]
# --workdir: the guest's work directory (one guest per work directory at a
# time; default /tmp/meshrun-chaos-jaccl-<hash of BIN_DIR>, or
# MESHRUN_RXE_WORKDIR). --budget S: deal no new job after S seconds of jobs
# (default: 90 s per job); the guest's own timeout is that plus 10 minutes.
# Exit: the guest script's (0 all jobs ok, 1 some not, 2 setup), 124 when the
# guest timed out, 77 when it cannot run here (not root, no QEMU/kernel).
set -u
BIN=$(readlink -f "${1:?usage: $0 BIN_DIR [options]}")
shift
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
WORK=${MESHRUN_RXE_WORKDIR:-${TMPDIR:-/tmp}/meshrun-chaos-jaccl-$(printf '%s' "$BIN" | cksum | cut -d' ' -f1)}
TABLE="" JOBS=30 BUDGET="" args=() own=${MESHRUN_RXE_WORKDIR:+no}
while [ $# -gt 0 ]; do
	case $1 in
	--workdir) WORK=$2; own=no; shift 2 ;;
	--table) TABLE=$2; shift 2 ;;
	--jobs) JOBS=$2; shift 2 ;;
	--budget) BUDGET=$2; shift 2 ;;
	*) args+=("$1"); shift ;;
	esac
done
[ -n "$BUDGET" ] || BUDGET=$((JOBS * 90))
[ "$(id -u)" = 0 ] || { echo "skip: the soft-RoCE guest needs root (apt-get, QEMU with the host's / shared)"; exit 77; }
for p in meshrun meshrun-allreduce-test; do
	[ -x "$BIN/$p" ] || { echo "error: $BIN/$p not built"; exit 2; }
done
mkdir -p "$WORK"
WORK=$(readlink -f "$WORK")
[ -z "$TABLE" ] || TABLE=$(readlink -f "$TABLE")
# the guest starts the command in our directory, which it cannot see when it
# is under /tmp (a tmpfs there): start from the work directory, always shared
cd "$WORK" || exit 2
rm -f "$WORK/jaccl-table.txt"
# --share: the guest mounts a tmpfs over /tmp, so a build or checkout under
# /tmp would be hidden from it
"$SRC/scripts/rxe-guest.sh" --workdir "$WORK" --no-setup --share "$BIN" --share "$SRC/tests" \
	--timeout $((BUDGET + 600)) \
	-- bash "$HERE/jaccl_guest.sh" "$BIN" --jobs "$JOBS" --budget "$BUDGET" --table "$WORK/jaccl-table.txt" "${args[@]}"
rc=$?
case $rc in
	102|103) echo "skip: no QEMU or no guest kernel with rdma_rxe could be installed (rxe-guest.sh exit $rc)"; exit 77 ;;
esac
# the table, and beside it what each failed job's stderr said about its fault
if [ -n "$TABLE" ] && [ -s "$WORK/jaccl-table.txt" ]; then
	cp "$WORK/jaccl-table.txt" "$TABLE"
	cp "$WORK/jaccl-table.named" "${TABLE%.txt}.named" 2>/dev/null
fi
# our own work directory (kernel copy, initramfs: ~40 MB) stays only when
# something failed; a --workdir or MESHRUN_RXE_WORKDIR is the caller's
if [ $rc != 0 ]; then echo "guest files kept for a look: $WORK (serial.log)"
elif [ -z "$own" ]; then cd / && rm -rf "$WORK"; fi
exit $rc
