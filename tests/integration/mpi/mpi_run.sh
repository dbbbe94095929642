#!/bin/bash
# mpi_run.sh [-l MESHRUN] N PROG ARGS... - run PROG as N ranks under Debian's
# Open MPI (mpirun directly, or through `MESHRUN --backend mpi -n N` with -l)
# and check that it used libmeshrun's mpi backend (N > 1) or got no mpi group
# and fell through to the size-1 group (N = 1, as MLX: a world of one is no
# group).
#
# ASAN_OPTIONS=detect_leaks=0: Open MPI (libmpi, its plugins, hwloc, pmix)
# leaves allocations behind at MPI_Finalize by design, which LeakSanitizer
# reports in every ASan rank; our own leaks are covered by the unit tests.
set -u
launcher=
if [ "${1:-}" = "-l" ]; then
	launcher=$2
	shift 2
fi
n=$1 prog=$2
shift 2
command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (openmpi-bin)"; exit 77; }
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
# the ring backend must not pick the job up: only mpirun's environment
unset MLX_HOSTFILE MLX_RANK
out=$(mktemp /tmp/mr-mpi-XXXXXX)
trap 'rm -f "$out"' EXIT
# timeout: a hang fails the test instead of blocking ctest
if [ -n "$launcher" ]; then
	timeout -k 10 600 "$launcher" --backend mpi -n "$n" \
		--mpi-arg "--allow-run-as-root --oversubscribe --mca mpi_yield_when_idle 1" -- "$prog" "$@" >"$out" 2>&1
else
	timeout -k 10 600 mpirun --allow-run-as-root --oversubscribe -n "$n" "$prog" "$@" >"$out" 2>&1
fi
rc=$?
cat "$out"
[ $rc -eq 0 ] || { echo "FAIL: ${launcher:-mpirun} -n $n exited $rc"; exit 1; }
if [ "$n" -gt 1 ]; then
	want="of $n (mpi): "
else
	want="rank 0 of 1 (none): "
fi
got=$(grep -c -- "$want" "$out")
if [ "$got" -ne "$n" ]; then
	echo "FAIL: expected $n summary lines containing '$want', got $got"
	exit 1
fi
echo "ok: $n rank(s): $want"
