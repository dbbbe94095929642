#!/bin/bash
# jaccl_guest.sh - the jaccl part of the seeded fault campaign (issue 16), run
# INSIDE the soft-RoCE guest (chaos_jaccl.sh boots it): jaccl jobs on a mesh
# of 4 ranks over 12 rxe devices (tests/integration/rdma/guest_jaccl.sh's
# mesh4) and, with --backends jaccl,jaccl-ring, jaccl-ring jobs over a ring of
# 4 (one cable per neighbour pair), each launched by meshrun with
# meshrun-allreduce-test, one random fault per job at a random moment:
#   rank-kill9 rank-stop rank-term   a rank (SIGKILL, SIGSTOP, SIGTERM)
#   meshrun-kill9 meshrun-int        meshrun itself (SIGKILL, SIGINT)
#   unplug flap                      a cable the job uses: its veth (the rxe
#                                    device's netdev) down, or down/up every
#                                    200-1000 ms
#   garbage halfopen badtoken slowloris   a foreign connection to the jaccl
#                                    side channel's listening port (rank 0's
#                                    coordinator port, open while the ranks
#                                    join: tried from the launch on)
#   none
# Each job is judged as chaos.sh judges its own (chaos_lib.sh: exit within
# --timeout + GRACE_S, a status docs/contracts.md allows, a failure that
# names the rank or cable, no process of the job (meshrun, ranks, watchdog)
# and no job directory left, success only with every rank's checks passed),
# and written as the same row; the same seeding: --seed deals faults and job
# seeds, a job's seed makes all its other choices, --job-seed S --faults F
# replays one job.
#
#   jaccl_guest.sh BIN_DIR [--seed N] [--jobs N] [--faults LIST]
#       [--backends jaccl,jaccl-ring] [--job-seed S] [--table FILE]
#       [--max-size SIZE] [--job-timeout S] [--peer-timeout S] [--budget S]
# --budget S: deal no new job after S seconds (the guest has a fixed timeout).
# Exit 0 when every job was ok, 1 otherwise, 2 on bad usage or setup.
set -u
BIN=$(cd "${1:?usage: $0 BIN_DIR [options]}" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
MESHRUN=$BIN/meshrun
ARTEST=$BIN/meshrun-allreduce-test
SEED="" JOBS=30 FAULT_LIST=all BACKEND_LIST=jaccl,jaccl-ring JOB_SEED="" TABLE="" MAXSIZE=16K BUDGET=0
# bounds, larger than chaos.sh's: everything runs emulated (TCG, 2 cores).
# GRACE_S: meshrun's SIGTERM->SIGKILL grace of 3 s plus the guest's slowness;
# LEFT_S: what the local watchdog and teardown may take after meshrun exits
JOB_S=150 PEER_S=20 GRACE_S=15 LEFT_S=6 KILL9_LEFT_S=6
while [ $# -gt 0 ]; do
	case $1 in
	--seed) SEED=$2; shift ;;
	--jobs) JOBS=$2; shift ;;
	--faults) FAULT_LIST=$2; shift ;;
	--backends) BACKEND_LIST=$2; shift ;;
	--job-seed) JOB_SEED=$2; JOBS=1; shift ;;
	--table) TABLE=$2; shift ;;
	--max-size) MAXSIZE=$2; shift ;;
	--job-timeout) JOB_S=$2; shift ;;
	--peer-timeout) PEER_S=$2; shift ;;
	--budget) BUDGET=$2; shift ;;
	*) echo "jaccl_guest.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
	shift
