#!/bin/bash
# bench/chaos/run.sh - the long fault campaign (issue 16): tests/chaos/chaos.sh with
# at least 200 jobs, a random seed (printed first: rerun with --seed to reproduce),
# ring and mpi jobs (mpi when Open MPI is installed), every fault, jobs of up to 128 KiB buffers (each all-reduce checker run takes 1-3 s).
# The table goes to stdout and to --table FILE (default chaos-SEED.txt here).
#   bench/chaos/run.sh BIN_DIR [--jobs N] [--seed N] [chaos.sh options...]
# Root; takes the machine's netns lock itself. Expect ~1-2 minutes per 20 jobs.
set -u
BIN=${1:?usage: $0 BIN_DIR [--jobs N] [--seed N] [options]}
shift
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SEED=$(( $(od -An -N4 -tu4 /dev/urandom) ))
JOBS=200
backends=ring
command -v mpirun >/dev/null 2>&1 && command -v orted >/dev/null 2>&1 && backends=ring,mpi
args=()
while [ $# -gt 0 ]; do
	case $1 in
	--seed) SEED=$2; shift 2 ;;
	--jobs) JOBS=$2; shift 2 ;;
	--backends) backends=$2; shift 2 ;;
	*) args+=("$1"); shift ;;
	esac
done
echo "# bench/chaos: seed $SEED, $JOBS jobs, backends $backends"
exec flock /tmp/meshrun-ns.lock env MESHRUN_SOURCE_DIR="$SRC" "$SRC/tests/chaos/chaos.sh" "$BIN" \
	--seed "$SEED" --jobs "$JOBS" --backends "$backends" --max-size 128K --job-timeout 15 \
	--table "chaos-$SEED.txt" "${args[@]}"
