#!/bin/bash
# meshconfig --at-boot, --mtu and --undo end to end (issue 36), through real sshd:
#   e2e_at_boot.sh BIN_DIR
# On ring:3 (3 simulated Macs, 3 cables):
# - an end that refuses --mtu 9000 (meshsim fault maxmtu) is named with its
#   cable, meshconfig exits 5 and installs no LaunchDaemon;
# - --auto-setup --at-boot --mtu 9000: every host gets the LaunchDaemon
#   (root:wheel 0644) and its script (0755), every cable end has MTU 9000 and
#   a 9000-byte don't-fragment packet crosses every cable;
# - every host rebooted (meshsim fault reboot: ports back in bridge0, no
#   addresses, MTU 1500): each host's own launchd runs the LaunchDaemon, which
#   logs what it changed; every host is as configured again, and a job runs
#   with the same hostfile, meshconfig not run again; then one host rebooted
#   while idle: the same;
# - --undo: every host's addresses, routes, links (MTU, bridge membership),
#   bridge0's members and /Library are what they were before the setup, and
#   only sshd runs in the hosts.
. "$(dirname "$0")/lib.sh"
N=$(uniq_name msb)
up "$N" ring:3
HF=$TMP/hosts.json
mc() { "$MESHCONFIG" --hosts "$HOSTS" --ssh-config "$CFG" "$@"; }
S() { ssh -F "$CFG" -o ConnectTimeout=15 "$@" </dev/null; }

# What a reboot and --undo must restore on each host: lib.sh's snapshot
# (IPv4 addresses, routes, link admin states), then each link's MTU and master,
# bridge0 up or down and its members as `ifconfig bridge0` lists them
# (cable-less ports too), every file under /Library with its owner and mode.
hoststate() {
	local h
	snapshot "$N"
	for h in ${HOSTS//,/ }; do
		echo "== $h"
		ip -n "$N-$h" -o link show | awk '{ m = "-"; for (i = 1; i <= NF; i++) if ($i == "master") m = $(i + 1)
			print $2, "mtu", $5, "master", m }' | sed -E 's/@[^:]*//'
		"$MESHSIM" exec --name "$N" "$h" -- ifconfig bridge0 |
			awk 'NR == 1 { print "bridge0", ($0 ~ /<UP/ ? "up" : "down") } $1 == "member:" { print "member", $2 }'
		(cd "$MESHSIM_STATE_DIR/$N/$h/Library" && find . -printf '%p %U:%G %m\n' | sort)
	done
}
# wait_boot_runs HOST...: each host's LaunchDaemon has logged the end of a run
# that changed something (30 s at most)
wait_boot_runs() {
	local h t
	for h in "$@"; do
		for ((t = 0; t < 300; t++)); do
			grep -q 'change(s), 0 failure(s)' "$MESHSIM_STATE_DIR/$N/$h/Library/Logs/meshrun/meshconfig-at-boot.log" 2>/dev/null && break
			sleep 0.1
		done
	done
}
job() { # a 3-rank all-reduce over the cables with the hostfile of the setup
	"$MESHRUN" --hostfile "$HF" --ssh-config "$CFG" -- "$ARTEST" --max-size 64K </dev/null >"$TMP/job" 2>&1 &&
		[ "$(grep -c ' of 3 .*: .* 0 failed' "$TMP/job")" = 3 ]
}

hoststate >"$TMP/before"

# 1. an end that refuses the MTU
check "fault maxmtu h2:en3 1500" "$MESHSIM" fault --name "$N" maxmtu h2:en3 1500
mc --auto-setup --at-boot --mtu 9000 --backend ring --output-hostfile "$HF" >"$TMP/mc0" 2>&1
rc=$?
if [ $rc = 5 ] && grep -q '^\[ERROR\] cable h[0-9]:en[0-9] <-> h[0-9]:en[0-9]: h2:en3 refuses mtu 9000 (it has 1500)' "$TMP/mc0"; then
	ok "an end that refuses mtu 9000: its cable named, exit 5"
else
	fail "mtu refusal: exit $rc"; show "$TMP/mc0"
fi
check "no LaunchDaemon installed after the refusal" test ! -e "$MESHSIM_STATE_DIR/$N/h1/Library/LaunchDaemons/io.meshrun.meshconfig.plist"
check "fault maxmtu h2:en3 off" "$MESHSIM" fault --name "$N" maxmtu h2:en3 off

