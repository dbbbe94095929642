# shellcheck shell=bash disable=SC2034
# Shared by the end-to-end tests (meshsim + meshconfig + meshrun + libmeshrun):
# skip rules, assertions, cluster bring-up, cleanup and the "nothing left" checks.
#
#   . lib.sh BIN_DIR     BIN_DIR holds meshsim, meshconfig, meshrun, meshrun-allreduce-test
#
# Clusters are named mse<N> and random hex (uniq_name: one name per run, so that
# two suites can run on one machine); their state lives in a temporary
# MESHSIM_STATE_DIR that is removed at the end.
set -u
BIN=${1:?usage: $0 BIN_DIR}
BIN=$(cd "$BIN" && pwd) || exit 1
SRC=${MESHRUN_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
MESHSIM=$BIN/meshsim
MESHCONFIG=$BIN/meshconfig
MESHRUN=$BIN/meshrun
ARTEST=$BIN/meshrun-allreduce-test
FAILS=0
TMP=$(mktemp -d /tmp/mse-e2e.XXXXXX)
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
skip() { echo "SKIP: $*"; rm -rf "$TMP"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "end-to-end tests need root (network namespaces, sshd)"
for p in ip ssh ssh-keygen ping pgrep; do
	command -v "$p" >/dev/null 2>&1 || skip "'$p' is not installed"
done
[ -x /usr/sbin/sshd ] || skip "sshd is not installed (openssh-server)"
ip netns add mseprobe$$ 2>/dev/null || skip "cannot create network namespaces here"
ip netns del mseprobe$$
for p in "$MESHSIM" "$MESHCONFIG" "$MESHRUN" "$ARTEST"; do
	[ -x "$p" ] || { echo "FAIL - $p is not built"; rm -rf "$TMP"; exit 1; }
done

# Processes started from our build directory (ranks, meshrun) in any namespace.
our_pids() { pgrep -f "^$BIN/" 2>/dev/null; }
# Routes into meshsim's management range other than the bridges' own (a test
# that hides a host must not do it with a route that outlives it): those there
# before this test are not its doing.
sim_routes() { ip -o route show root 10.230.0.0/16 2>/dev/null | grep -v ' proto kernel '; }
ROUTES_BEFORE=$(sim_routes)

cleanup() {
	for p in $(our_pids); do kill -9 "$p" 2>/dev/null; done
	for c in $CLUSTERS; do "$MESHSIM" down "$c" >/dev/null 2>&1; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ok() { echo "ok - $*"; }
fail() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }
check() { # check DESCRIPTION CMD...: CMD must succeed
	local d=$1
	shift
	if "$@"; then ok "$d"; else fail "$d (exit $?)"; fi
}
finish() {
	if [ "$FAILS" -ne 0 ]; then echo "$FAILS check(s) failed"; exit 1; fi
	echo "all checks passed"
	exit 0
}
# Prints a file indented, for failure context.
show() { sed 's/^/    | /' "$@" | head -60; }

# up NAME FIXTURE [ARGS...]: brings a cluster up (ARGS: more options of meshsim
# up, e.g. --pretend-rdma); exits the test when it cannot.
# Sets CFG (its ssh_config) and HOSTS (comma list of its host names, fixture order).
up() {
	local name=$1 fix=$2
	shift 2
	set -- "$name" "$fix" "$@"
	CLUSTERS="$CLUSTERS $1"
	if ! "$MESHSIM" up "$2" --name "$1" "${@:3}" >"$TMP/up.$1" 2>&1; then
		# another run's cluster of that name: not ours to take down at exit
		grep -q "is up or left over" "$TMP/up.$1" && CLUSTERS=${CLUSTERS// $1/}
		fail "meshsim up $2 --name $1"
		show "$TMP/up.$1"
		finish
	fi
	ok "meshsim up $2 --name $1"
	CFG=$MESHSIM_STATE_DIR/$1/ssh_config
	HOSTS=$(awk '$1 == "Host" { printf "%s%s", sep, $2; sep = "," }' "$CFG")
}

# up_ring NAME [FIXTURE]: up (default fixtures/mesh4-m3ultra, relative to the
# source tree), then meshconfig --backend ring --auto-setup; writes the hostfile
# to $TMP/hosts.json and its ranks, "host ip" per line, to $TMP/ranks; exits
# the test when meshconfig fails.
up_ring() {
	local fix=${2:-fixtures/mesh4-m3ultra} rc
	case $fix in /*) ;; *:*) ;; *) fix=$SRC/$fix ;; esac
	up "$1" "$fix"
	"$MESHCONFIG" --hosts "$HOSTS" --backend ring --auto-setup --ssh-config "$CFG" \
		--output-hostfile "$TMP/hosts.json" >"$TMP/mc.out" 2>&1
	rc=$?
	[ $rc -eq 0 ] && ok "meshconfig --backend ring --auto-setup" || { fail "meshconfig: exit $rc"; show "$TMP/mc.out"; finish; }
	awk -F'"' '/"ssh":/ { h = $4 } /"ips":/ { getline; print h, $2 }' "$TMP/hosts.json" >"$TMP/ranks"
}

# cables NAME: "hostA ifA hostB ifB" per cable, from meshsim status.
cables() {
	"$MESHSIM" status "$1" | sed -nE 's/^  ([^: ]+):([^ ]+) <-> ([^: ]+):([^ ]+).*$/\1 \2 \3 \4/p'
}

# addr4 NAME HOST IF: the IPv4 address/prefix of IF in HOST ("" when none).
addr4() {
	"$MESHSIM" exec --name "$1" "$2" -- ip -4 -o addr show dev "$3" 2>/dev/null |
		awk '{ print $4; exit }'
}

# counter NAME HOST IF FIELD: a link statistic (tx_bytes, rx_packets, ...).
counter() { ip netns exec "$1-$2" cat "/sys/class/net/$3/statistics/$4"; }

# snapshot NAME: addresses, routes and link states of every host (to see changes).
snapshot() {
	local h
	for h in ${HOSTS//,/ }; do
		echo "== $h"
		ip -n "$1-$h" -4 -o addr show | awk '{ print $2, $4 }'
		ip -n "$1-$h" -4 route show
		# admin state only: carrier flags settle on their own just after bring-up
		ip -n "$1-$h" -o link show | awk '{ print $2, $3 }' | sed -E 's/@[^:]*//; s/(NO-CARRIER|LOWER_UP),?//g'
	done
}

# only_sshd_left NAME: every process in the cluster's namespaces is its sshd listener.
only_sshd_left() {
	local h p c bad=0
	for h in ${HOSTS//,/ }; do
		for p in $(ip netns pids "$1-$h" 2>/dev/null); do
			c=$( { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null) # read once: it may exit meanwhile
			case $c in
			*"sshd "*"$MESHSIM_STATE_DIR/$1/"*) ;;
			"") ;; # exited meanwhile
			*) echo "  left in $h: $p $c"; bad=1 ;;
			esac
		done
	done
	return $bad
}

# nothing_left NAME: no namespace, root link, process or state of the cluster,
# no process of ours (meshrun, ranks) anywhere, no route added to 10.230/16.
nothing_left() {
	local n=$1
	if ip netns list | grep -q "^$n-"; then echo "  left: namespace $(ip netns list | grep "^$n-" | head -1)"; return 1; fi
	if ip -o link show | grep -q ": $n-"; then echo "  left: link $(ip -o link show | grep ": $n-" | head -1)"; return 1; fi
	if pgrep -f "$MESHSIM_STATE_DIR/$n/" >/dev/null; then echo "  left: process $(pgrep -af "$MESHSIM_STATE_DIR/$n/" | head -1)"; return 1; fi
	if [ -n "$(our_pids)" ]; then echo "  left: $(pgrep -af "^$BIN/" | head -1)"; return 1; fi
	if [ -e "$MESHSIM_STATE_DIR/$n" ]; then echo "  left: state dir"; return 1; fi
	if [ "$(sim_routes)" != "$ROUTES_BEFORE" ]; then echo "  left: route $(sim_routes | head -1)"; return 1; fi
	return 0
}

# no_jobdir_left NAME: no meshrun job directory in any host's own TMPDIR
# (meshsim gives each host STATE/HOST/tmp), e.g. one whose watchdog died with
# its host (meshsim fault stop) and that no later job there swept.
no_jobdir_left() {
	local d bad=0
	for d in "$MESHSIM_STATE_DIR/$1"/*/tmp/meshrun.*; do
		[ -e "$d" ] && { echo "  left: job directory ${d#"$MESHSIM_STATE_DIR/$1/"}"; bad=1; }
	done
	return $bad
}

# down NAME: meshsim down, and check that nothing is left.
down() {
	check "no job directory left on any host of $1" no_jobdir_left "$1"
	check "meshsim down $1" "$MESHSIM" down "$1"
	check "nothing of $1 left (namespaces, links, sshd, ranks, state)" nothing_left "$1"
	CLUSTERS=${CLUSTERS// $1/}
}
