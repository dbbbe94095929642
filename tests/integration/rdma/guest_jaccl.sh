#!/bin/bash
# guest_jaccl.sh - the JACCL checks that run INSIDE the soft-RoCE guest
# (scripts/rxe-guest.sh boots it).
# Usage: guest_jaccl.sh BIN_DIR [--max-size BYTES] [CASE[@CONFIG]...]
# --max-size: largest buffer of meshrun-allreduce-test in the mesh4, ring4x2
# and rc cases (default 128K: every op and dtype at every count up to 12345
# elements, the mesh's reduce-scatter path included; sizes from 1 MiB to 64
# MiB are case big's).
#
# Configurations (how the ranks reach soft-RoCE):
#   rxe        plain soft-RoCE, jaccl's default UC queue pairs, GID index 0
#              (given with --env: in one namespace only the link-local GID works)
#   rc         plain soft-RoCE, MESHRUN_JACCL_QP=rc
#   apple      meshsim's Apple RDMA layer (sim/appleverbs, LD_PRELOAD): Apple's
#              rules, a SEND without a posted RECV held until there is one
#   uc-strict  the layer, a SEND without a posted RECV lost (soft-RoCE's UC)
# Under the layer the cables' interfaces get IPv4 addresses (Apple's GID 1)
# and no GID index is given. After every case that should run clean there,
# the layer's counters must show no SEND held (apple) or lost (uc-strict):
# the protocol never sends without credit; no length error, no refusal.
#
# Cases (the default list runs each where the issue asks for it):
#   layer    the layer's rules one verb at a time, and jaccl's RC path refused
#   mesh4    4-rank mesh, 12 rxe devices: every op and dtype, send/recv
#   ring4x2  4-rank jaccl-ring, 2 cables per neighbour, both directions
#   shim     MLX's mpi calls through libmeshrun-mpi on the jaccl mesh and ring
#            (apple: then kill -9 of a rank mid MPI_Allreduce)
#   big      2 ranks: 1 MiB all_sum in 4 KiB frames (credits cycling many
#            times), and (apple) 64 MiB in 64 KiB frames (MESHRUN_JACCL_FRAME)
#   gap      a frame lost on the cable (the layer's MESHSIM_APPLE_LOSE): a rank
#            names the gap; the others name it or were stopped after it
#   rc       the mesh4 run with RC queue pairs
#   kill     kill -9 of a rank mid all_sum: every other rank names it
#   stop     SIGSTOP of a rank mid all_sum: every other rank names it
#   pull     a cable pulled (link down) mid all_sum: every rank names it
#   budget   11 queue pairs on one device (a 2-rank ring of 11 cables), then
#            6 memory regions where a rules file allows 5: refused before any
#            queue pair exists, naming the device and the limit
#   noip     a cable whose interfaces have no IPv4 address: the hint names it
#   probe    meshrun-rdma-probe under the layer and on plain soft-RoCE; its
#            files load into the layer
#   baddev   a device that does not exist, on rank 0, then on rank 1
#   doctor   meshconfig doctor's rdma and path checks on the 4-rank mesh, then
#            the port it names with a cable end down
#
# Every case runs through the real launcher, as a user would:
#   meshrun --hostfile F --backend jaccl|jaccl-ring -- meshrun-allreduce-test ...
# with an MLX object-form hostfile whose hosts are all 127.0.0.1 (meshrun
# starts them locally; rank 0's ips[0] is the coordinator's address) and whose
# rdma matrix names the rxe devices (guest_lib.sh: one veth pair with an rxe
# device on each end per cable). Exit codes checked are meshrun's documented
# ones: 0, or the status of the first rank that failed (128+S for a signal).
set -u
BIN=$1; shift
MAXSIZE=128K
if [ "${1:-}" = --max-size ]; then MAXSIZE=$2; shift 2; fi
PROG=$BIN/meshrun-allreduce-test
MESHRUN=$BIN/meshrun
AVLIB=$BIN/../lib/libmeshsim-appleverbs.so
STAT=$BIN/meshsim-appleverbs-stat
CASES=("$@") DEFAULTS=0
[ ${#CASES[@]} -gt 0 ] || DEFAULTS=1 CASES=(layer mesh4@rxe mesh4@apple mesh4@uc-strict ring4x2@rxe ring4x2@apple
	ring4x2@uc-strict shim@rxe shim@apple shim@uc-strict big@apple big@uc-strict gap@apple rc@rc kill@apple
	stop@apple pull@apple budget@apple noip@apple probe@apple baddev@rxe doctor@rxe)
if [ $DEFAULTS = 1 ] && { [ ! -x "$BIN/mpishim-mlx-test" ] || [ ! -e "$BIN/../lib/libmeshrun-mpi.so" ]; }; then
	# libmeshrun-mpi's check needs the C++ test program (no C++ compiler: not built)
	echo "note: case shim left out: $BIN/mpishim-mlx-test or lib/libmeshrun-mpi.so is not built"
	CASES=("${CASES[@]/shim@*/}")
fi
T=/tmp/jaccl-guest; mkdir -p "$T"
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/guest_lib.sh"
PORT=29500
pass=0; fail=0
ok() { echo "RDMA PASS [$CFG]: $*"; pass=$((pass + 1)); }
ko() { echo "RDMA FAIL [$CFG]: $*"; fail=$((fail + 1)); }

CFG=rxe
CFG_ENV=()
# use_config NAME: the environment every rank of the next cases gets
use_config() {
	CFG=$1
	case $CFG in
	rxe) CFG_ENV=(--env MESHRUN_IB_GID_INDEX=0);;
	rc) CFG_ENV=(--env MESHRUN_IB_GID_INDEX=0 --env MESHRUN_JACCL_QP=rc);;
	apple|uc-strict) CFG_ENV=(--env "LD_PRELOAD=$AVLIB" --env "MESHSIM_APPLE_VERBS=$CFG");;
	*) echo "unknown configuration '$CFG'"; return 1;;
	esac
	layered && "$STAT" --reset -q
	return 0
}
layered() { [ "$CFG" = apple ] || [ "$CFG" = uc-strict ]; }

