#!/bin/bash
# meshsim's cable faults as a job sees them (issue 14): a 4-rank ring all-reduce
# (meshrun-allreduce-test, one rank per simulated host, over the cables that
# meshconfig set up) under each fault, then after it is cleared:
#   rate       the same job takes longer than without it (never an absolute time)
#   loss       packets of that end are dropped (the nft counter), and the job
#              either succeeds or fails within its MESHRUN_TIMEOUT: never hangs
#   flap       the same, with the cable going down and up
#   partition  the job fails, naming a rank; a cable recabled across it is cut too
# each listed by `meshsim status`; after `down` no flapper is left.
#   e2e_faults.sh BIN_DIR
. "$(dirname "$0")/lib.sh"
command -v tc >/dev/null 2>&1 || skip "'tc' is not installed (iproute2)"
N=$(uniq_name msf)
check_not() { # check_not DESCRIPTION CMD...: CMD must fail
	local d=$1
	shift
	if "$@"; then fail "$d (it succeeded)"; else ok "$d"; fi
}

up_ring "$N"
n=$(wc -l <"$TMP/ranks")
[ "$n" -eq 4 ] || { fail "4 ranks in the hostfile"; show "$TMP/hosts.json"; finish; }
mapfile -t rhost < <(cut -d' ' -f1 "$TMP/ranks")
mapfile -t rip < <(cut -d' ' -f2 "$TMP/ranks")
ifof() { ip -n "$N-$1" -4 -o addr show | awk -v a="$2" '$4 ~ "^" a "/" { print $2; exit }'; }
HF=$TMP/ring.json
{
	printf '['
	for ((r = 0; r < n; r++)); do
		[ $r -gt 0 ] && printf ', '
		printf '["%s:%d"]' "${rip[$r]}" $((42000 + r))
	done
	printf ']\n'
} >"$HF"
# the end of rank 1's cable to rank 0 (its ring address is on it)
PORT=${rhost[1]}:$(ifof "${rhost[1]}" "${rip[1]}")
echo "# faults on $PORT"

# ring TAG TIMEOUT_S CAP_S [ARGS...]: the 4 ranks, each with MESHRUN_TIMEOUT;
# sets RC (space-separated exit codes, "hung" for a rank still running after
# CAP_S, then killed) and MS (wall time of the slowest rank).
ring() {
	local tag=$1 to=$2 cap=$3 t0 pids=() r i alive
	shift 3
	t0=$(date +%s%N)
	for ((r = 0; r < n; r++)); do
		setsid -w "$MESHSIM" exec --name "$N" "${rhost[$r]}" -- env MLX_RANK=$r MLX_HOSTFILE="$HF" \
			MESHRUN_JOB_TOKEN=e2e-faults-$$ MESHRUN_TIMEOUT="$to" \
			"$ARTEST" -q "$@" >"$TMP/$tag.r$r" 2>&1 &
		pids+=($!)
	done
	for ((i = 0; i < cap * 10; i++)); do
		alive=0
		for r in "${pids[@]}"; do kill -0 "$r" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	MS=$((($(date +%s%N) - t0) / 1000000))
	RC=""
	for ((r = 0; r < n; r++)); do
		if kill -0 "${pids[$r]}" 2>/dev/null; then
			RC="$RC hung"
			pkill -9 -s "$(ps -o sid= -p "${pids[$r]}" | tr -d ' ')" 2>/dev/null
			wait "${pids[$r]}" 2>/dev/null
		else
			wait "${pids[$r]}"
			RC="$RC $?"
		fi
	done
	RC=${RC# }
	echo "# $tag: exit codes $RC in $MS ms"
}
all_ok() { [ "$RC" = "0 0 0 0" ]; }
no_hang() { case " $RC " in *" hung "*) return 1 ;; esac; }
# The job either succeeded on every rank or failed within its timeout on all.
ok_or_failed() { all_ok || { no_hang && ! echo " $RC " | grep -q " 0 "; }; }
in_status() { "$MESHSIM" status "$N" | sed -n '/^faults:/,$p' | grep -q -- "$1"; }
qdisc() { ip netns exec "$N-${1%%:*}" tc qdisc show dev "${1#*:}" root; }

