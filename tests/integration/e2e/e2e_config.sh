#!/bin/bash
# meshconfig end to end (issue 4) on a meshsim cluster, through real sshd:
#   e2e_config.sh BIN_DIR FIXTURE_DIR|TOPOLOGY NAME
# - a host without passwordless sudo: every host's commands are printed, nothing changes;
# - --auto-setup: every cable's two ends get their /30 (MLX's plan when the fixture
#   records it) and ping each other across that cable's veth pair (link counters);
#   the hostfile is written (equal to the fixture's expected one, en0 addresses mapped);
# - a second run changes nothing on any host and writes the same hostfile, byte for byte.
# The cluster is brought up with --pretend-rdma: the fixture's RDMA devices are
# listed (not made), so the verdict and hostfile are the fixture's (jaccl, jaccl-ring).
. "$(dirname "$0")/lib.sh"
FIX=${2:?usage: $0 BIN_DIR FIXTURE NAME}
N=$(uniq_name "${3:?usage: $0 BIN_DIR FIXTURE NAME}")
case $FIX in /*) ;; *:*) ;; *) FIX=$SRC/$FIX ;; esac

up "$N" "$FIX" --pretend-rdma
nhosts=$(echo "$HOSTS" | tr ',' '\n' | wc -l)
H3=$(echo "$HOSTS" | cut -d, -f3)
echo "# fixture $FIX: hosts $HOSTS; no-sudo host: $H3"
cables "$N" >"$TMP/cables"
echo "# $(wc -l <"$TMP/cables") cables"

ip2int() { local IFS=.; set -- $1; echo $(( ($1 << 24) | ($2 << 16) | ($3 << 8) | $4 )); }
mc() { "$MESHCONFIG" --hosts "$HOSTS" --over thunderbolt --auto-setup --ssh-config "$CFG" "$@"; }

# 1. no passwordless sudo on one host: commands printed, no host changed.
check "fault nosudo $H3" "$MESHSIM" fault --name "$N" nosudo "$H3"
snapshot "$N" >"$TMP/snap0"
mc --output-hostfile "$TMP/hf.nosudo" >"$TMP/out.nosudo" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "no passwordless sudo" "$TMP/out.nosudo" && grep -q "^\[WARN\]  *- $H3\$" "$TMP/out.nosudo"; then
	ok "no-sudo host: meshconfig names $H3 and prints the commands instead (exit 0)"
else
	fail "no-sudo host: exit $rc, output:"; show "$TMP/out.nosudo"
fi
# the commands printed for H3 are its ifconfig/route lines
if sed -n "/^Setup for $H3\$/,/^\$/p" "$TMP/out.nosudo" | grep -Eq '^sudo ifconfig en[0-9]+ inet 192\.168\.[0-9]+\.[0-9]+ netmask 255\.255\.255\.252$'; then
	ok "the setup commands of $H3 are printed"
else
	fail "the setup commands of $H3 are printed"; show "$TMP/out.nosudo"
fi
snapshot "$N" >"$TMP/snap1"
if cmp -s "$TMP/snap0" "$TMP/snap1"; then ok "no host changed ($H3 included)"; else
	fail "a host changed without sudo"; diff "$TMP/snap0" "$TMP/snap1" | show
fi
check "fault sudo $H3" "$MESHSIM" fault --name "$N" sudo "$H3"

# 2. --auto-setup through ssh.
mc --output-hostfile "$TMP/hf1" >"$TMP/out1" 2>&1
rc=$?
if [ $rc -eq 0 ]; then ok "meshconfig --auto-setup (exit 0)"; else fail "meshconfig --auto-setup: exit $rc"; show "$TMP/out1"; fi
if [ -s "$TMP/hf1" ] && grep -q '"hosts"' "$TMP/hf1"; then ok "hostfile written"; else fail "hostfile written"; fi
for h in ${HOSTS//,/ }; do
	grep -q "\"ssh\": \"$h\"" "$TMP/hf1" || fail "hostfile names $h"
done
check "the hostfile of the no-sudo run is the same (same plan)" cmp "$TMP/hf.nosudo" "$TMP/hf1"

# every cable: both ends in the same /30 of 192.168/16, and a ping crosses its veth
while read -r ha ia hb ib; do
	aa=$(addr4 "$N" "$ha" "$ia"); ab=$(addr4 "$N" "$hb" "$ib")
	case "$aa $ab" in
	192.168.*/30\ 192.168.*/30)
		if [ $(( $(ip2int "${aa%/*}") >> 2 )) = $(( $(ip2int "${ab%/*}") >> 2 )) ] && [ "$aa" != "$ab" ]; then
			ok "$ha:$ia $aa <-> $hb:$ib $ab: one /30"
		else
			fail "$ha:$ia $aa <-> $hb:$ib $ab: not the same /30"
		fi
		;;
	*) fail "$ha:$ia '$aa' <-> $hb:$ib '$ab': no /30 address"; continue ;;
	esac
	tx=$(counter "$N" "$ha" "$ia" tx_packets); rx=$(counter "$N" "$hb" "$ib" rx_packets)
	if "$MESHSIM" exec --name "$N" "$ha" -- ping -c 3 -i 0.2 -W 2 -I "$ia" "${ab%/*}" >"$TMP/ping" 2>&1; then
		dtx=$(( $(counter "$N" "$ha" "$ia" tx_packets) - tx )); drx=$(( $(counter "$N" "$hb" "$ib" rx_packets) - rx ))
		if [ $dtx -ge 3 ] && [ $drx -ge 3 ]; then
			ok "$ha pings $hb ${ab%/*} over $ia (veth tx +$dtx, peer rx +$drx)"
		else
			fail "$ha -> $hb: ping did not cross $ha:$ia/$hb:$ib (tx +$dtx, rx +$drx)"
		fi
	else
		fail "$ha pings $hb ${ab%/*} over $ia"; show "$TMP/ping"
	fi
