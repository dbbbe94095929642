# Shared by the meshsim integration tests: skip rules, assertions, cleanup.
set -u
MESHSIM=${1:?usage: $0 path/to/meshsim}
FAILS=0
TMP=$(mktemp -d /tmp/mst-test.XXXXXX)
CLUSTERS=""
export MESHSIM_STATE_DIR=$TMP/state

# uniq_name PREFIX: PREFIX (6 characters at most) and random hex up to the 9
# characters meshsim allows, so that two runs of the suites on one machine
# never share a cluster (namespaces NAME-*, links, state).
uniq_name() {
	local p=${1:0:6} r
	r=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
	echo "$p${r:0:$((9 - ${#p}))}"
}
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "meshsim needs root (network namespaces, sshd)"
for p in ip ssh ssh-keygen ping; do
	command -v "$p" >/dev/null 2>&1 || skip "'$p' is not installed"
done
[ -x /usr/sbin/sshd ] || skip "sshd is not installed (openssh-server)"
ip netns add mstprobe$$ 2>/dev/null || skip "cannot create network namespaces here"
ip netns del mstprobe$$

cleanup() {
	for c in $CLUSTERS; do "$MESHSIM" down "$c" >/dev/null 2>&1; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ok() { echo "ok - $*"; }
fail() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }
check() { # check DESCRIPTION CMD...: CMD must succeed
	d=$1; shift
	if "$@"; then ok "$d"; else fail "$d (exit $?)"; fi
}
check_not() { # CMD must fail
	d=$1; shift
	if "$@"; then fail "$d (succeeded)"; else ok "$d"; fi
}

# Nothing of cluster $1 left: namespaces, root links, sshd processes, state.
nothing_left() {
	n=$1
	if ip netns list | grep -q "^$n-"; then echo "  left: namespace $(ip netns list | grep "^$n-" | head -1)"; return 1; fi
	if ip -o link show | grep -q ": $n-"; then echo "  left: link"; return 1; fi
	if pgrep -f "$MESHSIM_STATE_DIR/$n/" >/dev/null; then echo "  left: process"; return 1; fi
	if [ -e "$MESHSIM_STATE_DIR/$n" ]; then echo "  left: state dir"; return 1; fi
	return 0
}

finish() {
	if [ "$FAILS" -ne 0 ]; then echo "$FAILS check(s) failed"; exit 1; fi
	echo "all checks passed"
	exit 0
}

# A fixture folder for $2 (topology), in $TMP/$1: topo's generator through meshsim gen.
make_fixture() {
	"$MESHSIM" gen "$2" -o "$TMP/$1" >/dev/null || { echo "meshsim gen $2 failed"; exit 1; }
}
