#!/bin/bash
# meshsim's Macs restart and run their LaunchDaemons (issue 36), over real sshd:
# - every host has a /Library of its own (nothing made under this machine's /);
# - launchctl refuses what launchd refuses (a plist not root:wheel or group
#   writable, without ProgramArguments, malformed), loads the rest: RunAtLoad,
#   StartInterval, bootout, print, list;
# - `fault reboot` ends the host's processes, puts its ports, addresses, routes,
#   MTUs and bridge0 back as at boot, empties its TMPDIR, keeps /Library, and
#   its launchd loads the good plists and logs why the others are not loaded;
# - the MTU is real on the veth pairs: a don't-fragment 9000-byte ping passes
#   only when both ends have 9000; `fault maxmtu` makes ifconfig refuse as
#   macOS does (a warning, exit 0); macOS's ping refuses 9000 bytes outside sudo.
. "$(dirname "$0")/lib.sh"
command -v unshare >/dev/null 2>&1 || skip "unshare (util-linux) is not installed"
N=$(uniq_name msl)
CLUSTERS=$N
CFG=$MESHSIM_STATE_DIR/$N/ssh_config
S() { ssh -F "$CFG" -o ConnectTimeout=15 "$@" </dev/null; }
lib0=$(test -e /Library && echo yes || echo no)

check "up ring:3" "$MESHSIM" up ring:3 --name "$N"
H=$MESHSIM_STATE_DIR/$N/h1
check "h1's /Library/LaunchDaemons is its own (empty, in its state folder)" \
	test "$(S h1 'ls -A /Library/LaunchDaemons; echo end')" = end -a -d "$H/Library/LaunchDaemons"
check "no /Library made on this machine" test "$(test -e /Library && echo yes || echo no)" = "$lib0"

# a plist ($1: file, $2: label, $3: the job's shell command) written as root on h1
plist() {
	ssh -F "$CFG" -o ConnectTimeout=15 h1 "cat >/Library/LaunchDaemons/$1" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>$2</string>
	<key>ProgramArguments</key>
	<array><string>/bin/sh</string><string>-c</string><string>$3</string></array>
	<key>RunAtLoad</key>
	<true/>
	<key>StartInterval</key>
	<integer>1</integer>
	<key>StandardOutPath</key>
	<string>/Library/Logs/$2.out</string>
</dict>
</plist>
EOF
}
plist a.plist t.a 'echo run'
S h1 "chmod 664 /Library/LaunchDaemons/a.plist"
out=$(S h1 launchctl bootstrap system /Library/LaunchDaemons/a.plist 2>&1); rc=$?
check "a group-writable plist: 'Bootstrap failed: 5', bad ownership/permissions" \
	test "$rc" = 5 -a -n "$(echo "$out" | grep -x 'Bootstrap failed: 5: Input/output error')" \
	-a -n "$(echo "$out" | grep 'bad ownership/permissions')"
S h1 "chmod 644 /Library/LaunchDaemons/a.plist; chown 1:0 /Library/LaunchDaemons/a.plist"
out=$(S h1 launchctl bootstrap system /Library/LaunchDaemons/a.plist 2>&1); rc=$?
check "a plist not owned by root: refused (exit 5)" test "$rc" = 5 -a -n "$(echo "$out" | grep 'owner 1:0')"
S h1 "chown 0:0 /Library/LaunchDaemons/a.plist"
S h1 "printf '<plist><dict><key>Label</key><string>t.b</string></dict></plist>' >/Library/LaunchDaemons/b.plist"
out=$(S h1 launchctl bootstrap system /Library/LaunchDaemons/b.plist 2>&1); rc=$?
check "no ProgramArguments: refused (exit 5)" test "$rc" = 5 -a -n "$(echo "$out" | grep 'neither Program nor ProgramArguments')"
S h1 "printf '<plist><dict><key>Label</key>' >/Library/LaunchDaemons/c.plist"
out=$(S h1 launchctl bootstrap system /Library/LaunchDaemons/c.plist 2>&1); rc=$?
check "a malformed plist: refused, the line named" test "$rc" = 5 -a -n "$(echo "$out" | grep 'line 1:')"

check "root:wheel 0644: bootstrap system" S h1 launchctl bootstrap system /Library/LaunchDaemons/a.plist
out=$(S h1 launchctl bootstrap system /Library/LaunchDaemons/a.plist 2>&1); rc=$?
check "bootstrap of a loaded label: exit 5, already loaded" test "$rc" = 5 -a -n "$(echo "$out" | grep 'already loaded')"
sleep 2.5
n=$(wc -l <"$H/Library/Logs/t.a.out")
check "RunAtLoad and StartInterval 1: the job ran $n times in 2.5 s (2 at least)" test "$n" -ge 2
check "launchctl list shows it" test -n "$(S h1 launchctl list | awk -F'\t' '$3 == "t.a"')"
check "launchctl print: runs and last exit code 0" test -n "$(S h1 launchctl print system/t.a | grep 'last exit code = 0')"
check "bootout system/t.a" S h1 launchctl bootout system/t.a
n=$(wc -l <"$H/Library/Logs/t.a.out")
sleep 1.5
check "after bootout the job runs no more" test "$(wc -l <"$H/Library/Logs/t.a.out")" = "$n"
out=$(S h1 launchctl print system/t.a 2>&1); rc=$?
check "print of an unloaded job: exit 113" test "$rc" = 113 -a -n "$(echo "$out" | grep 'Could not find service')"
out=$(S h1 launchctl load /Library/LaunchDaemons/a.plist 2>&1); rc=$?
check "the legacy 'load' is refused by name" test "$rc" = 1 -a -n "$(echo "$out" | grep "legacy 'load'")"

