#!/bin/bash
# chaos.sh - the seeded fault campaign (issue 16 part 1): ring all-reduce jobs
# through meshrun on meshsim clusters, one random fault per job at a random
# moment, and for each job the promises of docs/contracts.md checked:
#
#   - meshrun exits within its bound: --timeout JOB_S plus GRACE_S (meshrun's
#     SIGTERM->SIGKILL grace of 3 s, ssh teardown); a job still running then is
#     a HANG (killed, counted);
#   - the exit status is one the contract allows for that fault (0; the first
#     failing rank's status, 2 for meshrun-allreduce-test's library error, 128+S;
#     124 for --timeout; 255 launcher; 130 for our SIGINT);
#   - a failed job names what failed: the rank, host, address or cable the fault
#     hit (or "--timeout" for 124); otherwise UNNAMED;
#   - afterwards no process of the job runs in any of the cluster's network
#     namespaces (only each host's sshd listener) and no job directory
#     (meshrun.*) exists on any host: every host's sessions get a TMPDIR of its
#     own, a tmpfs of its own (the full-disk fault fills exactly that), mounted
#     here before its sshd starts, so that it outlives a stopped host as a disk
#     would. A stopped host's directory goes only when the next job sets up
#     there (its watchdog died with it; docs/contracts.md, job directory
#     lifecycle): after a stop-host job a short job runs once the host is back,
#     and its directory must be gone then; LEFTOVER otherwise;
#   - a job that exits 0 printed "0 failed" for every rank, and no job printed a
#     wrong result (meshrun-allreduce-test checks every value): WRONG otherwise.
#
# The foreign connections (garbage, halfopen, badtoken, slowloris) go to every
# port the target rank listens on, whatever its backend, while it listens (its
# connection setup: the other ranks start once the connections are made), from the
# host at each cable's other end (foreign.py); "when" is the delay after the
# rank began to listen, "hit" that a rank accepted one (target: the accepted
# ports / the listening ones). A 124 after a bad cable (unplug, flap, loss) on
# a libmeshrun job must carry a rank's line naming it (CHAOS_STRICT_124=0 for
# the --timeout line alone).
#
# Every choice (cluster, fault, target, moment, parameters) comes from one
# 64-bit LCG seeded by --seed; job J's own seed is printed in its row, and
# --job-seed S replays that one job (same cluster, fault, moment).
#
# Job kinds (--backends, the "back" column; each job's seed picks one):
#   ring  meshrun-allreduce-test on libmeshrun's ring (every fault);
#   mpi   MLX's mpi backend (mpishim-mlx-test: dlopen of MLX_MPI_LIBNAME, MLX's
#         calls, every element checked) on libmeshrun-mpi: --backend mpi
#         --mpi-impl meshrun, no mpirun (every fault: libmeshrun underneath,
#         same listeners and job directory; its errors are fatal, exit 16 =
#         MPI_ERR_OTHER, src/mpishim/mpishim.h);
#   ompi  meshrun-allreduce-test under Debian's Open MPI (mpirun, orted over
#         ssh): mesh4 only, and only the faults in OMPI_FAULTS (no job
#         directory, no ring listener, no MaxSessions: mpirun's own ssh).
#
#   chaos.sh BIN_DIR [--seed N] [--jobs N] [--clusters mesh4,ring8]
#            [--backends ring,mpi,ompi] [--faults LIST] [--job-seed S] [--table FILE]
#            [--max-size SIZE] [--job-timeout S] [--peer-timeout S]
# CHAOS_KEEP=DIR keeps each job's stderr there; CHAOS_VERBOSE=1 runs the
# ranks with MLX_RING_VERBOSE=1 (libmeshrun's log: what TCP retransmitted...).
# Exit 0 when no job hung, left something, gave a wrong result or an unnamed or
# undocumented failure; 1 otherwise; 77 when it cannot run here (root, netns, sshd).
# Run by hand under `flock /tmp/meshrun-ns.lock` (clusters, namespaces).
BIN_ARG=${1:?usage: $0 BIN_DIR [options]}
shift
. "$(dirname "$0")/../integration/e2e/lib.sh" "$BIN_ARG"
for p in tc nft nsenter mount python3; do
	command -v "$p" >/dev/null 2>&1 || skip "'$p' is not installed"
done

