#!/bin/bash
# meshsim's hosts log in like Macs (issue 14): over the cluster's ssh_config (the
# path meshrun and meshconfig take) every host runs commands with zsh, has its own
# hostname, says Darwin/arm64, answers sw_vers and sysctl from its fixture, and
# refuses GNU forms as macOS does; after a host's restart (fault stop/start) too.
# Nothing on the machine changes: /etc/passwd, the mount table and the hostname
# of the root namespaces are the same during and after the cluster.
. "$(dirname "$0")/lib.sh"
command -v zsh >/dev/null 2>&1 || skip "zsh is not installed (scripts/deps.sh installs it)"
command -v unshare >/dev/null 2>&1 || skip "unshare (util-linux) is not installed"

FIX=${MESHRUN_SOURCE_DIR:-$(cd "$(dirname "$0")/../../.." && pwd)}/fixtures/mesh4-m3ultra
N=z$$ # unique to this run
CLUSTERS=$N
CFG=$MESHSIM_STATE_DIR/$N/ssh_config
# a generous connect timeout: on a loaded 2-core machine sshd may answer late
S() { ssh -F "$CFG" -o ConnectTimeout=15 "$@" </dev/null; }
passwd0=$(md5sum </etc/passwd)
host0=$(hostname)

check "up $FIX" "$MESHSIM" up "$FIX" --name $N
hosts=$(awk '$1 == "Host" { print $2 }' "$CFG")
for h in $hosts; do
	check "$h: the login shell is zsh (\$ZSH_VERSION set)" test -n "$(S $h 'echo $ZSH_VERSION')"
	# zsh's own rule, to be sure the command went through zsh: no splitting of $p
	check "$h: unquoted \$p is one word (zsh)" test "$(S $h 'p="a b"; for x in $p; do echo $x; done' | wc -l)" = 1
	check "$h: hostname is $h" test "$(S $h hostname)" = "$h"
	check "$h: meshsim exec $h -- hostname is $h too" test "$("$MESHSIM" exec --name $N $h -- hostname)" = "$h"
	check "$h: uname -s is Darwin" test "$(S $h uname -s)" = Darwin
	check "$h: uname -m is arm64" test "$(S $h uname -m)" = arm64
	check "$h: uname -n is $h" test "$(S $h uname -n)" = "$h"
	check "$h: sysctl -n hw.model is the fixture's Mac Studio (Mac15,14)" test "$(S $h sysctl -n hw.model)" = Mac15,14
	check "$h: sw_vers -productName is macOS" test "$(S $h sw_vers -productName)" = macOS
done
h1=${hosts%%$'\n'*}
S "$h1" sw_vers >"$TMP/sw_vers"
printf 'ProductName:\t\tmacOS\nProductVersion:\t\t26.2\nBuildVersion:\t\t25C56\n' >"$TMP/sw_vers.want"
check "$h1: sw_vers prints macOS's three lines" cmp -s "$TMP/sw_vers" "$TMP/sw_vers.want"
out=$(S "$h1" uname --kernel-name 2>&1); rc=$?
check "$h1: uname --kernel-name: illegal option, exit 1" test "$rc:$out" = "1:uname: illegal option -- -
usage: uname [-amnprsv]"
out=$(S "$h1" sysctl -n kernel.hostname 2>&1); rc=$?
check "$h1: sysctl of a Linux name: unknown oid, exit 1" test "$rc:$out" = "1:sysctl: unknown oid 'kernel.hostname'"
check "$h1: netstat -rn -f inet prints macOS's routing table" test "$(S "$h1" netstat -rn -f inet | sed -n 3p)" = "Internet:"

# a restarted host comes back the same way
check "fault stop $h1" "$MESHSIM" fault --name $N stop "$h1"
check "fault start $h1" "$MESHSIM" fault --name $N start "$h1"
check "$h1 after a restart: zsh, hostname, Darwin" test "$(S "$h1" 'echo ${ZSH_VERSION:+zsh} $(hostname) $(uname -s)')" = "zsh $h1 Darwin"

# the machine itself is untouched while the cluster runs
check "/etc/passwd unchanged while up" test "$(md5sum </etc/passwd)" = "$passwd0"
check "root still logs in with its own shell here" test "$(getent passwd root | cut -d: -f7)" != "$(command -v zsh)"
check "no mount on /etc/passwd in this namespace" test "$(grep -c ' /etc/passwd ' /proc/self/mounts)" = 0
check "this machine's hostname unchanged" test "$(hostname)" = "$host0"
check "no /etc/netns entries of the cluster" test ! -e "/etc/netns/$N-$h1"

check "down" "$MESHSIM" down $N
CLUSTERS=""
check "nothing of $N left" nothing_left $N
check "/etc/passwd unchanged after down" test "$(md5sum </etc/passwd)" = "$passwd0"
check "no mount on /etc/passwd after down" test "$(grep -c ' /etc/passwd ' /proc/self/mounts)" = 0
finish
