#!/bin/sh
# First contact with real hosts (issue 37), over a meshsim cluster (root):
#   hostkeys  hosts not in known_hosts, reached by address: meshrun and
#             meshconfig name every host in full and hint at a flag they both
#             have (every --flag they print is in their --help);
#             --accept-new-hostkeys records the keys into --known-hosts; a
#             changed key is refused with a hint that does not say "accept"
#   env       MESHRUN_TIMEOUT=7 meshrun ... reaches remote ranks; --env wins;
#             an outer job's MESHRUN_JOB_TOKEN does not
#   names     --hosts h1,h2,h3,h4 (ssh names): the ring gets the addresses ssh
#             reaches them at, an all-reduce runs, and a plain command too
# usage: first_contact.sh BINDIR CASE      cluster name: fc and random hex
set -u
BIN=$1
CASE=$2
MESHSIM=$BIN/meshsim
MESHRUN=$BIN/meshrun
MESHCONFIG=$BIN/meshconfig
T=$BIN/meshrun-allreduce-test
N=fc$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (meshsim: network namespaces, sshd)"
[ -x /usr/sbin/sshd ] || skip "sshd is not installed (openssh-server)"
for p in "$MESHSIM" "$MESHRUN" "$MESHCONFIG" "$T"; do [ -x "$p" ] || skip "$p is not built"; done
ip netns add fcprobe$$ 2>/dev/null || skip "cannot create network namespaces here"
ip netns del fcprobe$$

D=$(mktemp -d /tmp/fc-test.XXXXXX) || exit 1
export MESHSIM_STATE_DIR=$D/state
cleanup() {
	"$MESHSIM" down $N >/dev/null 2>&1
	rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
	echo "FAIL ($CASE): $*" >&2
	exit 1
}
ok() { echo "ok - $*"; }

# flags_exist TOOL FILE: every --flag in FILE (what TOOL printed) is in TOOL --help,
# except inside a quoted 'meshconfig ...' / 'meshrun ...' command (the docs tests
# and the unit test check those)
flags_exist() {
	"$BIN/$1" --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u >"$D/known"
	sed -E "s/'(meshconfig|meshrun) [^']*'//g" "$2" | grep -oE -- '(^|[^a-z0-9-])--[a-z][a-z0-9-]*' |
		grep -oE -- '--[a-z][a-z0-9-]*' | sort -u >"$D/named"
	[ -s "$D/named" ] || fail "$1 printed no flag at all: $(cat "$2")"
	missing=$(comm -23 "$D/named" "$D/known")
	[ -z "$missing" ] || fail "$1 names flags it does not have: $missing: $(cat "$2")"
}

"$MESHSIM" up ring:4 --name $N >"$D/up" 2>&1 || fail "meshsim up: $(cat "$D/up")"
S=$MESHSIM_STATE_DIR/$N
C=$S/ssh_config
addr() { awk -v h="$1" '$1 == "Host" { on = ($2 == h) } on && $1 == "HostName" { print $2; exit }' "$C"; }
A1=$(addr h1) A2=$(addr h2) A3=$(addr h3) A4=$(addr h4)
[ -n "$A1" ] && [ -n "$A4" ] || fail "no addresses in $C"
ADDRS=$A1,$A2,$A3,$A4

case $CASE in
hostkeys)
	# the hosts by address, as a user with a fresh known_hosts reaches them
	: >"$D/kh"
	cat >"$D/cfg" <<EOF
Host ${A1%.*}.*
  User root
  IdentityFile $S/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $D/kh
  BatchMode yes