done <"$TMP/cables"

# MLX's addresses, when the fixture records them: "links": [[hA, ifA, ipA, hB, ifB, ipB], ...]
if [ -f "$FIX/cluster.json" ]; then
	tr -d ' \n\t' <"$FIX/cluster.json" | grep -o '"links":\[\(\[[^]]*\],\{0,1\}\)*\]' |
		grep -o '\[[^][]*\]' | tr -d '[]"' | tr ',' ' ' >"$TMP/links"
	nl=0 bad=0
	while read -r ha ia pa hb ib pb; do
		nl=$((nl + 1))
		[ "$(addr4 "$N" "$ha" "$ia")" = "$pa/30" ] && [ "$(addr4 "$N" "$hb" "$ib")" = "$pb/30" ] ||
			{ bad=1; echo "  $ha:$ia $(addr4 "$N" "$ha" "$ia") / $hb:$ib $(addr4 "$N" "$hb" "$ib"), expected $pa / $pb"; }
	done <"$TMP/links"
	if [ $nl -gt 0 ]; then
		[ $bad = 0 ] && ok "the $nl links carry the addresses of the fixture's expected plan" ||
			fail "the links carry the addresses of the fixture's expected plan"
	fi
	# the expected hostfile, with meshsim's management addresses mapped to the fixture's en0
	if command -v jq >/dev/null 2>&1 && jq -e '.expect.hostfile' "$FIX/cluster.json" >/dev/null 2>&1; then
		cp "$TMP/hf1" "$TMP/hf1.mapped"
		for h in ${HOSTS//,/ }; do
			m=$(awk -v h="$h" '$1=="Host"{f=($2==h)} f&&$1=="HostName"{print $2; exit}' "$CFG")
			e=$(jq -r --arg h "$h" '.hosts[] | select(.name == $h) | .en0 // empty' "$FIX/cluster.json")
			[ -n "$m" ] && [ -n "$e" ] && sed -i "s/\"$m\"/\"$e\"/g" "$TMP/hf1.mapped"
		done
		# meshrun's "mesh_ips" (full meshes only; MLX ignores the key) aside
		if [ "$(jq -S 'del(.hosts[].mesh_ips)' "$TMP/hf1.mapped")" = "$(jq -S .expect.hostfile "$FIX/cluster.json")" ]; then
			ok "the hostfile is the fixture's expected (MLX) hostfile, plus mesh_ips on a full mesh"
		else
			fail "the hostfile differs from the fixture's expected one"
			diff <(jq -S . "$TMP/hf1.mapped") <(jq -S .expect.hostfile "$FIX/cluster.json") | show
		fi
	else
		echo "# jq missing or no expected hostfile: hostfile not compared with the fixture's"
	fi
fi

# 3. a second run: nothing changes, same hostfile byte for byte
snapshot "$N" >"$TMP/snap2"
mc --output-hostfile "$TMP/hf2" >"$TMP/out2" 2>&1
rc=$?
[ $rc -eq 0 ] && ok "second run (exit 0)" || { fail "second run: exit $rc"; show "$TMP/out2"; }
check "second run writes the same hostfile (byte compare)" cmp "$TMP/hf1" "$TMP/hf2"
snapshot "$N" >"$TMP/snap3"
if cmp -s "$TMP/snap2" "$TMP/snap3"; then ok "second run changed nothing on any host ($nhosts hosts)"; else
	fail "second run changed a host"; diff "$TMP/snap2" "$TMP/snap3" | show
fi

check "only sshd runs in the hosts" only_sshd_left "$N"
down "$N"
finish
