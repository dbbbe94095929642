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
MESHSIM=$1 MESHCONFIG=$2 MESHRUN=$3 PROG=$4
. "$(dirname "$0")/meshsim_lib.sh" msm1
command -v mpirun >/dev/null || skip "mpirun not installed (openmpi-bin)"
command -v orted >/dev/null || skip "orted not installed (openmpi-bin)"
command -v ssh >/dev/null || skip "the OpenSSH client is not installed (mpirun starts orted with it)"
for p in "$MESHSIM" "$MESHCONFIG" "$MESHRUN" "$PROG"; do
	[ -x "$p" ] || { echo "FAIL - $p is not built"; exit 1; }
done

msl_up mesh:4 6
NET=$(ip -o -4 route show dev "$NAME-br" | awk '{ print $1; exit }')
[ -n "$NET" ] || { fail "no management subnet on $NAME-br"; finish; }

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

msl_tx_mark

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
msl_check_cables $((1 << 20))
msl_end
