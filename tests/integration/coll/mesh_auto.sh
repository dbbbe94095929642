#!/bin/bash
# mesh_auto.sh RUN_RING PROG - the mesh backend's MESHRUN_MESH_SCHEDULE=auto
# (tcpmesh.c): 4 ranks run the test program (every dtype and op, each size
# class called many times) with MLX_RING_VERBOSE, and every rank must log the
# same verdict ("the mesh|ring schedule from now on") for the same size
# classes, each class at most once: a rank choosing alone would run the other
# schedule than its peers and hang or fail the job. Results are checked by the
# program itself.
set -u
run_ring=$1 prog=$2
out=$(mktemp -d /tmp/mr-mesh-auto-XXXXXX)
trap 'rm -rf "$out"' EXIT

MLX_RING_VERBOSE=1 MESHRUN_MESH_SCHEDULE=auto "$run_ring" -m -n 4 -o "$out" -- "$prog" --max-size 1M -q >/dev/null 2>&1 ||
	{ echo "FAIL: the job failed"; cat "$out"/rank*.err | grep -v '^\[' | head -20; exit 1; }
for r in 0 1 2 3; do
	grep -o 'class 2^[0-9]*): mesh schedule [0-9]* us, ring schedule [0-9]* us: the [a-z]* schedule' "$out/rank$r.err" |
		sed 's/): mesh schedule.*: the / /' >"$out/verdicts.$r"
done
n=$(wc -l <"$out/verdicts.0")
[ "$n" -ge 1 ] || { echo "FAIL: rank 0 logged no schedule verdict"; exit 1; }
dups=$(sort "$out/verdicts.0" | cut -d' ' -f1-2 | uniq -d)
[ -z "$dups" ] || { echo "FAIL: rank 0 decided a class twice: $dups"; exit 1; }
for r in 1 2 3; do
	cmp -s "$out/verdicts.0" "$out/verdicts.$r" ||
		{ echo "FAIL: rank $r's verdicts differ from rank 0's:"; diff "$out/verdicts.0" "$out/verdicts.$r"; exit 1; }
done
echo "ok: 4 ranks, $n size classes, the same verdicts: $(tr '\n' ';' <"$out/verdicts.0")"
