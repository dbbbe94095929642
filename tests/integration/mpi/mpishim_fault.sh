#!/bin/bash
# mpishim_fault.sh RUN_RING SHIM PROG - 3 ranks of mpishim-mlx-test --fault-loop
# (16 MiB all_sums through libmeshrun-mpi); kill -9 of rank 2 after its second
# all_sum: ranks 0 and 1 must get an error from MPI_Allreduce (exit 3, where
# Open MPI's default handler aborts the job) within MESHRUN_TIMEOUT, and say
# which peer failed on stderr.
set -u
run_ring=$1 shim=$2 prog=$3
out=$(mktemp -d /tmp/mr-shim-fault-XXXXXX)
trap 'rm -rf "$out"' EXIT
timeout_s=4
export MESHRUN_TIMEOUT=$timeout_s MLX_MPI_LIBNAME=$shim
unset MLX_HOSTFILE MESHRUN_HOSTFILE MLX_RANK
"$run_ring" -n 3 -o "$out" -- "$prog" --fault-loop >/dev/null 2>&1 &
runner=$!
for ((i = 0; i < 300; i++)); do
	grep -q "iteration 1 done" "$out/rank2.out" 2>/dev/null && break
	sleep 0.1
done
if ! grep -q "iteration 1 done" "$out/rank2.out" 2>/dev/null; then
	echo "FAIL: rank 2 never completed an all_sum"; cat "$out"/rank*.err; kill "$runner"; wait "$runner"; exit 1
fi
kill -9 "$(cat "$out/rank2.pid")"
t0=$(date +%s.%N)
wait "$runner"
t1=$(date +%s.%N)
fail=0
for r in 0 1; do
	if ! grep -q "MPI_Allreduce returned [1-9]" "$out/rank$r.out" ||
	   ! grep -q "libmeshrun-mpi: MPI_Allreduce: .*rank 2" "$out/rank$r.err"; then
		echo "FAIL: rank $r:"; cat "$out/rank$r.out" | tail -3; cat "$out/rank$r.err"; fail=1
	else
		echo "ok: rank $r: $(grep 'returned' "$out/rank$r.out"): $(grep 'libmeshrun-mpi' "$out/rank$r.err")"
	fi
done
# every rank was done within MESHRUN_TIMEOUT (+1 s of slack for a loaded machine)
if awk -v a="$t0" -v b="$t1" -v t="$timeout_s" 'BEGIN { exit !(b - a > t + 1) }'; then
	echo "FAIL: the ranks took $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s to fail (MESHRUN_TIMEOUT=$timeout_s)"; fail=1
fi
exit $fail
