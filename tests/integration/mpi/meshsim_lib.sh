# shellcheck shell=bash
# meshsim_lib.sh - shared by the mpi tests on a meshsim cluster (mpi_meshsim.sh:
# Open MPI's mpirun; mpishim_meshsim.sh: libmeshrun-mpi): skip rules, the
# cluster's bring-up and meshconfig --auto-setup, the cables, their traffic
# check, and the "nothing left" checks at the end.
#
#   MESHSIM=... MESHCONFIG=... PROG=...   (PROG: a rank program; none may outlive the test)
#   . meshsim_lib.sh PREFIX              the cluster is PREFIX and random hex
#   msl_up TOPOLOGY NCABLES              meshsim up, meshconfig -> $TMP/hosts.json,
#                                        the cables "hA ifA hB ifB" -> $TMP/cables
#   msl_tx_mark / msl_check_cables MIN   every cable sent >= MIN bytes each way since the mark
#   msl_end                              no process left in the hosts, meshsim down,
#                                        nothing of the cluster left; then finish
# Sets NAME, TMP, MESHSIM_STATE_DIR, HOSTS (h1,...), CFG (the cluster's ssh_config).
set -u
NAME=$1$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n') # one per run
FAILS=0
UP=0

ok() { echo "ok - $*"; }
fail() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }
show() { sed 's/^/    | /' "$@" | head -80; }
finish() {
	[ "$FAILS" -eq 0 ] || { echo "$FAILS check(s) failed"; exit 1; }
	echo "all checks passed"
	exit 0
}
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "meshsim needs root (network namespaces, sshd)"
[ -x /usr/sbin/sshd ] || skip "sshd is not installed (openssh-server)"
ip netns add msmprobe$$ 2>/dev/null || skip "cannot create network namespaces here"
ip netns del msmprobe$$

TMP=$(mktemp -d "/tmp/$1.XXXXXX")
export MESHSIM_STATE_DIR=$TMP/state
HOSTS=h1,h2,h3,h4
CFG=$MESHSIM_STATE_DIR/$NAME/ssh_config

# every process in the cluster's namespaces but its sshd listeners
strays() {
	local h p
	for h in ${HOSTS//,/ }; do
		for p in $(ip netns pids "$NAME-$h" 2>/dev/null); do
			case $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) in
			*"sshd "*"$MESHSIM_STATE_DIR/$NAME/"*) ;;
			"") ;; # exited meanwhile
			*) echo "$h $p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" ;;
			esac
		done
	done
}
nothing_left() {
	if ip netns list | grep -q "^$NAME-"; then echo "  left: namespace $(ip netns list | grep "^$NAME-" | head -1)"; return 1; fi
	if ip -o link show | grep -q ": $NAME-"; then echo "  left: link $(ip -o link show | grep ": $NAME-" | head -1)"; return 1; fi
	if pgrep -f "$MESHSIM_STATE_DIR/" >/dev/null; then echo "  left: process $(pgrep -af "$MESHSIM_STATE_DIR/" | head -1)"; return 1; fi
	if pgrep -f "^$PROG( |\$)" >/dev/null; then echo "  left: rank $(pgrep -af "^$PROG( |\$)" | head -1)"; return 1; fi
	[ ! -e "$MESHSIM_STATE_DIR/$NAME" ] || { echo "  left: state dir"; return 1; }
}
cleanup() {
	local rc=$? l
	# shellcheck disable=SC2317 # called by the EXIT trap
	if [ "$UP" -eq 1 ]; then
		strays | while read -r _ p _; do kill -9 "$p" 2>/dev/null; done
		"$MESHSIM" down "$NAME" >/dev/null 2>&1
		nothing_left || rc=1
	fi
	for l in $(pgrep -f "^$PROG( |\$)"); do kill -9 "$l" 2>/dev/null; done
	rm -rf "$TMP"
	exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

msl_up() { # msl_up TOPOLOGY NCABLES
	UP=1
	if ! "$MESHSIM" up "$1" --name "$NAME" >"$TMP/up.log" 2>&1; then
		fail "meshsim up $1 --name $NAME"; show "$TMP/up.log"; finish
	fi
	ok "meshsim up $1 --name $NAME"
	if "$MESHCONFIG" --hosts "$HOSTS" --over thunderbolt --backend ring --auto-setup --ssh-config "$CFG" \
		--output-hostfile "$TMP/hosts.json" >"$TMP/config.log" 2>&1; then
		ok "meshconfig --auto-setup: every cable has its /30"
	else
		fail "meshconfig --auto-setup"; show "$TMP/config.log"; finish
	fi
	"$MESHSIM" status "$NAME" | sed -nE 's/^  ([^: ]+):([^ ]+) <-> ([^: ]+):([^ ]+).*$/\1 \2 \3 \4/p' >"$TMP/cables"
	[ "$(wc -l <"$TMP/cables")" -eq "$2" ] ||
		{ fail "$1 has $2 cables, meshsim status lists $(wc -l <"$TMP/cables")"; finish; }
}

tx() { ip netns exec "$NAME-$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }
msl_tx_mark() { # the tx byte counters of both ends of every cable
	local ha ia hb ib
	while read -r ha ia hb ib; do
		echo "$ha $ia $(tx "$ha" "$ia") $hb $ib $(tx "$hb" "$ib")"
	done <"$TMP/cables" >"$TMP/tx0"
}
msl_check_cables() { # msl_check_cables MIN: every cable carried the ranks' traffic
	local ha ia a0 hb ib b0 da db
	while read -r ha ia a0 hb ib b0; do
		da=$(($(tx "$ha" "$ia") - a0)) db=$(($(tx "$hb" "$ib") - b0))
		if [ "$da" -ge "$1" ] && [ "$db" -ge "$1" ]; then
			ok "cable $ha:$ia <-> $hb:$ib carried the ranks' traffic ($da / $db bytes sent)"
		else
			fail "cable $ha:$ia <-> $hb:$ib: $da / $db bytes sent, want >= $1 each way"
		fi
	done <"$TMP/tx0"
}

msl_end() {
	local left
	left=$(strays)
	if [ -z "$left" ]; then ok "no rank left in any host"; else
		fail "processes left in the hosts:"; echo "$left" | show
	fi
	# every host's own TMPDIR (meshsim: STATE/HOST/tmp): no job directory
	left=$(for d in "$MESHSIM_STATE_DIR/$NAME"/*/tmp/meshrun.*; do [ -e "$d" ] && echo "$d"; done)
	if [ -z "$left" ]; then ok "no job directory left on any host"; else
		fail "job directories left:"; echo "$left" | show
	fi
	if "$MESHSIM" down "$NAME" >"$TMP/down.log" 2>&1; then ok "meshsim down $NAME"; else
		fail "meshsim down $NAME"; show "$TMP/down.log"
	fi
	UP=0
	if nothing_left; then ok "nothing of $NAME left (namespaces, links, sshd, ranks, state)"; else
		fail "something of $NAME is left"
	fi
	finish
}
