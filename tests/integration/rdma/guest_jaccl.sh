#!/bin/bash
# guest_jaccl.sh - the JACCL checks that run INSIDE the soft-RoCE guest
# (scripts/rxe-guest.sh boots it). Usage: guest_jaccl.sh BIN_DIR [CASE...]
# Options: --max-size BYTES (largest buffer of the test program, default 1M).
# Cases: mesh4 ring4x2 kill baddev (default: mesh4 ring4x2 kill baddev).
#
# Every "cable" is a veth pair with an rxe device on each end, all in ONE
# network namespace: rxe on the guest's 6.1 kernel does not work across
# namespaces, and between devices of one namespace only GID index 0 (the
# link-local fe80:: RoCE v2 GID) works, so MESHRUN_IB_GID_INDEX=0. IPv6 DAD is
# off, else modify_qp(RTR) fails with ETIMEDOUT while addresses are tentative.
# Names: mesh cable i-j is veth m<i>_<j> / rxe_<i>_<j> on rank i's end; ring
# cable k between i and j is r<i>_<j>_<k> / rxe_<i>_<j>_<k>.
set -u
BIN=$1; shift
MAXSIZE=1M
if [ "${1:-}" = --max-size ]; then MAXSIZE=$2; shift 2; fi
PROG=$BIN/meshrun-allreduce-test
CASES=("$@"); [ ${#CASES[@]} -gt 0 ] || CASES=(mesh4 ring4x2 kill baddev)
T=/tmp/jaccl-guest; mkdir -p "$T"
PORT=29500
pass=0; fail=0
ok() { echo "RDMA PASS: $*"; pass=$((pass + 1)); }
ko() { echo "RDMA FAIL: $*"; fail=$((fail + 1)); }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

echo 0 > /proc/sys/net/ipv6/conf/all/accept_dad
echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad

# cable IF_A IF_B RXE_A RXE_B
cable() {
	ip link add "$1" type veth peer name "$2" && ip link set "$1" up && ip link set "$2" up &&
	rdma link add "$3" type rxe netdev "$1" && rdma link add "$4" type rxe netdev "$2"
}

wait_ready() { # devices...
	local i d okall
	for i in $(seq 300); do
		okall=1
		for d in "$@"; do
			[ "$(cat /sys/class/infiniband/$d/ports/1/state 2>/dev/null)" = "4: ACTIVE" ] || okall=0
		done
		ip -6 addr show tentative | grep -q inet6 && okall=0
		[ $okall = 1 ] && return 0
		sleep 0.1
	done
	echo "devices not ready: $*"; return 1
}

# matrix JSON for a mesh of N ranks (one cable per pair)
make_mesh() {
	local n=$1 i j devs=() row
	for ((i = 0; i < n; i++)); do for ((j = i + 1; j < n; j++)); do
		[ -e /sys/class/infiniband/rxe_${i}_${j} ] || cable m${i}_${j} m${j}_${i} rxe_${i}_${j} rxe_${j}_${i} || return 1
		devs+=(rxe_${i}_${j} rxe_${j}_${i})
	done; done
	wait_ready "${devs[@]}" || return 1
	{
		printf '['
		for ((i = 0; i < n; i++)); do
			row=
			for ((j = 0; j < n; j++)); do
				[ $j -gt 0 ] && row+=', '
				if [ $i = $j ]; then row+=null; else row+="\"rxe_${i}_${j}\""; fi
			done
			[ $i -gt 0 ] && printf ', '
			printf '[%s]' "$row"
		done
		printf ']\n'
	} >"$T/mesh$n.json"
}

# matrix JSON for a ring of N ranks with K cables per neighbour
make_ring() {
	local n=$1 k=$2 i j c devs=() row cell
	for ((i = 0; i < n; i++)); do
		j=$(((i + 1) % n))
		for ((c = 0; c < k; c++)); do
			[ -e /sys/class/infiniband/rxe_${i}_${j}_$c ] || cable r${i}_${j}_$c r${j}_${i}_$c rxe_${i}_${j}_$c rxe_${j}_${i}_$c || return 1
			devs+=(rxe_${i}_${j}_$c rxe_${j}_${i}_$c)
		done
	done
	wait_ready "${devs[@]}" || return 1
	{
		printf '['
		for ((i = 0; i < n; i++)); do
			row=
			for ((j = 0; j < n; j++)); do
				[ $j -gt 0 ] && row+=', '
				if [ $j = $(((i + 1) % n)) ] || [ $j = $(((i + n - 1) % n)) ]; then
					cell=
					for ((c = 0; c < k; c++)); do [ $c -gt 0 ] && cell+=', '; cell+="\"rxe_${i}_${j}_$c\""; done
					row+="[$cell]"
				else
					row+=null
				fi
			done
			[ $i -gt 0 ] && printf ', '
			printf '[%s]' "$row"
		done
		printf ']\n'
	} >"$T/ring${n}x$k.json"
}

# start N ranks in the background: start_ranks N MATRIX TAG [env...] -- prog args
PIDS=()
start_ranks() {
	local n=$1 m=$2 tag=$3 r envs=()
	shift 3
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	PORT=$((PORT + 1))
	PIDS=()
	for ((r = 0; r < n; r++)); do
		env MLX_RANK=$r MLX_IBV_DEVICES="$m" MLX_JACCL_COORDINATOR=127.0.0.1:$PORT \
			MESHRUN_IB_GID_INDEX=0 MESHRUN_JOB_TOKEN=jaccl-guest-$tag "${envs[@]}" \
			timeout -k 5 600 "$@" >"$T/$tag.$r.out" 2>"$T/$tag.$r.err" &
		PIDS+=($!)
	done
}

# wait for all ranks; RCS gets their exit codes
wait_ranks() {
	local p
	RCS=()
	for p in "${PIDS[@]}"; do wait "$p"; RCS+=($?); done
}

show() { # tag n
	local r
	echo "--- kernel log:"; dmesg | grep -iE "rxe|rdma|infiniband" | grep -v "set active\|added" | tail -15
	echo "--- rxe counters (summed): $(cat /sys/class/infiniband/*/ports/1/hw_counters/{duplicate_request,completer_retry_err,retry_exceeded_err,rcvd_rnr_err,send_rnr_err,send_err,out_of_seq_request} 2>/dev/null | tr '\n' ' ')"
	for ((r = 0; r < $2; r++)); do
		echo "--- rank $r stdout:"; tail -5 "$T/$1.$r.out"
		echo "--- rank $r stderr:"; tail -20 "$T/$1.$r.err"
	done
}

check_all() { # tag n desc
	local t0=$START r bad=0
	wait_ranks
	for ((r = 0; r < $2; r++)); do [ "${RCS[$r]}" = 0 ] || bad=1; done
	if [ $bad = 0 ]; then ok "$3 ($(since "$t0") s)"; grep -h "checks" "$T/$1".*.out | head -4
	else ko "$3: exit codes ${RCS[*]}"; show "$1" "$2"; fi
}

case_mesh4() {
	make_mesh 4 || { ko "mesh4: setting up 12 rxe devices failed"; return; }
	START=$(now)
	start_ranks 4 "$T/mesh4.json" mesh4 MESHRUN_TIMEOUT=120 -- "$PROG" --max-size "$MAXSIZE" -q
	check_all mesh4 4 "jaccl mesh, 4 ranks, 12 rxe devices, every op/dtype up to $MAXSIZE"
}

case_ring4x2() {
	make_ring 4 2 || { ko "ring4x2: setting up 16 rxe devices failed"; return; }
	START=$(now)
	start_ranks 4 "$T/ring4x2.json" ring4x2 MESHRUN_TIMEOUT=120 MLX_JACCL_RING=1 -- "$PROG" --max-size "$MAXSIZE" -q
	# The test program ends with send/recv between EVERY pair; jaccl-ring
	# connects neighbours only (as MLX's), so the run must get through every
	# collective check with 0 failures and then stop at the first
	# non-neighbour send/recv with that error.
	local r bad=0
	wait_ranks
	for ((r = 0; r < 4; r++)); do
		grep -q " 0 failed" "$T/ring4x2.$r.out" || bad=1
		[ "${RCS[$r]}" = 0 ] && continue
		[ "${RCS[$r]}" = 2 ] && grep -q "is not a neighbour of rank $r" "$T/ring4x2.$r.err" || bad=1
	done
	if [ $bad = 0 ]; then
		ok "jaccl-ring, 4 ranks, 2 cables per neighbour, both directions: every collective, op and dtype up to $MAXSIZE, and neighbour send/recv ($(since "$START") s)"
		grep -h "checks" "$T"/ring4x2.*.out | head -4
	else ko "ring4x2: exit codes ${RCS[*]}"; show ring4x2 4; fi
}

case_kill() {
	make_mesh 4 || { ko "kill: mesh setup failed"; return; }
	START=$(now)
	start_ranks 4 "$T/mesh4.json" kill MESHRUN_TIMEOUT=20 -- "$PROG" --fault-loop --max-size 1M
	local i r bad=0
	for i in $(seq 600); do grep -q "iteration 2 done" "$T/kill.2.out" 2>/dev/null && break; sleep 0.1; done
	# PIDS are the `timeout` wrappers: kill the rank itself, their child
	kill -9 $(pgrep -P "${PIDS[2]}") "${PIDS[2]}"
	wait_ranks
	for r in 0 1 3; do
		if [ "${RCS[$r]}" != 3 ] || ! grep -q "rank 2" "$T/kill.$r.err"; then bad=1; fi
	done
	if [ $bad = 0 ]; then
		ok "kill -9 rank 2 mid all_sum: ranks 0, 1, 3 failed naming rank 2 ($(since "$START") s)"
		for r in 0 1 3; do sed -n 1p "$T/kill.$r.err"; done
	else ko "kill: exit codes ${RCS[*]} (want 3 for ranks 0 1 3, and 'rank 2' named)"; show kill 4; fi
}

case_baddev() {
	make_mesh 2 || { ko "baddev: setup failed"; return; }
	echo '[[null, "rxe_nope"], ["rxe_1_0", null]]' >"$T/bad.json"
	START=$(now)
	start_ranks 2 "$T/bad.json" baddev MESHRUN_TIMEOUT=20 -- "$PROG" --max-size 4K -q
	wait_ranks
	if [ "${RCS[0]}" = 2 ] && grep -q "rxe_nope" "$T/baddev.0.err" && [ "${RCS[1]}" != 0 ]; then
		ok "nonexistent device: rank 0 fails naming 'rxe_nope', rank 1 fails too ($(since "$START") s)"
		sed -n 1p "$T/baddev.0.err"; sed -n 1p "$T/baddev.1.err"
	else ko "baddev: exit codes ${RCS[*]}"; show baddev 2; fi
}

echo "== jaccl guest checks: ${CASES[*]} (kernel $(uname -r))"
for c in "${CASES[@]}"; do
	echo "== case $c"
	"case_$c"
done
echo "jaccl guest: $pass passed, $fail failed"
[ $fail = 0 ]
