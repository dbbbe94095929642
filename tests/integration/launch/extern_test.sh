#!/bin/sh
# Integration tests of meshrun under an external launcher (src/launch/extern.h):
# Open MPI's mpirun for real, srun as a stand-in script (srun is not installed
# here) that records its argv and environment and starts the ranks with
# SLURM_PROCID/SLURM_NTASKS set, as srun does. No root needed.
# usage: extern_test.sh MESHRUN BINDIR CASE
set -u
MESHRUN=$1
BINDIR=$2
CASE=$3

D=$(mktemp -d "${TMPDIR:-/tmp}/meshrun-extern-test.XXXXXX") || exit 1
mkdir "$D/tmp" "$D/bin"
export TMPDIR="$D/tmp" # meshrun's job directories land here: must be empty afterwards
# a launcher that runs as root in CI: Open MPI refuses root without this
MPIARG="--allow-run-as-root"
unset MLX_RANK MLX_HOSTFILE SLURM_JOB_ID SLURM_PROCID SLURM_NTASKS MESHRUN_LAUNCHER
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # Open MPI's own leaks
trap 'rm -rf "$D"' EXIT
trap 'exit 1' INT TERM

fail() {
	echo "FAIL ($CASE): $*" >&2
	exit 1
}

need_mpirun() {
	command -v mpirun >/dev/null || { echo "SKIP: mpirun not installed (openmpi-bin)"; exit 77; }
}

no_files_left() {
	[ -z "$(ls -A "$D/tmp")" ] || fail "meshrun left files in TMPDIR: $(ls -A "$D/tmp")"
}

# srun stand-in: logs argv (one word per line) and SLURM_HOSTFILE's content, then runs
# the command after "--" --ntasks times in parallel with SLURM_PROCID set.
cat >"$D/bin/srun" <<'EOF'
#!/bin/sh
log=$SRUN_LOG
printf '%s\n' "$0" "$@" >"$log.argv"
cat "$SLURM_HOSTFILE" >"$log.hosts"
n=1
while [ $# -gt 0 ]; do
	case $1 in
	--ntasks=*) n=${1#--ntasks=} ;;
	--) shift; break ;;
	esac
	shift
done
i=0
pids=
while [ $i -lt "$n" ]; do
	SLURM_PROCID=$i SLURM_NTASKS=$n "$@" &
	pids="$pids $!"
	i=$((i + 1))
done
rc=0
for p in $pids; do wait "$p" || rc=$?; done
exit $rc
EOF
chmod +x "$D/bin/srun"