SIZE=(--max-size 256K)
ring base 10 60 "${SIZE[@]}"
all_ok && ok "the ring job runs without faults" || { fail "ring job without faults"; show "$TMP/base.r0"; finish; }
BASE=$MS

# ---- rate: both ends shaped, the job slower than before and after
check "fault rate $PORT 20mbit" "$MESHSIM" fault --name "$N" rate "$PORT" 20mbit
check "status lists the rate" in_status "^  rate .*20mbit"
peer=$(cables "$N" | awk -v h="${PORT%%:*}" -v i="${PORT#*:}" '$1 == h && $2 == i { print $3 ":" $4 } $3 == h && $4 == i { print $1 ":" $2 }')
check "tbf on $PORT" sh -c "ip netns exec '$N-${PORT%%:*}' tc qdisc show dev '${PORT#*:}' | grep -q 'tbf.*rate 20Mbit'"
check "tbf on the other end $peer (a cable limits both directions)" sh -c "ip netns exec '$N-${peer%%:*}' tc qdisc show dev '${peer#*:}' | grep -q 'tbf.*rate 20Mbit'"
ring rate 10 60 "${SIZE[@]}"
SLOW=$MS
all_ok && ok "the ring job runs over the 20mbit cable" || { fail "ring job over the shaped cable"; show "$TMP/rate.r0"; }
check "fault rate $peer off (either end clears it)" "$MESHSIM" fault --name "$N" rate "$peer" off
check_not "status no longer lists the rate" in_status "^  rate "
check_not "no tbf left on $PORT" sh -c "ip netns exec '$N-${PORT%%:*}' tc qdisc show dev '${PORT#*:}' | grep -q tbf"
ring after 10 60 "${SIZE[@]}"
all_ok && ok "the ring job runs after the rate is cleared" || fail "ring job after rate off"
echo "# all-reduce: ${BASE} ms before, ${SLOW} ms at 20mbit, ${MS} ms after"
check "the shaped cable made the job slower than before (${SLOW} > ${BASE} ms)" test "$SLOW" -gt "$BASE"
check "and slower than after it was cleared (${SLOW} > ${MS} ms)" test "$SLOW" -gt "$MS"

# ---- loss
"$MESHSIM" fault --name "$N" loss "$PORT" 5 >"$TMP/loss.out" 2>&1; rc=$?
if [ $rc -eq 3 ]; then
	ok "loss refused with exit 3: $(cat "$TMP/loss.out")"
else
	check "fault loss $PORT 5 (exit $rc)" test $rc -eq 0
	check "status lists the loss" in_status "^  loss $PORT 5%"
	ring loss 5 40 "${SIZE[@]}"
	check "with 5% loss the job succeeded or failed within its timeout (exit codes $RC)" ok_or_failed
	# dropped where the cable's other end receives (meshsim: netdev ingress there)
	drops=$(for ns in $(ip netns list | awk -v p="$N-" 'index($1, p) == 1 { print $1 }'); do
		ip netns exec "$ns" nft list table netdev meshsim_loss 2>/dev/null; done |
		awk '/counter packets/ { for (i = 1; i < NF; i++) if ($i == "packets") s += $(i + 1) } END { print s + 0 }')
	echo "# loss: ${drops:-?} packets dropped"
	check "packets of that end were dropped (${drops:-none})" test "${drops:-0}" -gt 0
	check "fault loss $PORT 0" "$MESHSIM" fault --name "$N" loss "$PORT" 0
	check_not "status no longer lists the loss" in_status "^  loss "
fi

