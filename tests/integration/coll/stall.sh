#!/bin/bash
# stall.sh RUN_RING PROG [-m] - SIGSTOP one of 4 ranks in the middle of a 64 MiB
# all_sum loop: the other three must fail within MESHRUN_TIMEOUT (2 s here,
# asserted with a generous bound on a loaded machine) with an error naming
# the stopped rank and "no sign of life". -m: the mesh backend.
set -u
run_ring=$1 prog=$2 mode=${3:-}
out=$(mktemp -d /tmp/mr-coll-stall-XXXXXX)
victim=""
trap '[ -n "$victim" ] && kill -9 "$victim" 2>/dev/null; rm -rf "$out"' EXIT
export MESHRUN_TIMEOUT=2
"$run_ring" -n 4 -o "$out" $mode -- "$prog" --fault-loop --max-size 64M >/dev/null 2>&1 &
runner=$!
for ((i = 0; i < 600; i++)); do
	grep -q "iteration 1 done" "$out/rank1.out" 2>/dev/null && break
	sleep 0.1
done
if ! grep -q "iteration 1 done" "$out/rank1.out" 2>/dev/null; then
	echo "FAIL: rank 1 never completed an all_sum"; kill "$runner"; wait "$runner"; exit 1
fi
victim=$(cat "$out/rank1.pid")
t0=$(date +%s%N)
kill -STOP "$victim"
# the three others exit on their own; the stopped one is killed afterwards
fail=0
for r in 0 2 3; do
	pid=$(cat "$out/rank$r.pid")
	for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then echo "FAIL: rank $r still running 30 s after the stop"; fail=1; fi
done
ms=$((($(date +%s%N) - t0) / 1000000))
kill -9 "$victim" 2>/dev/null
wait "$runner"
victim=""
addr=$(sed -n '3p' "$out/hostfile.json" | grep -o '127.0.0.1:[0-9]*' | head -1)
echo "# the three others stopped ${ms} ms after the SIGSTOP (MESHRUN_TIMEOUT=2)"
[ "$ms" -lt 15000 ] || { echo "FAIL: took ${ms} ms"; fail=1; }
for r in 0 2 3; do
	if grep -q "all_sum failed: .*rank 1 ($addr) showed no sign of life" "$out/rank$r.err"; then
		echo "ok: rank $r: $(grep 'all_sum failed' "$out/rank$r.err")"
	else
		echo "FAIL: rank $r did not report rank 1 ($addr) as stalled:"; cat "$out/rank$r.err"; fail=1
	fi
done
exit $fail
