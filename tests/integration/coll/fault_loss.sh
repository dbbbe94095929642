#!/bin/bash
# fault_loss.sh RUN_RING PROG [-m|-local|-tx] - 30% packet loss on one data connection, as the
# chaos campaign's loss fault (meshsim) does it: nftables, numgen random ...
# drop, where the packets arrive (the input hook; meshsim: netdev ingress at the
# cable's other end), so that TCP sees real loss and retransmits; here on what
# rank 2 sends on that connection, in a network namespace of its own whose
# loopback gets a cable's MTU of 1500. TCP still delivers a segment now and
# then and the control lanes stay healthy, so the lanes' check (no byte for
# MESHRUN_TIMEOUT) never fires: only the data path's checks (coll/tcp/watch.c)
# end the job (or, on Linux, the data socket's TCP_USER_TIMEOUT). -local: the drops are on rank 2's own output instead, which
# its TCP takes for local failures to send, never retransmissions: there only
# the receiver's check in whole packets sees it, and must say the link stalls
# (60% there: TCP sends again at once after a local failure). The other three ranks must fail within
# MESHRUN_TIMEOUT + 8 s, each naming that connection (rank 2 and its peer
# there, either end first, with its address), as "the data link to rank N stalls";
# the other end first warns that the link is degraded.
# Root (namespace, nftables); 77 otherwise. -m: the mesh backend.
set -u
. "$(dirname "$0")/fault_lib.sh"
mode=${3:-} hook=input pct=30 size=16M tx=0
# local drops only slow TCP down where they are dense (it sends again at once)
[ "$mode" = -local ] && mode="" hook=output pct=60
# -tx: 15% loss under all_sums of 64K (packets of a few segments, each done
# well within the receiver's warning time, each collective shorter than the
# sender's sampling tick): only TCP's own count of what it retransmitted sees
# that link, across collectives (coll/tcp/watch.c); the chaos campaign's mesh4
# loss jobs ended at meshrun's --timeout unnamed this way
[ "$mode" = -tx ] && mode="" pct=15 size=64K tx=1
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a network namespace and nftables)"; exit 77; }
command -v nft >/dev/null 2>&1 || { echo "SKIP: 'nft' is not installed"; exit 77; }
ns=mrloss-$$
ip netns add "$ns" 2>/dev/null || { echo "SKIP: cannot create a network namespace"; exit 77; }
fault_extra_cleanup() { ip netns del "$ns" 2>/dev/null; }
ip -n "$ns" link set lo mtu 1500 up
export MESHRUN_TIMEOUT=2 MLX_RING_VERBOSE=${MLX_RING_VERBOSE:-}
FAULT_WRAP="ip netns exec $ns"
fault_start "$1" "$2" "$mode" "$size"
p2=$(fault_addr 2)
p2=${p2##*:}
# the data connection at rank 2's port: the one that carried the most
e=$(ip netns exec "$ns" ss -tinH state established "( sport = :$p2 )" |
	awk '/^[^ \t]/ { n = split($NF, a, ":"); peer = a[n] }
	     /bytes_acked:/ { match($0, /bytes_acked:[0-9]+/); n = substr($0, RSTART + 12, RLENGTH - 12) + 0;
			      if (n > best) { best = n; port = peer } }
	     END { print port }')
[ -n "$e" ] || { echo "FAIL: no data connection at rank 2's port $p2"; ip netns exec "$ns" ss -tin; exit 1; }
ip netns exec "$ns" nft -f - <<NFT || { echo "SKIP: nftables refused the loss rule"; exit 77; }
table inet mrloss {
	chain out {
		type filter hook $hook priority 0;
		tcp sport $p2 tcp dport $e numgen random mod 100 < $pct counter drop
	}
}
NFT
fault_wait_others
dropped=$(ip netns exec "$ns" nft list table inet mrloss | grep -o 'packets [0-9]*')
for f in "$out"/rank*.pid; do kill -9 "$(cat "$f")" 2>/dev/null; done
wait "$runner"
runner=
if [ $alive = 1 ]; then
	echo "FAIL: ranks still running ${took}s after $pct% loss began on rank 2's data connection (port $p2 -> $e, $dropped dropped; MESHRUN_TIMEOUT=2): the degraded link went unnoticed"
	tail -n 3 "$out"/rank*.out "$out"/rank*.err
	exit 1
fi
# the lossy connection's two ends see it (the loss hits rank 2's data and its
# acknowledgements of the other end's): the failure names one end, and the
# other end or its peer says so: our checks ("the data link to/from rank N"),
# or on Linux the data socket's TCP_USER_TIMEOUT ("send to rank N (addr):
# Connection timed out", rank 2 reporting its peer)
# Both ends may reach a verdict in the same instant ("the data link to rank 1
# stalls" at rank 2, "the data link from rank 2 loses packets" at rank 1), and
# each rank reports whichever notice came first: every rank must name that
# one connection, either end first, with that end's address.
link_msg() {
	grep -Eo "all_sum failed: (rank [0-9]+ \([^)]*\): the data link (to|from) rank [0-9]+ (stalls|loses packets)|(send to|recv from) rank [0-9]+ \([^)]*\): Connection timed out)" "$out/rank$1.err" | head -1
}
# link_ends MSG: "FIRST SECOND", the end named first (its address checked) and the other
link_ends() {
	local a b
	a=$(echo "$1" | grep -Eo "rank [0-9]+" | head -1 | grep -o "[0-9]*$")
	b=$(echo "$1" | grep -Eo "rank [0-9]+" | sed -n 2p | grep -o "[0-9]*$")
	echo "$a ${b:-2}"
}
msg=$(link_msg 0)
read -r culprit seer <<<"$(link_ends "$msg")"
if [ -z "$msg" ] || { [ "$culprit" != 2 ] && [ "$seer" != 2 ]; }; then
	echo "FAIL: rank 0 did not name the lossy connection's data link (rank 2 and its peer there):"
	cat "$out/rank0.err"
	exit 1
fi
fail=0
for r in $(echo 0 1 2 3 | tr ' ' '\n' | grep -vx "$culprit"); do
	m=$(link_msg "$r")
	read -r a b <<<"$(link_ends "$m")"
	if [ -n "$m" ] && { [ "$a $b" = "$culprit $seer" ] || [ "$a $b" = "$seer $culprit" ]; } &&
		echo "$m" | grep -qF "rank $a ($(fault_addr "$a"))"; then
		echo "ok: rank $r: $m"
	else
		echo "FAIL: rank $r did not name the link between rank $culprit and rank $seer:"
		cat "$out/rank$r.err"
		fail=1
	fi
done
addr=$(fault_addr "$culprit")
if [ $hook = output ]; then
	if ! echo "$msg" | grep -q "stalls$"; then
		echo "FAIL: local drops: the failure is not the receiver's 'stalls': $msg"; fail=1
	fi
	if ! grep -q "warning: the link from rank $culprit ($addr) to rank $seer is degraded" "$out/rank$seer.err"; then
		echo "FAIL: rank $seer did not warn that the link from rank $culprit is degraded"; fail=1
	fi
fi
# the sender's warning: the retransmitted share, or a drop of a whole window
# seen first (no acknowledgement for the warning time; one flag per link)
if [ $tx = 1 ] && ! grep -Eq "warning: the link from rank 2 to rank [0-9]* \([^)]*\) is degraded: (TCP retransmitted|no acknowledgement)" "$out"/rank2.err; then
	echo "FAIL: rank 2 did not warn that its link to its peer loses packets"; fail=1
fi
echo "ranks ended ${took}s after the loss began ($dropped dropped): $msg"
exit $fail
