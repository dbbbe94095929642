#!/bin/bash
# Two `meshsim up` at once from two suites (two state folders) whose cluster
# names hash to the same management subnet: each gets its own 10.230.K.0/24
# (the machine-wide subnet claim), both come up, both go down. Without the
# claim both picked the hint in the seconds before either bridge had its address.
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
finish
