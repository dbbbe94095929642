#!/bin/bash
# run.sh HARNESS CORPUS SECONDS - run one libFuzzer harness for SECONDS from its
# committed seed corpus (read only: new inputs go to a temporary folder).
# Fails on any crash, leak, UB report, per-input hang (-timeout) or
# out-of-memory, and then prints the input that did it (hex) so that it can be
# kept as a regression case in tests/unit.
set -u
harness=$1 corpus=$2 secs=${3:-20}
[ -x "$harness" ] || { echo "SKIP: no harness '$harness'"; exit 77; }
[ -d "$corpus" ] || { echo "FAIL: no seed corpus '$corpus'"; exit 1; }
work=$(mktemp -d /tmp/mr-fuzz-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/new"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
"$harness" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
	-print_final_stats=1 -artifact_prefix="$work/" "$work/new" "$corpus" >"$work/log" 2>&1
rc=$?
grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss_mb|stat::new_units_added)' "$work/log"
grep -Eo 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' "$work/log" | tail -1
if [ "$rc" -ne 0 ]; then
	echo "FAIL: $(basename "$harness") exited $rc"
	tail -60 "$work/log"
	for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* "$work"/slow-unit-*; do
		[ -f "$a" ] || continue
		echo "--- $(basename "$a") ($(stat -c %s "$a") bytes):"
		od -An -tx1 -v "$a" | head -40
	done
	exit 1
fi
echo "ok: $(basename "$harness") ran ${secs}s"