done
[ -n "$SEED" ] || SEED=$((${EPOCHREALTIME/./} % 4294967296))
ALL_FAULTS="none rank-kill9 rank-stop rank-term meshrun-kill9 meshrun-int unplug flap garbage halfopen badtoken slowloris"
[ "$FAULT_LIST" = all ] && FAULT_LIST=${ALL_FAULTS// /,}
IFS=, read -r -a FAULTS <<<"$FAULT_LIST"
IFS=, read -r -a BACKENDS <<<"$BACKEND_LIST"
for f in "${FAULTS[@]}"; do
	[[ " $ALL_FAULTS " == *" $f "* ]] || { echo "jaccl_guest.sh: no fault '$f' here (only: $ALL_FAULTS)" >&2; exit 2; }
done
T=/tmp/chaos-jaccl TMP=/tmp/chaos-jaccl
rm -rf "$T"; mkdir -p "$T/tmp"
. "$HERE/../integration/rdma/guest_lib.sh"
. "$HERE/chaos_lib.sh"
# a sleep without exec (every exec costs most of a second under TCG): a read
# that times out on a FIFO we hold open at both ends (no /dev/fd in the guest)
mkfifo "$T/nap" && exec {NAPFD}<>"$T/nap" || { echo "jaccl_guest.sh: mkfifo $T/nap failed"; exit 2; }
nap() { read -r -t "$1" -u "$NAPFD" _ || :; }

echo "# jaccl chaos campaign (guest, kernel $(uname -r)): seed $SEED, $JOBS jobs, backends ${BACKENDS[*]}, faults ${FAULTS[*]}"
echo "# bounds: --timeout ${JOB_S}s + ${GRACE_S}s grace; MESHRUN_TIMEOUT ${PEER_S}s; leftovers gone ${LEFT_S}s after exit"

# ---- the cables and hostfiles: mesh cable i-j is veth m<i>_<j> / rxe_<i>_<j>,
# ring cable i-(i+1) r<i>_<j>_0 / rxe_<i>_<j>_0 (guest_lib.sh)
declare -A HF C_BASE
ts=$EPOCHREALTIME
mesh_cables 4 || { echo "setting up 12 rxe devices failed"; exit 2; }
HF[jaccl]=$T/mesh4.json
hostfile "${HF[jaccl]}" jaccl 4 mesh_cell
if [[ ",$BACKEND_LIST," == *,jaccl-ring,* ]]; then
	ring_cables 4 1 || { echo "setting up the ring's 8 rxe devices failed"; exit 2; }
	HF[jaccl-ring]=$T/ring4.json
	hostfile "${HF[jaccl-ring]}" jaccl-ring 4 ring_cell 4 1
fi
echo "# rxe devices ready in $(since "$ts") s"

# cable_if B I J: rank I's end of its cable to J; cable_devs B I J: both rxe devices
cable_if() { if [ "$1" = jaccl ]; then echo "m$2_$3"; else echo "r$2_$3_0"; fi; }
cable_devs() { if [ "$1" = jaccl ]; then echo "rxe_$2_$3 rxe_$3_$2"; else echo "rxe_$2_$3_0 rxe_$3_$2_0"; fi; }

# strays: every process of a job (meshrun, a rank, the watchdog), "pid:cmdline"
strays() {
	local p a c
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[ "$p" = $$ ] && continue
		a=()
		mapfile -t -d '' a <"/proc/$p/cmdline" 2>/dev/null || continue
		c="${a[*]}"
		case $c in
		"$BIN/"*|*" $BIN/"*|*meshrun-watchdog*) echo "$p:${c:0:60}" ;;
		esac
	done
}
jobdirs() { local d; for d in "$T"/tmp/meshrun.* /tmp/meshrun.*; do [ -e "$d" ] && echo "$d"; done; }

# ---- faults. Globals of a job: B, F, TR (target rank), TO (the cable's other
# rank), IF (the cable's veth), ARG, MPID, PORT.
FOREIGN_PID="" FLAP_PID="" STOPPED=""
foreign() { # foreign MODE: a connection to rank 0's coordinator port
	local mode=$1 hello tok b
	# a well-formed jaccl hello (lane 0xffff, nconn "JCCL") from rank TR (1..3) with a wrong token
	tok=chaos-wrong-token-0123456789abcd
	hello='MRNG\x01\x00\xff\xff'$(printf '\\x%02x\\x00\\x00\\x00' "$((TR == 0 ? 1 : TR))")'\x04\x00\x00\x00\x4c\x43\x43\x4a\x20\x00\x00\x00'$tok
	(
		for ((i = 0; i < 1500; i++)); do exec 3<>"/dev/tcp/127.0.0.1/$PORT" && break; nap 0.01; done 2>/dev/null
		{ : >&3; } 2>/dev/null || { echo missed >"$T/foreign"; exit 0; }
		echo hit >"$T/foreign"
		case $mode in
		garbage) printf "$GARBAGE" >&3 ;;
		badtoken) printf "$hello" >&3 ;;
		slowloris) # the hello's bytes one by one, 0.5 s apart
			while [ -n "$hello" ]; do
				if [ "${hello:0:2}" = '\x' ]; then b=${hello:0:4}; else b=${hello:0:1}; fi
				hello=${hello:${#b}}
				printf "$b" >&3 || break
				nap 0.5
			done ;;
		esac
		nap 30
	) >/dev/null 2>&1 &
	FOREIGN_PID=$!
}
inject() {
	local p i
	case $F in
	none) ;;
	rank-kill9|rank-stop|rank-term)
		p=""
		for ((i = 0; i < 100; i++)); do p=$(rank_pid "$MPID" "$TR") && break; kill -0 "$MPID" 2>/dev/null || break; nap 0.05; done
		[ -n "$p" ] || { HIT=missed; return; }
		case $F in rank-kill9) kill -9 "$p" ;; rank-stop) kill -STOP "$p"; STOPPED=$p ;; rank-term) kill -TERM "$p" ;; esac
		;;
	meshrun-kill9) kill -9 "$MPID" ;;
	meshrun-int) kill -INT "$MPID" ;;
	unplug) ip link set "$IF" down >"$TMP/fault.out" 2>&1 || HIT=failed ;;
	flap)
		( while :; do ip link set "$IF" down; nap "$ARG_S"; ip link set "$IF" up; nap "$ARG_S"; done ) >/dev/null 2>&1 &
		FLAP_PID=$!
		;;
	esac
}
clear_fault() {
	case $F in
	rank-stop) [ -n "$STOPPED" ] && kill -CONT "$STOPPED" 2>/dev/null ;;
	unplug|flap)
		[ -n "$FLAP_PID" ] && { kill -9 "$FLAP_PID"; wait "$FLAP_PID"; }
		FLAP_PID=""
		ip link set "$IF" up
		# the next job needs both ends ACTIVE again
		wait_ready $(cable_devs "$B" "$TR" "$TO") >/dev/null || echo "# cable $IF: its devices did not come back"
		;;
	garbage|halfopen|badtoken|slowloris)
		[ -n "$FOREIGN_PID" ] && { kill -9 "$FOREIGN_PID"; wait "$FOREIGN_PID"; }
		FOREIGN_PID=""
		;;
	esac >/dev/null 2>&1
	return 0
}

