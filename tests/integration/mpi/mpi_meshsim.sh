#!/bin/bash
# mpi_meshsim.sh MESHSIM MESHCONFIG MESHRUN PROG - issue 8: libmeshrun's mpi backend
# as 4 ranks in 4 meshsim hosts, over the simulated Thunderbolt cables (root).
#
# - `meshsim up mesh:4` (cluster msm1 and random hex, state in a temporary MESHSIM_STATE_DIR) and
#   `meshconfig --auto-setup` give every cable its /30 (192.168.x.y);
# - `meshrun --backend mpi --hostfile <meshconfig's hostfile> --ssh-config <meshsim's>`
#   runs PROG (meshrun-allreduce-test, every op and dtype, send/recv of 1 MiB between
#   every pair) under Debian's Open MPI: mpirun starts one orted per host over
#   OpenSSH with that ssh_config (meshrun passes "--mca plm_rsh_args -F FILE"; no
#   plm_rsh_args is given here, so the run only works through that), and the
#   ranks' traffic is restricted to the cables (pml ob1, btl tcp,self,
#   btl_tcp_if_include 192.168.0.0/16; host routes over the direct cables, see
#   below);
# - checks: exit 0, 4 summary lines "of 4 (mpi): ... 0 failed", each of the 6
#   cables carried at least 1 MiB each way (so the 4 ranks ran in 4 hosts and every
#   pair talked over its own cable), no rank or orted left in any host, and after
#   `meshsim down` nothing of the cluster is left.
#
# Under meshsim, orted needs two settings that real hosts do not (launchx's
# findings, bench/launch): oob_tcp_if_include <management subnet> (the orteds
# reach mpirun over en0, not the cables), and a TMPDIR per host: the namespaces
# share this machine's /tmp and hostname, and the 4 orteds would race for one
# session directory.
#
# ASAN_OPTIONS=detect_leaks=0 for the ranks: see mpi_run.sh.
set -u
MESHSIM=$1 MESHCONFIG=$2 MESHRUN=$3 PROG=$4
NAME=msm1$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n') # one per run
FAILS=0

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "meshsim needs root (network namespaces, sshd)"
command -v mpirun >/dev/null || skip "mpirun not installed (openmpi-bin)"
command -v orted >/dev/null || skip "orted not installed (openmpi-bin)"
command -v ssh >/dev/null || skip "the OpenSSH client is not installed (mpirun starts orted with it)"
[ -x /usr/sbin/sshd ] || skip "sshd is not installed (openssh-server)"
ip netns add msmprobe$$ 2>/dev/null || skip "cannot create network namespaces here"
ip netns del msmprobe$$
for p in "$MESHSIM" "$MESHCONFIG" "$MESHRUN" "$PROG"; do
	[ -x "$p" ] || { echo "FAIL - $p is not built"; exit 1; }
done

TMP=$(mktemp -d /tmp/msm-mpi.XXXXXX)
export MESHSIM_STATE_DIR=$TMP/state
HOSTS=h1,h2,h3,h4
UP=0

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

ok() { echo "ok - $*"; }
fail() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }
show() { sed 's/^/    | /' "$@" | head -80; }
finish() {
	[ "$FAILS" -eq 0 ] || { echo "$FAILS check(s) failed"; exit 1; }
	echo "all checks passed"
	exit 0
}

UP=1
if ! "$MESHSIM" up mesh:4 --name "$NAME" >"$TMP/up.log" 2>&1; then
	fail "meshsim up mesh:4 --name $NAME"; show "$TMP/up.log"; finish
fi
ok "meshsim up mesh:4 --name $NAME"
CFG=$MESHSIM_STATE_DIR/$NAME/ssh_config
NET=$(ip -o -4 route show dev "$NAME-br" | awk '{ print $1; exit }')
[ -n "$NET" ] || { fail "no management subnet on $NAME-br"; finish; }

if "$MESHCONFIG" --hosts "$HOSTS" --over thunderbolt --backend ring --auto-setup --ssh-config "$CFG" \
	--output-hostfile "$TMP/hosts.json" >"$TMP/config.log" 2>&1; then
	ok "meshconfig --auto-setup: every cable has its /30"
else
	fail "meshconfig --auto-setup"; show "$TMP/config.log"; finish
fi

# the cables "hostA ifA hostB ifB"
"$MESHSIM" status "$NAME" | sed -nE 's/^  ([^: ]+):([^ ]+) <-> ([^: ]+):([^ ]+).*$/\1 \2 \3 \4/p' >"$TMP/cables"
[ "$(wc -l <"$TMP/cables")" -eq 6 ] || { fail "mesh:4 has 6 cables, meshsim status lists $(wc -l <"$TMP/cables")"; finish; }