MLX_SIZES=1,7,1000,70000
SEED="" JOBS=20 CLUSTER_LIST=mesh4,ring8 FAULT_LIST=all JOB_SEED="" TABLE="" MAXSIZE=1M BACKEND_LIST=ring
# LEFT_S: after a failed launch every host's watchdog waits a second before it
# removes (hal.h: a setup may still be making its directory), then ssh teardown;
# 3.9 s was seen on the loaded 2-core machine
JOB_S=20 PEER_S=3 GRACE_S=6 LEFT_S=5 KILL9_LEFT_S=3
# foreign connections: the other ranks start once foreign.py has made its
# connections and seen them accepted or not, at most this much later
FOREIGN_HOLD_MS=1500
CHAOS_DIR=$(cd "$(dirname "$0")" && pwd)
while [ $# -gt 0 ]; do
	case $1 in
	--seed) SEED=$2; shift ;;
	--jobs) JOBS=$2; shift ;;
	--clusters) CLUSTER_LIST=$2; shift ;;
	--faults) FAULT_LIST=$2; shift ;;
	--backends) BACKEND_LIST=$2; shift ;;
	--job-seed) JOB_SEED=$2; JOBS=1; shift ;;
	--table) TABLE=$2; shift ;;
	--max-size) MAXSIZE=$2; shift ;;
	--job-timeout) JOB_S=$2; shift ;;
	--peer-timeout) PEER_S=$2; shift ;;
	*) echo "chaos.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
	shift
done
[ -n "$SEED" ] || SEED=$(( $(od -An -N4 -tu4 /dev/urandom) ))
ALL_FAULTS="none rank-kill9 rank-stop rank-term meshrun-kill9 meshrun-int unplug flap loss latency
 stop-host partition garbage halfopen badtoken slowloris fulldisk maxsessions spew"
[ "$FAULT_LIST" = all ] && FAULT_LIST=$(echo $ALL_FAULTS | tr ' ' ,)
IFS=, read -r -a FAULTS <<<"$FAULT_LIST"
IFS=, read -r -a CLUSTER_KINDS <<<"$CLUSTER_LIST"
IFS=, read -r -a BACKENDS <<<"$BACKEND_LIST"
# Open MPI jobs (mpirun here, orted over ssh): on mesh4 only (every pair of hosts
# has its cable, see tests/integration/mpi/mpi_meshsim.sh), and the faults that
# concern ranks, meshrun, cables and hosts (no job directory, no ring listener)
OMPI_FAULTS=" none rank-kill9 rank-stop rank-term meshrun-kill9 meshrun-int unplug flap loss latency stop-host partition spew "
MLXTEST=$BIN/mpishim-mlx-test
for b in "${BACKENDS[@]}"; do
	case $b in
	ring) ;;
	mpi) [ -x "$MLXTEST" ] && [ -e "$BIN/../lib/libmeshrun-mpi.so" ] ||
		skip "--backends mpi: mpishim-mlx-test or lib/libmeshrun-mpi.so not built (a C++ compiler)" ;;
	ompi)
		command -v mpirun >/dev/null 2>&1 && command -v orted >/dev/null 2>&1 ||
			skip "--backends ompi: mpirun/orted not installed (openmpi-bin)"
		case ,$CLUSTER_LIST, in *,mesh4,*) ;; *) echo "chaos.sh: --backends ompi needs the mesh4 cluster" >&2; exit 2 ;; esac
		;;
	*) echo "chaos.sh: unknown backend '$b' (ring, mpi, ompi)" >&2; exit 2 ;;
	esac
done
echo "# chaos campaign: seed $SEED, $JOBS jobs, clusters ${CLUSTER_KINDS[*]}, backends ${BACKENDS[*]}, faults ${FAULTS[*]}"
echo "# bounds: --timeout ${JOB_S}s + ${GRACE_S}s grace; MESHRUN_TIMEOUT ${PEER_S}s; leftovers gone ${LEFT_S}s after exit (${KILL9_LEFT_S}s after kill -9 of meshrun)"

# the PRNG (seed_rng, rand, pick), the dealing of faults and job seeds, the
# judging of a job, its row and the summary: shared with the jaccl part
. "$(dirname "$0")/chaos_lib.sh"

