#!/bin/bash
# Discovery follows the live cables, RDMA is reported only where it works
# (issue 14), on meshsim's 4-Mac mesh (fixtures/mesh4-m3ultra) through real sshd:
#   e2e_live.sh BIN_DIR
# - unplug: both system_profilers show the receptacle empty, both ifconfigs say
#   "status: inactive", and neither `ifconfig up` nor an address brings the
#   link back; meshconfig reports the missing cable (not a full mesh, --dot
#   without it); plug: the full mesh again, the recorded system_profiler;
# - a cable pulled while --auto-setup configures the hosts: exit 5 naming the
#   host and the interface (the post-setup ping check); plugged again: exit 0;
# - without soft-RoCE (no rdma_rxe): ibv_devices lists nothing, meshconfig writes
#   a ring hostfile and the all-reduce over it passes;
# - recable: a new cable between two free ports is discovered and carries
#   traffic; a cable moved away leaves its old peer's receptacle empty;
# - up --pretend-rdma: the fixture's devices are listed (jaccl hostfile), and
#   without rdma_rxe the jaccl job fails naming the flag.
. "$(dirname "$0")/lib.sh"
FIX=$SRC/fixtures/mesh4-m3ultra
N=$(uniq_name msl1)

S() { ssh -F "$CFG" -o ConnectTimeout=15 "$@"; } # generous: a loaded machine answers late
mc() { "$MESHCONFIG" --hosts "$HOSTS" --ssh-config "$CFG" "$@"; }
edges() { grep -c -- ' -- ' "$1"; }
empty_receptacles() { S "$1" system_profiler SPThunderboltDataType -json | grep -c '"receptacle_no_devices_connected"'; }
status_of() { S "$1" ifconfig "$2" | sed -n 's/^\tstatus: //p'; }
# has_carrier NAME HOST IF: the kernel's view of the link
has_carrier() { ip -n "$1-$2" -o link show dev "$3" | grep -q 'LOWER_UP'; }

