#!/bin/bash
# Two `meshsim up` at once from two suites (two state folders) whose cluster
# names hash to the same management subnet: each gets its own 10.230.K.0/24
# (the machine-wide subnet claim), both come up, both go down. Without the
# claim both picked the hint in the seconds before either bridge had its address.
# Then: a route this machine has inside the hint's /24 (here an unreachable one
# for .3, as a killed test could leave) moves `up` to another subnet, and every
# host of that cluster answers.
. "$(dirname "$0")/lib.sh"

# meshsim's hint: FNV-1a of the name, mod 250, plus 1 (sim/plan.c)
hint() {
	local s=$1 h=2166136261 i c
	for ((i = 0; i < ${#s}; i++)); do
		printf -v c '%d' "'${s:i:1}"
		h=$(( ((h ^ c) * 16777619) & 0xffffffff ))
	done
	echo $(( h % 250 + 1 ))
}
A=$(uniq_name sn) B=
want=$(hint "$A")
for _ in $(seq 5000); do
	n=$(uniq_name sn)
	[ "$n" != "$A" ] && [ "$(hint "$n")" = "$want" ] && { B=$n; break; }
done
[ -n "$B" ] || { fail "no second name with hint $want"; finish; }
ok "names $A and $B share the subnet hint $want"

mkdir -p "$TMP/a" "$TMP/b"
both_down() {
	MESHSIM_STATE_DIR=$TMP/a "$MESHSIM" down "$A" >/dev/null 2>&1
	MESHSIM_STATE_DIR=$TMP/b "$MESHSIM" down "$B" >/dev/null 2>&1
	cleanup
}
trap both_down EXIT
( MESHSIM_STATE_DIR=$TMP/a "$MESHSIM" up mesh:2 --name "$A" >"$TMP/a.log" 2>&1 ) &
pa=$!
( MESHSIM_STATE_DIR=$TMP/b "$MESHSIM" up mesh:2 --name "$B" >"$TMP/b.log" 2>&1 ) &
pb=$!
wait $pa; ra=$?
wait $pb; rb=$?
sa=$(sed -n 's/.*management \(10\.230\.[0-9]*\)\.0.*/\1/p' "$TMP/a.log")
sb=$(sed -n 's/.*management \(10\.230\.[0-9]*\)\.0.*/\1/p' "$TMP/b.log")
[ $ra = 0 ] && ok "up $A" || { fail "up $A: $(tail -3 "$TMP/a.log")"; }
[ $rb = 0 ] && ok "up $B" || { fail "up $B: $(tail -3 "$TMP/b.log")"; }
if [ -n "$sa" ] && [ -n "$sb" ] && [ "$sa" != "$sb" ]; then
	ok "distinct management subnets: $sa.0/24 and $sb.0/24"
else
	fail "management subnets '$sa' and '$sb' are not distinct"
fi
for c in "a $A" "b $B"; do
	set -- $c
	MESHSIM_STATE_DIR=$TMP/$1 "$MESHSIM" down "$2" >/dev/null 2>&1 || fail "down $2"
done
[ ! -e /run/meshsim-subnets/"${sa#10.230.}" ] || fail "the claim of $sa was left"
[ ! -e /run/meshsim-subnets/"${sb#10.230.}" ] || fail "the claim of $sb was left"
ip netns list | grep -qE "^($A|$B)-" && fail "namespaces left" || ok "nothing left"

C=$(uniq_name sr) ROUTE=
k=$(hint "$C")
routed_down() { [ -n "$ROUTE" ] && ip route del unreachable "$ROUTE" 2>/dev/null; both_down; }
trap routed_down EXIT
ip route add unreachable "10.230.$k.3/32" && ROUTE=10.230.$k.3/32 || fail "route 10.230.$k.3 unreachable"
MESHSIM_STATE_DIR=$TMP/a "$MESHSIM" up ring:3 --name "$C" >"$TMP/c.log" 2>&1
rc=$?
sc=$(sed -n 's/.*management \(10\.230\.[0-9]*\)\.0.*/\1/p' "$TMP/c.log")
if [ $rc = 0 ] && [ -n "$sc" ] && [ "$sc" != "10.230.$k" ]; then
	ok "a route left in 10.230.$k.0/24 (the hint of $C): up took $sc.0/24 instead"
else
	fail "up $C beside a route in its hint 10.230.$k: exit $rc, subnet '$sc': $(tail -3 "$TMP/c.log")"
fi
for h in h1 h2 h3; do
	ssh -F "$TMP/a/$C/ssh_config" -o ConnectTimeout=10 "$h" true </dev/null ||
		fail "$C: $h does not answer"
done
MESHSIM_STATE_DIR=$TMP/a "$MESHSIM" down "$C" >/dev/null 2>&1 || fail "down $C"
ip route del unreachable "$ROUTE" && ROUTE=
finish