# ---- clusters: NAME, hostfile, hosts, rank hosts/addresses/interfaces
declare -A C_NAME C_HF C_HOSTS C_N C_BASE
FIX_mesh4=fixtures/mesh4-m3ultra
FIX_ring8=fixtures/ring8
sshd_pid() { cat "$MESHSIM_STATE_DIR/$1/$2/sshd.pid" 2>/dev/null; }
# mount_tmp NAME HOST: the host's TMPDIR, $TMP/tmp/NAME-HOST, is a tmpfs of 8 MiB
# mounted here before meshsim up: the host's sshd (a mount namespace of its own,
# a private copy of ours) and the one a stop/start makes see it, and so do we.
# Each host has job directories of its own, the full-disk fault fills it, and
# what a stopped host left stays there for the next job's sweep, as on a disk.
# sshd's own files live under $TMP, hence not /tmp itself.
host_tmp() { echo "$TMP/tmp/$1-$2"; }
CHAOS_MOUNTS=()
mount_tmp() {
	local d
	d=$(host_tmp "$1" "$2")
	mkdir -p "$d" && mount -t tmpfs -o size=8m,mode=1777 "chaos-$1-$2" "$d" && CHAOS_MOUNTS+=("$d")
}
trap 'for m in "${CHAOS_MOUNTS[@]}"; do umount -l "$m"; done 2>/dev/null; cleanup' EXIT
# set_tmpdir NAME HOST: sshd gives every session TMPDIR (SetEnv; meshsim's own
# per-host one replaced), re-read on SIGHUP
set_tmpdir() {
	local cfg=$MESHSIM_STATE_DIR/$1/$2/sshd_config
	sed -i "s|TMPDIR=[^ ]*||; s|^SetEnv .*|& TMPDIR=$(host_tmp "$1" "$2")|" "$cfg"
	kill -HUP "$(sshd_pid "$1" "$2")"
}
# ssh_ok HOST: the host answers ssh (up to 10 s)
ssh_ok() {
	for _ in $(seq 50); do
		ssh -F "$CFG" -o ConnectTimeout=2 "$1" true </dev/null >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	return 1
}
in_host_mnt() { # in_host_mnt NAME HOST CMD...: CMD in the mount namespace of the host's sshd
	local n=$1 h=$2 pid
	shift 2
	pid=$(sshd_pid "$n" "$h") && [ -n "$pid" ] && nsenter -t "$pid" -m "$@"
}

