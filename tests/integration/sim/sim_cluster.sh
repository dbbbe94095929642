#!/bin/bash
# meshsim on a 4-host full mesh: shims over real sshd, traffic over the right
# veth, faults, exec, teardown, cleanup of a half-made cluster.
. "$(dirname "$0")/lib.sh"

# The shipped 4-host mesh fixture when there is one, else a generated one.
FIX=""
for d in "${MESHRUN_SOURCE_DIR:-/nonexistent}"/fixtures/*/; do
	[ -f "$d/cluster.json" ] || continue
	n=$(grep -c '"name": *"' "$d/cluster.json")
	if [ -d "$d/h1" ] && [ -d "$d/h4" ] && [ ! -d "$d/h5" ] && grep -q '"verdict": *"mesh"' "$d/cluster.json" &&
	   ! grep -q 'missing\|cables=' "$d/cluster.json"; then FIX=${d%/}; break; fi
done
if [ -z "$FIX" ]; then make_fixture mesh4 mesh:4; FIX=$TMP/mesh4; fi
echo "# fixture: $FIX"

N=$(uniq_name mst1)
N2=$(uniq_name mst2)
CLUSTERS="$N $N2"
CFG=$MESHSIM_STATE_DIR/$N/ssh_config
S() { ssh -F "$CFG" -o ConnectTimeout=15 "$@"; } # generous: a loaded machine answers late

check "up $FIX" sh -c '"$1" up "$2" --name "$3" >"$4" 2>&1' _ "$MESHSIM" "$FIX" "$N" "$TMP/up.out"
sed 's/^/# /' "$TMP/up.out"
check_not "a second up of the same name is refused" "$MESHSIM" up "$FIX" --name $N
check "ssh_config and known_hosts reach h1" S h1 true

for h in h1 h2; do
	S $h system_profiler SPThunderboltDataType -json >"$TMP/sp.$h"
	check "$h: system_profiler prints its fixture byte for byte" cmp -s "$TMP/sp.$h" "$FIX/$h/system_profiler.json"
	S $h networksetup -listallhardwareports >"$TMP/ns.$h"
	check "$h: networksetup prints its fixture" cmp -s "$TMP/ns.$h" "$FIX/$h/networksetup.txt"
done
S h1 ibv_devices >"$TMP/ibv.h1"
if grep -q '^meshsim: no RDMA on every host' "$TMP/up.out"; then
	# no rdma_rxe: the devices do not exist, and ibv_devices says so as it does without any
	check "h1: ibv_devices lists no device (no soft-RoCE here)" sh -c '! grep -q rdma_ "$1" && grep -q "node GUID" "$1"' _ "$TMP/ibv.h1"
else
	check "h1: ibv_devices prints its fixture" cmp -s "$TMP/ibv.h1" "$FIX/h1/ibv_devices.txt"
fi
check "h1: en0 has the management address" test "$(S h1 ipconfig getifaddr en0)" = "$(awk '$1=="Host"&&$2=="h1"{f=1} f&&$1=="HostName"{print $2; exit}' "$CFG")"

# The first cable between h1 and h2, and another cable of h1.
"$MESHSIM" status $N >"$TMP/status"
# without a name: one line per cluster that is up (issue 37)
grep -Eq "^$N: [0-9]+ hosts, " <("$MESHSIM" status) && ok "status without a name lists the cluster" ||
	fail "status without a name lists the cluster: $("$MESHSIM" status 2>&1 | head -3)"
cable=$(grep -E '^  h1:[^ ]+ <-> h2:' "$TMP/status" | head -1)
other=$(grep -E '^  h1:[^ ]+ <-> h[34]:' "$TMP/status" | head -1)
IF1=$(echo "$cable" | sed -E 's/^  h1:([^ ]+) <-> h2:(.*)$/\1/')
IF2=$(echo "$cable" | sed -E 's/^  h1:([^ ]+) <-> h2:(.*)$/\2/')
IFO=$(echo "$other" | sed -E 's/^  h1:([^ ]+) <-> .*$/\1/')
echo "# cable h1:$IF1 <-> h2:$IF2, other cable of h1: $IFO"
[ -n "$IF1" ] && [ -n "$IF2" ] && [ -n "$IFO" ] || { fail "status lists the cables"; finish; }

check "h1: shims configure the cable" S h1 "sudo ifconfig bridge0 down && sudo ifconfig $IF1 inet 192.168.77.1 netmask 255.255.255.252 && sudo route change 192.168.77.2 -interface $IF1"
check "h2: shims configure the cable" S h2 "sudo ifconfig bridge0 down && sudo ifconfig $IF2 inet 192.168.77.2 netmask 0xfffffffc && sudo route -n change 192.168.77.1 -interface $IF2"
check "h1: ipconfig getifaddr $IF1" test "$(S h1 ipconfig getifaddr $IF1)" = 192.168.77.1
check_not "h1: ipconfig getifaddr $IFO (no address) exits 1" S h1 ipconfig getifaddr $IFO
check_not "shim refuses a hostile interface name" S h1 "sudo ifconfig 'en0;true' inet 1.2.3.4 netmask 255.255.255.0"
check_not "shim refuses a bad netmask" S h1 "sudo ifconfig $IF1 inet 1.2.3.4 netmask 255.0.255.0"

ctr() { ip netns exec "$N-$1" cat "/sys/class/net/$2/statistics/$3"; }
tx1=$(ctr h1 $IF1 tx_packets); rx2=$(ctr h2 $IF2 rx_packets); txo=$(ctr h1 $IFO tx_packets)
check "h1 pings h2 over the cable" S h1 ping -c 5 -i 0.2 -W 2 192.168.77.2
dtx1=$(( $(ctr h1 $IF1 tx_packets) - tx1 )); drx2=$(( $(ctr h2 $IF2 rx_packets) - rx2 ))
dtxo=$(( $(ctr h1 $IFO tx_packets) - txo ))
echo "# packets: h1:$IF1 tx +$dtx1, h2:$IF2 rx +$drx2, h1:$IFO tx +$dtxo"
check "the pings crossed the veth of that cable (h1 tx)" test "$dtx1" -ge 5
check "the pings crossed the veth of that cable (h2 rx)" test "$drx2" -ge 5
check "no ping went over another cable" test "$dtxo" -lt 5

check "fault unplug h1:$IF1" "$MESHSIM" fault --name $N unplug h1:$IF1
check_not "ping fails while unplugged" S h1 ping -c 1 -W 1 192.168.77.2
grep -q "unplug h1:$IF1" <("$MESHSIM" status $N) && ok "status shows the unplugged cable" || fail "status shows the unplugged cable"
check "fault plug h2:$IF2 (the other end)" "$MESHSIM" fault --name $N plug h2:$IF2
S h1 "for i in 1 2 3 4 5; do ping -c 1 -W 1 192.168.77.2 >/dev/null && exit 0; done; exit 1"
[ $? -eq 0 ] && ok "ping works again after plug" || fail "ping works again after plug"

check "fault nosudo h3" "$MESHSIM" fault --name $N nosudo h3
msg=$(S h3 sudo -n true 2>&1); rc=$?
check "h3: sudo fails like sudo -n" test "$rc" -eq 1 -a "$msg" = "sudo: a password is required"
check "fault sudo h3" "$MESHSIM" fault --name $N sudo h3
check "h3: sudo works again" S h3 sudo -n true

check "fault stop h4" "$MESHSIM" fault --name $N stop h4
check_not "h4 is unreachable" ssh -F "$CFG" -o ConnectTimeout=2 h4 true
check "fault start h4" "$MESHSIM" fault --name $N start h4
check "h4 is reachable again" S h4 true
# sshd creates its pid file a moment before it writes the pid: a reader must
# take the empty file for "not yet" (it once crashed meshsim with SIGSEGV).
# A wrapper first on PATH holds that moment open for 0.3 s.
mkdir -p "$TMP/slowsshd"
printf '%s\n' '#!/bin/sh' 'pidf=$(awk '"'"'$1 == "PidFile" { print $2 }'"'"' "$2")' \
	': >"$pidf"; sleep 0.3; exec /usr/sbin/sshd "$@"' >"$TMP/slowsshd/sshd"
chmod +x "$TMP/slowsshd/sshd"
check "fault stop h4 (again)" "$MESHSIM" fault --name $N stop h4
check "fault start h4 while its sshd.pid is still empty" env PATH="$TMP/slowsshd:$PATH" "$MESHSIM" fault --name $N start h4
check "h4 is reachable after the slow start" S h4 true
cp "$MESHSIM_STATE_DIR/$N/h3/sshd.pid" "$MESHSIM_STATE_DIR/$N/h3/sshd.pid.keep"
: >"$MESHSIM_STATE_DIR/$N/h3/sshd.pid"
"$MESHSIM" status $N >"$TMP/status.empty"; rc=$?
check "status with an empty sshd.pid exits 0" test $rc -eq 0
check "status shows that sshd as stopped" grep -q "^  h3 .*sshd stopped" "$TMP/status.empty"
mv "$MESHSIM_STATE_DIR/$N/h3/sshd.pid.keep" "$MESHSIM_STATE_DIR/$N/h3/sshd.pid"

"$MESHSIM" fault --name $N latency h1:$IF1 5ms; rc=$?
case $rc in
0) ok "latency set"; check "latency cleared" "$MESHSIM" fault --name $N latency h1:$IF1 0 ;;
3) ok "latency: skipped, the kernel has no sch_netem" ;;
*) fail "fault latency exit $rc" ;;
esac

"$MESHSIM" exec --name $N h2 -- sh -c 'exit 7'; rc=$?
check "exec passes the exit code through" test $rc -eq 7
check "exec runs in the host with its shims" test "$("$MESHSIM" exec --name $N h2 -- ipconfig getifaddr $IF2)" = 192.168.77.2

check "down" "$MESHSIM" down $N
check "down left nothing (namespaces, links, sshd, state)" nothing_left $N

# A crash half-way: leftovers found by name prefix.
# The stray process must be inside the namespace before `down` runs (the
# background `ip netns exec` may not have entered it yet: then down cannot see
# it and it would outlive the test), and it must not hold the test's stdout.
mkdir -p "$MESHSIM_STATE_DIR/$N2"
ip netns add "$N2-h1" && ip link add "$N2-br" type bridge && ip link add "$N2-m0" type veth peer name en0 netns "$N2-h1"
ip netns exec "$N2-h1" sleep 300 </dev/null >/dev/null 2>&1 &
STRAY=$!
for _ in $(seq 100); do [ -n "$(ip netns pids "$N2-h1" 2>/dev/null)" ] && break; sleep 0.1; done
check "a stray process runs in the half-made host" test -n "$(ip netns pids "$N2-h1" 2>/dev/null)"
check "down cleans a half-made cluster" "$MESHSIM" down "$N2"
check "nothing of it is left" nothing_left "$N2"
running() { s=$(ps -o stat= -p "$1") && [ "${s#Z}" = "$s" ]; } # a zombie is not running
check_not "down killed the stray process" running "$STRAY"
kill -9 "$STRAY" 2>/dev/null
wait
finish
