#!/bin/bash
# mpi_fault.sh PROG - kill -9 one of 4 mpi ranks in the middle of all_sum
# loops: mpirun must end the job with a non-zero status naming the signal,
# not hang (timeout is only the safety net: its 124 fails the test; mpirun
# itself exits 137 = 128+9, the killed rank's status), and no rank may be
# left running.
set -u
prog=$1
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (openmpi-bin)"; exit 77; }
# see mpi_run.sh: Open MPI's own allocations at exit are not ours to report
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
unset MLX_HOSTFILE MLX_RANK
out=$(mktemp /tmp/mr-mpi-fault-XXXXXX)
tpid=
ranks=()
cleanup() {
	[ -n "$tpid" ] && kill -9 "$tpid" 2>/dev/null
	for p in "${ranks[@]}"; do kill -9 "$p" 2>/dev/null; done
	rm -f "$out"
}
trap cleanup EXIT
timeout 120 mpirun --allow-run-as-root --oversubscribe -n 4 \
	"$prog" --fault-loop --max-size 4M >"$out" 2>&1 &
tpid=$!
# every rank finished at least 2 all_sums: the job runs; kill inside the next
for ((i = 0; i < 600; i++)); do
	[ "$(grep -c 'iteration 2 done' "$out")" -ge 4 ] && break
	sleep 0.1
done
mpid=$(pgrep -P "$tpid" | head -1)
for p in $(pgrep -P "$mpid" 2>/dev/null); do
	grep -q "allreduce-test" "/proc/$p/cmdline" 2>/dev/null && ranks+=("$p")
done
if [ "${#ranks[@]}" -ne 4 ]; then
	echo "FAIL: found ${#ranks[@]} rank processes under mpirun, want 4"; cat "$out"; exit 1
fi
kill -9 "${ranks[2]}"
wait "$tpid"
rc=$?
cat "$out" | grep -v "iteration .* done" | head -30
fail=0
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
	echo "FAIL: the job ended with status $rc (want a failure, not 0 and not the timeout)"; fail=1
fi
if ! grep -q "signal 9" "$out"; then
	echo "FAIL: mpirun did not report the killed rank (signal 9)"; fail=1
fi
# mpirun has ended; its ranks die with it (SIGKILL takes a moment under load):
# wait up to 10 s for each to be gone (or a zombie), then judge
running() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
for p in "${ranks[@]}"; do
	for ((i = 0; i < 100; i++)); do running "$p" || break; sleep 0.1; done
	if running "$p"; then
		echo "FAIL: rank process $p still running"; fail=1
	fi
done
[ $fail -eq 0 ] && echo "ok: the job failed with status $rc after rank 2 was killed"
exit $fail