bring_up() { # bring_up KIND
	local k=$1 n fix
	n=$(uniq_name "ch$k")
	n=${n:0:9}
	fix=FIX_$k
	[ -n "${!fix:-}" ] || { echo "chaos.sh: unknown cluster '$k' (mesh4, ring8)" >&2; exit 2; }
	local h
	for h in "$SRC/${!fix}"/*/; do
		h=${h%/}
		mount_tmp "$n" "${h##*/}" || { fail "a tmpfs TMPDIR for $k host ${h##*/}"; finish; }
	done
	up "$n" "$SRC/${!fix}"
	"$MESHCONFIG" --hosts "$HOSTS" --backend ring --auto-setup --ssh-config "$CFG" \
		--output-hostfile "$TMP/$k.json" >"$TMP/mc.$k" 2>&1 ||
		{ fail "meshconfig on $k"; show "$TMP/mc.$k"; finish; }
	C_NAME[$k]=$n C_HF[$k]=$TMP/$k.json C_HOSTS[$k]=$HOSTS
	awk -F'"' '/"ssh":/ { h = $4 } /"ips":/ { getline; print h, $2 }' "$TMP/$k.json" >"$TMP/$k.ranks"
	C_N[$k]=$(wc -l <"$TMP/$k.ranks")
	for h in ${HOSTS//,/ }; do
		mountpoint -q "$(host_tmp "$n" "$h")" && set_tmpdir "$n" "$h" || { fail "a tmpfs TMPDIR for $k host $h"; finish; }
	done
	for h in ${HOSTS//,/ }; do ssh_ok "$h" || { fail "$k host $h answers ssh after SIGHUP"; finish; }; done
	[ "$k" = mesh4 ] && case ,$BACKEND_LIST, in *,ompi,*) ompi_setup "$n" ;; esac
	ok "cluster $k: $n, ${C_N[$k]} ranks, a tmpfs TMPDIR per host"
}

# ompi_setup NAME: what Open MPI needs on mesh4 (tests/integration/mpi/mpi_meshsim.sh
# says why): a /32 route to each cable address of a peer over the direct cable,
# orted's out-of-band on the management subnet, a TMPDIR per orted.
OMPI_ARGS=()
ompi_setup() {
	local n=$1 ha ia hb ib x net agent
	cable_addrs() { ip -n "$n-$1" -4 -o addr show | awk '$4 ~ /^192\.168\./ { split($4, a, "/"); print a[1] }'; }
	while read -r ha ia hb ib; do
		for x in $(cable_addrs "$hb"); do ip -n "$n-$ha" route replace "$x/32" dev "$ia"; done
		for x in $(cable_addrs "$ha"); do ip -n "$n-$hb" route replace "$x/32" dev "$ib"; done
	done < <(cables "$n")
	net=$(ip -o -4 route show dev "$n-br" | awk '{ print $1; exit }')
	mkdir -p "$TMP/orte"
	# shellcheck disable=SC2016 # $$ is the remote shell's pid: one TMPDIR per orted
	agent='env TMPDIR='"$TMP"'/orte/$$ orted'
	OMPI_ARGS=(--mpi-arg "--allow-run-as-root --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include 192.168.0.0/16"
		--mpi-arg "--mca oob_tcp_if_include $net" --mpi-arg "--mca orte_launch_agent '$agent'")
}

# rank_host KIND R / rank_ip KIND R / rank_if KIND R
rank_host() { sed -n "$(($2 + 1))p" "$TMP/$1.ranks" | cut -d' ' -f1; }
rank_ip() { sed -n "$(($2 + 1))p" "$TMP/$1.ranks" | cut -d' ' -f2; }
rank_if() {
	ip -n "${C_NAME[$1]}-$(rank_host "$1" "$2")" -4 -o addr show |
		awk -v a="$(rank_ip "$1" "$2")" '$4 ~ "^" a "/" { print $2; exit }'
}
# rank_pid NAME HOST: the pid of our test program in that host's namespace
rank_pid() {
	local p
	for p in $(ip netns pids "$1-$2" 2>/dev/null); do
		case $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline") in "$ARTEST "* | "$MLXTEST "*) echo "$p"; return 0 ;; esac
	done
	return 1
}
# strays NAME HOSTS: every process in the cluster's namespaces but the sshd listeners
strays() {
	local h p c
	for h in ${2//,/ }; do
		for p in $(ip netns pids "$1-$h" 2>/dev/null); do
			c=$(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline")
			case $c in
			*"sshd "*"$MESHSIM_STATE_DIR/$1/"*) ;;
			"$MESHSIM fault "*) ;; # a flapper: the fault, not the job
			"") ;;
			*) echo "$h:$p:${c:0:60}" ;;
			esac
		done
	done
}
jobdirs() { # jobdirs NAME HOSTS: job directories left on the hosts (their tmpfs is ours too)
	local h d
	for h in ${2//,/ }; do
		for d in "$(host_tmp "$1" "$h")"/meshrun.*; do [ -e "$d" ] && echo "$h:$d"; done
	done
}

# ---- faults: inject KIND, clear KIND. Globals of the job: K (cluster kind),
# N (its name), F (fault), T* (targets), ARG (parameter), MPID (meshrun's pid).
FOREIGN_PID=""
# foreign MODE: a foreign connection to every port rank TR listens on, whatever
# its backend (foreign.py finds them in the rank's own socket table), from the
# host at each cable's other end, DELAY_MS after the rank began to listen; the
# helper's first line in $TMP/foreign says whether a rank accepted it (hit)
foreign() {
	local mode=$1 h peers=$TPEER
	for h in ${C_HOSTS[$K]//,/ }; do [ "$h" = "$TH" ] || [ "$h" = "$TPEER" ] || peers="$peers,$h"; done
	peers=$(echo "$peers" | sed "s/[^,]*/$N-&/g")
	setsid python3 "$CHAOS_DIR/foreign.py" "$mode" "$N-$TH" "$peers" "$ARTEST,$MLXTEST" "$WHEN" \
		"$TL" "${C_N[$K]}" "$GARBAGE" "$TMP/foreign.go" >"$TMP/foreign" 2>&1 &
	FOREIGN_PID=$!
}
# msfault ARGS...: meshsim fault; HIT=unsupported when this kernel cannot (exit 3)
msfault() {
	"$MESHSIM" fault --name "$N" "$@" >"$TMP/fault.out" 2>&1
	case $? in 0) ;; 3) HIT=unsup ;; *) HIT=failed; echo "# meshsim fault $*: $(cat "$TMP/fault.out")" ;; esac
}
CFG_OF() { echo "$MESHSIM_STATE_DIR/$N/$1/sshd_config"; }
inject() {
	local p
	case $F in
	none) ;;
	rank-kill9|rank-stop|rank-term)
		for _ in $(seq 100); do p=$(rank_pid "$N" "$TH") && break; kill -0 "$MPID" 2>/dev/null || break; sleep 0.05; done
		[ -n "$p" ] || { HIT=missed; return; }
		case $F in rank-kill9) kill -9 "$p" ;; rank-stop) kill -STOP "$p"; STOPPED=$p ;; rank-term) kill -TERM "$p" ;; esac
		;;
	meshrun-kill9) kill -9 "$MPID" ;;
	meshrun-int) kill -INT "$MPID" ;;
	unplug) msfault unplug "$TPORT" ;;
	flap) msfault flap "$TPORT" "$ARG" ;;
	loss) msfault loss "$TPORT" "$ARG" ;;
	latency) msfault latency "$TPORT" "$ARG" ;;
	stop-host) msfault stop "$TH" ;;
	partition) msfault partition "$ARG" ;;
	fulldisk) in_host_mnt "$N" "$TH" sh -c 'cat /dev/zero >"$0/chaos-fill"' "$(host_tmp "$N" "$TH")" 2>/dev/null ;;
	maxsessions)
		sed -i "s/^MaxSessions .*/MaxSessions $ARG/" "$(CFG_OF "$TH")"
		kill -HUP "$(sshd_pid "$N" "$TH")"
		;;
	esac
}
clear_fault() {
	case $F in
	rank-stop) [ -n "$STOPPED" ] && kill -CONT "$STOPPED" 2>/dev/null ;;
	unplug) "$MESHSIM" fault --name "$N" plug "$TPORT" ;;
	flap) "$MESHSIM" fault --name "$N" flap "$TPORT" off ;;
	loss) "$MESHSIM" fault --name "$N" loss "$TPORT" 0 ;;
	latency) "$MESHSIM" fault --name "$N" latency "$TPORT" 0 ;;
	stop-host) "$MESHSIM" fault --name "$N" start "$TH" ;; # its sshd sees the same TMPDIR
	partition) "$MESHSIM" fault --name "$N" heal ;;
	garbage|halfopen|badtoken|slowloris)
		[ -n "$FOREIGN_PID" ] && { pkill -9 -s "$FOREIGN_PID" 2>/dev/null; kill -9 "$FOREIGN_PID" 2>/dev/null; wait "$FOREIGN_PID" 2>/dev/null; }
		FOREIGN_PID=""
		;;
	fulldisk) in_host_mnt "$N" "$TH" rm -f "$(host_tmp "$N" "$TH")/chaos-fill" ;;
	maxsessions)
		sed -i "s/^MaxSessions .*/MaxSessions 30/" "$(CFG_OF "$TH")"
		kill -HUP "$(sshd_pid "$N" "$TH")"
		;;
	esac >/dev/null 2>&1
	# the host answers ssh again before the next job
	case $F in stop-host|maxsessions|partition) ssh_ok "$TH" ;; esac
}

