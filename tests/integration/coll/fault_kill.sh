#!/bin/bash
# fault_kill.sh RUN_RING PROG [-m] - kill -9 one of 4 ranks in the middle of a 64 MiB
# all_sum: the other three must fail (exit 3) with an error naming rank 2 and
# its address. Asserts the error, not the time (MESHRUN_TIMEOUT is small only so
# that a broken detection fails the test instead of hanging it). -m: the mesh
# backend (run_ring.sh -m), where rank 2 is every rank's direct peer.
set -u
run_ring=$1 prog=$2 mode=${3:-}
out=$(mktemp -d /tmp/mr-coll-fault-XXXXXX)
trap 'rm -rf "$out"' EXIT
export MESHRUN_TIMEOUT=5
"$run_ring" -n 4 -o "$out" $mode -- "$prog" --fault-loop --max-size 64M >/dev/null 2>&1 &
runner=$!
# wait until rank 2 finished a whole all_sum, so the kill lands inside the next one
for ((i = 0; i < 600; i++)); do
	grep -q "iteration 1 done" "$out/rank2.out" 2>/dev/null && break
	sleep 0.1
done
if ! grep -q "iteration 1 done" "$out/rank2.out" 2>/dev/null; then
	echo "FAIL: rank 2 never completed an all_sum"; kill "$runner"; wait "$runner"; exit 1
fi
kill -9 "$(cat "$out/rank2.pid")"
wait "$runner"
addr=$(sed -n '4p' "$out/hostfile.json" | grep -o '127.0.0.1:[0-9]*' | head -1)
fail=0
for r in 0 1 3; do
	if ! grep -q "all_sum failed: .*rank 2 ($addr)" "$out/rank$r.err"; then
		echo "FAIL: rank $r did not report rank 2 ($addr):"; cat "$out/rank$r.err"; fail=1
	else
		echo "ok: rank $r: $(grep 'all_sum failed' "$out/rank$r.err")"
	fi
done
exit $fail
