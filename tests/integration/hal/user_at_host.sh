#!/bin/sh
# "user@host" through the tools (issue 15): meshrun (hostfile and --hosts) and
# meshconfig split the destination; the user goes to sshd. Run by sshd_hosts.sh
# (h1, h2; root is the only account that logs in, "mrh-nouser" does not exist).
# usage: sshd_hosts.sh 2 user_at_host.sh BINDIR
set -u
BIN=$1
[ -n "${MRH_SSH_CONFIG:-}" ] || { echo "skip: run me through sshd_hosts.sh"; exit 77; }
D=$(mktemp -d /tmp/mrh-uah.XXXXXX) || exit 1
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export MESHRUN_SSH_CONFIG=$MRH_SSH_CONFIG

cat >"$D/hf.json" <<EOH
[{"ssh": "root@h1", "ips": ["10.231.0.11"]}, {"ssh": "root@10.231.0.12", "ips": ["10.231.0.12"]}]
EOH
out=$("$BIN/meshrun" --hostfile "$D/hf.json" -- sh -c 'echo "$MLX_RANK $(id -un)"' 2>"$D/err") ||
	fail "meshrun with root@ hosts: rc $? $(cat "$D/err")"
echo "$out" | grep -qx "0 root" && echo "$out" | grep -qx "1 root" || fail "meshrun output: $out"

"$BIN/meshrun" --hosts root@10.231.0.11 -- id -un >"$D/out" 2>"$D/err" || fail "--hosts root@IP: $(cat "$D/err")"
grep -qx root "$D/out" || fail "--hosts root@IP printed: $(cat "$D/out")"

"$BIN/meshrun" --hosts mrh-nouser@10.231.0.11 -- true >"$D/out" 2>"$D/err" && fail "mrh-nouser@h1 succeeded"
grep -q "as 'mrh-nouser'" "$D/err" || fail "mrh-nouser@h1: $(cat "$D/err")"

# meshconfig: the ssh step reaches both (the topology step fails later: no Macs here)
"$BIN/meshconfig" --hosts root@h1,root@10.231.0.12 --verbose >"$D/out" 2>"$D/err"
grep -q "2 hosts reachable" "$D/err" || fail "meshconfig root@: $(cat "$D/err")"
"$BIN/meshconfig" --hosts mrh-nouser@h1,h2 >"$D/out" 2>"$D/err" && fail "meshconfig mrh-nouser@h1 succeeded"
grep -q "mrh-nouser@h1" "$D/err" && grep -q "as 'mrh-nouser'" "$D/err" || fail "meshconfig mrh-nouser: $(cat "$D/err")"
grep -q "hint: authentication refused" "$D/err" && ! grep -q "password-less" "$D/err" ||
	fail "meshconfig auth hint: $(cat "$D/err")"
# the hint fits the failure: a timeout is not a key problem
"$BIN/meshconfig" --hosts unreach,h1 >"$D/out" 2>"$D/err" && fail "meshconfig unreach succeeded"
grep -q "hint: no answer within the connect timeout" "$D/err" && ! grep -q "authorized_keys" "$D/err" ||
	fail "meshconfig timeout hint: $(cat "$D/err")"
printf '[{"ssh": "mrh-nouser@h1", "ips": ["10.231.0.11"]}]' >"$D/bad.json"
"$BIN/meshrun" --hostfile "$D/bad.json" -- true >"$D/out" 2>"$D/err"; rc=$?
[ $rc = 255 ] && grep -q "hint: authentication refused" "$D/err" || fail "meshrun auth hint: $rc $(cat "$D/err")"
echo "user@host: meshrun and meshconfig pass"