# ---- the job kinds: job_cmd KIND sets cmd (the program) and bargs (meshrun's
# backend options); chaos_judge (chaos_lib.sh) knows each kind's result lines
job_cmd() {
	case $1 in
	ring) cmd=("$ARTEST" --max-size "$MAXSIZE") bargs=() ;;
	ompi) cmd=("$ARTEST" --max-size "$MAXSIZE") bargs=(--backend mpi "${OMPI_ARGS[@]}") ;;
	mpi) cmd=("$MLXTEST" --sizes "$MLX_SIZES") bargs=(--backend mpi --mpi-impl meshrun) ;;
	esac
}

# ---- one job
# run_job INDEX JOBSEED FAULT: the job's own choices all come from JOBSEED; its
# fault was dealt by the campaign (a shuffled deck of all faults per round, so
# that a short campaign still meets each of them), and JOBSEED picks it again
# from a deck of that one fault: --job-seed S --faults F replays it.
run_job() {
	local j=$1 js=$2 nr hosts t0 t1 rc=0 left="" verdict=ok note="" el
	seed_rng "$js"
	pick "${BACKENDS[@]}"; B=$P
	pick "${CLUSTER_KINDS[@]}"; K=$P
	[ "$B" = ompi ] && K=mesh4
	N=${C_NAME[$K]} nr=${C_N[$K]} hosts=${C_HOSTS[$K]} CFG=$MESHSIM_STATE_DIR/$N/ssh_config
	if [ "$B" = ompi ]; then
		local mf=() f
		for f in "${FAULTS[@]}"; do case $OMPI_FAULTS in *" $f "*) mf+=("$f") ;; esac; done
		[ ${#mf[@]} -gt 0 ] || mf=(none)
		case " ${mf[*]} " in *" $3 "*) mf=("$3") ;; esac
		pick "${mf[@]}"; F=$P
	else
		pick "$3"; F=$P
	fi
	# libmeshrun's TCP mesh (mpi jobs on a cluster whose hostfile has mesh_ips)
	# listens only for higher ranks: the highest has no listener to aim at
	local tn=$nr
	case $F:$B in garbage:mpi|halfopen:mpi|badtoken:mpi|slowloris:mpi)
		grep -q '"mesh_ips"' "${C_HF[$K]}" && tn=$((nr - 1)) ;;
	esac
	rand "$tn"; TR=$R; TL=$(((TR + nr - 1) % nr))
	TH=$(rank_host "$K" "$TR") TPORT=$TH:$(rank_if "$K" "$TR") TIP=$(rank_ip "$K" "$TR")
	TPEER=$(rank_host "$K" "$TL")
	FOREIGN=""
	# the moment: anywhere in a clean job's run
	local base=${C_BASE[$K.$B]}
	rand $((base + 1)); WHEN=$R
	ARG="" STOPPED="" HIT=hit GARBAGE=""
	local cmd bargs
	job_cmd "$B"
	# what a failed job must name: the target rank, its host or address
	local names="rank $TR[ :(]|$TH|$TIP"
	case $F in
	flap) rand 5; ARG=$((200 * (R + 1)))ms ;;
	loss) rand 30; ARG=$((R + 1)) ;;
	latency) rand 200; ARG=$((R + 5))ms ;;
	partition)
		local hs g1=() g2=() h
		read -r -a hs <<<"${hosts//,/ }"
		for h in "${hs[@]}"; do rand 2; if [ $R = 0 ]; then g1+=("$h"); else g2+=("$h"); fi; done
		[ ${#g1[@]} = 0 ] && { g1=("${g2[0]}"); g2=("${g2[@]:1}"); }
		[ ${#g2[@]} = 0 ] && { g2=("${g1[0]}"); g1=("${g1[@]:1}"); }
		ARG="$(IFS=,; echo "${g1[*]}")|$(IFS=,; echo "${g2[*]}")"
		names="rank [0-9]+[ :(]|$N" # any rank across the cut
		;;
	garbage)
		local i
		for i in $(seq 64); do rand 256; GARBAGE="$GARBAGE$(printf '%02x' "$R")"; done
		;;
	fulldisk|maxsessions)
		rand 2; [ $R = 0 ] && WHEN=-1 # half of them before the launch
		[ $F = maxsessions ] && { rand 2; ARG=$R; }
		;;
	spew)
		cmd=(/bin/sh -c 'if [ "${MLX_RANK:-$OMPI_COMM_WORLD_RANK}" = "$0" ]; then head -c 10000000 /dev/zero | tr "\0" x; fi; exec "$@"' "$TR" "${cmd[@]}")
		;;
	esac
	case $F in garbage|halfopen|badtoken|slowloris)
		# the moment: within the target's connection setup, the only time a
		# rank listens (coll/tcp/conn.c closes its listeners once its lanes are
		# up): WHEN ms after it began to listen; every other rank starts
		# once foreign.py is done ($TMP/foreign.go, at most FOREIGN_HOLD_MS
		# later), so that setup lasts whatever the machine's load and the
		# order in which ssh starts the ranks
		rand 250; WHEN=$R
		rm -f "$TMP/foreign.go"
		# shellcheck disable=SC2016 # the rank's shell expands them
		cmd=(/bin/sh -c 'if [ "${MLX_RANK:-$OMPI_COMM_WORLD_RANK}" != "$0" ]; then i=0; while [ $i -lt "$2" ] && [ ! -e "$1" ]; do sleep 0.05; i=$((i + 1)); done; fi; shift 2; exec "$@"' \
			"$TR" "$TMP/foreign.go" $((FOREIGN_HOLD_MS / 50)) "${cmd[@]}")
		;;
	esac
	[ $F = none ] && WHEN=-
	case $F in unplug|flap|loss|latency) names="$names|rank $TL[ :(]|$TPEER" ;; esac

	[ "$WHEN" = -1 ] && inject
	t0=$(now_ms)
	# SIGINT at its default: bash starts background commands with it ignored
	env --default-signal=INT "$MESHRUN" --hostfile "${C_HF[$K]}" --ssh-config "$CFG" --timeout "$JOB_S" "${bargs[@]}" \
		--env MESHRUN_TIMEOUT="$PEER_S" ${CHAOS_VERBOSE:+--env MLX_RING_VERBOSE=1} -- "${cmd[@]}" </dev/null >"$TMP/out" 2>"$TMP/err" &
	MPID=$!
	case $F in
	garbage|halfopen|badtoken|slowloris) foreign "$F" ;;
	none) ;;
	*) if [ "$WHEN" != -1 ]; then
		sleep "$(printf '%d.%03d' $((WHEN / 1000)) $((WHEN % 1000)))"
		kill -0 "$MPID" 2>/dev/null || HIT=late
		[ $HIT = late ] || inject
	fi ;;
	esac
	# wait for meshrun within its bound
	local bound=$(((JOB_S + GRACE_S) * 1000))
	while kill -0 "$MPID" 2>/dev/null && [ $(($(now_ms) - t0)) -lt $bound ]; do sleep 0.05; done
	t1=$(now_ms)
	el=$((t1 - t0))
	if kill -0 "$MPID" 2>/dev/null; then
		verdict=HANG note="meshrun still ran after $((bound / 1000)) s"
		kill -9 "$MPID"
	fi
	wait "$MPID" 2>/dev/null
	rc=$?
	case $F in garbage|halfopen|badtoken|slowloris)
		# our own connection goes before the leftover check (it lives in a
		# host); the helper decides within 1 s of its connections
		for _ in $(seq 60); do [ -s "$TMP/foreign" ] && break; sleep 0.05; done
		FOREIGN=$(head -1 "$TMP/foreign" 2>/dev/null)
		case $FOREIGN in "hit "*) HIT=hit ;; "missed no rank"*) HIT=late ;; *) HIT=missed ;; esac
		[ $HIT = hit ] || note="$note (foreign.py: ${FOREIGN:-no answer})"
		clear_fault
		;;
	esac

	# leftovers: within LEFT_S of the exit (kill -9 of meshrun: the watchdogs' 3 s)
	local lim=$LEFT_S
	[ $F = meshrun-kill9 ] && lim=$KILL9_LEFT_S
	# a stopped host's directory: checked after the next job (below)
	local others=$hosts
	[ $F = stop-host ] && others=$(echo ",$hosts," | sed "s/,$TH,/,/; s/^,//; s/,\$//")
	while :; do
		left="$(strays "$N" "$hosts") $(jobdirs "$N" "$others")"
		left=$(echo $left)
		[ -z "$left" ] && break
		[ $(($(now_ms) - t1)) -gt $((lim * 1000)) ] && break
		sleep 0.1
	done
	local exit_left=$(($(now_ms) - t1))
	clear_fault
	if [ $F = stop-host ] && [ -z "$left" ]; then
		# the host is back: the next job's setup there sweeps what its killed watchdog left
		"$MESHRUN" --hostfile "${C_HF[$K]}" --ssh-config "$CFG" --timeout "$JOB_S" -- true </dev/null >"$TMP/sweep.out" 2>&1 ||
			note="$note the job after the restart failed: $(head -c 200 "$TMP/sweep.out")"
		left=$(echo $(jobdirs "$N" "$hosts"))
		[ -z "$left" ] || note="$note not swept by the next job:"
	fi
	if [ -n "$left" ]; then
		[ $verdict = ok ] && verdict=LEFTOVER
		note="$note left after ${lim}s: ${left:0:200}"
		# clean up for the next job
		for p in $(strays "$N" "$hosts" | cut -d: -f2); do kill -9 "$p" 2>/dev/null; done
		for h in ${hosts//,/ }; do rm -rf "$(host_tmp "$N" "$h")"/meshrun.*; done
	fi

	# exit status, names, results (chaos_lib.sh)
	VERDICT=$verdict NOTE=$note
	chaos_judge "$rc" "$TMP/out" "$TMP/err" "$nr" "$names"
	local target=$TH
	case $F in rank-*) target="r$TR@$TH" ;; unplug|flap|loss|latency) target=$TPORT ;;
	partition) target=$ARG ;; garbage|halfopen|badtoken|slowloris) # accepted ports "of" the listening ones
		target="r$TR@$TIP:$(echo "$FOREIGN" | awk '$1 == "hit" { print $2 "/" $4 } $1 != "hit" { print "-" }')" ;;
	meshrun-*|none) target=- ;; spew) target="r$TR" ;; esac
	[ -n "$ARG" ] && [ $F != partition ] && target="$target $ARG"
	chaos_row "$j" "$js" "$K" "$B" "$target" "$WHEN" "$rc" "$el" "$exit_left" "$TMP/err"
	# CHAOS_KEEP=DIR: every job's whole stderr, for a diagnosis
	[ -z "${CHAOS_KEEP:-}" ] || cp "$TMP/err" "$CHAOS_KEEP/job$j-$js-$VERDICT.err"
}