# ---- one job (run_job INDEX JOBSEED FAULT, as chaos.sh's)
run_job() {
	local j=$1 js=$2 t0 t1 rc el left="" lim bound names target i bn
	seed_rng "$js"
	pick "${BACKENDS[@]}"; B=$P
	pick "$3"; F=$P
	rand 4; TR=$R
	if [ "$B" = jaccl ]; then rand 3; TO=$(((TR + 1 + R) % 4)); else rand 2; TO=$(((TR + 1 + 2 * R) % 4)); fi
	IF=$(cable_if "$B" "$TR" "$TO")
	rand $((${C_BASE[$B]} + 1)); WHEN=$R
	ARG="" STOPPED="" HIT=hit GARBAGE="" VERDICT=ok NOTE=""
	PORT=$((20000 + j % 10000))
	names="rank ${TR}[ :(]"
	case $F in
	flap) rand 5; ARG=$((200 * (R + 1)))ms ARG_S=0.$((2 * (R + 1)))00; [ $R = 4 ] && ARG_S=1 ;;
	garbage) for ((i = 0; i < 64; i++)); do rand 256; GARBAGE+=$(printf '\\x%02x' "$R"); done ;;
	esac
	case $F in garbage|halfopen|badtoken|slowloris) rand 400; WHEN=$R ;; esac
	[ "$F" = none ] && WHEN=-
	local d
	case $F in unplug|flap) names="$names|rank ${TO}[ :(]|$IF"; for d in $(cable_devs "$B" "$TR" "$TO"); do names+="|$d"; done ;; esac
	: >"$T/foreign"

	t0=$(now_ms)
	# SIGINT at its default: bash starts background commands with it ignored
	TMPDIR=$T/tmp env --default-signal=INT "$MESHRUN" --hostfile "${HF[$B]}" --backend "$B" -p "$PORT" --stdin none \
		--timeout "$JOB_S" --env MESHRUN_IB_GID_INDEX=0 --env MESHRUN_TIMEOUT="$PEER_S" \
		-- "$ARTEST" --max-size "$MAXSIZE" </dev/null >"$T/out" 2>"$T/err" &
	MPID=$!
	case $F in
	garbage|halfopen|badtoken|slowloris) nap "$(printf '0.%03d' "$WHEN")"; foreign "$F" ;;
	none) ;;
	*)
		nap "$(printf '%d.%03d' $((WHEN / 1000)) $((WHEN % 1000)))"
		if kill -0 "$MPID" 2>/dev/null; then inject; else HIT=late; fi
		;;
	esac
	bound=$(((JOB_S + GRACE_S) * 1000))
	while kill -0 "$MPID" 2>/dev/null && [ $(($(now_ms) - t0)) -lt $bound ]; do nap 0.05; done
	t1=$(now_ms)
	el=$((t1 - t0))
	if kill -0 "$MPID" 2>/dev/null; then
		VERDICT=HANG NOTE="meshrun still ran after $((bound / 1000)) s"
		kill -9 "$MPID"
	fi
	wait "$MPID" 2>/dev/null
	rc=$?
	case $F in garbage|halfopen|badtoken|slowloris)
		read -r HIT <"$T/foreign"; HIT=${HIT:-missed}
		clear_fault
		;;
	esac
	lim=$LEFT_S
	[ "$F" = meshrun-kill9 ] && lim=$KILL9_LEFT_S
	while :; do
		left="$(strays) $(jobdirs)"
		left=$(echo $left)
		[ -z "$left" ] && break
		[ $(($(now_ms) - t1)) -gt $((lim * 1000)) ] && break
		nap 0.1
	done
	local exit_left=$(($(now_ms) - t1))
	clear_fault
	if [ -n "$left" ]; then
		[ "$VERDICT" = ok ] && VERDICT=LEFTOVER
		NOTE="$NOTE left after ${lim}s: ${left:0:200}"
		for p in $(strays | cut -d: -f1); do kill -9 "$p" 2>/dev/null; done
		rm -rf "$T"/tmp/meshrun.* /tmp/meshrun.*
	fi
	chaos_judge "$rc" "$T/out" "$T/err" 4 "$names"
	case $F in
	rank-*) target="r$TR" ;; unplug|flap) target=$IF ;;
	garbage|halfopen|badtoken|slowloris) target="127.0.0.1:$PORT" ;; *) target=- ;;
	esac
	[ -n "$ARG" ] && target="$target $ARG"
	bn=jaccl; [ "$B" = jaccl-ring ] && bn=jring
	# what a failed job said about its fault, next to the table: the lines naming it
	if [ -n "$TABLE" ] && [ "$rc" != 0 ]; then
		local l k=0
		{
			echo "== job $j ($bn $F $target, exit $rc): lines matching /$names/"
			while IFS= read -r l && [ $k -lt 8 ]; do [[ $l =~ $names ]] && { echo "  ${l:0:240}"; k=$((k + 1)); }; done <"$T/err"
		} >>"${TABLE%.txt}.named"
	fi
	chaos_row "$j" "$js" rxe4 "$bn" "$target" "$WHEN" "$rc" "$el" "$exit_left" "$T/err"
}

