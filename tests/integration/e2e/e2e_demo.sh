#!/bin/bash
# scripts/demo.sh without its build step, so the README's first command cannot rot:
#   e2e_demo.sh SOURCE_DIR BUILD_DIR
# As root: the simulated 4-Mac cluster (meshsim, meshconfig, meshrun over ssh) is
# brought up, every rank prints the right sum, and nothing is left afterwards.
# Always: the local form (--local, what a user without root gets).
set -u
SRC=${1:?usage: $0 SOURCE_DIR BUILD_DIR}
BUILD=${2:?usage: $0 SOURCE_DIR BUILD_DIR}
BIN=$BUILD/bin
# one name per run (random hex): two suites can run on one machine
N=mse5$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
TMP=$(mktemp -d /tmp/mse-demo.XXXXXX)
export MESHSIM_STATE_DIR=$TMP/state
FAILS=0
cleanup() {
	for p in $(pgrep -f "^$BIN/"); do kill -9 "$p" 2>/dev/null; done
	"$BIN/meshsim" down "$N" >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
ok() { echo "ok - $*"; }
fail() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }

nothing_left() {
	if ip netns list 2>/dev/null | grep -q "^$N-"; then echo "  left: namespace"; return 1; fi
	if ip -o link show 2>/dev/null | grep -q ": $N-"; then echo "  left: link"; return 1; fi
	if pgrep -f "^$BIN/" >/dev/null || pgrep -f "$MESHSIM_STATE_DIR/" >/dev/null; then
		echo "  left: $(pgrep -af "^$BIN/|$MESHSIM_STATE_DIR/" | head -1)"; return 1
	fi
	if [ -e "$MESHSIM_STATE_DIR/$N" ]; then echo "  left: state dir"; return 1; fi
	return 0
}

demo() { # demo LABEL EXPECT_REGEX ARGS...
	local label=$1 want=$2
	shift 2
	"$SRC/scripts/demo.sh" --no-build --build-dir "$BUILD" --name "$N" "$@" </dev/null >"$TMP/out" 2>&1
	local rc=$?
	if [ $rc -eq 0 ] && grep -q "all 4 ranks got the sum 1+2+...+4 = 10: OK" "$TMP/out" &&
	   [ "$(grep -c ': contributed [1-4], all_sum = 10 (expected 10);.*: OK$' "$TMP/out")" -eq 4 ] &&
	   grep -Eq "$want" "$TMP/out"; then
		ok "$label: 4 ranks print the sum 10"
	else
		fail "$label: exit $rc"
		sed 's/^/    | /' "$TMP/out" | tail -40
	fi
	if nothing_left; then ok "$label: nothing left"; else fail "$label: something left"; fi
}

if [ "$(id -u)" -eq 0 ] && [ -x /usr/sbin/sshd ] && ip netns add mseprobe$$ 2>/dev/null; then
	ip netns del mseprobe$$
	# ranks on the simulated Macs, talking over the cable addresses (a full
	# mesh: meshconfig writes mesh_ips, so meshrun runs the mesh backend)
	demo "demo on the simulated cluster" '^\[rank 3 m4\] rank 3 of 4 \(mesh\)'
	grep -q '"192\.168\.' "$TMP/out" && ok "hostfile of cable addresses shown" || fail "hostfile of cable addresses shown"
else
	echo "# not root or no network namespaces: the simulated-cluster demo is not tried here"
fi
demo "demo --local" '^\[rank 3 127\.0\.0\.1\] rank 3 of 4 \(ring\)' --local

if [ "$FAILS" -ne 0 ]; then echo "$FAILS check(s) failed"; exit 1; fi
echo "all checks passed"