# ---- the campaign (in a function: bash reads a script as it runs, and an edit
# of this file during a long campaign must not change the running one)
main() {
local k t0 j saved
for k in "${CLUSTER_KINDS[@]}"; do bring_up "$k"; done
# a clean job per cluster and kind: it must pass, and its time scales the fault moments
local b cmd bargs
for k in "${CLUSTER_KINDS[@]}"; do
	for b in "${BACKENDS[@]}"; do
		[ "$b" = ompi ] && [ "$k" != mesh4 ] && continue
		t0=$(now_ms)
		CFG=$MESHSIM_STATE_DIR/${C_NAME[$k]}/ssh_config
		job_cmd "$b"
		"$MESHRUN" --hostfile "${C_HF[$k]}" --ssh-config "$CFG" --timeout "$JOB_S" "${bargs[@]}" \
			--env MESHRUN_TIMEOUT="$PEER_S" -- "${cmd[@]}" </dev/null >"$TMP/out" 2>"$TMP/err" ||
			{ fail "a clean $b job on $k"; show "$TMP/out" "$TMP/err"; finish; }
		F=none HIT=hit B=$b VERDICT=ok NOTE=""
		chaos_judge 0 "$TMP/out" "$TMP/err" "${C_N[$k]}" "-"
		[ "$VERDICT" = ok ] || { fail "a clean $b job on $k: $NOTE"; show "$TMP/out"; finish; }
		C_BASE[$k.$b]=$(($(now_ms) - t0))
		ok "a clean $b job on $k: ${C_BASE[$k.$b]} ms"
	done
done
[ -z "$TABLE" ] || : >"$TABLE"
row "# seed $SEED"
row "# kinds: ring and mpi: every fault, both clusters; ompi (Open MPI's mpirun): mesh4, faults${OMPI_FAULTS% }"
row "$CHAOS_HEADER"
seed_rng "$SEED"
T_START=$(now_ms)
for ((j = 1; j <= JOBS; j++)); do
	chaos_deal "${FAULTS[@]}"
	saved=$RNG
	run_job "$j" "$JS" "$DEALT" 2>>"$TMP/jobs.stderr" # bash's "Killed" notices
	RNG=$saved
done
T_ALL=$((($(now_ms) - T_START) / 1000))

chaos_summary "$SEED" "$JOBS" "$T_ALL" "${FAULTS[@]}"
for k in "${CLUSTER_KINDS[@]}"; do down "${C_NAME[$k]}"; done
if [ $NBAD -ne 0 ]; then
	fail "$NBAD of $JOBS jobs hung, left something, gave a wrong result, an undocumented status or an unnamed failure (seed $SEED)"
else
	ok "$JOBS jobs: no hang, leftover, wrong result or unnamed failure (seed $SEED)"
fi
finish
}
main "$@"; exit $?