up "$N" "$FIX"
H=(${HOSTS//,/ })
norxe=false
grep -q '^meshsim: no RDMA on every host' "$TMP/up.$N" && norxe=true
read -r ha ia hb ib < <(cables "$N" | awk -v a="${H[0]}" -v b="${H[1]}" '$1 == a && $3 == b' | head -1)
echo "# cable $ha:$ia <-> $hb:$ib; soft-RoCE missing: $norxe"
[ -n "$ib" ] || { fail "no cable between ${H[0]} and ${H[1]}"; finish; }

# 0. RDMA only where it exists
S "$ha" ibv_devices >"$TMP/ibv" 2>&1
if $norxe; then
	grep -q 'rdma_rxe' <(grep '^meshsim: no RDMA on' "$TMP/up.$N") &&
		ok "up names the hosts without RDMA and why (no rdma_rxe)" || fail "up's RDMA line: $(grep RDMA "$TMP/up.$N")"
	if ! grep -q rdma_ "$TMP/ibv" && grep -q 'node GUID' "$TMP/ibv"; then
		ok "$ha: ibv_devices lists no device (header only)"
	else
		fail "$ha: ibv_devices lists devices that do not exist"; show "$TMP/ibv"
	fi
else
	grep -q rdma_ "$TMP/ibv" && ok "$ha: ibv_devices lists the soft-RoCE devices" || fail "$ha: ibv_devices lists nothing"
fi

# 1. plugged: a full mesh
mc --output-hostfile "$TMP/hf0" >"$TMP/mc0" 2>&1
[ $? -eq 0 ] && grep -q '^verdict: mesh' "$TMP/mc0" && ok "meshconfig: verdict mesh" || { fail "meshconfig before unplug"; show "$TMP/mc0"; }
mc --dot >"$TMP/dot0" 2>/dev/null
check "--dot draws the 6 cables" test "$(edges "$TMP/dot0")" -eq 6
e_a=$(empty_receptacles "$ha"); e_b=$(empty_receptacles "$hb")

# 2. unplug
check "fault unplug $ha:$ia" "$MESHSIM" fault --name "$N" unplug "$ha:$ia"
check "$ha: system_profiler shows one more empty receptacle" test "$(empty_receptacles "$ha")" -eq $((e_a + 1))
check "$hb: system_profiler shows one more empty receptacle" test "$(empty_receptacles "$hb")" -eq $((e_b + 1))
check "$ha: ifconfig $ia says status: inactive" test "$(status_of "$ha" "$ia")" = inactive
check "$hb: ifconfig $ib says status: inactive" test "$(status_of "$hb" "$ib")" = inactive
S "$ha" "sudo ifconfig bridge0 down && sudo ifconfig $ia inet 192.168.99.1 netmask 255.255.255.252 && sudo ifconfig $ia up" &&
S "$hb" "sudo ifconfig bridge0 down && sudo ifconfig $ib inet 192.168.99.2 netmask 255.255.255.252 && sudo ifconfig $ib up"
check "ifconfig inet/up on both ends is accepted" test $? -eq 0
check "$ha: still inactive after ifconfig up" test "$(status_of "$ha" "$ia")" = inactive
if has_carrier "$N" "$ha" "$ia" || has_carrier "$N" "$hb" "$ib"; then fail "a pulled cable has a carrier"; else ok "no carrier at either end"; fi
if S "$ha" ping -c 1 -W 1 192.168.99.2 >/dev/null 2>&1; then fail "a ping crossed a pulled cable"; else ok "no ping crosses the pulled cable"; fi
mc --verbose --output-hostfile "$TMP/hf1" >"$TMP/mc1" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "not a full mesh: $ha is not cabled to $hb" "$TMP/mc1" &&
   grep -q '^verdict: ring, 4 hosts, 5 cables' "$TMP/mc1"; then
	ok "meshconfig reports the missing cable (not a full mesh: $ha-$hb, a ring without it)"
else
	fail "meshconfig after unplug: exit $rc"; show "$TMP/mc1"
fi
mc --dot >"$TMP/dot1" 2>/dev/null
check "--dot no longer draws it (5 cables)" test "$(edges "$TMP/dot1")" -eq 5
"$MESHSIM" status "$N" | grep -q "^  unplug $ha:$ia" && ok "status lists the fault" || fail "status lists the fault"

# 3. plug: everything back
check "fault plug $hb:$ib (the other end)" "$MESHSIM" fault --name "$N" plug "$hb:$ib"
S "$ha" system_profiler SPThunderboltDataType -json >"$TMP/sp.a"
check "$ha: system_profiler is the recorded one again" cmp -s "$TMP/sp.a" "$FIX/$ha/system_profiler.json"
check "$ha: ifconfig $ia says status: active" test "$(status_of "$ha" "$ia")" = active
S "$ha" "for i in 1 2 3 4 5; do ping -c 1 -W 1 192.168.99.2 >/dev/null && exit 0; done; exit 1"
check "the addresses set while unplugged work once plugged" test $? -eq 0
mc --output-hostfile "$TMP/hf2" >"$TMP/mc2" 2>&1
[ $? -eq 0 ] && grep -q '^verdict: mesh' "$TMP/mc2" && ok "meshconfig: the full mesh again" || { fail "meshconfig after plug"; show "$TMP/mc2"; }
mc --dot >"$TMP/dot2" 2>/dev/null
check "--dot draws the 6 cables again" test "$(edges "$TMP/dot2")" -eq 6

# 4. a cable pulled while --auto-setup configures it (after discovery saw it):
# a wrapper around $ha's ifconfig shim pulls it just before its address is set
bin=$MESHSIM_STATE_DIR/$N/$ha/bin
mv "$bin/ifconfig" "$bin/ifconfig.shim"
cat >"$bin/ifconfig" <<EOF
#!/bin/sh
if [ "\$1" = "$ia" ] && [ "\$2" = inet ] && [ ! -e "$TMP/pulled" ]; then
	: >"$TMP/pulled"
	MESHSIM_STATE_DIR="$MESHSIM_STATE_DIR" "$MESHSIM" fault --name "$N" unplug "$ha:$ia" >"$TMP/pull.log" 2>&1 || exit 1
fi
exec "$bin/ifconfig.shim" "\$@"
EOF
chmod +x "$bin/ifconfig"
mc --auto-setup --output-hostfile "$TMP/hf3" >"$TMP/mc3" 2>&1
rc=$?
mv "$bin/ifconfig.shim" "$bin/ifconfig"
if [ -e "$TMP/pulled" ] && [ $rc -eq 5 ] && grep -q "^\[ERROR\] $ha: $ia: no answer from .* ($hb) after setup" "$TMP/mc3"; then
	ok "--auto-setup with the cable pulled during setup: exit 5 naming $ha and $ia"
else
	fail "--auto-setup with a pulled cable: exit $rc (pulled: $([ -e "$TMP/pulled" ] && echo yes || echo no))"
	show "$TMP/mc3" "$TMP/pull.log"
fi
check "fault plug $ha:$ia" "$MESHSIM" fault --name "$N" plug "$ha:$ia"
mc --auto-setup --output-hostfile "$TMP/hf4" >"$TMP/mc4" 2>&1
rc=$?
[ $rc -eq 0 ] && ok "--auto-setup once plugged in: exit 0" || { fail "--auto-setup after plug: exit $rc"; show "$TMP/mc4"; }

# 5. no soft-RoCE: a ring hostfile, and its job runs
if $norxe; then
	check "no rdma_rxe: meshconfig wrote a ring hostfile" grep -q '"backend": "ring"' "$TMP/hf4"
	"$MESHRUN" --hostfile "$TMP/hf4" --ssh-config "$CFG" -- "$ARTEST" --max-size 1M -q </dev/null >"$TMP/ar" 2>&1
	rc=$?
	[ $rc -eq 0 ] && ok "the all-reduce over that hostfile passes" || { fail "all-reduce: exit $rc"; show "$TMP/ar"; }
fi

# 6. recable: a cable between two free ports, then one moved
hc=${H[2]} hd=${H[3]}
check "fault recable $ha:en6 $hc:en7 (two free ports)" "$MESHSIM" fault --name "$N" recable "$ha:en6" "$hc:en7"
"$MESHSIM" status "$N" | grep -q "^  $ha:en6 <-> $hc:en7\$" && ok "status lists the new cable" || fail "status lists the new cable"
check "$ha: ifconfig en6 says status: active" test "$(status_of "$ha" en6)" = active
mc --dot >"$TMP/dot3" 2>/dev/null
check "--dot draws the new cable (7 cables)" test "$(edges "$TMP/dot3")" -eq 7
S "$ha" "sudo ifconfig en6 inet 192.168.98.1 netmask 255.255.255.252" && S "$hc" "sudo ifconfig en7 inet 192.168.98.2 netmask 255.255.255.252"
check "addresses on the new cable" test $? -eq 0
tx=$(counter "$N" "$ha" en6 tx_packets)
S "$ha" "for i in 1 2 3 4 5; do ping -c 1 -W 1 192.168.98.2 >/dev/null && exit 0; done; exit 1"
check "a ping crosses the new cable" test $? -eq 0 -a "$(counter "$N" "$ha" en6 tx_packets)" -gt "$tx"
check "fault recable $ha:$ia $hd:en6 (moves the $ha-$hb cable)" "$MESHSIM" fault --name "$N" recable "$ha:$ia" "$hd:en6"
check "$hb: the old end's interface shows inactive" test "$(status_of "$hb" "$ib")" = inactive
check "$hb: one more empty receptacle than the recording" test "$(empty_receptacles "$hb")" -eq $((e_b + 1))
mc --verbose --output-hostfile "$TMP/hf5" >"$TMP/mc5" 2>&1
if grep -q "not a full mesh: $ha is not cabled to $hb" "$TMP/mc5" && grep -q '^verdict: ring, 4 hosts, 7 cables' "$TMP/mc5"; then ok "meshconfig: $ha-$hb is gone after the move"; else
	fail "meshconfig after the move"; show "$TMP/mc5"
fi
mc --dot >"$TMP/dot4" 2>/dev/null
check "--dot: 7 cables, two of them $ha-$hd" test "$(edges "$TMP/dot4")" -eq 7
down "$N"

# 7. --pretend-rdma: the verdict of the real Macs, and a jaccl job that names the flag
N2=$(uniq_name msl2)
up "$N2" "$FIX" --pretend-rdma
grep -q -- '--pretend-rdma' "$TMP/up.$N2" && ok "up says what --pretend-rdma does" || fail "up's --pretend-rdma line"
S "$ha" ibv_devices | grep -q rdma_ && ok "--pretend-rdma: ibv_devices lists the fixture's devices" || fail "--pretend-rdma: no devices listed"
mc --auto-setup --output-hostfile "$TMP/hfp" >"$TMP/mcp" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q '"backend": "jaccl"' "$TMP/hfp" && ok "meshconfig writes the fixture's jaccl hostfile" || { fail "meshconfig --pretend-rdma: exit $rc"; show "$TMP/mcp"; }
if $norxe; then
	"$MESHRUN" --hostfile "$TMP/hfp" --ssh-config "$CFG" --timeout 60 -- "$ARTEST" --max-size 64K -q </dev/null >"$TMP/arp" 2>&1
	rc=$?
	if [ $rc -ne 0 ] && grep -q 'meshsim up --pretend-rdma' "$TMP/arp"; then
		ok "the jaccl job fails naming --pretend-rdma (exit $rc)"
		grep -m1 'pretend-rdma' "$TMP/arp" | sed 's/^/# /'
	else
		fail "jaccl job under --pretend-rdma: exit $rc"; show "$TMP/arp"
	fi
fi
down "$N2"
finish
