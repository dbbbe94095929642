#!/bin/bash
# tcp_cc.sh RUN_RING PROG - the ring's data connections use the congestion
# control MESHRUN_RING_TCP_CC names (default reno; "system" keeps the
# system's), as the kernel reports it back; a name the kernel lacks keeps the
# system's and the job still passes; a malformed name fails init naming the
# variable.
set -u
run_ring=$1 prog=$2
out=$(mktemp -d /tmp/mr-coll-cc-XXXXXX)
trap 'rm -rf "$out"' EXIT
export MLX_RING_VERBOSE=1
sys=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
fail=0
check() { # name value-of-MESHRUN_RING_TCP_CC want-regex-in-rank0.err
	local name=$1 val=$2 want=$3 status
	rm -f "$out"/rank*
	if [ "$val" = "<unset>" ]; then
		env -u MESHRUN_RING_TCP_CC "$run_ring" -n 2 -o "$out" -- "$prog" --max-size 64K -q >/dev/null 2>&1
	else
		MESHRUN_RING_TCP_CC=$val "$run_ring" -n 2 -o "$out" -- "$prog" --max-size 64K -q >/dev/null 2>&1
	fi
	status=$?
	if [ $status != 0 ]; then
		echo "FAIL: $name: the job failed (status $status)"; cat "$out"/rank*.err; fail=1; return
	fi
	if grep -Eq "$want" "$out/rank0.err"; then
		echo "ok: $name"
	else
		echo "FAIL: $name: no /$want/ in rank 0's log:"; cat "$out/rank0.err"; fail=1
	fi
}
check default "<unset>" "data connections use TCP congestion control 'reno'"
check system system "data connections use TCP congestion control '$sys'"
check missing nosuchcc "TCP congestion control 'nosuchcc' not set: .*keeping the system's"
check missing-falls-back nosuchcc "data connections use TCP congestion control '$sys'"
# malformed: init fails on every rank, naming the variable
rm -f "$out"/rank*
if MESHRUN_RING_TCP_CC='reno; rm' "$run_ring" -n 2 -o "$out" -- "$prog" --max-size 64K -q >/dev/null 2>&1; then
	echo "FAIL: malformed: the job passed"; fail=1
elif grep -q "MESHRUN_RING_TCP_CC='reno; rm'" "$out/rank0.err" && grep -q "MESHRUN_RING_TCP_CC" "$out/rank1.err"; then
	echo "ok: malformed name refused"
else
	echo "FAIL: malformed: no message naming MESHRUN_RING_TCP_CC:"; cat "$out"/rank*.err; fail=1
fi
exit $fail
