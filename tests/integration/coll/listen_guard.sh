#!/bin/bash
# listen_guard.sh RUN_RING PROG - what another machine can throw at a ring
# rank's listening port while the job sets up (docs/contracts.md, "What
# another machine on the network can do"): 70 slow-loris connections that
# send one byte and then nothing (more than the 64 pending slots), garbage,
# a hello claiming a 65535-byte token, and a hello with another job's token.
# Each must be refused, logged (MLX_RING_VERBOSE) with its reason, and the
# job must still pass, within a few seconds although the slow connections
# stay open (ranks 1 and 2 start 3 s after rank 0, when the slow ones have
# been closed for their missing hello).
set -u
run_ring=$1 prog=$2
out=$(mktemp -d /tmp/mr-coll-guard-XXXXXX)
holder=
cleanup() {
	[ -n "$holder" ] && kill "$holder" 2>/dev/null
	rm -rf "$out"
}
trap cleanup EXIT
export MLX_RING_VERBOSE=1
# hello: "MRNG", version 1, lane 0, rank 2, size 3, nconn 1, token length, reserved 0
hello='MRNG\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00'
export RUN_RING_HOOK='
	for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$MR_PORT0) 2>/dev/null && break; sleep 0.1; done
	# the slow-loris: 70 connections held open 8 s by a background shell
	( for i in $(seq 70); do exec {fd}<>/dev/tcp/127.0.0.1/$MR_PORT0 && printf M >&$fd; done; sleep 8 ) \
		>/dev/null 2>&1 &
	echo $! >"$MR_OUTDIR/holder.pid"
	sleep 0.5
	exec 3<>/dev/tcp/127.0.0.1/$MR_PORT0 && printf "GET / HTTP/1.0\r\n\r\n" >&3
	exec 4<>/dev/tcp/127.0.0.1/$MR_PORT0 && printf "'"$hello"'\xff\xff\x00\x00" >&4
	exec 5<>/dev/tcp/127.0.0.1/$MR_PORT0 && printf "'"$hello"'\x09\x00\x00\x00wrong-job" >&5
	sleep 2.5   # past the 2 s hello bound of the slow ones, before ranks 1 and 2 start
	true'
start=$(date +%s)
"$run_ring" -n 3 -o "$out" -- "$prog" --max-size 64K -q >/dev/null 2>&1
rc=$?
took=$(( $(date +%s) - start ))
holder=$(cat "$out/holder.pid" 2>/dev/null)
if [ $rc -ne 0 ]; then
	echo "FAIL: the job did not pass (exit $rc)"; cat "$out"/rank*.err; exit 1
fi
fail=0
for want in "bad magic" "malformed hello (token length 65535)" "job token does not match" \
	"too many pending connections (closed the oldest)" "no complete hello within 2000 ms"; do
	if grep -qF "$want" "$out/rank0.err"; then
		echo "ok: refused: $want"
	else
		echo "FAIL: no refusal for '$want' in rank 0's log"; fail=1
	fi
done
# the slow connections stay open 8 s: the job must not wait for them
if [ "$took" -gt 7 ]; then
	echo "FAIL: the job took ${took}s with slow connections held open"; fail=1
else
	echo "ok: the job passed in ${took}s"
fi
[ $fail = 0 ] || cat "$out/rank0.err"
exit $fail