case "$CASE" in
mpi_root)
	# as root, Open MPI's 15-line refusal becomes one line saying how to allow it
	need_mpirun
	[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root"; exit 77; }
	mpirun --version 2>/dev/null | grep -q "(Open MPI)" || { echo "SKIP: mpirun is not Open MPI"; exit 77; }
	env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM "$MESHRUN" --backend mpi -n 2 -- true \
		>"$D/out" 2>"$D/err"; rc=$?
	[ $rc = 2 ] && [ "$(wc -l <"$D/err")" = 1 ] && grep -q -- "--mpi-arg --allow-run-as-root" "$D/err" ||
		fail "mpi as root: $rc $(cat "$D/err")"
	env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM "$MESHRUN" --backend mpi -n 2 \
		--mpi-arg "$MPIARG" -- echo ran >"$D/out" 2>"$D/err" || fail "--allow-run-as-root: $? $(cat "$D/err")"
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$MESHRUN" --backend mpi -n 2 -- echo ran \
		>"$D/out" 2>"$D/err" || fail "OMPI_ALLOW_RUN_AS_ROOT*: $? $(cat "$D/err")"
	[ "$(grep -c ran "$D/out")" = 2 ] || fail "ranks did not run: $(cat "$D/out")"
	;;
mpirun_ring)
	# the ring backend with ranks numbered by mpirun (OMPI_COMM_WORLD_RANK, no MLX_RANK)
	need_mpirun
	T="$BINDIR/meshrun-allreduce-test"
	[ -x "$T" ] || { echo "SKIP: $T is not built"; exit 77; }
	"$MESHRUN" --launcher mpirun -n 4 --backend ring --mpi-arg "$MPIARG" -- \
		sh -c 'echo "env ${MLX_RANK-none} $OMPI_COMM_WORLD_RANK $(cat "$MLX_HOSTFILE")"' >"$D/env" 2>&1 ||
		fail "env probe: exit code $?: $(cat "$D/env")"
	H='[["127.0.0.1:32323"], ["127.0.0.1:32324"], ["127.0.0.1:32325"], ["127.0.0.1:32326"]]'
	printf 'env none %s %s\n' 0 "$H" 1 "$H" 2 "$H" 3 "$H" >"$D/want"
	grep '^env ' "$D/env" | sort | cmp -s - "$D/want" || fail "rank environment: $(cat "$D/env")"
	"$MESHRUN" --launcher mpirun -n 4 --backend ring --mpi-arg "$MPIARG" -- "$T" --max-size 64K \
		>"$D/out" 2>&1 || fail "exit code $?: $(cat "$D/out")"
	[ "$(grep -c ' of 4 (ring): .* 0 failed' "$D/out")" = 4 ] || fail "not 4 passing ring ranks: $(cat "$D/out")"
	# a failing rank: mpirun's exit code comes through
	"$MESHRUN" --launcher mpirun -n 2 --mpi-arg "$MPIARG" -- sh -c 'exit $((OMPI_COMM_WORLD_RANK + 3))' \
		>"$D/out" 2>&1
	rc=$?
	[ $rc = 3 ] || [ $rc = 4 ] || fail "failing rank: exit code $rc: $(cat "$D/out")"
	no_files_left
	;;
srun_fake)
	# srun's exact argv and SLURM_HOSTFILE, and ranks numbered by SLURM_PROCID (auto: SLURM_JOB_ID)
	T="$BINDIR/meshrun-allreduce-test"
	[ -x "$T" ] || { echo "SKIP: $T is not built"; exit 77; }
	export SRUN_LOG="$D/srun"
	PATH="$D/bin:$PATH" SLURM_JOB_ID=4242 "$MESHRUN" -n 3 --cwd "$D" --env 'V=a,b c' -- \
		sh -c 'echo "env ${MLX_RANK-none} $SLURM_PROCID $V $(cat "$MLX_HOSTFILE")"' >"$D/env" 2>&1 ||
		fail "exit code $?: $(cat "$D/env")"
	H='[["127.0.0.1:32323"], ["127.0.0.1:32324"], ["127.0.0.1:32325"]]'
	printf 'env none %s a,b c %s\n' 0 "$H" 1 "$H" 2 "$H" >"$D/want"
	sort "$D/env" | cmp -s - "$D/want" || fail "rank environment: $(cat "$D/env")"
	me=$(hostname)
	printf '%s\n' "$D/bin/srun" --ntasks=3 "--nodelist=$me" --distribution=arbitrary \
		--kill-on-bad-exit=1 --export=ALL "--chdir=$D" -- /usr/bin/sh -c \
		'echo "env ${MLX_RANK-none} $SLURM_PROCID $V $(cat "$MLX_HOSTFILE")"' >"$D/want.argv"
	sh_path=$(command -v sh)
	sed -i "s|^/usr/bin/sh\$|$sh_path|" "$D/want.argv"
	cmp -s "$D/srun.argv" "$D/want.argv" || fail "srun argv: $(cat "$D/srun.argv")"
	printf '%s\n' "$me" "$me" "$me" | cmp -s - "$D/srun.hosts" || fail "SLURM_HOSTFILE: $(cat "$D/srun.hosts")"
	PATH="$D/bin:$PATH" "$MESHRUN" --launcher srun -n 3 --backend ring -- "$T" --max-size 64K \
		>"$D/out" 2>&1 || fail "ring under srun: exit code $?: $(cat "$D/out")"
	[ "$(grep -c ' of 3 (ring): .* 0 failed' "$D/out")" = 3 ] || fail "not 3 passing ring ranks: $(cat "$D/out")"
	# opting out inside an allocation: our own launcher again (MLX_RANK is set)
	PATH="$D/bin:$PATH" SLURM_JOB_ID=4242 "$MESHRUN" --launcher meshrun -n 2 -- sh -c 'echo "r$MLX_RANK"' |
		sort | tr '\n' ' ' >"$D/out"
	[ "$(cat "$D/out")" = "r0 r1 " ] || fail "--launcher meshrun: $(cat "$D/out")"
	no_files_left
	;;