# h1 configured by hand, as meshconfig would, then rebooted
S h1 'ifconfig bridge0 deletem en2; ifconfig en2 inet 192.168.0.1 netmask 255.255.255.252;
	route -n change 192.168.0.2 -interface en2; ifconfig en2 mtu 9000; touch "$TMPDIR/x"' >/dev/null
S h1 "printf 'x' >/Library/LaunchDaemons/d.plist; chmod 666 /Library/LaunchDaemons/d.plist"
"$MESHSIM" fault --name "$N" reboot h1 >"$TMP/reboot" 2>&1; rc=$?
check "fault reboot h1 (exit 0)" test "$rc" = 0
check "its launchd loaded t.a from its own /Library/LaunchDaemons" grep -q 'loaded t.a from /Library/LaunchDaemons/a.plist' "$TMP/reboot"
check "and said why b, c, d were not loaded" test "$(grep -c 'not loaded:' "$TMP/reboot")" = 3
grep -q 'd.plist: not loaded: .*bad ownership' "$TMP/reboot" || { fail "d.plist: bad ownership not said"; sed 's/^/    | /' "$TMP/reboot"; }
check "h1 after reboot: en2 without an address" test -z "$(ip -n "$N-h1" -4 -o addr show dev en2)"
check "h1 after reboot: only the kernel's routes" test -z "$(ip -n "$N-h1" route show | grep -v 'proto kernel')"
check "h1 after reboot: en2 at mtu 1500" test -n "$(ip -n "$N-h1" link show dev en2 | grep ' mtu 1500 ')"
check "h1 after reboot: en2 and en3 in bridge0, which is up" \
	test "$(S h1 ifconfig bridge0 | awk '$1 == "member:" { printf "%s ", $2 }')" = "en2 en3 en4 " \
	-a -n "$(S h1 ifconfig bridge0 | sed -n 1p | grep '<UP,')"
check "h1 after reboot: its TMPDIR is empty, /Library kept" test ! -e "$H/tmp/x" -a -e "$H/Library/LaunchDaemons/a.plist"
sleep 1
check "h1 after reboot: t.a runs again" test -n "$(S h1 launchctl print system/t.a | grep 'runs = [1-9]')"
check "h1 runs its sshd, t.a's supervisor and no other process" \
	test "$(ip netns pids "$N-h1" | xargs -r ps -o args= -p | grep -cv -e 'sshd' -e 'meshsim-launchd')" = 0
check "h2 has no job" test "$(S h2 launchctl list | wc -l)" = 1

# the MTU on the veth pairs, and what refuses it
check "h1 and h2: en2 in 192.168.0.0/30, bridge0 down" \
	S h1 'ifconfig bridge0 down; ifconfig en2 inet 192.168.0.1 netmask 255.255.255.252'
S h2 'ifconfig bridge0 down; ifconfig en2 inet 192.168.0.2 netmask 255.255.255.252' >/dev/null
check "fault maxmtu h2:en2 1500" "$MESHSIM" fault --name "$N" maxmtu h2:en2 1500
out=$(S h2 ifconfig en2 mtu 9000 2>&1); rc=$?
check "h2: ifconfig en2 mtu 9000 refused as macOS does: a warning, exit 0, mtu 1500" \
	test "$rc:$out" = "0:ifconfig: ioctl (set mtu): Invalid argument" -a -n "$(S h2 ifconfig en2 | sed -n '1{/ mtu 1500$/p}')"
S h1 ifconfig en2 mtu 9000
check_not "9000 bytes don't-fragment from h1 (mtu 9000) to h2 (1500): lost" \
	S h1 sudo ping -D -s 8972 -c 1 -t 2 192.168.0.2 >/dev/null
check "fault maxmtu h2:en2 off" "$MESHSIM" fault --name "$N" maxmtu h2:en2 off
S h2 ifconfig en2 mtu 9000
check "both ends at 9000: the 9000-byte packet crosses the veth pair" \
	S h1 sudo ping -D -s 8972 -c 1 -t 2 192.168.0.2 >/dev/null
check_not "9001 bytes don't-fragment: refused" S h1 sudo ping -D -s 8973 -c 1 -t 2 192.168.0.2 >/dev/null 2>&1
out=$(S h1 ping -D -s 8972 -c 1 -t 2 192.168.0.2 2>&1); rc=$?
check "macOS's ping outside sudo: 9000 bytes fail, sendto: Message too long (exit 2)" \
	test "$rc" = 2 -a -n "$(echo "$out" | grep 'sendto: Message too long')"

check "down" "$MESHSIM" down "$N"
CLUSTERS=""
check "nothing of $N left (its launchd's jobs too)" nothing_left "$N"
check "no /Library left on this machine" test "$(test -e /Library && echo yes || echo no)" = "$lib0"
finish