EOF
	"$MESHRUN" --ssh-config "$D/cfg" --hosts "$ADDRS" -- hostname >"$D/out" 2>"$D/err"
	rc=$?
	[ $rc = 255 ] || fail "meshrun, unknown keys: exit $rc, expected 255: $(cat "$D/err")"
	for a in $A1 $A2 $A3 $A4; do
		# each host in full: its line ends with the known_hosts file's whole path
		grep -Eq "^\[ERROR\]   $a: .*host key is unknown: .* is not in '$D/kh'( |$)" "$D/err" ||
			fail "meshrun: host $a is not listed in full: $(cat "$D/err")"
	done
	grep -q "hint: host key not known yet: .*--accept-new-hostkeys" "$D/err" ||
		fail "meshrun: no hint naming --accept-new-hostkeys: $(cat "$D/err")"
	flags_exist meshrun "$D/err"
	ok "meshrun: 4 unknown host keys, each host in full, a hint with meshrun's own flags"

	"$MESHCONFIG" --ssh-config "$D/cfg" --hosts "$ADDRS" --output-hostfile "$D/h.json" 2>"$D/err"
	rc=$?
	[ $rc = 3 ] || fail "meshconfig, unknown keys: exit $rc, expected 3: $(cat "$D/err")"
	for a in $A1 $A2 $A3 $A4; do
		grep -Eq "^\[ERROR\]   - $a: .* is not in '$D/kh'( |$)" "$D/err" ||
			fail "meshconfig: host $a is not listed in full: $(cat "$D/err")"
	done
	flags_exist meshconfig "$D/err"
	ok "meshconfig: the same hosts, the same hint, meshconfig's own flags"

	# --accept-new-hostkeys records the keys into --known-hosts (not the config's file)
	"$MESHRUN" --ssh-config "$D/cfg" --known-hosts "$D/kh2" --accept-new-hostkeys --hosts "$ADDRS" \
		-- hostname >"$D/out" 2>"$D/err" || fail "meshrun --accept-new-hostkeys: exit $?: $(cat "$D/err")"
	[ "$(sort "$D/out" | tr '\n' ' ')" = "h1 h2 h3 h4 " ] || fail "ranks printed: $(cat "$D/out")"
	[ "$(wc -l <"$D/kh2")" -eq 4 ] || fail "--known-hosts file has $(wc -l <"$D/kh2") lines, not 4"
	[ ! -s "$D/kh" ] || fail "the ssh_config's known_hosts was written although --known-hosts was given"
	"$MESHRUN" --ssh-config "$D/cfg" --known-hosts "$D/kh2" --hosts "$ADDRS" -- true 2>"$D/err" ||
		fail "meshrun with the recorded keys: exit $?: $(cat "$D/err")"
	"$MESHCONFIG" --ssh-config "$D/cfg" --known-hosts "$D/kh2" --hosts "$ADDRS" --output-hostfile "$D/h.json" \
		2>"$D/err" || fail "meshconfig with the recorded keys: exit $?: $(cat "$D/err")"
	ok "--accept-new-hostkeys --known-hosts FILE: recorded there, then both tools run"

	# a changed key: refused even with --accept-new-hostkeys, the hint says why
	k3=$(awk -v a="$A3" '$1 == a { print $3 }' "$D/kh2")
	awk -v a="$A1" -v k="$k3" '$1 == a { $3 = k } { print }' "$D/kh2" >"$D/kh3"
	"$MESHRUN" --ssh-config "$D/cfg" --known-hosts "$D/kh3" --accept-new-hostkeys --hosts "$ADDRS" \
		-- true 2>"$D/err"
	rc=$?
	[ $rc = 255 ] && grep -q "^\[ERROR\]   $A1: .*host key has changed" "$D/err" &&
		grep -q "hint: host key changed since it was recorded: .*ssh-keygen -R" "$D/err" &&
		! grep -q "hint: host key not known" "$D/err" ||
		fail "changed key: exit $rc: $(cat "$D/err")"
	flags_exist meshrun "$D/err"
	ok "a changed key is refused, with the changed-key hint only"
	;;
env)
	# two remote hosts (a hostfile with addresses: only the environment is
	# tested here); ranks print what they got
	printf '[{"ssh": "h1", "ips": ["%s"]}, {"ssh": "h2", "ips": ["%s"]}]' "$A1" "$A2" >"$D/hosts.json"
	MESHRUN_TIMEOUT=7 MESHRUN_JOB_TOKEN=stale-token-of-an-outer-job "$MESHRUN" --ssh-config "$C" \
		--hostfile "$D/hosts.json" -- sh -c 'echo "$MESHRUN_TIMEOUT ${#MESHRUN_JOB_TOKEN}"' >"$D/out" 2>"$D/err" ||
		fail "meshrun: exit $?: $(cat "$D/err")"
	[ "$(sort -u "$D/out")" = "7 32" ] ||
		fail "remote ranks got '$(sort -u "$D/out" | tr '\n' '|')', expected MESHRUN_TIMEOUT 7 and a fresh 32-digit token"
	ok "MESHRUN_TIMEOUT from meshrun's environment reaches remote ranks, an outer job token does not"
	MESHRUN_TIMEOUT=7 "$MESHRUN" --ssh-config "$C" --hostfile "$D/hosts.json" --env MESHRUN_TIMEOUT=3 -- \
		sh -c 'echo "$MESHRUN_TIMEOUT"' >"$D/out" 2>"$D/err" || fail "meshrun --env: exit $?: $(cat "$D/err")"
	[ "$(sort -u "$D/out")" = 3 ] || fail "--env did not win: '$(cat "$D/out")'"
	ok "--env MESHRUN_TIMEOUT=3 wins over meshrun's own"
	;;
names)
	# ssh names only (no addresses anywhere): a plain command, then the ring
	"$MESHRUN" --ssh-config "$C" --hosts h1,h2,h3,h4 -- hostname >"$D/out" 2>"$D/err" ||
		fail "meshrun --hosts NAMES -- hostname: exit $?: $(cat "$D/err")"
	[ "$(sort "$D/out" | tr '\n' ' ')" = "h1 h2 h3 h4 " ] || fail "ranks printed: $(cat "$D/out")"
	ok "--hosts h1,h2,h3,h4 -- hostname runs"
	"$MESHRUN" --ssh-config "$C" --hosts h1,h2,h3,h4 -- sh -c 'cat "$MLX_HOSTFILE"' >"$D/out" 2>"$D/err" ||
		fail "ring file: exit $?: $(cat "$D/err")"
	want="[[\"$A1:32323\"], [\"$A2:32324\"], [\"$A3:32325\"], [\"$A4:32326\"]]"
	[ "$(sort -u "$D/out")" = "$want" ] || fail "ring file '$(sort -u "$D/out")', expected '$want'"
	"$MESHRUN" --ssh-config "$C" --hosts h1,h2,h3,h4 -- "$T" --max-size 64K -q >"$D/out" 2>&1 ||
		fail "all-reduce over --hosts names: exit $?: $(cat "$D/out")"
	ok "the ring connects to the addresses ssh reaches h1..h4 at (ssh_config HostName): all-reduce passed"
	;;
*)
	fail "unknown case"
	;;
esac
"$MESHSIM" down $N >"$D/down" 2>&1 || fail "meshsim down: $(cat "$D/down")"
ip netns list | grep -q "^$N-" && fail "namespaces $N-* left behind"
exit 0