# The layer saw only what a credited protocol does: no SEND held or lost, no
# length error, nothing refused (prints the counters that are not 0).
layer_clean() { # tag
	layered || return 0
	local l bad=0 nz=
	"$STAT" >"$T/stat.txt" || return 1
	while read -r l; do
		case $l in *" 0") continue;; sends*) nz+=" ${l// /=}"; continue;; esac
		nz+=" ${l// /=}"; bad=1
	done <"$T/stat.txt"
	echo "layer counters after $1:$nz"
	"$STAT" --reset -q
	return $bad
}

# launch TAG HOSTFILE BACKEND [meshrun options] -- PROG ARGS: meshrun in the
# background (pid in MR_PID), stdout/stderr in $T/TAG.out/.err; every job
# gets its own coordinator port and the configuration's environment.
launch() {
	local tag=$1 hf=$2 backend=$3
	shift 3
	PORT=$((PORT + 10))
	# --timeout: the whole job
	"$MESHRUN" --hostfile "$hf" --backend "$backend" -p $PORT --tag-output --stdin none \
		--timeout 780 "${CFG_ENV[@]}" "$@" >"$T/$tag.out" 2>"$T/$tag.err" &
	MR_PID=$!
}

show() { # tag
	echo "--- kernel log:"; dmesg | grep -iE "rxe|rdma|infiniband" | grep -v "set active\|added" | tail -15
	echo "--- meshrun stdout:"; tail -8 "$T/$1.out"
	echo "--- meshrun stderr:"; tail -25 "$T/$1.err"
	layered && { echo "--- layer:"; "$STAT" | tr '\n' ' '; echo; }
}

# every rank's summary says "0 failed" (and the backend's name)
all_summaries() { # tag n
	local r
	for ((r = 0; r < $2; r++)); do
		has "$T/$1.out" "^\[rank $r 127\.0\.0\.1\] meshrun-allreduce-test: rank $r of $2 \(jaccl\): [0-9]+ checks, 0 failed" || return 1
	done
}

# The cables of a case, with IPv4 on their interfaces under the layer.
mesh_setup() { # N
	mesh_cables "$1" || return 1
	layered && { mesh_ipv4 "$1" >/dev/null || return 1; }
	hostfile "$T/mesh$1.json" jaccl "$1" mesh_cell
}
ring_setup() { # N K
	ring_cables "$1" "$2" || return 1
	layered && { ring_ipv4 "$1" "$2" || return 1; }
	hostfile "$T/ring$1x$2.json" jaccl-ring "$1" ring_cell "$1" "$2"
}

case_mesh4() {
	local ts=$EPOCHREALTIME t0 rc
	mesh_setup 4 || { ko "mesh4: setting up 12 rxe devices failed"; return; }
	echo "12 rxe devices ready in $(since "$ts") s"
	t0=$EPOCHREALTIME
	launch mesh4 "$T/mesh4.json" jaccl --env MESHRUN_TIMEOUT=120 -- "$PROG" --max-size "$MAXSIZE"
	wait $MR_PID; rc=$?
	if [ $rc = 0 ] && all_summaries mesh4 4 && ! has "$T/mesh4.out" skipped && layer_clean mesh4; then
		ok "meshrun --backend jaccl, 4-rank mesh hostfile, 12 rxe devices: every op/dtype up to $MAXSIZE, send/recv between every pair ($(since "$t0") s)"
		while IFS= read -r l; do [[ $l =~ checks ]] && echo "$l"; done <"$T/mesh4.out"
	else ko "mesh4: meshrun exit $rc"; show mesh4; fi
}

