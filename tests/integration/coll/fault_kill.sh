#!/bin/bash
# fault_kill.sh RUN_RING PROG [-m] - kill -9 one of 4 ranks in the middle of a 64 MiB
# all_sum: the other three must fail (exit 3) with an error naming rank 2 and
# its address. Asserts the error, not the time (MESHRUN_TIMEOUT is small only so
# that a broken detection fails the test instead of hanging it). -m: the mesh
# backend (run_ring.sh -m), where rank 2 is every rank's direct peer.
set -u
. "$(dirname "$0")/fault_lib.sh"
export MESHRUN_TIMEOUT=5
fault_start "$1" "$2" "${3:-}"
kill -9 "$(cat "$out/rank2.pid")"
wait "$runner"
runner=
fault_named 2 0 1 3
