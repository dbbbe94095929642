#!/bin/bash
# mpishim_meshsim.sh MESHSIM MESHCONFIG MESHRUN PROG SHIM - issue 18: MLX's mpi
# backend (PROG, mpishim-mlx-test) on libmeshrun-mpi as 4 ranks in 4 meshsim
# hosts, over the simulated Thunderbolt cables (root).
#
# - `meshsim up ring:4` (cluster msh and random hex, state in a temporary
#   MESHSIM_STATE_DIR; meshsim_lib.sh, shared with mpi_meshsim.sh) and `meshconfig --auto-setup` give every cable its /30;
# - `meshrun --backend mpi --mpi-impl meshrun --hostfile <meshconfig's>
#   --ssh-config <meshsim's>` starts the ranks over ssh, no mpirun: every rank
#   must see MLX_HOSTFILE unset and MLX_MPI_LIBNAME = SHIM, and say ok through
#   libmeshrun's ring;
# - every cable carried at least 1 MiB each way (the ranks ran in 4 hosts over
#   the cables), nothing is left in the hosts, and `meshsim down` leaves nothing.
# Run it under flock /tmp/meshrun-ns.lock (ctest: RUN_SERIAL; developers: the lock).
MESHSIM=$1 MESHCONFIG=$2 MESHRUN=$3 PROG=$4 SHIM=$5
. "$(dirname "$0")/meshsim_lib.sh" msh
for p in "$MESHSIM" "$MESHCONFIG" "$MESHRUN" "$PROG" "$SHIM"; do
	[ -e "$p" ] || { echo "FAIL - $p is not built"; exit 1; }
done

msl_up ring:4 4
msl_tx_mark

# /bin/sh -c: each rank first says what it sees (the launch contract), then runs PROG
timeout -k 10 120 "$MESHRUN" --backend mpi --mpi-impl meshrun --hostfile "$TMP/hosts.json" \
	--ssh-config "$CFG" --env MESHRUN_TIMEOUT=20 -- /bin/sh -c \
	'echo "env: MLX_HOSTFILE=${MLX_HOSTFILE-unset} MLX_MPI_LIBNAME=$MLX_MPI_LIBNAME"; exec "$0" "$@"' \
	"$PROG" >"$TMP/run.log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then ok "meshrun --backend mpi --mpi-impl meshrun (4 meshsim hosts) exited 0"; else
	fail "meshrun --backend mpi --mpi-impl meshrun (4 meshsim hosts) exited $rc"; show "$TMP/run.log"
fi
n=$(grep -c "env: MLX_HOSTFILE=unset MLX_MPI_LIBNAME=$SHIM\$" "$TMP/run.log")
if [ "$n" -eq 4 ]; then ok "4 ranks with MLX_HOSTFILE unset and MLX_MPI_LIBNAME=$SHIM"; else
	fail "expected 4 ranks with MLX_HOSTFILE unset and MLX_MPI_LIBNAME=$SHIM, got $n"; show "$TMP/run.log"
fi
n=$(grep -cE 'rank [0-3] of 4: ok \(libmeshrun-mpi .*\(ring\)\)' "$TMP/run.log")
if [ "$n" -eq 4 ]; then ok "4 ranks of MLX's mpi calls on libmeshrun-mpi (ring): every check passed"; else
	fail "expected 4 'rank N of 4: ok (libmeshrun-mpi ... (ring))' lines, got $n"; show "$TMP/run.log"
fi
msl_check_cables $((1 << 20))
msl_end
