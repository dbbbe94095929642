#!/bin/bash
# mpishim_run.sh -r RUN_RING SHIM N PROG ARGS...   ranks started directly on a
#                                                  loopback ring (run_ring.sh)
# mpishim_run.sh -l MESHRUN SHIM N PROG ARGS...    `MESHRUN --backend mpi
#                                                  --mpi-impl meshrun -n N`
# PROG is mpishim-mlx-test (MLX's mpi.cpp reduced to its calls). With -r the
# shim is named by MLX_MPI_LIBNAME here; with -l meshrun must set it itself
# (to SHIM, the build tree's) and leave MLX_HOSTFILE unset. Passes when every
# rank says ok with a version string naming the shim and the ring.
set -u
mode=$1 tool=$2 shim=$3 n=$4 prog=$5
shift 5
out=$(mktemp /tmp/mr-shim-XXXXXX)
trap 'rm -f "$out"' EXIT
unset MLX_MPI_LIBNAME MLX_HOSTFILE MESHRUN_HOSTFILE MLX_RANK
export MESHRUN_TIMEOUT=20
if [ "$mode" = -r ]; then
	MLX_MPI_LIBNAME=$shim timeout -k 5 100 "$tool" -n "$n" -- "$prog" "$@" >"$out" 2>&1
else
	# the program prints what it sees: MLX_HOSTFILE must be unset, MLX_MPI_LIBNAME the shim
	timeout -k 5 100 "$tool" --backend mpi --mpi-impl meshrun -n "$n" -- /bin/sh -c \
		'echo "env: MLX_HOSTFILE=${MLX_HOSTFILE-unset} MLX_MPI_LIBNAME=$MLX_MPI_LIBNAME"; exec "$0" "$@"' \
		"$prog" "$@" >"$out" 2>&1
fi
rc=$?
cat "$out"
[ $rc -eq 0 ] || { echo "FAIL: exited $rc"; exit 1; }
want="of $n: ok (libmeshrun-mpi .*Open MPI ABI subset.*(ring))"
got=$(grep -c -- "$want" "$out")
[ "$got" -eq "$n" ] || { echo "FAIL: expected $n lines matching '$want', got $got"; exit 1; }
if [ "$mode" = -l ]; then
	got=$(grep -c "env: MLX_HOSTFILE=unset MLX_MPI_LIBNAME=$shim\$" "$out")
	[ "$got" -eq "$n" ] || { echo "FAIL: expected MLX_HOSTFILE unset and MLX_MPI_LIBNAME=$shim on $n ranks, got $got"; exit 1; }
fi
echo "ok: $n ranks through $shim"
