#!/bin/bash
# fault_stop.sh RUN_RING PROG [-m] - SIGSTOP one of 4 ranks in the middle of a 64 MiB
# all_sum: a peer that is alive but silent keeps its sockets open, so only the
# stall check (ring_p2p.c: no byte for MESHRUN_TIMEOUT) can end the job. The
# other three must fail (exit 3) within the timeout plus a grace, rank 2's
# neighbours saying it "showed no sign of life", and every error naming rank 2
# and its address. kill -9 and a pulled cable reach the end-of-connection
# path first, so they cannot catch a stall check that is switched off.
# -m: the mesh backend (run_ring.sh -m), where every rank is rank 2's neighbour.
set -u
run_ring=$1 prog=$2 mode=${3:-}
out=$(mktemp -d /tmp/mr-coll-stop-XXXXXX)
runner=
cleanup() {
	[ -f "$out/rank2.pid" ] && kill -9 "$(cat "$out/rank2.pid")" 2>/dev/null
	[ -n "$runner" ] && wait "$runner" 2>/dev/null
	rm -rf "$out"
}
trap cleanup EXIT
export MESHRUN_TIMEOUT=2
"$run_ring" -n 4 -o "$out" $mode -- "$prog" --fault-loop --max-size 64M >/dev/null 2>&1 &
runner=$!
for ((i = 0; i < 600; i++)); do
	grep -q "iteration 1 done" "$out/rank2.out" 2>/dev/null && break
	sleep 0.1
done
if ! grep -q "iteration 1 done" "$out/rank2.out" 2>/dev/null; then
	echo "FAIL: rank 2 never completed an all_sum"; exit 1
fi
kill -STOP "$(cat "$out/rank2.pid")"
t0=$(date +%s)
# ranks 0, 1 and 3 must exit on their own within MESHRUN_TIMEOUT + 8 s
alive=1
while [ $(($(date +%s) - t0)) -lt 10 ]; do
	alive=0
	for r in 0 1 3; do
		kill -0 "$(cat "$out/rank$r.pid")" 2>/dev/null && alive=1
	done
	[ $alive = 0 ] && break
	sleep 0.1
done
took=$(($(date +%s) - t0))
kill -9 "$(cat "$out/rank2.pid")"
wait "$runner"
runner=
if [ $alive = 1 ]; then
	echo "FAIL: ranks still running ${took}s after rank 2 stopped (MESHRUN_TIMEOUT=2): the stall went unnoticed"
	exit 1
fi
addr=$(sed -n '4p' "$out/hostfile.json" | grep -o '127.0.0.1:[0-9]*' | head -1)
fail=0
for r in 0 1 3; do
	if ! grep -q "all_sum failed: .*rank 2 ($addr)" "$out/rank$r.err"; then
		echo "FAIL: rank $r did not report rank 2 ($addr):"; cat "$out/rank$r.err"; fail=1
	else
		echo "ok: rank $r: $(grep 'all_sum failed' "$out/rank$r.err")"
	fi
done
for r in 1 3; do
	grep -q "rank 2 ($addr) showed no sign of life" "$out/rank$r.err" ||
		{ echo "FAIL: rank $r (a neighbour) did not name the stall"; fail=1; }
done
echo "ranks ended ${took}s after the stop"
exit $fail