# ---- flap
check "fault flap $PORT 1s" "$MESHSIM" fault --name "$N" flap "$PORT" 1s
check "status lists the flap" in_status "^  flap .* 1000ms"
sleep 0.5
check_not "the cable is down half a period in" sh -c "ip -n '$N-${PORT%%:*}' -o link show dev '${PORT#*:}' | grep -q ',UP'"
ring flap 3 40 "${SIZE[@]}"
check "with the cable flapping the job succeeded or failed within its timeout (exit codes $RC)" ok_or_failed
check "fault flap $PORT off" "$MESHSIM" fault --name "$N" flap "$PORT" off
check_not "status no longer lists the flap" in_status "^  flap "
check "the cable is up after the flap" sh -c "ip -n '$N-${PORT%%:*}' -o link show dev '${PORT#*:}' | grep -q '[<,]UP[,>]'"

# ---- partition
SPLIT="${rhost[0]},${rhost[1]}|${rhost[2]},${rhost[3]}"
check "fault partition '$SPLIT'" "$MESHSIM" fault --name "$N" partition "$SPLIT"
check "status lists the partition" in_status "^  partition $SPLIT"
check_not "${rhost[0]} cannot reach ${rhost[2]} on the management network" \
	ip netns exec "$N-${rhost[0]}" ping -c 1 -W 1 "$(awk -v h="${rhost[2]}" '$1=="Host"&&$2==h{f=1} f&&$1=="HostName"{print $2; exit}' "$CFG")"
check "${rhost[0]} still reaches ${rhost[1]}" \
	ip netns exec "$N-${rhost[0]}" ping -c 1 -W 1 "$(awk -v h="${rhost[1]}" '$1=="Host"&&$2==h{f=1} f&&$1=="HostName"{print $2; exit}' "$CFG")"
ring part 3 30 "${SIZE[@]}"
check "across the partition the job failed on every rank within its timeout (exit codes $RC)" \
	sh -c 'no_hang() { case " $1 " in *" hung "*|*" 0 "*) return 1 ;; esac; }; no_hang "$1"' _ "$RC"
named=$(grep -h "rank [0-9]" "$TMP"/part.r[0-3] | head -1)
echo "# partition: $named"
check "its error names a peer rank" test -n "$named"
# a recable while partitioned: the partition cuts cables, so the new cable
# across the cut is cut too (drawn again over the cables as they are now)
A=${rhost[0]} C=${rhost[2]}
check "fault recable $A:en6 $C:en6 (across the partition)" "$MESHSIM" fault --name "$N" recable "$A:en6" "$C:en6"
ip -n "$N-$A" addr add 192.168.97.1/30 dev en6 && ip -n "$N-$C" addr add 192.168.97.2/30 dev en6
check "addresses on the new cable" test $? -eq 0
check "status still lists the partition" in_status "^  partition $SPLIT"
check_not "nothing crosses the new cable across the partition" ip netns exec "$N-$A" ping -c 2 -W 1 192.168.97.2
check "fault heal" "$MESHSIM" fault --name "$N" heal
# (the failed ARP of the cut is remembered: forget it first)
ip -n "$N-$A" neigh flush dev en6
check "after heal a ping crosses the new cable" ip netns exec "$N-$A" sh -c \
	'for i in 1 2 3; do ping -c 1 -W 1 192.168.97.2 >/dev/null && exit 0; done; exit 1'
check_not "status no longer lists the partition" in_status "^  partition "
ring healed 10 60 "${SIZE[@]}"
all_ok && ok "the ring job runs again after heal" || { fail "ring job after heal"; show "$TMP/healed.r0"; }

# ---- down ends a running flapper
check "fault flap $PORT 200ms (left running for down)" "$MESHSIM" fault --name "$N" flap "$PORT" 200ms
FLAPPER=$(cat "$MESHSIM_STATE_DIR/$N/"*/flap-*.pid 2>/dev/null | head -1)
check "its flapper runs (pid ${FLAPPER:-none})" kill -0 "${FLAPPER:-0}"
down "$N"
gone() { for _ in $(seq 30); do s=$(ps -o stat= -p "$1") || return 0; [ "${s#Z}" != "$s" ] && return 0; sleep 0.1; done; return 1; }
check "down ended the flapper" gone "$FLAPPER"
finish