main() {
	local b t0 j saved
	# a clean job per backend: it must pass, and its time scales the fault moments
	for b in "${BACKENDS[@]}"; do
		t0=$(now_ms)
		TMPDIR=$T/tmp "$MESHRUN" --hostfile "${HF[$b]}" --backend "$b" -p 19999 --stdin none --timeout "$JOB_S" \
			--env MESHRUN_IB_GID_INDEX=0 --env MESHRUN_TIMEOUT="$PEER_S" -- "$ARTEST" -q --max-size "$MAXSIZE" \
			</dev/null >"$T/base" 2>&1 || { echo "a clean $b job failed:"; tail -20 "$T/base"; exit 2; }
		C_BASE[$b]=$(($(now_ms) - t0))
		echo "# a clean $b job: ${C_BASE[$b]} ms"
	done
	[ -z "$TABLE" ] || : >"$TABLE"
	[ -z "$TABLE" ] || : >"${TABLE%.txt}.named"
	row "# seed $SEED (jaccl, rxe guest)"
	row "$CHAOS_HEADER"
	seed_rng "$SEED"
	T_START=$(now_ms)
	local done_jobs=0
	for ((j = 1; j <= JOBS; j++)); do
		if [ "$BUDGET" -gt 0 ] && [ $(($(now_ms) - T_START)) -gt $((BUDGET * 1000)) ]; then
			row "# budget of ${BUDGET}s spent: $done_jobs of $JOBS jobs ran"
			break
		fi
		chaos_deal "${FAULTS[@]}"
		saved=$RNG
		run_job "$j" "$JS" "$DEALT" 2>>"$T/jobs.stderr"
		RNG=$saved
		done_jobs=$j
	done
	# bash's own complaints (and "Killed" notices) next to the table
	[ -z "$TABLE" ] || cp "$T/jobs.stderr" "${TABLE%.txt}.stderr" 2>/dev/null
	chaos_summary "$SEED" "$done_jobs" $((($(now_ms) - T_START) / 1000)) "${FAULTS[@]}"
	if [ $NBAD -ne 0 ]; then
		echo "FAIL - $NBAD of $done_jobs jaccl jobs hung, left something, gave a wrong result, an undocumented status or an unnamed failure (seed $SEED)"
		return 1
	fi
	echo "ok - $done_jobs jaccl jobs: no hang, leftover, wrong result or unnamed failure (seed $SEED)"
}
main "$@"; exit $?
