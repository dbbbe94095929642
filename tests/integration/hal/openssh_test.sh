#!/bin/sh
# The OpenSSH client backend (issue 21 part 4) through meshrun and meshconfig on
# the netns sshd hosts: jobs, exit statuses, a killed rank, stdin, kill -9 of
# meshrun (nothing left: no rank, no ssh master, no control socket), meshconfig's
# discovery, a ProxyCommand host, and auto choosing OpenSSH for a host whose
# configuration libssh2 cannot follow (PKCS11Provider).
# usage: sshd_hosts.sh 4 openssh_test.sh BINDIR
set -u
BIN=$1
[ -n "${MRH_SSH_CONFIG:-}" ] || { echo "skip: run me through sshd_hosts.sh"; exit 77; }
command -v ssh >/dev/null 2>&1 || { echo "skip: no OpenSSH client"; exit 77; }
D=$(mktemp -d /tmp/mrh-ossh.XXXXXX) || exit 1
# control sockets of this test only: a private runtime dir
export XDG_RUNTIME_DIR=$D/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
trap 'rm -rf "$D"' EXIT
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
ok() { echo "ok - $*"; }
export MESHRUN_SSH_CONFIG=$MRH_SSH_CONFIG
# a hostfile for hosts NAME:ADDR... (meshrun's ring needs the addresses)
hostfile() {
	f=$D/hf-$1.json; sep=""
	printf '[' >"$f"
	for e in "$@"; do
		printf '%s{"ssh": "%s", "ips": ["%s"]}' "$sep" "${e%%:*}" "${e#*:}" >>"$f"; sep=", "
	done
	printf ']\n' >>"$f"
	echo "$f"
}
HF=$(hostfile h1:10.231.0.11 h2:10.231.0.12 h3:10.231.0.13 h4:10.231.0.14)
# a hang must not hold the namespace lock: every run has a deadline
T="timeout -k 5 60"
MR="$T $BIN/meshrun --ssh openssh --hostfile $HF"

# nothing of ours left anywhere: ssh clients and masters here, ranks there
nothing_left() {
	tag=$1
	for _ in $(seq 1 40); do
		left=""
		pgrep -f "ControlPath=$XDG_RUNTIME_DIR" >/dev/null && left="ssh processes"
		for i in 1 2 3 4; do
			for p in $(ip netns pids mrh-h$i 2>/dev/null); do
				tr '\0' ' ' 2>/dev/null </proc/$p/cmdline | grep -q "$tag" && left="$left rank on h$i"
			done
		done
		[ -z "$left" ] && [ -z "$(ls -A "$XDG_RUNTIME_DIR/meshrun-ssh" 2>/dev/null)" ] && return 0
		sleep 0.1
	done
	echo "  left: $left $(ls -A "$XDG_RUNTIME_DIR/meshrun-ssh" 2>/dev/null)"
	return 1
}

# a job: every rank, in order, with its environment
out=$($MR --tag-output -- sh -c 'echo "r=$MLX_RANK"' 2>"$D/err") && [ "$(echo "$out" | sort | tr -d '\n')" = "[rank 0 h1] r=0[rank 1 h2] r=1[rank 2 h3] r=2[rank 3 h4] r=3" ] &&
	ok "job on 4 hosts" || fail "job: rc $? out '$out' err $(cat "$D/err")"
nothing_left zzz || fail "left after a job"

# exit statuses: the first failing rank's
$MR -- sh -c '[ "$MLX_RANK" = 2 ] && exit 3; exit 0' 2>"$D/err"; rc=$?
[ $rc = 3 ] && ok "rank exit 3 -> meshrun 3" || fail "exit 3: rc $rc $(cat "$D/err")"
$MR -- true 2>"$D/err"; rc=$?
[ $rc = 0 ] && ok "all exit 0 -> 0" || fail "true: rc $rc $(cat "$D/err")"

# a killed rank: OpenSSH's client says 255 for a remote signal; the others are
# stopped, within the time (it once hung 1 run in 3 here: pump() polled with no
# timeout after its own first steps had already ended the last command)
start=$(date +%s)
MESHRUN_LOG=debug $MR --verbose -- sh -c 'if [ "$MLX_RANK" = 1 ]; then sleep 0.3; kill -9 $$; fi; exec sleep 31' 2>"$D/err"; rc=$?
[ $rc = 255 ] && grep -q "no exit status" "$D/err" && [ $(($(date +%s) - start)) -lt 15 ] &&
	ok "killed rank -> 255, others stopped" || fail "killed rank: rc $rc $(cat "$D/err")"
nothing_left "sleep 31" && ok "nothing left after a killed rank" || fail "left after a killed rank"

# stdin goes to every rank
out=$(printf 'hello\n' | $MR -- cat 2>"$D/err")
[ "$(echo "$out" | grep -c '^hello$')" = 4 ] && ok "stdin to every rank" || fail "stdin: '$out' $(cat "$D/err")"

# kill -9 of meshrun: the ranks, the clients and the masters all go
$BIN/meshrun --ssh openssh --hostfile "$HF" -- sleep 32 >/dev/null 2>&1 &
mp=$!
for _ in $(seq 1 50); do
	n=0
	for i in 1 2 3 4; do
		for p in $(ip netns pids mrh-h$i 2>/dev/null); do
			tr '\0' ' ' 2>/dev/null </proc/$p/cmdline | grep -q "sleep 32" && n=$((n + 1))
		done
	done
	[ $n = 4 ] && break
	sleep 0.1
