#!/bin/bash
# mpishim_jaccl_cfg.sh MESHRUN PROG - issue 18: `meshrun --backend mpi
# --mpi-impl meshrun` on a hostfile whose rdma matrix is complete hands
# libmeshrun-mpi jaccl's variables (JACCL_COORDINATOR, JACCL_IBV_DEVICES; no
# ring hostfile), and the shim's MPI_Init really goes to libmeshrun's jaccl.
# A configuration check on 2 local ranks: without an RDMA device MPI_Init must
# fail naming jaccl (not fall back to a world of one), and meshrun must stop
# the job naming the rank. A real jaccl run belongs to the soft-RoCE guest
# (tests/integration/rdma): skipped (77) where this machine has RDMA devices,
# or where libmeshrun was built without jaccl.
set -u
MESHRUN=$1 PROG=$2
[ -d /sys/class/infiniband ] && [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ] &&
	{ echo "SKIP: this machine has RDMA devices: the failure path cannot be shown here (tests/integration/rdma runs jaccl)"; exit 77; }
tmp=$(mktemp -d /tmp/mr-shim-jaccl.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/hosts.json" <<'JSON'
[{"ssh": "127.0.0.1", "ips": ["127.0.0.1"], "rdma": [null, "rxe0"]},
 {"ssh": "127.0.0.1", "ips": ["127.0.0.1"], "rdma": ["rxe0", null]}]
JSON
unset MLX_MPI_LIBNAME MLX_HOSTFILE MESHRUN_HOSTFILE MLX_RANK JACCL_COORDINATOR JACCL_IBV_DEVICES MLX_IBV_DEVICES
MESHRUN_TIMEOUT=5 timeout -k 5 60 "$MESHRUN" --backend mpi --mpi-impl meshrun --hostfile "$tmp/hosts.json" \
	--starting-port $((20000 + $$ % 10000)) -- /bin/sh -c \
	'echo "env: JACCL_COORDINATOR=${JACCL_COORDINATOR-unset} JACCL_IBV_DEVICES=${JACCL_IBV_DEVICES:+file} MESHRUN_HOSTFILE=${MESHRUN_HOSTFILE-unset} MLX_IBV_DEVICES=${MLX_IBV_DEVICES-unset}"; exec "$0"' \
	"$PROG" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
if grep -q "of 1: ok" "$tmp/out"; then
	echo "SKIP: the ranks ran as worlds of one: libmeshrun was built without jaccl (libibverbs)"; exit 77
fi
fails=0
n=$(grep -cE "^env: JACCL_COORDINATOR=127\.0\.0\.1:[0-9]+ JACCL_IBV_DEVICES=file MESHRUN_HOSTFILE=unset MLX_IBV_DEVICES=unset$" "$tmp/out")
[ "$n" -eq 2 ] && echo "ok - both ranks got jaccl's variables (JACCL_*), no ring hostfile, none of MLX's names" ||
	{ echo "FAIL - expected 2 ranks with JACCL_* set and MESHRUN_HOSTFILE/MLX_IBV_DEVICES unset, got $n"; fails=1; }
grep -qE "libmeshrun-mpi: MPI_Init: .*jaccl" "$tmp/out" && echo "ok - MPI_Init went to libmeshrun's jaccl and failed naming it" ||
	{ echo "FAIL - no 'libmeshrun-mpi: MPI_Init: ... jaccl' error"; fails=1; }
# both ranks fail alike: one line says so (issue 37), or a line per rank
[ $rc -ne 0 ] && grep -qE "\[ERROR\] (rank [01] .*|every rank \(2 of 2\) failed the same way: )exit status 16" "$tmp/out" &&
	echo "ok - meshrun exited $rc naming the ranks' exit status (MPI error class 16)" ||
	{ echo "FAIL - meshrun exited $rc without naming a rank's exit status 16"; fails=1; }
exit $fails
