#!/bin/bash
# tcp_cc.sh RUN_RING PROG [FLAVOUR] - the ring's data connections use the congestion
# control MESHRUN_RING_TCP_CC names (default reno; "system" keeps the
# system's), as the kernel reports it back; a name the kernel lacks keeps the
# system's and the job still passes; a malformed name fails init naming the
# variable. Likewise their send buffer, MESHRUN_RING_SNDBUF (default 512K,
# which the kernel doubles and caps at net.core.wmem_max; "system":
# autotuned). FLAVOUR "portable" (the MESHRUN_PORTABLE_ONLY build, a Mac's
# code path): there is no congestion control option, so every name is
# refused with ENOTSUP, logged, and the job passes on the system's.
set -u
run_ring=$1 prog=$2 flavour=${3:-native}
out=$(mktemp -d /tmp/mr-coll-cc-XXXXXX)
trap 'rm -rf "$out"' EXIT
export MLX_RING_VERBOSE=1
sys=$(cat /proc/sys/net/ipv4/tcp_congestion_control)
fail=0
check() { # name value-of-VAR want-regex-in-rank0.err (VAR: MESHRUN_RING_TCP_CC unless set)
	local name=$1 val=$2 want=$3 var=${VAR:-MESHRUN_RING_TCP_CC} status
	rm -f "$out"/rank*
	if [ "$val" = "<unset>" ]; then
		env -u "$var" "$run_ring" -n 2 -o "$out" -- "$prog" --max-size 64K -q >/dev/null 2>&1
	else
		env "$var=$val" "$run_ring" -n 2 -o "$out" -- "$prog" --max-size 64K -q >/dev/null 2>&1
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
if [ "$flavour" = portable ]; then
	check default "<unset>" "TCP congestion control 'reno' not set: Operation not supported"
	check default-system "<unset>" "data connections use TCP congestion control the system's"
	check cubic cubic "TCP congestion control 'cubic' not set: Operation not supported"
	check system-name system "data connections use TCP congestion control the system's"
else
check default "<unset>" "data connections use TCP congestion control 'reno'"
check system system "data connections use TCP congestion control '$sys'"
check missing nosuchcc "TCP congestion control 'nosuchcc' not set: .*keeping the system's"
check missing-falls-back nosuchcc "data connections use TCP congestion control '$sys'"
fi
# send buffer: what the kernel reports, SO_SNDBUF doubled after the cap
wmem_max=$(cat /proc/sys/net/core/wmem_max)
kernel_sndbuf() { local b=$1; [ "$b" -gt "$wmem_max" ] && b=$wmem_max; echo $((2 * b)); }
VAR=MESHRUN_RING_SNDBUF check sndbuf-default "<unset>" "send buffer $(kernel_sndbuf 524288) bytes \(fixed\)"
VAR=MESHRUN_RING_SNDBUF check sndbuf-64K 64K "send buffer $(kernel_sndbuf 65536) bytes \(fixed\)"
VAR=MESHRUN_RING_SNDBUF check sndbuf-system system "send buffer [0-9]+ bytes \(autotuned\)"
# malformed: init fails on every rank, naming the variable
malformed() { # var value
	rm -f "$out"/rank*
	if env "$1=$2" "$run_ring" -n 2 -o "$out" -- "$prog" --max-size 64K -q >/dev/null 2>&1; then
		echo "FAIL: malformed $1: the job passed"; fail=1
	elif grep -qF "$1='$2'" "$out/rank0.err" && grep -qF "$1" "$out/rank1.err"; then
		echo "ok: malformed $1='$2' refused"
	else
		echo "FAIL: malformed $1='$2': no message naming it:"; cat "$out"/rank*.err; fail=1
	fi
}
malformed MESHRUN_RING_TCP_CC 'reno; rm'
malformed MESHRUN_RING_SNDBUF 12X
malformed MESHRUN_RING_SNDBUF 1K
exit $fail