case_rc() {
	local t0 rc
	mesh_setup 4 || { ko "rc: mesh setup failed"; return; }
	t0=$EPOCHREALTIME
	launch rc "$T/mesh4.json" jaccl --env MESHRUN_TIMEOUT=120 -- "$PROG" --max-size "$MAXSIZE"
	wait $MR_PID; rc=$?
	if [ $rc = 0 ] && all_summaries rc 4 && ! has "$T/rc.out" skipped; then
		ok "MESHRUN_JACCL_QP=rc, 4-rank mesh: every op/dtype up to $MAXSIZE over RC queue pairs, same protocol ($(since "$t0") s)"
	else ko "rc: meshrun exit $rc"; show rc; fi
}

case_ring4x2() {
	local ts=$EPOCHREALTIME t0 rc r bad=0
	ring_setup 4 2 || { ko "ring4x2: setting up 16 rxe devices failed"; return; }
	echo "16 rxe devices ready in $(since "$ts") s"
	t0=$EPOCHREALTIME
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
	layer_clean ring4x2 || bad=1
	if [ $rc = 0 ] && [ $bad = 0 ]; then
		ok "meshrun --backend jaccl-ring, 4 ranks, 2 cables per neighbour, both directions: every collective, op and dtype up to $MAXSIZE, neighbour send/recv; non-neighbour pairs skipped as unsupported ($(since "$t0") s)"
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
# buffers take: jaccl's sends then wait for the receiver's credit, and the
# split's point-to-point gather must not deadlock on them (it hung until the
# stall timeout when every rank sent first). Then (apple) kill -9 of one
# rank: every other rank's MPI_Allreduce returns an error naming it within
# MESHRUN_TIMEOUT (MESHRUN_MPI_ERRORS=return: the program prints the code and
# the seconds the call took).
case_shim() {
	local prog=$BIN/mpishim-mlx-test t0 rc p0 p1 r i pid its tk secs bad=0 l
	if [ ! -x "$prog" ] || [ ! -e "$BIN/../lib/libmeshrun-mpi.so" ]; then
		ko "shim: $prog or libmeshrun-mpi.so is not built"; return
	fi
	mesh_setup 4 || { ko "shim: mesh setup failed"; return; }
	t0=$EPOCHREALTIME p0=$(sent_pkts 'rxe_[0-3]_[0-3]')
	launch shim4 "$T/mesh4.json" mpi --mpi-impl meshrun --env MESHRUN_TIMEOUT=120 -- "$prog" --sizes 1,1000,10000 --split-size 600000
	wait $MR_PID; rc=$?
	p1=$(sent_pkts 'rxe_[0-3]_[0-3]')
	if [ $rc = 0 ] && shim_summaries shim4 4 && [ $((p1 - p0)) -gt 1000 ] && layer_clean shim4; then
		ok "meshrun --backend mpi --mpi-impl meshrun, 4-rank jaccl mesh: mpishim-mlx-test (every dtype and op at 1, 1000, 10000 elements, all_gather, send/recv between every pair, splits) passed on jaccl, $((p1 - p0)) packets over the mesh's rxe devices ($(since "$t0") s)"
	else ko "shim mesh4: meshrun exit $rc, $((p1 - p0)) packets on the mesh devices"; show shim4; fi

	ring_setup 4 2 || { ko "shim: ring setup failed"; return; }
	t0=$EPOCHREALTIME p0=$(sent_pkts 'rxe_*_*_*')
	launch shimring "$T/ring4x2.json" mpi --mpi-impl meshrun --env MESHRUN_TIMEOUT=120 -- "$prog" --sizes 10000 --neighbours-only
	wait $MR_PID; rc=$?
	p1=$(sent_pkts 'rxe_*_*_*')
	if [ $rc = 0 ] && shim_summaries shimring 4 && [ $((p1 - p0)) -gt 1000 ] && layer_clean shimring; then
		ok "the same on a 4-rank jaccl-ring (2 cables per neighbour; send/recv and the split between neighbours): passed on jaccl, $((p1 - p0)) packets over the ring's rxe devices ($(since "$t0") s)"
	else ko "shim ring4x2: meshrun exit $rc, $((p1 - p0)) packets on the ring devices"; show shimring; fi

	[ "$CFG" = apple ] || return 0
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
	"$STAT" --reset -q
	if [ $bad = 0 ]; then
		ok "shim: kill -9 of rank 2 mid MPI_Allreduce on jaccl (after $its iterations, at $tk s): ranks 0, 1, 3 got an error naming rank 2 within MESHRUN_TIMEOUT=20; meshrun exit $rc ($(since "$t0") s)"
		while IFS= read -r l; do [[ $l =~ returned ]] && echo "$l"; done <"$T/shimkill.out"
	else ko "shim kill: meshrun exit $rc, rank 2 pid '$pid' killed after $its iterations at $tk s"; show shimkill; fi
}

# bench-rdma-allsum (its closing all_sum of known values is checked) on a
# 2-rank mesh: 1 MiB in the default 4 KiB frames (a transfer of 128 frames
# through a window of 32 RECVs: the credits cycle), then 64 MiB in 64 KiB
# frames (MESHRUN_JACCL_FRAME: macOS 26.3+). Not larger frames: soft-RoCE's
# UC loses a message of more than 64 packets now and then (every packet
# arrives, the RECV never completes; measured at 128 KiB and 512 KiB), which
# jaccl reports as lost frames.
case_big() {
	local t0 rc f sz bad=0 l
	mesh_setup 2 || { ko "big: mesh setup failed"; return; }
	t0=$EPOCHREALTIME
	local sizes=(4K:1M 64K:64M)
	[ "$CFG" = apple ] || sizes=(4K:1M) # the 64 MiB call costs a minute under emulation
	for f in "${sizes[@]}"; do
		sz=${f#*:}; f=${f%:*}
		launch big$f "$T/mesh2.json" jaccl --env MESHRUN_TIMEOUT=120 --env MESHRUN_JACCL_FRAME=$f \
			-- "$BIN/bench-rdma-allsum" --label "frame$f" --lat-size 4K --bw-size "$sz" --lat-iters 2 --bw-iters 1
		wait $MR_PID; rc=$?
		[ $rc = 0 ] && has "$T/big$f.out" "RESULT frame$f 2 $(numfmt --from=iec "$sz") " || { bad=1; show big$f; }
		while IFS= read -r l; do [[ $l =~ RESULT ]] && echo "  $l"; done <"$T/big$f.out"
	done
	layer_clean big || bad=1
	if [ $bad = 0 ]; then
		ok "2-rank mesh: all_sum of ${sizes[*]} (frame:size), results checked ($(since "$t0") s)"
	else ko "big: a run failed"; fi
}

# A frame lost on the cable (the layer's MESHSIM_APPLE_LOSE=40: the 40th SEND
# that leaves each queue pair completes at its sender and never arrives, the
# peer's RECV waits for the next one): UC does not retransmit, so the next
# frame lands where the lost one was due. A rank must fail naming the gap
# (frame 40 where 39 was expected) and the peer and device, rather than sum
# the next frame's data in its place or wait out the stall timeout; every
# other rank names it too or was stopped by meshrun after that failure.
case_gap() {
	local t0=$EPOCHREALTIME rc r bad=0 l
	mesh_setup 2 || { ko "gap: mesh setup failed"; return; }
	launch gap "$T/mesh2.json" jaccl --env MESHRUN_TIMEOUT=60 --env MESHSIM_APPLE_LOSE=40 \
		-- "$BIN/bench-rdma-allsum" --label gap --lat-size 4K --bw-size 1M --lat-iters 2 --bw-iters 1
	wait $MR_PID; rc=$?
	[ $rc != 0 ] || bad=1
	# A rank names the gap itself or is told it through the side channel;
	# one that meshrun stopped first (it stops the group as soon as one rank
	# fails) has said nothing wrong. At least one rank must name it.
	local gap="peer rank [01] \(device 'rxe_[01]_[01]'\): frame 40 arrived where frame 39 was expected: 1 frame\(s\) lost on the cable" named=0
	for r in 0 1; do
		if has "$T/gap.err" "^\[rank $r 127\.0\.0\.1\] .*$gap"; then named=$((named + 1))
		else has "$T/gap.err" "^\[WARN\] rank $r \(127\.0\.0\.1\): stopped by meshrun .* after rank [01] \(127\.0\.0\.1\) failed" || bad=1; fi
	done
	[ $named -ge 1 ] || bad=1
	"$STAT" >"$T/gap-stat.txt"
	has "$T/gap-stat.txt" "^lost [12]$" || bad=1
	"$STAT" --reset -q
	if [ $bad = 0 ]; then
		ok "a frame lost on each queue pair of a 2-rank mesh (MESHSIM_APPLE_LOSE=40): $named of 2 ranks name the gap, the peer and the device (a rank that does not was stopped by meshrun after the first failure), meshrun exit $rc ($(since "$t0") s)"
		while IFS= read -r l; do [[ $l =~ arrived\ where ]] && echo "${l:0:220}"; done <"$T/gap.err"
	else ko "gap: meshrun exit $rc"; show gap; cat "$T/gap-stat.txt"; fi
}

# The exit status meshrun must give when a rank was killed or stopped:
# that rank's (its signal) or, when a survivor noticed and exited before
# meshrun reaped it, the survivor's (3).
first_failed() { # tag
	local l
	while IFS= read -r l; do
		[[ $l =~ ^\[WARN\]\ rank\ ([0-9]+)\ \(127\.0\.0\.1\)\ failed:\ stopping ]] && { echo "${BASH_REMATCH[1]}"; return; }
	done <"$T/$1.err"
}

# A fault mid all_sum on the 4-rank mesh (case kill, stop, pull).
# fault_run TAG TIMEOUT ACTION: ACTION runs once rank 2 finished its first
# iteration; sets RC, FAULT_AT (seconds since the start), ITS, and FAULT_S
# (seconds from the fault to meshrun's exit).
fault_run() {
	local tag=$1 to=$2 action=$3 i ta t0=$EPOCHREALTIME
	# --ignore-sigterm: meshrun stops the other ranks as soon as one failed;
	# this way each still prints the failure it saw itself (meshrun's SIGKILL
	# after its grace ends a rank that hangs, which fails the check).
	launch "$tag" "$T/mesh4.json" jaccl --verbose --env MESHRUN_TIMEOUT=$to -- "$PROG" --fault-loop --ignore-sigterm --max-size 256K
	for ((i = 0; i < 600; i++)); do [ -e "$T/$tag.out" ] && has "$T/$tag.out" "rank 2 iteration 1 done" && break; sleep 0.1; done
	ITS=$(count "$T/$tag.out" "rank 2 iteration"); FAULT_AT=$(since "$t0")
	ta=$EPOCHREALTIME
	$action
	wait $MR_PID; RC=$?
	FAULT_S=$(since "$ta")
}

kill_rank2() { FAULT_PID=$(rank_pid $MR_PID 2); [ -n "$FAULT_PID" ] && kill -9 "$FAULT_PID" || kill "$MR_PID"; }
stop_rank2() { FAULT_PID=$(rank_pid $MR_PID 2); [ -n "$FAULT_PID" ] && kill -STOP "$FAULT_PID" || kill "$MR_PID"; }
pull_cable() { ip link set m1_2 down; }

# Every survivor failed within the timeout (plus meshrun's grace) naming
# rank 2 (WHAT: regex of the reason).
named_rank2() { # tag timeout what
	local r bad=0
	for r in 0 1 3; do
		has "$T/$1.err" "^\[rank $r 127\.0\.0\.1\] meshrun-allreduce-test: rank $r: all_sum failed: .*$3" || bad=1
		# its own end, status 3 (--verbose's trace: meshrun's summary folds
		# ranks that failed the same way into one line)
		has "$T/$1.err" "rank $r \(127\.0\.0\.1\): exited with status 3" || bad=1
	done
	[ "${FAULT_S%.*}" -le "$2" ] || bad=1
	return $bad
}

case_kill() {
	local first want bad=0 l
	mesh_setup 4 || { ko "kill: mesh setup failed"; return; }
	fault_run kill 20 kill_rank2
	[ -n "$FAULT_PID" ] || bad=1
	first=$(first_failed kill)
	if [ "$first" = 2 ]; then want=137; else want=3; fi
	[ -n "$first" ] && [ $RC = $want ] || bad=1
	has "$T/kill.err" "rank 2 \(127\.0\.0\.1\): (killed by signal 9|stopped by meshrun \(signal 9\))" || bad=1
	# each survivor names rank 2: rank 0 sees its side channel close and
	# tells the others (never the stall timeout: "stopped answering")
	named_rank2 kill 20 "(peer )?rank 2 (closed|has left)" || bad=1
	"$STAT" --reset -q
	if [ $bad = 0 ]; then
		ok "kill -9 of rank 2 mid all_sum (after $ITS iterations, at $FAULT_AT s): ranks 0, 1, 3 failed naming rank 2 within $FAULT_S s (MESHRUN_TIMEOUT=20); first failure seen: rank $first, meshrun exit $RC"
		while IFS= read -r l; do [[ $l =~ all_sum\ failed ]] && echo "${l:0:220}"; done <"$T/kill.err"
	else ko "kill: meshrun exit $RC (first failed rank '$first', want $want) after $FAULT_S s, rank 2 pid '$FAULT_PID' killed after $ITS iterations at $FAULT_AT s"; show kill; fi
}

case_stop() {
	local bad=0 l
	mesh_setup 4 || { ko "stop: mesh setup failed"; return; }
	fault_run stop 20 stop_rank2
	[ -n "$FAULT_PID" ] && kill -CONT "$FAULT_PID" 2>/dev/null
	[ -n "$FAULT_PID" ] || bad=1
	# Apple's driver reports nothing for a stopped peer: its heartbeats stop
	# (rank 0 names it after half the timeout) or, later, the data stalls
	[ $RC != 0 ] || bad=1
	named_rank2 stop 20 "rank 2 (showed no sign of life|\(device '[^']*'\) stopped answering)" || bad=1
	"$STAT" --reset -q
	if [ $bad = 0 ]; then
		ok "SIGSTOP of rank 2 mid all_sum (after $ITS iterations, at $FAULT_AT s): ranks 0, 1, 3 failed naming rank 2 within $FAULT_S s (MESHRUN_TIMEOUT=20); meshrun exit $RC"
		while IFS= read -r l; do [[ $l =~ all_sum\ failed ]] && echo "${l:0:220}"; done <"$T/stop.err"
	else ko "stop: meshrun exit $RC after $FAULT_S s, rank 2 pid '$FAULT_PID' stopped after $ITS iterations at $FAULT_AT s"; show stop; fi
}

case_pull() {
	local r bad=0 l
	mesh_setup 4 || { ko "pull: mesh setup failed"; return; }
	# a cable pulled mid all_sum: rank 1's end of cable 1-2 goes down. The
	# first rank to see it (a failed completion on that cable, or ranks 1 and
	# 2 reporting to rank 0 that they wait on each other) fails the group
	# through the side channel: every rank must name that cable. No rank may
	# hang.
	fault_run pull 20 pull_cable
	ip link set m1_2 up
	[ $RC = 3 ] || bad=1
	for r in 0 1 2 3; do
		has "$T/pull.err" "^\[rank $r 127\.0\.0\.1\] meshrun-allreduce-test: rank $r: all_sum failed: .*(peer rank [12] \(device 'rxe_(1_2|2_1)'\)|rank 1 \(device 'rxe_1_2'\) and rank 2 \(device 'rxe_2_1'\) wait on each other)" || bad=1
	done
	[ "${FAULT_S%.*}" -le 20 ] || bad=1
	"$STAT" --reset -q
	if [ $bad = 0 ]; then
		ok "cable 1-2 pulled mid all_sum (after $ITS iterations, at $FAULT_AT s): every rank failed naming that cable within $FAULT_S s (MESHRUN_TIMEOUT=20); meshrun exit 3"
		while IFS= read -r l; do [[ $l =~ all_sum\ failed ]] && echo "${l:0:220}"; done <"$T/pull.err"
	else ko "pull: meshrun exit $RC, $FAULT_S s after the cable went down at $FAULT_AT s"; show pull; fi
}

# the layer's test cable, without IPv4 addresses
layer_cable() {
	[ -e /sys/class/infiniband/rxe_la ] || cable la lb rxe_la rxe_lb || return 1
	wait_ready rxe_la rxe_lb || return 1
	ip -4 addr flush dev la; ip -4 addr flush dev lb
}

# meshsim's Apple RDMA layer (sim/appleverbs) on one cable, in both delivery
# modes: appleverbs-check calls each verb the rules are about (before and
# after the cable's interfaces get IPv4 addresses), and the layer's counters
# must show what it held (apple) or lost (uc-strict). Then jaccl's RC path
# (MESHRUN_JACCL_QP=rc) must fail under the layer at QP creation: the layer
# can fail a test.
case_layer() {
	local mode t0=$EPOCHREALTIME bad=0 rc l r
	layer_cable || { ko "layer: cable setup failed"; return; }
	for mode in apple uc-strict; do
		"$STAT" --reset -q
		LD_PRELOAD=$AVLIB MESHSIM_APPLE_VERBS=$mode "$BIN/appleverbs-check" noip rxe_la rxe_lb >"$T/layer-$mode.out" 2>&1 || bad=1
		ip addr add 10.78.0.1/30 dev la && ip addr add 10.78.0.2/30 dev lb
		LD_PRELOAD=$AVLIB MESHSIM_APPLE_VERBS=$mode "$BIN/appleverbs-check" ip rxe_la rxe_lb >>"$T/layer-$mode.out" 2>&1 || bad=1
		"$STAT" >>"$T/layer-$mode.out"
		if [ $mode = apple ]; then has "$T/layer-$mode.out" "^held [1-9]" || bad=1
		else has "$T/layer-$mode.out" "^drops [1-9]" || bad=1; fi
		ip -4 addr flush dev la; ip -4 addr flush dev lb
	done
	# the QP type the rules refuse, through the real launcher and libmeshrun
	pair_cell() { if [ $1 = $2 ]; then echo null; elif [ $1 = 0 ]; then echo '"rxe_la"'; else echo '"rxe_lb"'; fi; }
	ip addr add 10.78.0.1/30 dev la && ip addr add 10.78.0.2/30 dev lb
	hostfile "$T/layer-rc.json" jaccl 2 pair_cell
	launch layerrc "$T/layer-rc.json" jaccl --env MESHRUN_TIMEOUT=20 --env "LD_PRELOAD=$AVLIB" --env MESHRUN_JACCL_QP=rc -- "$PROG" --ignore-sigterm --max-size 4K -q
	wait $MR_PID; rc=$?
	ip -4 addr flush dev la; ip -4 addr flush dev lb
	"$STAT" --reset -q
	[ $rc = 2 ] || bad=1
	for r in 0 1; do
		has "$T/layerrc.err" "^\[rank $r 127\.0\.0\.1\] meshrun-allreduce-test: init: .*ibv_create_qp \(RC\) on 'rxe_l[ab]': Operation not supported" || bad=1
	done
	if [ $bad = 0 ]; then
		ok "Apple layer on rxe_la/rxe_lb, apple and uc-strict: every rule refused or held as the table says; jaccl's RC queue pairs fail at creation under it, meshrun exit 2 ($(since "$t0") s)"
		while IFS= read -r l; do [[ $l =~ ibv_create_qp ]] && echo "${l:0:220}"; done <"$T/layerrc.err"
	else
		ko "layer: meshrun exit $rc"
		for mode in apple uc-strict; do echo "--- $mode:"; cat "$T/layer-$mode.out"; done
		echo "--- jaccl rc under the layer:"; tail -8 "$T/layerrc.err"
	fi
}

# meshrun-rdma-probe on the layer's cable, both ends, under the layer (apple):
# its file must describe Apple's driver as the layer simulates it, so the
# layer loaded with it must pass appleverbs-check again; then on plain
# soft-RoCE, whose file (RC creates there) must load into the layer and make
# it let RC queue pairs create: the layer follows the probe's file.
probe_pair() { # tag [VAR=value...] (PROBE_OPTS: more probe options)
	local tag=$1 rc1 rc2
	shift
	env "$@" "$BIN/meshrun-rdma-probe" ${PROBE_OPTS:-} --device rxe_lb --listen 127.0.0.1:18515 -o "$T/$tag-b.json" 2>"$T/$tag-b.err" &
	local lp=$!
	env "$@" "$BIN/meshrun-rdma-probe" ${PROBE_OPTS:-} --device rxe_la --connect 127.0.0.1:18515 -o "$T/$tag-a.json" 2>"$T/$tag-a.err"
	rc1=$?
	wait $lp; rc2=$?
	[ $rc1 = 0 ] && [ $rc2 = 0 ]
}

case_probe() {
	local t0=$EPOCHREALTIME bad=0 l
	layer_cable || { ko "probe: cable setup failed"; return; }
	ip addr add 10.78.0.1/30 dev la && ip addr add 10.78.0.2/30 dev lb
	probe_pair probe-apple "LD_PRELOAD=$AVLIB" MESHSIM_APPLE_VERBS=apple || bad=1
	"$STAT" --reset -q
	ip -4 addr flush dev la; ip -4 addr flush dev lb
	# the probe's file as the rules: the layer must behave as by default
	LD_PRELOAD=$AVLIB MESHSIM_APPLE_RULES=$T/probe-apple-a.json "$BIN/appleverbs-check" noip rxe_la rxe_lb >"$T/probe-check.out" 2>&1 || bad=1
	ip addr add 10.78.0.1/30 dev la && ip addr add 10.78.0.2/30 dev lb
	LD_PRELOAD=$AVLIB MESHSIM_APPLE_RULES=$T/probe-apple-a.json "$BIN/appleverbs-check" ip rxe_la rxe_lb >>"$T/probe-check.out" 2>&1 || bad=1
	"$STAT" --reset -q
	# plain soft-RoCE (GID 0: one namespace), then its file into the layer
	PROBE_OPTS="--gid-index 0" probe_pair probe-rxe || bad=1
	ip -4 addr flush dev la; ip -4 addr flush dev lb
	LD_PRELOAD=$AVLIB MESHSIM_APPLE_RULES=$T/probe-rxe-a.json "$BIN/appleverbs-check" noip rxe_la rxe_lb >"$T/probe-rxe-check.out" 2>&1
	has "$T/probe-rxe-check.out" "^FAIL: an RC QP fails to create with EOPNOTSUPP" || bad=1
	"$STAT" --reset -q
	if [ $bad = 0 ]; then
		ok "meshrun-rdma-probe on rxe_la/rxe_lb: under the layer its file reproduces Apple's rules (the layer loaded with it passes appleverbs-check); on plain soft-RoCE its file loads into the layer, which then lets RC create ($(since "$t0") s)"
		while IFS= read -r l; do [[ $l =~ \"(qp_types|max_qp_per_device|max_mr_per_device|send_without_recv|max_msg_bytes)\" ]] && echo "  apple: ${l:0:110}"; done <"$T/probe-apple-a.json"
	else
		ko "probe"
		for l in probe-apple-a probe-apple-b probe-rxe-a probe-rxe-b; do echo "--- $l:"; cat "$T/$l.err" "$T/$l.json" 2>/dev/null | head -60; done
		echo "--- checks:"; grep -v "^ok" "$T/probe-check.out" "$T/probe-rxe-check.out"
	fi
}

# Setup failures every rank must report alike (meshrun exit 2), each naming
# what to fix: setup_fail TAG HOSTFILE BACKEND REGEX [meshrun options]
setup_fail() {
	local tag=$1 hf=$2 backend=$3 want=$4 r bad=0
	shift 4
	launch "$tag" "$hf" "$backend" --env MESHRUN_TIMEOUT=20 "$@" -- "$PROG" --ignore-sigterm --max-size 4K -q
	wait $MR_PID; RC=$?
	[ $RC = 2 ] || bad=1
	for r in 0 1; do
		has "$T/$tag.err" "^\[rank $r 127\.0\.0\.1\] meshrun-allreduce-test: init: .*$want" || bad=1
	done
	has "$T/$tag.err" "[Bb]roken pipe|closed the connection" && bad=1
	return $bad
}

# 11 queue pairs on one device: a 2-rank jaccl-ring whose 11 cables all name
# rxe_la (rank 0) and rxe_lb (rank 1); then 6 cables where a rules file
# allows 5 memory regions. Both are refused before any queue pair exists:
# the layer saw no ibv_create_qp at all (its refusals stay 0).
case_budget() {
	local t0=$EPOCHREALTIME bad=0 l c
	layer_cable || { ko "budget: cable setup failed"; return; }
	ip addr add 10.78.0.1/30 dev la && ip addr add 10.78.0.2/30 dev lb
	many_cell() { # N I J
		local k cell=
		if [ $2 = $3 ]; then echo null; return; fi
		for ((k = 0; k < $1; k++)); do [ $k -gt 0 ] && cell+=', '; if [ $2 = 0 ]; then cell+='"rxe_la"'; else cell+='"rxe_lb"'; fi; done
		echo "[$cell]"
	}
	hostfile "$T/budget11.json" jaccl-ring 2 many_cell 11
	setup_fail budgetqp "$T/budget11.json" jaccl-ring "needs 11 queue pairs on device 'rxe_l[ab]' .*limit of 10 per device" || bad=1
	sed 's/"value": 100, "errno": "ENOMEM"/"value": 5, "errno": "ENOMEM"/' "$BIN/../share/meshsim/apple-rules.json" >"$T/mr5.json"
	hostfile "$T/budget6.json" jaccl-ring 2 many_cell 6
	setup_fail budgetmr "$T/budget6.json" jaccl-ring "needs 6 memory regions on device 'rxe_l[ab]' .*limit of 5 per device" --env "MESHSIM_APPLE_RULES=$T/mr5.json" || bad=1
	ip -4 addr flush dev la; ip -4 addr flush dev lb
	layer_clean budget || bad=1
	if [ $bad = 0 ]; then
		ok "11 queue pairs on one device, and 6 memory regions where the rules allow 5: every rank refused before creating any, naming the device and the limit; meshrun exit 2 ($(since "$t0") s)"
		cat "$T/budgetqp.err" "$T/budgetmr.err" | while IFS= read -r l; do [[ $l =~ needs ]] && echo "${l:0:230}"; done
	else ko "budget: meshrun exit $RC"; show budgetqp; show budgetmr; fi
}

case_noip() {
	local t0=$EPOCHREALTIME bad=0 l
	layer_cable || { ko "noip: cable setup failed"; return; }
	hostfile "$T/noip.json" jaccl 2 pair_cell
	setup_fail noip "$T/noip.json" jaccl "device 'rxe_l[ab]' has no IPv4-mapped GID: give its interface 'l[ab]' an IPv4 address" || bad=1
	layer_clean noip || bad=1
	if [ $bad = 0 ]; then
		ok "a cable whose interfaces have no IPv4 address: both ranks fail naming the interface to address, meshrun exit 2 ($(since "$t0") s)"
		while IFS= read -r l; do [[ $l =~ IPv4 ]] && echo "${l:0:230}"; done <"$T/noip.err"
	else ko "noip: meshrun exit $RC"; show noip; fi
}
pair_cell() { if [ $1 = $2 ]; then echo null; elif [ $1 = 0 ]; then echo '"rxe_la"'; else echo '"rxe_lb"'; fi; }

case_baddev() {
	mesh_cables 2 || { ko "baddev: setup failed"; return; }
	local t0=$EPOCHREALTIME who bad=0 l
	for who in 0 1; do
		bad_cell() { if [ $1 = $2 ]; then echo null; elif [ $1 = $BAD ]; then echo '"rxe_nope"'; else echo "\"rxe_$1_$2\""; fi; }
		BAD=$who hostfile "$T/bad$who.json" jaccl 2 bad_cell
		setup_fail bad$who "$T/bad$who.json" jaccl "RDMA device 'rxe_nope' .*not found" || bad=1
	done
	if [ $bad = 0 ]; then
		ok "nonexistent device on rank 0, then on rank 1: both ranks fail naming 'rxe_nope', meshrun exit 2 ($(since "$t0") s)"
		cat "$T/bad0.err" "$T/bad1.err" | while IFS= read -r l; do [[ $l =~ rxe_nope ]] && echo "${l:0:200}"; done
	else ko "baddev: meshrun exit $RC"; show bad0; show bad1; fi
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
	[ -n "$c" ] || continue
	name=${c%@*}; cfg=rxe
	[ "$name" != "$c" ] && cfg=${c#*@}
	[ "$name" = layer ] && cfg=apple
	use_config "$cfg" || { ko "$c: unknown configuration"; continue; }
	ts=$EPOCHREALTIME
	echo "== case $name [$CFG]"
	"case_$name"
	echo "   ($(since "$ts") s)"
done
echo "jaccl guest: $pass passed, $fail failed ($(since "$T0") s)"
[ $fail = 0 ]