# 2. the setup, kept at boot, with jumbo frames
mc --auto-setup --at-boot --mtu 9000 --backend ring --output-hostfile "$HF" >"$TMP/mc1" 2>&1
rc=$?
[ $rc = 0 ] && ok "meshconfig --auto-setup --at-boot --mtu 9000 (exit 0)" || { fail "meshconfig --at-boot: exit $rc"; show "$TMP/mc1"; finish; }
for h in ${HOSTS//,/ }; do
	L=$MESHSIM_STATE_DIR/$N/$h/Library
	check "$h: the LaunchDaemon is root:wheel 0644, its script 0755" test \
		"$(stat -c '%u:%g %a' "$L/LaunchDaemons/io.meshrun.meshconfig.plist" "$L/Application Support/meshrun/meshconfig-at-boot.sh" | tr '\n' ' ')" = "0:0 644 0:0 755 "
	check "$h: launchd has it loaded (launchctl print)" S "$h" launchctl print system/io.meshrun.meshconfig >/dev/null
done
while read -r ha ia hb ib; do
	check "$ha:$ia and $hb:$ib at mtu 9000" test -n "$(ip -n "$N-$ha" link show dev "$ia" | grep ' mtu 9000 ')" \
		-a -n "$(ip -n "$N-$hb" link show dev "$ib" | grep ' mtu 9000 ')"
	peer=$(ip -n "$N-$hb" -4 -o addr show dev "$ib" | awk '{ sub(/\/.*/, "", $4); print $4 }')
	check "$ha -> $hb: 9000 bytes, don't fragment, over $ia" \
		ip netns exec "$N-$ha" ping -q -M do -s 8972 -c 1 -W 2 -I "$ia" "$peer" >/dev/null
done < <(cables "$N")
hoststate >"$TMP/configured"

# 3. every host reboots; the same hostfile works, meshconfig not run again
for h in ${HOSTS//,/ }; do
	"$MESHSIM" fault --name "$N" reboot "$h" >"$TMP/reboot.$h" 2>&1
	rc=$?
	[ $rc = 0 ] && grep -q 'loaded io.meshrun.meshconfig from /Library/LaunchDaemons' "$TMP/reboot.$h" &&
		ok "reboot $h: its launchd loaded io.meshrun.meshconfig" ||
		{ fail "reboot $h: exit $rc"; show "$TMP/reboot.$h"; }
done
wait_boot_runs ${HOSTS//,/ }
check "after the reboots, h1's LaunchDaemon logged taking en2 out of bridge0" \
	grep -q 'meshconfig-at-boot (h1): en2 out of bridge0' "$MESHSIM_STATE_DIR/$N/h1/Library/Logs/meshrun/meshconfig-at-boot.log"
hoststate >"$TMP/rebooted"
if cmp -s "$TMP/configured" "$TMP/rebooted"; then ok "after every host rebooted, every host is as configured"; else
	fail "a rebooted host differs from its setup"; diff "$TMP/configured" "$TMP/rebooted" | show
fi
check "a job runs with the same hostfile after every host rebooted" job || show "$TMP/job"

# 4. one host reboots while idle
: >"$MESHSIM_STATE_DIR/$N/h2/Library/Logs/meshrun/meshconfig-at-boot.log"
check "reboot h2 while idle" "$MESHSIM" fault --name "$N" reboot h2 >/dev/null
wait_boot_runs h2
hoststate >"$TMP/rebooted2"
check "after h2 rebooted, every host is as configured" cmp -s "$TMP/configured" "$TMP/rebooted2"
check "a job runs with the same hostfile after h2 rebooted" job || show "$TMP/job"

# 5. undo
mc --undo >"$TMP/undo" 2>&1
rc=$?
[ $rc = 0 ] && ok "meshconfig --undo (exit 0)" || { fail "meshconfig --undo: exit $rc"; show "$TMP/undo"; }
hoststate >"$TMP/after"
if cmp -s "$TMP/before" "$TMP/after"; then
	ok "after --undo every host is as before the setup (addresses, routes, links, MTUs, bridge0, /Library)"
else
	fail "--undo left a host changed"; diff "$TMP/before" "$TMP/after" | show
fi
check "only sshd runs in the hosts (no LaunchDaemon left running)" only_sshd_left "$N"
down "$N"
finish
