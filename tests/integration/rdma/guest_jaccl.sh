#!/bin/bash
# guest_jaccl.sh - the JACCL checks that run INSIDE the soft-RoCE guest
# (scripts/rxe-guest.sh boots it). Usage: guest_jaccl.sh BIN_DIR [CASE...]
# Options: --max-size BYTES (largest buffer of the test program, default 1M).
# The run_rdma.sh default is 16M (several minutes under TCG).
# Cases: mesh4 ring4x2 shim kill pull baddev doctor (default: all seven).
#
# Every case runs through the real launcher, as a user would:
#   meshrun --hostfile F --backend jaccl|jaccl-ring -- meshrun-allreduce-test ...
# (case shim: meshrun --hostfile F --backend mpi --mpi-impl meshrun --
# mpishim-mlx-test ..., MLX's mpi calls through libmeshrun-mpi on jaccl)
# with an MLX object-form hostfile whose 4 hosts are all 127.0.0.1 (meshrun
# starts them locally; rank 0's ips[0] is the coordinator's address) and whose
# rdma matrix names the rxe devices (guest_lib.sh: one veth pair with an rxe
# device on each end per cable, GID index 0 given with --env).
# Exit codes checked are meshrun's documented ones: 0, or the status of the
# first rank that failed (128+S for a signal).
set -u
BIN=$1; shift
MAXSIZE=1M
if [ "${1:-}" = --max-size ]; then MAXSIZE=$2; shift 2; fi
PROG=$BIN/meshrun-allreduce-test
MESHRUN=$BIN/meshrun
CASES=("$@"); [ ${#CASES[@]} -gt 0 ] || CASES=(mesh4 ring4x2 shim kill pull baddev doctor)
T=/tmp/jaccl-guest; mkdir -p "$T"
. "$(dirname "$0")/guest_lib.sh"
PORT=29500
pass=0; fail=0
ok() { echo "RDMA PASS: $*"; pass=$((pass + 1)); }
ko() { echo "RDMA FAIL: $*"; fail=$((fail + 1)); }

# launch TAG HOSTFILE BACKEND [meshrun options] -- PROG ARGS: meshrun in the
# background (pid in MR_PID), stdout/stderr in $T/TAG.out/.err; every job
# gets its own coordinator port.
launch() {
	local tag=$1 hf=$2 backend=$3
	shift 3
	PORT=$((PORT + 10))
	# --timeout: the whole job; a 16 MiB run takes minutes under TCG
	"$MESHRUN" --hostfile "$hf" --backend "$backend" -p $PORT --tag-output --stdin none \
		--timeout 780 --env MESHRUN_IB_GID_INDEX=0 "$@" >"$T/$tag.out" 2>"$T/$tag.err" &
	MR_PID=$!
}

show() { # tag
	echo "--- kernel log:"; dmesg | grep -iE "rxe|rdma|infiniband" | grep -v "set active\|added" | tail -15
	echo "--- rxe counters (summed): $(cat /sys/class/infiniband/*/ports/1/hw_counters/{duplicate_request,completer_retry_err,retry_exceeded_err,rcvd_rnr_err,send_rnr_err,send_err,out_of_seq_request} 2>/dev/null | tr '\n' ' ')"
	echo "--- meshrun stdout:"; tail -8 "$T/$1.out"
	echo "--- meshrun stderr:"; tail -25 "$T/$1.err"
}

# every rank's summary says "0 failed" (and the backend's name)
all_summaries() { # tag n
	local r
	for ((r = 0; r < $2; r++)); do
		has "$T/$1.out" "^\[rank $r 127\.0\.0\.1\] meshrun-allreduce-test: rank $r of $2 \(jaccl\): [0-9]+ checks, 0 failed" || return 1
	done
}

case_mesh4() {
	local ts=$EPOCHREALTIME
	mesh_cables 4 || { ko "mesh4: setting up 12 rxe devices failed"; return; }
	echo "12 rxe devices ready in $(since "$ts") s"
	hostfile "$T/mesh4.json" jaccl 4 mesh_cell
	local t0=$EPOCHREALTIME rc
	launch mesh4 "$T/mesh4.json" jaccl --env MESHRUN_TIMEOUT=120 -- "$PROG" --max-size "$MAXSIZE"
	wait $MR_PID; rc=$?
	if [ $rc = 0 ] && all_summaries mesh4 4 && ! has "$T/mesh4.out" skipped; then
		ok "meshrun --backend jaccl, 4-rank mesh hostfile, 12 rxe devices: every op/dtype up to $MAXSIZE, send/recv between every pair ($(since "$t0") s)"
		while IFS= read -r l; do [[ $l =~ checks ]] && echo "$l"; done <"$T/mesh4.out"
	else ko "mesh4: meshrun exit $rc"; show mesh4; fi
}

case_ring4x2() {
	local ts=$EPOCHREALTIME
	ring_cables 4 2 || { ko "ring4x2: setting up 16 rxe devices failed"; return; }
	echo "16 rxe devices ready in $(since "$ts") s"
	hostfile "$T/ring4x2.json" jaccl-ring 4 ring_cell 4 2
	local t0=$EPOCHREALTIME rc r bad=0
	launch ring4x2 "$T/ring4x2.json" jaccl-ring --env MESHRUN_TIMEOUT=120 -- "$PROG" --max-size "$MAXSIZE"
	wait $MR_PID; rc=$?
	# jaccl-ring connects neighbours only (as MLX's): the send/recv between
	# ranks 0-2 and 1-3 is refused as unsupported and reported as skipped;
	# every neighbour pair and every collective must pass.
	all_summaries ring4x2 4 || bad=1
	for ((r = 0; r < 4; r++)); do
		has "$T/ring4x2.out" "^\[rank $r 127\.0\.0\.1\] .* [0-9]+ checks, 0 failed, [1-9][0-9]* skipped$" || bad=1
		has "$T/ring4x2.out" "^\[rank $r 127\.0\.0\.1\] .*skipped .*is not a neighbour of rank $r" || bad=1
	done
	if [ $rc = 0 ] && [ $bad = 0 ]; then
		ok "meshrun --backend jaccl-ring, 4 ranks, 2 cables per neighbour, both directions: every collective, op and dtype up to $MAXSIZE, neighbour send/recv; non-neighbour pairs skipped as unsupported ($(since "$t0") s)"
		while IFS= read -r l; do [[ $l =~ skipped ]] && echo "$l"; done <"$T/ring4x2.out"
	else ko "ring4x2: meshrun exit $rc"; show ring4x2; fi
}

# Packets sent by the rxe devices whose names match GLOB (summed counters).
sent_pkts() {
	local f v n=0
	for f in /sys/class/infiniband/$1/ports/1/hw_counters/sent_pkts; do
		[ -e "$f" ] && read -r v <"$f" && n=$((n + v))
	done
	echo $n
}

# every rank of mpishim-mlx-test says ok, with the shim's version string
# naming libmeshrun's backend after MPI_Init: jaccl
shim_summaries() { # tag n
	local r
	for ((r = 0; r < $2; r++)); do
		has "$T/$1.out" "^\[rank $r 127\.0\.0\.1\] mlx-mpi-test: rank $r of $2: ok \(libmeshrun-mpi .*Open MPI ABI subset .*\(jaccl\)\)$" || return 1
	done
}

# MLX's mpi backend on jaccl (issue 18): `meshrun --backend mpi --mpi-impl
# meshrun` on the same hostfiles gives libmeshrun-mpi jaccl's variables
# (JACCL_RING=1 for the ring), and mpishim-mlx-test (MLX's mpi.cpp reduced to
# its calls: dlopen of MLX_MPI_LIBNAME, every dtype and op, all_gather,
# send/recv, splits) must pass on jaccl's QPs: the version string names
# jaccl and the mesh's (then the ring's) rxe devices carried the packets. The
# reordered split's all_sum is 2.4 MB, more than a peer's posted receive
# buffers take: jaccl's sends then wait for the receiver, and the split's
# point-to-point gather must not deadlock on them (it hung until the stall
# timeout when every rank sent first). Then kill -9 of
# one rank: every other rank's MPI_Allreduce returns an error naming it
# within MESHRUN_TIMEOUT (MESHRUN_MPI_ERRORS=return: the program prints the
# code and the seconds the call took).
case_shim() {
	local prog=$BIN/mpishim-mlx-test t0 rc p0 p1 r i pid its tk secs bad=0 l
	if [ ! -x "$prog" ] || [ ! -e "$BIN/../lib/libmeshrun-mpi.so" ]; then
		ko "shim: $prog or libmeshrun-mpi.so is not built"; return
	fi
	mesh_cables 4 || { ko "shim: mesh setup failed"; return; }
	hostfile "$T/mesh4.json" jaccl 4 mesh_cell
	t0=$EPOCHREALTIME p0=$(sent_pkts 'rxe_[0-3]_[0-3]')
	launch shim4 "$T/mesh4.json" mpi --mpi-impl meshrun --env MESHRUN_TIMEOUT=120 -- "$prog" --sizes 1,1000,10000 --split-size 600000
	wait $MR_PID; rc=$?
	p1=$(sent_pkts 'rxe_[0-3]_[0-3]')
	if [ $rc = 0 ] && shim_summaries shim4 4 && [ $((p1 - p0)) -gt 1000 ]; then
		ok "meshrun --backend mpi --mpi-impl meshrun, 4-rank jaccl mesh: mpishim-mlx-test (every dtype and op at 1, 1000, 10000 elements, all_gather, send/recv between every pair, splits) passed on jaccl, $((p1 - p0)) packets over the mesh's rxe devices ($(since "$t0") s)"
	else ko "shim mesh4: meshrun exit $rc, $((p1 - p0)) packets on the mesh devices"; show shim4; fi

	ring_cables 4 2 || { ko "shim: ring setup failed"; return; }
	hostfile "$T/ring4x2.json" jaccl-ring 4 ring_cell 4 2
	t0=$EPOCHREALTIME p0=$(sent_pkts 'rxe_*_*_*')
	launch shimring "$T/ring4x2.json" mpi --mpi-impl meshrun --env MESHRUN_TIMEOUT=120 -- "$prog" --sizes 10000 --neighbours-only
	wait $MR_PID; rc=$?
	p1=$(sent_pkts 'rxe_*_*_*')
	if [ $rc = 0 ] && shim_summaries shimring 4 && [ $((p1 - p0)) -gt 1000 ]; then
		ok "the same on a 4-rank jaccl-ring (2 cables per neighbour; send/recv and the split between neighbours): passed on jaccl, $((p1 - p0)) packets over the ring's rxe devices ($(since "$t0") s)"
	else ko "shim ring4x2: meshrun exit $rc, $((p1 - p0)) packets on the ring devices"; show shimring; fi

	t0=$EPOCHREALTIME
	launch shimkill "$T/mesh4.json" mpi --mpi-impl meshrun --verbose --env MESHRUN_TIMEOUT=20 --env MESHRUN_MPI_ERRORS=return \
		-- "$prog" --fault-loop --fault-size 262144 --ignore-sigterm
	for ((i = 0; i < 600; i++)); do [ -e "$T/shimkill.out" ] && has "$T/shimkill.out" "^\[rank 2 127\.0\.0\.1\] iteration 1 done" && break; sleep 0.1; done
	pid=$(rank_pid $MR_PID 2)
	its=$(count "$T/shimkill.out" "rank 2 127\.0\.0\.1\] iteration"); tk=$(since "$t0")
	[ -n "$pid" ] && kill -9 "$pid"
	[ -n "$pid" ] || { kill "$MR_PID"; bad=1; }
	wait $MR_PID; rc=$?
	for r in 0 1 3; do
		l=
		while IFS= read -r l; do
			[[ $l =~ ^\[rank\ $r\ 127\.0\.0\.1\]\ mlx-mpi-test:\ rank\ $r\ of\ 4:\ MPI_Allreduce\ returned\ [1-9][0-9]*\ after\ ([0-9]+)\.[0-9]+\ s ]] && break
			l=
		done <"$T/shimkill.out"
		secs=${BASH_REMATCH[1]:-99}
		[ -n "$l" ] && [ "$secs" -lt 20 ] || bad=1
		has "$T/shimkill.err" "^\[rank $r 127\.0\.0\.1\] libmeshrun-mpi: MPI_Allreduce: .*rank 2" || bad=1
	done
	if [ $bad = 0 ]; then
		ok "shim: kill -9 of rank 2 mid MPI_Allreduce on jaccl (after $its iterations, at $tk s): ranks 0, 1, 3 got an error naming rank 2 within MESHRUN_TIMEOUT=20; meshrun exit $rc ($(since "$t0") s)"
		while IFS= read -r l; do [[ $l =~ returned ]] && echo "$l"; done <"$T/shimkill.out"
		while IFS= read -r l; do [[ $l =~ libmeshrun-mpi:\ MPI_Allreduce ]] && echo "${l:0:220}"; done <"$T/shimkill.err"
	else ko "shim kill: meshrun exit $rc, rank 2 pid '$pid' killed after $its iterations at $tk s"; show shimkill; fi
}

case_kill() {
	mesh_cables 4 || { ko "kill: mesh setup failed"; return; }
	hostfile "$T/mesh4.json" jaccl 4 mesh_cell
	local t0=$EPOCHREALTIME i r rc pid first want tk tw its bad=0 l
	# --ignore-sigterm: meshrun stops the other ranks as soon as one failed;
	# this way each still prints the failure it saw itself (meshrun's SIGKILL
	# after its grace ends a rank that hangs, which fails the check).
	launch kill "$T/mesh4.json" jaccl --verbose --env MESHRUN_TIMEOUT=20 -- "$PROG" --fault-loop --ignore-sigterm --max-size 256K
	for ((i = 0; i < 600; i++)); do has "$T/kill.out" "rank 2 iteration 1 done" && break; sleep 0.1; done
	pid=$(rank_pid $MR_PID 2)
	its=$(count "$T/kill.out" "rank 2 iteration"); tk=$(since "$t0")
	[ -n "$pid" ] && kill -9 "$pid"
	[ -n "$pid" ] || kill "$MR_PID" # do not wait for the whole --timeout
	wait $MR_PID; rc=$?
	tw=$(since "$t0")
	[ -n "$pid" ] || bad=1
	# The contract: meshrun exits with the status of the first rank it saw
	# fail. That is rank 2 (137, SIGKILL) or, when a survivor noticed the
	# death and exited before meshrun reaped rank 2, that rank (3).
	first=
	while IFS= read -r l; do
		[[ $l =~ ^\[WARN\]\ rank\ ([0-9]+)\ \(127\.0\.0\.1\)\ failed:\ stopping ]] && { first=${BASH_REMATCH[1]}; break; }
	done <"$T/kill.err"
	if [ "$first" = 2 ]; then want=137; else want=3; fi
	[ -n "$first" ] && [ $rc = $want ] || bad=1
	has "$T/kill.err" "rank 2 \(127\.0\.0\.1\): (killed by signal 9|stopped by meshrun \(signal 9\))" || bad=1
	for r in 0 1 3; do
		# each survivor names rank 2: the one that noticed first (closed side
		# channel, or a failed work completion on its QP) tells the others
		# (not by the stall timeout: "stopped answering")
		has "$T/kill.err" "^\[rank $r 127\.0\.0\.1\] meshrun-allreduce-test: rank $r: all_sum failed: .*peer rank 2 (closed|has left|\(device '[^']*'\): [a-z]+ work completion failed)" || bad=1
		has "$T/kill.err" "rank $r \(127\.0\.0\.1\): (stopped by meshrun \()?exit status 3" || bad=1
	done
	if [ $bad = 0 ]; then
		ok "kill -9 of rank 2 mid all_sum (after $its iterations, at $tk s) under meshrun: ranks 0, 1, 3 failed naming rank 2; first failure seen: rank $first, meshrun exit $rc at $tw s ($(since "$t0") s)"
		while IFS= read -r l; do [[ $l =~ all_sum\ failed|INFO.*(exited|killed) ]] && echo "$l"; done <"$T/kill.err"
	else ko "kill: meshrun exit $rc (first failed rank '$first', want $want), rank 2 pid '$pid' killed after $its iterations at $tk s"; show kill; fi
}

case_pull() {
	mesh_cables 4 || { ko "pull: mesh setup failed"; return; }
	hostfile "$T/mesh4.json" jaccl 4 mesh_cell
	local t0=$EPOCHREALTIME i r rc its tk bad=0 l
	# a cable pulled mid all_sum: rank 1's end of cable 1-2 goes down. Ranks 1
	# and 2 get a port error (or a failed send) on their ends of it at once,
	# before any retry or stall timeout, and the first report reaches every
	# rank through the side channel: every rank must fail naming a device of
	# that cable. No rank may hang.
	launch pull "$T/mesh4.json" jaccl --verbose --env MESHRUN_TIMEOUT=10 -- "$PROG" --fault-loop --ignore-sigterm --max-size 256K
	for ((i = 0; i < 600; i++)); do has "$T/pull.out" "rank 2 iteration 1 done" && break; sleep 0.1; done
	its=$(count "$T/pull.out" "rank 2 iteration"); tk=$(since "$t0")
	ip link set m1_2 down
	wait $MR_PID; rc=$?
	ip link set m1_2 up
	[ $rc = 3 ] || bad=1
	for r in 0 1 2 3; do
		has "$T/pull.err" "^\[rank $r 127\.0\.0\.1\] meshrun-allreduce-test: rank $r: all_sum failed: .*peer rank [12] \(device 'rxe_(1_2|2_1)'\): " || bad=1
	done
	if [ $bad = 0 ]; then
		ok "cable 1-2 pulled mid all_sum (after $its iterations, at $tk s): every rank failed naming that cable; meshrun exit 3 ($(since "$t0") s)"
		while IFS= read -r l; do [[ $l =~ all_sum\ failed ]] && echo "${l:0:220}"; done <"$T/pull.err"
	else ko "pull: meshrun exit $rc after the cable went down at $tk s"; show pull; fi
}

case_baddev() {
	mesh_cables 2 || { ko "baddev: setup failed"; return; }
	local t0=$EPOCHREALTIME who rc r bad=0 l
	for who in 0 1; do
		bad_cell() { if [ $1 = $2 ]; then echo null; elif [ $1 = $BAD ]; then echo '"rxe_nope"'; else echo "\"rxe_$1_$2\""; fi; }
		BAD=$who hostfile "$T/bad$who.json" jaccl 2 bad_cell
		launch bad$who "$T/bad$who.json" jaccl --env MESHRUN_TIMEOUT=20 -- "$PROG" --ignore-sigterm --max-size 4K -q
		wait $MR_PID; rc=$?
		[ $rc = 2 ] || bad=1
		# every rank names the device, none says "Broken pipe"
		for r in 0 1; do
			has "$T/bad$who.err" "^\[rank $r 127\.0\.0\.1\] meshrun-allreduce-test: init: .*RDMA device 'rxe_nope' .*not found" || bad=1
		done
		has "$T/bad$who.err" "[Bb]roken pipe|closed the connection" && bad=1
	done
	if [ $bad = 0 ]; then
		ok "nonexistent device on rank 0, then on rank 1: both ranks fail naming 'rxe_nope', meshrun exit 2 ($(since "$t0") s)"
		cat "$T/bad0.err" "$T/bad1.err" | while IFS= read -r l; do [[ $l =~ rxe_nope ]] && echo "${l:0:200}"; done
	else ko "baddev: meshrun exit $rc"; show bad0; show bad1; fi
}

# meshconfig doctor (issue 35) on the mesh's rxe devices, the ranks all here:
# the rdma and path checks pass (the hostfile's devices exist, their ports are
# active, GID 0 as the ranks use it, the queue pairs within max_qp, the jaccl
# side channel's port reached), exit 0; one cable end down: the rdma column
# fails with that port (code rdma-port-down), exit 1; up again.
case_doctor() {
	local t0=$EPOCHREALTIME mc=$BIN/meshconfig hf=$T/doctor4.json rc st i bad=0
	mesh_cables 4 || { ko "doctor: mesh setup failed"; return; }
	hostfile "$hf" jaccl 4 mesh_cell
	"$mc" doctor --hostfile "$hf" --env MESHRUN_IB_GID_INDEX=0 --json >"$T/doctor.json" 2>"$T/doctor.err"
	rc=$?
	[ $rc = 0 ] && [ "$(jq -r '.hosts[0] | .rdma + " " + .path' "$T/doctor.json")" = "ok ok" ] &&
		[ "$(jq '[.problems[] | select(.status == "fail")] | length' "$T/doctor.json")" = 0 ] || bad=1
	ip link set m1_2 down
	for ((i = 0; i < 100; i++)); do
		read -r st <"/sys/class/infiniband/rxe_1_2/ports/1/state"
		[ "$st" != "4: ACTIVE" ] && break
		sleep 0.1
	done
	"$mc" doctor --hostfile "$hf" --env MESHRUN_IB_GID_INDEX=0 --json >"$T/doctor-down.json" 2>>"$T/doctor.err"
	rc=$?
	[ $rc = 1 ] && jq -e '.problems[] | select(.check == "rdma" and .code == "rdma-port-down" and (.what | test("rxe_1_2")))' \
		"$T/doctor-down.json" >/dev/null || bad=1
	ip link set m1_2 up
	wait_ready rxe_1_2 || bad=1
	if [ $bad = 0 ]; then
		ok "meshconfig doctor on 12 rxe devices: rdma and path pass; with m1_2 down its port is named (rdma-port-down) ($(since "$t0") s)"
	else
		ko "doctor: exit $rc"
		jq -c '.hosts, .problems' "$T/doctor.json" "$T/doctor-down.json" 2>&1 | head -20
		tail -5 "$T/doctor.err"
	fi
}

echo "== jaccl guest checks: ${CASES[*]} (kernel $(uname -r))"
T0=$EPOCHREALTIME
for c in "${CASES[@]}"; do
	echo "== case $c"
	"case_$c"
done
echo "jaccl guest: $pass passed, $fail failed ($(since "$T0") s)"
[ $fail = 0 ]