srun_missing)
	# srun not on PATH: a clear error, exit 255; inside an allocation it names the opt-out
	PATH=/usr/bin:/bin "$MESHRUN" --launcher srun -n 2 -- true 2>"$D/err"
	rc=$?
	[ $rc = 255 ] && grep -q "'srun' not found on PATH" "$D/err" || fail "--launcher srun: $rc $(cat "$D/err")"
	PATH=/usr/bin:/bin SLURM_JOB_ID=7 "$MESHRUN" -n 2 -- true 2>"$D/err"
	rc=$?
	[ $rc = 255 ] && grep -q "SLURM_JOB_ID is set" "$D/err" && grep -q -- "--launcher meshrun" "$D/err" ||
		fail "SLURM_JOB_ID: $rc $(cat "$D/err")"
	"$MESHRUN" --launcher mpirun --backend nccl -n 2 -- true 2>"$D/err"
	rc=$?
	[ $rc = 2 ] && grep -q "needs MLX_RANK" "$D/err" || fail "nccl under mpirun: $rc $(cat "$D/err")"
	no_files_left
	;;
shared_dir)
	# remote hosts under mpirun: the hostfile must be on a shared filesystem
	need_mpirun
	fs=$(stat -f -c %T "$D")
	case $fs in nfs*|lustre|gpfs|fuse*|ceph|cifs|smb*|9p|afs|beegfs) echo "SKIP: $D is on $fs"; exit 77 ;; esac
	(cd "$D" && "$MESHRUN" --launcher mpirun --hosts 10.255.0.1,10.255.0.2 -- true) 2>"$D/err"
	rc=$?
	[ $rc = 2 ] && grep -q "working directory '$D' is on a local filesystem" "$D/err" &&
		grep -q -- "--shared-dir" "$D/err" || fail "local cwd: $rc $(cat "$D/err")"
	[ -z "$(ls -A "$D" | grep meshrun)" ] || fail "left a job directory in $D"
	no_files_left
	;;
mpi_yield)
	# --backend mpi with more ranks than CPUs: --mca mpi_yield_when_idle 1, unless the user set it
	need_mpirun
	n=$(($(nproc) + 1))
	"$MESHRUN" --verbose --backend mpi -n $n --mpi-arg "$MPIARG --oversubscribe" -- true 2>"$D/err" ||
		fail "exit code $?: $(cat "$D/err")"
	grep -q -- "--mca mpi_yield_when_idle 1 $MPIARG" "$D/err" || fail "no yield: $(cat "$D/err")"
	"$MESHRUN" --verbose --backend mpi -n $n --mpi-arg "$MPIARG --oversubscribe --mca mpi_yield_when_idle 0" \
		-- true 2>"$D/err" || fail "exit code $?: $(cat "$D/err")"
	[ "$(grep -c mpi_yield_when_idle "$D/err")" = 1 ] || fail "yield added to the user's own: $(cat "$D/err")"
	"$MESHRUN" --verbose --backend mpi -n 1 --mpi-arg "$MPIARG" -- true 2>"$D/err" ||
		fail "exit code $?: $(cat "$D/err")"
	! grep -q mpi_yield_when_idle "$D/err" || fail "yield without oversubscription: $(cat "$D/err")"
	no_files_left
	;;
*)
	fail "unknown case"
	;;
esac
echo "ok: $CASE"
exit 0