# Open MPI 4.1's TCP BTL pairs every local interface with some address of the
# peer, "PRIVATE DIFFERENT NETWORK" pairs included (it does not look at routes;
# --mca reachable netlink does not change that in 4.1), and stripes over all of
# them: with point-to-point /30s, h2's en3 (the cable to h3) is paired with h1's
# address on the h1-h3 cable, and connect() fails "Network is unreachable".
# So every host gets a /32 route to each of a peer's cable addresses through
# its own cable to that peer: whatever pair Open MPI picks, the bytes between
# two hosts cross the cable between them (the counters below check it).
cable_addrs() { ip -n "$NAME-$1" -4 -o addr show | awk '$4 ~ /^192\.168\./ { split($4, a, "/"); print a[1] }'; }
routes_ok=1
while read -r ha ia hb ib; do
	for x in $(cable_addrs "$hb"); do ip -n "$NAME-$ha" route replace "$x/32" dev "$ia" || routes_ok=0; done
	for x in $(cable_addrs "$ha"); do ip -n "$NAME-$hb" route replace "$x/32" dev "$ib" || routes_ok=0; done
done <"$TMP/cables"
n=$(for h in ${HOSTS//,/ }; do cable_addrs "$h"; done | wc -l)
if [ $routes_ok -eq 1 ] && [ "$n" -eq 12 ]; then ok "12 cable addresses, each routed over the direct cable from every other host"; else
	fail "cable routes (addresses: $n, want 12)"; finish
fi

# the tx byte counters of both ends of every cable before the run
tx() { ip netns exec "$NAME-$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }
while read -r ha ia hb ib; do
	echo "$ha $ia $(tx "$ha" "$ia") $hb $ib $(tx "$hb" "$ib")"
done <"$TMP/cables" >"$TMP/tx0"

mkdir "$TMP/orte"
# shellcheck disable=SC2016 # $$ is the remote shell's pid: one TMPDIR per orted
agent='env TMPDIR='"$TMP"'/orte/$$ orted'
timeout -k 10 400 "$MESHRUN" --verbose --backend mpi --hostfile "$TMP/hosts.json" --ssh-config "$CFG" \
	--env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
	--mpi-arg "--allow-run-as-root --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include 192.168.0.0/16" \
	--mpi-arg "--mca oob_tcp_if_include $NET" \
	--mpi-arg "--mca orte_launch_agent '$agent'" \
	-- "$PROG" --max-size 1M >"$TMP/run.log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then ok "meshrun --backend mpi --hostfile (4 meshsim hosts) exited 0"; else
	fail "meshrun --backend mpi --hostfile (4 meshsim hosts) exited $rc"; show "$TMP/run.log"
fi
# meshrun handed its --ssh-config to mpirun's ssh (no plm_rsh_args given above)
if grep -q "plm_rsh_args '-F $CFG'" "$TMP/run.log"; then ok "meshrun passed --ssh-config to mpirun as plm_rsh_args '-F $CFG'"; else
	fail "meshrun's mpirun command line has no plm_rsh_args '-F $CFG'"; show "$TMP/run.log"
fi
n=$(grep -cE 'rank [0-3] of 4 \(mpi\): [0-9]+ checks, 0 failed' "$TMP/run.log")
if [ "$n" -eq 4 ]; then ok "4 ranks of the mpi backend, 0 failed checks"; else
	fail "expected 4 summary lines 'rank N of 4 (mpi): ... 0 failed', got $n"; show "$TMP/run.log"
fi

# every cable carried the pair's 1 MiB send/recv each way (and more: the collectives)
min=$((1 << 20))
while read -r ha ia a0 hb ib b0; do
	da=$(($(tx "$ha" "$ia") - a0)) db=$(($(tx "$hb" "$ib") - b0))
	if [ "$da" -ge "$min" ] && [ "$db" -ge "$min" ]; then
		ok "cable $ha:$ia <-> $hb:$ib carried the ranks' traffic ($da / $db bytes sent)"
	else
		fail "cable $ha:$ia <-> $hb:$ib: $da / $db bytes sent, want >= $min each way"
	fi
done <"$TMP/tx0"

left=$(strays)
if [ -z "$left" ]; then ok "no rank or orted left in any host"; else
	fail "processes left in the hosts:"; echo "$left" | show
fi
if "$MESHSIM" down "$NAME" >"$TMP/down.log" 2>&1; then ok "meshsim down $NAME"; else
	fail "meshsim down $NAME"; show "$TMP/down.log"
fi
UP=0
if nothing_left; then ok "nothing of $NAME left (namespaces, links, sshd, ranks, state)"; else
	fail "something of $NAME is left"
fi
finish
