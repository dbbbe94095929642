#!/bin/bash
# mpishim_meshsim.sh MESHSIM MESHCONFIG MESHRUN PROG SHIM - issue 18: MLX's mpi
# backend (PROG, mpishim-mlx-test) on libmeshrun-mpi as 4 ranks in 4 meshsim
# hosts, over the simulated Thunderbolt cables (root).
#
# - `meshsim up ring:4` (cluster msh and random hex, state in a temporary
#   MESHSIM_STATE_DIR) and `meshconfig --auto-setup` give every cable its /30;
# - `meshrun --backend mpi --mpi-impl meshrun --hostfile <meshconfig's>
#   --ssh-config <meshsim's>` starts the ranks over ssh, no mpirun: every rank
#   must see MLX_HOSTFILE unset and MLX_MPI_LIBNAME = SHIM, and say ok through
#   libmeshrun's ring;
# - every cable carried at least 1 MiB each way (the ranks ran in 4 hosts over
#   the cables), nothing is left in the hosts, and `meshsim down` leaves nothing.
# Run it under flock /tmp/meshrun-ns.lock (ctest: RUN_SERIAL; developers: the lock).
set -u
MESHSIM=$1 MESHCONFIG=$2 MESHRUN=$3 PROG=$4 SHIM=$5
NAME=msh$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n') # one per run
FAILS=0

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "meshsim needs root (network namespaces, sshd)"
[ -x /usr/sbin/sshd ] || skip "sshd is not installed (openssh-server)"
ip netns add mshprobe$$ 2>/dev/null || skip "cannot create network namespaces here"
ip netns del mshprobe$$
for p in "$MESHSIM" "$MESHCONFIG" "$MESHRUN" "$PROG" "$SHIM"; do
	[ -e "$p" ] || { echo "FAIL - $p is not built"; exit 1; }
done

TMP=$(mktemp -d /tmp/msh-shim.XXXXXX)
export MESHSIM_STATE_DIR=$TMP/state
HOSTS=h1,h2,h3,h4
UP=0

strays() {
	local h p
	for h in ${HOSTS//,/ }; do
		for p in $(ip netns pids "$NAME-$h" 2>/dev/null); do
			case $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) in
			*"sshd "*"$MESHSIM_STATE_DIR/$NAME/"*) ;;
			"") ;;
			*) echo "$h $p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" ;;
			esac
		done
	done
}
nothing_left() {
	if ip netns list | grep -q "^$NAME-"; then echo "  left: namespace"; return 1; fi
	if ip -o link show | grep -q ": $NAME-"; then echo "  left: link"; return 1; fi
	if pgrep -f "$MESHSIM_STATE_DIR/" >/dev/null; then echo "  left: process $(pgrep -af "$MESHSIM_STATE_DIR/" | head -1)"; return 1; fi
	[ ! -e "$MESHSIM_STATE_DIR/$NAME" ] || { echo "  left: state dir"; return 1; }
}
cleanup() {
	local rc=$?
	# shellcheck disable=SC2317 # called by the EXIT trap
	if [ "$UP" -eq 1 ]; then
		strays | while read -r _ p _; do kill -9 "$p" 2>/dev/null; done
		"$MESHSIM" down "$NAME" >/dev/null 2>&1
		nothing_left || rc=1
	fi
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
if ! "$MESHSIM" up ring:4 --name "$NAME" >"$TMP/up.log" 2>&1; then
	fail "meshsim up ring:4 --name $NAME"; show "$TMP/up.log"; finish
fi
ok "meshsim up ring:4 --name $NAME"
CFG=$MESHSIM_STATE_DIR/$NAME/ssh_config
if "$MESHCONFIG" --hosts "$HOSTS" --over thunderbolt --backend ring --auto-setup --ssh-config "$CFG" \
	--output-hostfile "$TMP/hosts.json" >"$TMP/config.log" 2>&1; then
	ok "meshconfig --auto-setup: every cable has its /30"
else
	fail "meshconfig --auto-setup"; show "$TMP/config.log"; finish
fi
"$MESHSIM" status "$NAME" | sed -nE 's/^  ([^: ]+):([^ ]+) <-> ([^: ]+):([^ ]+).*$/\1 \2 \3 \4/p' >"$TMP/cables"
[ "$(wc -l <"$TMP/cables")" -eq 4 ] || { fail "ring:4 has 4 cables, meshsim status lists $(wc -l <"$TMP/cables")"; finish; }
tx() { ip netns exec "$NAME-$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }
while read -r ha ia hb ib; do
	echo "$ha $ia $(tx "$ha" "$ia") $hb $ib $(tx "$hb" "$ib")"
done <"$TMP/cables" >"$TMP/tx0"

# /bin/sh -c: each rank first says what it sees (the launch contract), then runs PROG
timeout -k 10 120 "$MESHRUN" --backend mpi --mpi-impl meshrun --hostfile "$TMP/hosts.json" \
	--ssh-config "$CFG" --env MESHRUN_TIMEOUT=20 -- /bin/sh -c \
	'echo "env: MLX_HOSTFILE=${MLX_HOSTFILE-unset} MLX_MPI_LIBNAME=$MLX_MPI_LIBNAME"; exec "$0" "$@"' \
	"$PROG" >"$TMP/run.log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then ok "meshrun --backend mpi --mpi-impl meshrun (4 meshsim hosts) exited 0"; else
	fail "meshrun --backend mpi --mpi-impl meshrun (4 meshsim hosts) exited $rc"; show "$TMP/run.log"
fi
n=$(grep -c "env: MLX_HOSTFILE=unset MLX_MPI_LIBNAME=$SHIM\$" "$TMP/run.log")
if [ "$n" -eq 4 ]; then ok "4 ranks with MLX_HOSTFILE unset and MLX_MPI_LIBNAME=$SHIM"; else
	fail "expected 4 ranks with MLX_HOSTFILE unset and MLX_MPI_LIBNAME=$SHIM, got $n"; show "$TMP/run.log"
fi
n=$(grep -cE 'rank [0-3] of 4: ok \(libmeshrun-mpi .*\(ring\)\)' "$TMP/run.log")
if [ "$n" -eq 4 ]; then ok "4 ranks of MLX's mpi calls on libmeshrun-mpi (ring): every check passed"; else
	fail "expected 4 'rank N of 4: ok (libmeshrun-mpi ... (ring))' lines, got $n"; show "$TMP/run.log"
fi
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
if [ -z "$left" ]; then ok "no rank left in any host"; else
	fail "processes left in the hosts:"; echo "$left" | show
fi
if "$MESHSIM" down "$NAME" >"$TMP/down.log" 2>&1; then ok "meshsim down $NAME"; else
	fail "meshsim down $NAME"; show "$TMP/down.log"
fi
UP=0
if nothing_left; then ok "nothing of $NAME left (namespaces, links, sshd, state)"; else
	fail "something of $NAME is left"
fi
finish
