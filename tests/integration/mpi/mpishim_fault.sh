#!/bin/bash
# mpishim_fault.sh RUN_RING SHIM PROG - 3 ranks of mpishim-mlx-test --fault-loop
# (16 MiB all_sums through libmeshrun-mpi); kill -9 of rank 2 after its second
# all_sum, twice:
#   MESHRUN_MPI_ERRORS=return: ranks 0 and 1 get an error from MPI_Allreduce
#     (the program prints it and exits 3);
#   default (fatal, what an MLX program gets: MLX does not check the codes):
#     ranks 0 and 1 end inside MPI_Allreduce with status 16 (MPI_ERR_OTHER) and
#     never print a result;
# both within MESHRUN_TIMEOUT, saying which peer failed on stderr, where Open
# MPI's default handler aborts the job and MLX's ring hangs.
set -u
run_ring=$1 shim=$2 prog=$3
out=$(mktemp -d /tmp/mr-shim-fault-XXXXXX)
trap 'rm -rf "$out"' EXIT
timeout_s=4
export MESHRUN_TIMEOUT=$timeout_s MLX_MPI_LIBNAME=$shim
unset MLX_HOSTFILE MESHRUN_HOSTFILE MLX_RANK
fail=0

one_run() { # MODE
	local mode=$1 runner t0 t1 r status
	rm -f "$out"/rank*
	if [ "$mode" = return ]; then export MESHRUN_MPI_ERRORS=return; else unset MESHRUN_MPI_ERRORS; fi
	"$run_ring" -n 3 -o "$out" -- "$prog" --fault-loop >/dev/null 2>&1 &
	runner=$!
	for ((i = 0; i < 300; i++)); do
		grep -q "iteration 1 done" "$out/rank2.out" 2>/dev/null && break
		sleep 0.1
	done
	if ! grep -q "iteration 1 done" "$out/rank2.out" 2>/dev/null; then
		echo "FAIL ($mode): rank 2 never completed an all_sum"; cat "$out"/rank*.err; kill "$runner"; wait "$runner"; fail=1; return
	fi
	kill -9 "$(cat "$out/rank2.pid")"
	t0=$(date +%s.%N)
	wait "$runner"
	status=$?
	t1=$(date +%s.%N)
	for r in 0 1; do
		if ! grep -q "libmeshrun-mpi: MPI_Allreduce: .*rank 2" "$out/rank$r.err"; then
			echo "FAIL ($mode): rank $r did not name rank 2:"; cat "$out/rank$r.err"; fail=1
		elif [ "$mode" = return ] && ! grep -q "MPI_Allreduce returned [1-9]" "$out/rank$r.out"; then
			echo "FAIL ($mode): rank $r saw no error code:"; tail -3 "$out/rank$r.out"; fail=1
		elif [ "$mode" = fatal ] && { grep -q "returned" "$out/rank$r.out" ||
			! grep -q "errors are fatal .*exiting with status 16" "$out/rank$r.err"; }; then
			echo "FAIL ($mode): rank $r went on after the error or did not say it exits:"
			tail -3 "$out/rank$r.out"; cat "$out/rank$r.err"; fail=1
		else
			echo "ok ($mode): rank $r: $(grep 'libmeshrun-mpi: MPI_Allreduce' "$out/rank$r.err")"
		fi
	done
	# run_ring exits with the first non-zero status: rank 0's (3, or 16 when fatal)
	want=3; [ "$mode" = fatal ] && want=16
	[ "$status" = "$want" ] || { echo "FAIL ($mode): the ranks' status is $status, want $want"; fail=1; }
	# every rank was done within MESHRUN_TIMEOUT (+1 s of slack for a loaded machine)
	if awk -v a="$t0" -v b="$t1" -v t="$timeout_s" 'BEGIN { exit !(b - a > t + 1) }'; then
		echo "FAIL ($mode): the ranks took $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s to fail (MESHRUN_TIMEOUT=$timeout_s)"; fail=1
	fi
}

one_run return
one_run fatal
exit $fail
