#!/bin/bash
# foreign.sh RUN_RING PROG [-m] - while rank 0 waits for its neighbours (-m:
# the mesh backend, where rank 0 listens for every peer), a garbage
# connection and a meshrun hello with another job's token reach its port: both
# must be refused (logged with MLX_RING_VERBOSE) and the job must still pass.
set -u
run_ring=$1 prog=$2 mode=${3:-}
out=$(mktemp -d /tmp/mr-coll-foreign-XXXXXX)
trap 'rm -rf "$out"' EXIT
export MLX_RING_VERBOSE=1
# hello: "MRNG", version 1, lane 0, rank 2, size 3, nconn 1, token "wrong-job" (9 bytes)
export RUN_RING_HOOK='
	for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$MR_PORT0) 2>/dev/null && break; sleep 0.1; done
	exec 3<>/dev/tcp/127.0.0.1/$MR_PORT0 && printf "GET / HTTP/1.0\r\n\r\n" >&3 && sleep 0.3 && exec 3>&-
	exec 4<>/dev/tcp/127.0.0.1/$MR_PORT0 &&
	printf "MRNG\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x00\x00\x09\x00\x00\x00wrong-job" >&4 &&
	sleep 0.3 && exec 4>&-
	true'
if ! "$run_ring" -n 3 -o "$out" $mode -- "$prog" --max-size 64K -q >/dev/null 2>&1; then
	echo "FAIL: the job did not pass"; cat "$out"/rank*.err; exit 1
fi
fail=0
for want in "bad magic" "job token does not match"; do
	if grep -q "refused connection from 127.0.0.1:[0-9]*: .*$want" "$out/rank0.err"; then
		echo "ok: refused: $want"
	else
		echo "FAIL: no refusal for '$want' in rank 0's log:"; cat "$out/rank0.err"; fail=1
	fi
done
exit $fail
