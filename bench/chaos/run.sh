#!/bin/bash
# bench/chaos/run.sh - the long fault campaign (issue 16): tests/chaos/chaos.sh with
# at least 200 jobs, a random seed (printed first: rerun with --seed to reproduce),
# job kinds mixed by seed (chaos.sh's --backends): ring (libmeshrun's ring),
# mpi (MLX's mpi calls on libmeshrun-mpi, --mpi-impl meshrun); every fault,
# jobs of up to 128 KiB buffers (each all-reduce checker run takes 1-3 s).
# Open MPI's mpirun (--backends ring,mpi,ompi) is not in the default mix: on a
# loaded 2-core machine its busy-polling ranks take 14+ s for a clean job.
# Then --jaccl N (default 30; 0: none) jaccl jobs with the same seed in the
# soft-RoCE QEMU guest (tests/chaos/chaos_jaccl.sh: fewer faults there, 20-60 s
# a job under TCG), and one summary over both tables.
# The tables go to stdout and to chaos-SEED.txt, chaos-jaccl-SEED.txt and
# (both and the merged summary) chaos-all-SEED.txt here.
#   bench/chaos/run.sh BIN_DIR [--jobs N] [--seed N] [--jaccl N] [chaos.sh options...]
# (--jobs 0: the jaccl part only; --jaccl 0: the meshsim part only)
# Root; takes the machine's netns lock itself for the meshsim part. Expect
# ~1-2 minutes per 20 meshsim jobs, ~1 minute per jaccl job.
set -u
BIN=${1:?usage: $0 BIN_DIR [--jobs N] [--seed N] [options]}
shift
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SEED=$(( $(od -An -N4 -tu4 /dev/urandom) ))
JOBS=200
JACCL=30
backends=ring,mpi
args=()
while [ $# -gt 0 ]; do
	case $1 in
	--seed) SEED=$2; shift 2 ;;
	--jobs) JOBS=$2; shift 2 ;;
	--backends) backends=$2; shift 2 ;;
	--jaccl) JACCL=$2; shift 2 ;;
	*) args+=("$1"); shift ;;
	esac
done
echo "# bench/chaos: seed $SEED, $JOBS jobs, backends $backends; $JACCL jaccl jobs in the rxe guest"
rc=0
# --jobs 0: the jaccl part only
[ "$JOBS" -gt 0 ] && { flock /tmp/meshrun-ns.lock env MESHRUN_SOURCE_DIR="$SRC" "$SRC/tests/chaos/chaos.sh" "$BIN" \
	--seed "$SEED" --jobs "$JOBS" --backends "$backends" --max-size 128K --job-timeout 15 \
	--table "chaos-$SEED.txt" "${args[@]}"; rc=$?; }
[ "$JACCL" -gt 0 ] || exit $rc
"$SRC/tests/chaos/chaos_jaccl.sh" "$BIN" --seed "$SEED" --jobs "$JACCL" --table "chaos-jaccl-$SEED.txt"
jrc=$?
[ $jrc = 77 ] && jrc=0 # no guest here: the meshsim part decides
# one summary over both parts (chaos_lib.sh reads the rows back)
TABLE="" TMP=""
. "$SRC/tests/chaos/chaos_lib.sh"
{
	cat "chaos-$SEED.txt" "chaos-jaccl-$SEED.txt" 2>/dev/null
	echo "# ---- both parts"
	chaos_summary_rows "$SEED" "chaos-$SEED.txt" "chaos-jaccl-$SEED.txt" 2>/dev/null
} >"chaos-all-$SEED.txt"
sed -n '/^# ---- both parts/,$p' "chaos-all-$SEED.txt"
[ $rc = 0 ] && [ $jrc = 0 ]