done
[ $n = 4 ] || fail "kill -9: only $n ranks started"
# the watchdogs have their registrations (as in e2e_kill9.sh): a rank runs on its
# host before meshrun has read its marker and sent "+PGID" to the watchdog, and a
# rank killed in that window is not the watchdog's to stop
sleep 0.5
kill -9 $mp
wait $mp 2>/dev/null
nothing_left "sleep 32" && ok "kill -9 of meshrun leaves nothing" || fail "left after kill -9 of meshrun"

# connection failures name the host, with the hint; usage errors
$T $BIN/meshrun --ssh openssh --hostfile "$(hostfile unreach:10.231.0.250)" -- true >/dev/null 2>"$D/err"; rc=$?
[ $rc = 255 ] && grep -q "unreach" "$D/err" && grep -q "hint:" "$D/err" && ok "unreachable -> 255 with a hint" ||
	fail "unreachable: rc $rc $(cat "$D/err")"
$T $BIN/meshrun --ssh openssh --hostfile "$(hostfile badkey:10.231.0.12)" -- true >/dev/null 2>"$D/err"; rc=$?
[ $rc = 255 ] && grep -q "hint: host key" "$D/err" && ok "bad host key -> 255 with a hint" ||
	fail "badkey: rc $rc $(cat "$D/err")"
MESHRUN_SSH=bogus $T $BIN/meshrun --hosts h1 -- true >/dev/null 2>"$D/err"; rc=$?
[ $rc = 2 ] && grep -q "MESHRUN_SSH 'bogus'" "$D/err" && ok "MESHRUN_SSH=bogus -> 2" || fail "bogus: rc $rc $(cat "$D/err")"
out=$(MESHRUN_SSH=openssh $T $BIN/meshrun --hostfile "$(hostfile h1:10.231.0.11)" -- echo via-env 2>"$D/err")
[ "$out" = via-env ] && ok "MESHRUN_SSH=openssh" || fail "MESHRUN_SSH=openssh: '$out' $(cat "$D/err")"

# meshconfig: discovery over OpenSSH (the topology step fails later: no Macs here)
$T "$BIN/meshconfig" --ssh openssh --hosts h1,h2,h3,h4 --verbose >"$D/out" 2>"$D/err"
grep -q "4 hosts reachable" "$D/err" && ok "meshconfig --ssh openssh reaches 4 hosts" ||
	fail "meshconfig: $(cat "$D/err")"
nothing_left zzz || fail "left after meshconfig"

# a host reachable through a ProxyCommand, over OpenSSH (libssh2 does it too,
# issue 21 part 2: auto keeps it there)
{
	echo "Host viaproxy"
	echo "    HostName 10.231.0.13"
	echo "    ProxyCommand ssh -F $MRH_SSH_CONFIG -W %h:%p h2"
	echo "Host pk1"
	echo "    HostName 10.231.0.14"
	echo "    PKCS11Provider $D/no-such-pkcs11.so"
	cat "$MRH_SSH_CONFIG"
} >"$D/ssh_config"
out=$(MESHRUN_SSH_CONFIG=$D/ssh_config $T $BIN/meshrun --ssh openssh --hostfile "$(hostfile viaproxy:10.231.0.13 h1:10.231.0.11)" -- sh -c 'echo "$MLX_RANK $(hostname -I 2>/dev/null || hostname)"' 2>"$D/err"); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | sort | cut -c1-13 | tr "\n" " ")" = "0 10.231.0.13 1 10.231.0.11 " ] &&
	ok "ProxyCommand host over OpenSSH" || fail "ProxyCommand: rc $rc '$out' $(cat "$D/err")"
# auto: a host libssh2 cannot do (PKCS11Provider) gets the OpenSSH client, said once
out=$(MESHRUN_SSH_CONFIG=$D/ssh_config $T $BIN/meshrun --hostfile "$(hostfile pk1:10.231.0.14 h1:10.231.0.11 viaproxy:10.231.0.13)" -- sh -c 'echo "$MLX_RANK $(hostname -I 2>/dev/null || hostname)"' 2>"$D/err"); rc=$?
[ $rc = 0 ] && [ "$(echo "$out" | sort | cut -c1-13 | tr "\n" " ")" = "0 10.231.0.14 1 10.231.0.11 2 10.231.0.13 " ] &&
	grep -q "using the OpenSSH client for pk1 (PKCS11Provider" "$D/err" &&
	[ "$(grep -c "OpenSSH client" "$D/err")" = 1 ] && ! grep -q "viaproxy" "$D/err" &&
	ok "auto: the PKCS11Provider host over OpenSSH, the others over libssh2" ||
	fail "auto PKCS11Provider: rc $rc '$out' $(cat "$D/err")"
MESHRUN_SSH_CONFIG=$D/ssh_config $T $BIN/meshconfig --hosts pk1,h1 --verbose >"$D/out" 2>"$D/err"
grep -q "2 hosts reachable" "$D/err" && grep -q "OpenSSH client for pk1" "$D/err" && ok "meshconfig auto: PKCS11Provider host" ||
	fail "meshconfig auto: $(cat "$D/err")"
nothing_left zzz || fail "left after auto"

[ $FAILS = 0 ] || { echo "$FAILS check(s) failed"; exit 1; }
echo "all checks passed"
