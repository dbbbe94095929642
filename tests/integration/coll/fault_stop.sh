#!/bin/bash
# fault_stop.sh RUN_RING PROG [-m] - SIGSTOP one of 4 ranks in the middle of a 64 MiB
# all_sum: a peer that is alive but silent keeps its sockets open, so only the
# stall check (coll/tcp/p2p.c: no byte for MESHRUN_TIMEOUT) can end the job. The
# other three must fail (exit 3) within the timeout plus a grace, rank 2's
# neighbours saying it "showed no sign of life", and every error naming rank 2
# and its address. kill -9 and a pulled cable reach the end-of-connection
# path first, so they cannot catch a stall check that is switched off.
# -m: the mesh backend (run_ring.sh -m), where every rank is rank 2's neighbour.
set -u
. "$(dirname "$0")/fault_lib.sh"
export MESHRUN_TIMEOUT=2
fault_start "$1" "$2" "${3:-}"
kill -STOP "$(cat "$out/rank2.pid")"
# ranks 0, 1 and 3 must exit on their own within MESHRUN_TIMEOUT + 8 s
fault_wait_others
kill -9 "$(cat "$out/rank2.pid")"
wait "$runner"
runner=
if [ $alive = 1 ]; then
	echo "FAIL: ranks still running ${took}s after rank 2 stopped (MESHRUN_TIMEOUT=2): the stall went unnoticed"
	exit 1
fi
addr=$(fault_addr 2)
fault_named 2 0 1 3
fail=$?
for r in 1 3; do
	grep -q "rank 2 ($addr) showed no sign of life" "$out/rank$r.err" ||
		{ echo "FAIL: rank $r (a neighbour) did not name the stall"; fail=1; }
done
echo "ranks ended ${took}s after the stop"
exit $fail
