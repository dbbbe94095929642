#!/bin/sh
# meshrun with local and remote hosts in one job (the hal's routing backend,
# src/hal/mux.c): 127.0.0.1 and localhost run by fork/exec, h1 and h2 of a
# meshsim cluster over ssh, all supervised from one poll loop. Root (meshsim).
# usage: mixed_test.sh BINDIR      cluster name: mslm and random hex (one per run)
set -u
BIN=$1
MESHSIM=$BIN/meshsim
MESHRUN=$BIN/meshrun
T=$BIN/meshrun-allreduce-test
N=mslm$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (meshsim: network namespaces, sshd)"
[ -x /usr/sbin/sshd ] || skip "sshd is not installed (openssh-server)"
for p in "$MESHSIM" "$MESHRUN" "$T"; do [ -x "$p" ] || skip "$p is not built"; done
ip netns add mslmprobe$$ 2>/dev/null || skip "cannot create network namespaces here"
ip netns del mslmprobe$$

D=$(mktemp -d /tmp/mslm-test.XXXXXX) || exit 1
export MESHSIM_STATE_DIR=$D/state
MARK=mslm-rank-$$
cleanup() {
	for p in $(pgrep -f "$MARK"); do kill -9 "$p" 2>/dev/null; done
	"$MESHSIM" down $N >/dev/null 2>&1
	rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
no_rank_left() {
	i=0
	while pgrep -f "$MARK" >/dev/null; do
		i=$((i + 1))
		[ $i -gt 30 ] && fail "$1: ranks left: $(pgrep -af "$MARK")"
		sleep 0.1
	done
}

"$MESHSIM" up mesh:4 --name $N >"$D/up" 2>&1 || fail "meshsim up: $(cat "$D/up")"
C=$MESHSIM_STATE_DIR/$N/ssh_config
mgmt=$(ip -o -4 addr show $N-br | awk '{ split($4, a, "/"); print a[1] }')
h1=$(ip netns exec $N-h1 ip -o -4 addr show en0 | awk '{ split($4, a, "/"); print a[1] }')
h2=$(ip netns exec $N-h2 ip -o -4 addr show en0 | awk '{ split($4, a, "/"); print a[1] }')
[ -n "$mgmt" ] && [ -n "$h1" ] && [ -n "$h2" ] || fail "no management addresses: '$mgmt' '$h1' '$h2'"
cat >"$D/hosts.json" <<EOF
[{"ssh": "127.0.0.1", "ips": ["$mgmt"]}, {"ssh": "h1", "ips": ["$h1"]},
 {"ssh": "h2", "ips": ["$h2"]}, {"ssh": "localhost", "ips": ["$mgmt"]}]
EOF

# 1. where each rank runs: local ranks have no en0 (they are not in a namespace)
"$MESHRUN" --hostfile "$D/hosts.json" --ssh-config "$C" --tag-output -- \
	sh -c 'echo "at $(ip -o -4 addr show en0 2>/dev/null | wc -l)"' >"$D/out" 2>&1 || fail "where: $? $(cat "$D/out")"
printf '%s\n' '[rank 0 127.0.0.1] at 0' '[rank 1 h1] at 1' '[rank 2 h2] at 1' '[rank 3 localhost] at 0' >"$D/want"
sort "$D/out" | cmp -s - "$D/want" || fail "ranks ran in the wrong places: $(cat "$D/out")"

# 2. the ring allreduce across local and remote ranks
"$MESHRUN" --hostfile "$D/hosts.json" --ssh-config "$C" -- "$T" --max-size 256K >"$D/out" 2>&1 ||
	fail "allreduce: exit $?: $(cat "$D/out")"
[ "$(grep -c ' of 4 (ring): .* 0 failed' "$D/out")" = 4 ] || fail "not 4 passing ranks: $(cat "$D/out")"

# 3. a remote rank fails: the local ranks (and the other remote one) are stopped
"$MESHRUN" --hostfile "$D/hosts.json" --ssh-config "$C" -- sh -c '
	if [ "$MLX_RANK" = 2 ]; then sleep 0.5; exit 4; fi
	exec sleep 300' "$MARK" >"$D/out" 2>&1
rc=$?
[ $rc = 4 ] || fail "remote failure: exit $rc, expected 4: $(cat "$D/out")"
grep -q 'rank 2 (h2): exit status 4' "$D/out" || fail "no summary: $(cat "$D/out")"
no_rank_left "after a remote rank failed"

# 4. a local rank fails: the remote ranks are stopped
"$MESHRUN" --hostfile "$D/hosts.json" --ssh-config "$C" -- sh -c '
	if [ "$MLX_RANK" = 3 ]; then sleep 0.5; exit 5; fi
	exec sleep 300' "$MARK" >"$D/out" 2>&1
rc=$?
[ $rc = 5 ] || fail "local failure: exit $rc, expected 5: $(cat "$D/out")"
no_rank_left "after a local rank failed"

# 5. a stopped remote host is reported by name before launch; nothing starts locally
"$MESHSIM" fault --name $N stop h2 >/dev/null 2>&1 || fail "meshsim fault stop h2"
"$MESHRUN" --hostfile "$D/hosts.json" --ssh-config "$C" -- sh -c 'exec sleep 300' "$MARK" >"$D/out" 2>&1
rc=$?
[ $rc = 255 ] && grep -q 'h2' "$D/out" || fail "stopped host: exit $rc: $(cat "$D/out")"
no_rank_left "after a stopped host"
echo "ok: mixed local and remote hosts"
exit 0
