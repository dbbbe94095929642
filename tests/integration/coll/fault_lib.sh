# fault_lib.sh - sourced by the coll fault tests (fault_kill.sh, fault_stop.sh,
# fault_loss.sh): start 4 local ranks (run_ring.sh) looping a max-size all_sum,
# wait until a rank finished one whole all_sum so the fault lands inside the
# next, and check what the surviving ranks said.
#
#   fault_start RUN_RING PROG MODE [SIZE]  sets $out (a temp dir, removed at exit)
#                                          and $runner (run_ring.sh's pid);
#                                          $FAULT_WRAP (words) runs before run_ring.sh
#   fault_addr R                           rank R's first address, from the hostfile
#   fault_named R RANKS...                 every one of RANKS reported rank R (its
#                                          address) in its all_sum failure; 0 or 1
#   fault_wait_others                      wait up to 10 s (MESHRUN_TIMEOUT + 8) for
#                                          ranks 0, 1 and 3 to exit on their own; sets
#                                          $alive (1: one still runs) and $took (s)
# Exported MESHRUN_TIMEOUT and the like reach the ranks.
out="" runner=""
fault_cleanup() {
	local f
	for f in "$out"/rank*.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done
	[ -n "$runner" ] && wait "$runner" 2>/dev/null
	[ -n "$out" ] && [ -z "${FAULT_KEEP:-}" ] && rm -rf "$out"
	[ "$(type -t fault_extra_cleanup)" = function ] && fault_extra_cleanup
}
trap fault_cleanup EXIT

fault_start() {
	local run_ring=$1 prog=$2 mode=$3 size=${4:-64M} i
	out=$(mktemp -d /tmp/mr-coll-fault-XXXXXX)
	# shellcheck disable=SC2086 # FAULT_WRAP and mode are words
	${FAULT_WRAP:-} "$run_ring" -n 4 -o "$out" $mode -- "$prog" --fault-loop --max-size "$size" >/dev/null 2>&1 &
	runner=$!
	for ((i = 0; i < 600; i++)); do
		grep -q "iteration 1 done" "$out/rank2.out" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "FAIL: rank 2 never completed an all_sum"
	exit 1
}

fault_wait_others() {
	local t0 r
	t0=$(date +%s)
	alive=1
	while [ $(($(date +%s) - t0)) -lt 10 ]; do
		alive=0
		for r in 0 1 3; do
			kill -0 "$(cat "$out/rank$r.pid")" 2>/dev/null && alive=1
		done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	took=$(($(date +%s) - t0))
}

fault_addr() {
	sed -n "$(($1 + 2))p" "$out/hostfile.json" | grep -o '127.0.0.1:[0-9]*' | head -1
}

fault_named() {
	local who=$1 addr r fail=0
	shift
	addr=$(fault_addr "$who")
	for r in "$@"; do
		if ! grep -q "all_sum failed: .*rank $who ($addr)" "$out/rank$r.err"; then
			echo "FAIL: rank $r did not report rank $who ($addr):"; cat "$out/rank$r.err"; fail=1
		else
			echo "ok: rank $r: $(grep 'all_sum failed' "$out/rank$r.err")"
		fi
	done
	return $fail
}
