#!/bin/sh
# --persist (issue 21 part 5) through meshrun and meshconfig on the netns sshd
# hosts: the first job starts the daemon (socket 0600 in a 0700 directory), the
# next job and meshconfig reuse its connections (the sshds see no new
# connection: the same TCP connections before and after), kill -9 of meshrun
# leaves no rank and no job directory, a job with a live daemon runs no
# `ssh -G` itself, a rank runs in a spare shell the daemon started ahead (and
# none outlives the daemon), the daemon removes job directories as its clients go, an
# edited ssh_config is not answered from a cache, a killed daemon's stale socket is
# replaced, `meshrun --persist stop` ends it and removes the socket, and a short
# idle time ends it on its own. ~15 s.
# usage: sshd_hosts.sh 4 persist_test.sh BINDIR
set -u
BIN=$1
[ -n "${MRH_SSH_CONFIG:-}" ] || { echo "skip: run me through sshd_hosts.sh"; exit 77; }
command -v ss >/dev/null 2>&1 || { echo "skip: no ss (iproute2)"; exit 77; }
D=$(mktemp -d /tmp/mrh-persist.XXXXXX) || exit 1
# this test's daemons only: a private runtime dir
export XDG_RUNTIME_DIR=$D/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
DPID=""
cleanup() {
	[ -n "$DPID" ] && kill -9 "$DPID" 2>/dev/null
	for p in $(daemon_pids); do kill -9 "$p" 2>/dev/null; done
	rm -rf "$D"
}
trap cleanup EXIT
FAILS=0
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
ok() { echo "ok - $*"; }
export MESHRUN_SSH_CONFIG=$MRH_SSH_CONFIG
unset MESHRUN_SSH_PERSIST
f=$D/hf.json
printf '[{"ssh": "h1", "ips": ["10.231.0.11"]}, {"ssh": "h2", "ips": ["10.231.0.12"]}, {"ssh": "h3", "ips": ["10.231.0.13"]}, {"ssh": "h4", "ips": ["10.231.0.14"]}]\n' >"$f"
T="timeout -k 5 60"
MR="$T $BIN/meshrun --hostfile $f"

sock() { ls "$XDG_RUNTIME_DIR"/meshrun/persist-*.sock 2>/dev/null; }
# the processes listening on our runtime dir's sockets
daemon_pids() {
	ss -xlpn 2>/dev/null | grep "$XDG_RUNTIME_DIR/meshrun/" | grep -oE 'pid=[0-9]+' | cut -d= -f2 | sort -u
}
# our TCP connections to the sshds (local address:port), sorted
conns() { ss -Htn state established '( dport = :22 )' 2>/dev/null | awk '{print $3 ">" $4}' | grep '10.231.0.1:' | sort; }

# ranks tagged $1 left on any host
ranks_left() {
	left=""
	for i in 1 2 3 4; do
		for p in $(ip netns pids mrh-h$i 2>/dev/null); do
			tr '\0' ' ' 2>/dev/null </proc/$p/cmdline | grep -q "$1" && left="$left rank on h$i"
		done
	done
	[ -z "$left" ]
}
# the daemon's spare shells (hal.h "spare") on host $1 (1..4): their pids
spare_pids() {
	for p in $(ip netns pids mrh-h$1 2>/dev/null); do
		tr '\0' ' ' 2>/dev/null </proc/$p/cmdline | grep -q "meshrun-spare" && echo "$p"
	done
}
no_spares() { for i in 1 2 3 4; do [ -z "$(spare_pids $i)" ] || return 1; done; }
two_spares_h1() { [ "$(spare_pids 1 | wc -l)" = 2 ]; }
wait_for() { # COMMAND...: true within 5 s
	for _ in $(seq 1 50); do "$@" && return 0; sleep 0.1; done
	return 1
}

# 1. the first job starts the daemon
out=$($MR --persist 30s --tag-output -- sh -c 'echo "r=$MLX_RANK"' 2>"$D/err") &&
	[ "$(echo "$out" | sort | tr -d '\n')" = "[rank 0 h1] r=0[rank 1 h2] r=1[rank 2 h3] r=2[rank 3 h4] r=3" ] &&
	ok "first job with --persist on 4 hosts" || fail "first job: rc $? out '$out' err $(cat "$D/err")"
s=$(sock)
[ -S "$s" ] && [ "$(stat -c %a "$s")" = 600 ] && [ "$(stat -c %a "$XDG_RUNTIME_DIR/meshrun")" = 700 ] &&
	ok "socket $s: mode 0600 in a 0700 directory" || fail "socket: '$s' $(ls -la "$XDG_RUNTIME_DIR/meshrun" 2>&1)"
DPID=$(daemon_pids)
[ -n "$DPID" ] && kill -0 "$DPID" && ok "daemon $DPID runs after the job" || fail "no daemon after the first job"
before=$(conns)
[ "$(echo "$before" | grep -c .)" = 4 ] && ok "the daemon holds 4 connections" || fail "connections: '$before'"

# 2. the next job and meshconfig reuse them: no new connection at any sshd
out=$($MR --persist 30s -- sh -c 'echo "$MLX_RANK"' 2>"$D/err") && [ "$(echo "$out" | sort | tr -d '\n')" = 0123 ] &&
	ok "second job" || fail "second job: rc $? '$out' $(cat "$D/err")"
# the daemon keeps 2 shells started on each host; the next rank there runs in
# one of them (its exec keeps the spare's pid), and it starts another
wait_for two_spares_h1 && spares=$(spare_pids 1) && ok "2 spare shells on h1: $(echo $spares)" ||
	fail "spares on h1: '$(spare_pids 1)'"
out=$($MR --persist 30s -- sh -c 'echo "$MLX_RANK $$"' 2>"$D/err")
pid0=$(echo "$out" | awk '$1 == 0 { print $2 }')
[ -n "$pid0" ] && echo "$spares" | grep -qx "$pid0" && ok "rank 0 ran in a spare shell (pid $pid0)" ||
	fail "rank 0 (pid '$pid0') not in a spare ($(echo $spares)): '$out' $(cat "$D/err")"
wait_for two_spares_h1 && ! spare_pids 1 | grep -qx "$pid0" && ok "h1 has 2 spares again" ||
	fail "spares after the job: '$(spare_pids 1)'"
MESHRUN_SSH_PERSIST=30s $T "$BIN/meshconfig" --hosts h1,h2,h3,h4 --verbose >"$D/out" 2>"$D/err"
grep -q "4 hosts reachable" "$D/err" && ok "meshconfig with MESHRUN_SSH_PERSIST" || fail "meshconfig: $(cat "$D/err")"
after=$(conns)
[ "$before" = "$after" ] && [ "$(daemon_pids)" = "$DPID" ] &&
	ok "the same 4 TCP connections before and after: no handshake" || fail "connections changed: '$before' -> '$after'"

# the client asks the daemon for its host lookups: no `ssh -G` of its own (an
# `ssh` first on our PATH logs each call; the daemon was started without it)
mkdir "$D/shim"
printf '#!/bin/sh\necho "$PPID $*" >>%s/ssh.log\nexec %s "$@"\n' "$D" "$(command -v ssh)" >"$D/shim/ssh"
chmod +x "$D/shim/ssh"
out=$(PATH="$D/shim:$PATH" $MR --persist 30s -- sh -c 'echo "$MLX_RANK"' 2>"$D/err") &&
	[ "$(echo "$out" | sort | tr -d '\n')" = 0123 ] && ! grep -q -- "-G" "$D/ssh.log" 2>/dev/null &&
	ok "a job with a live daemon runs no ssh -G itself" ||
	fail "ssh -G by the client: rc $? '$out' $(cat "$D/err") log: $(cat "$D/ssh.log" 2>/dev/null)"

# job directories: removed by the daemon as the client goes (no rm of its own)
$MR --persist 30s -- sh -c 'dirname "$MLX_HOSTFILE" >'"$D"'/jd.$MLX_RANK' >/dev/null 2>"$D/err" ||
	fail "job for its directories: $(cat "$D/err")"
jdirs_gone() { for x in "$D"/jd.*; do [ -d "$(cat "$x")" ] && return 1; done; return 0; }
[ "$(ls "$D"/jd.* | wc -l)" = 4 ] && wait_for jdirs_gone && ok "the job directories go with the client" ||
	fail "job directories left: $(cat "$D"/jd.*)"

# an edited ssh_config is never answered from the old daemon's cache: h1 moved
# to an address nobody answers is unreachable at once, and back again reachable
cp "$MRH_SSH_CONFIG" "$D/cfg"
printf '[{"ssh": "h1", "ips": ["10.231.0.11"]}]\n' >"$D/hf-h1.json"
MR1="$T $BIN/meshrun --persist 30s --hostfile $D/hf-h1.json"
MESHRUN_SSH_CONFIG=$D/cfg $MR1 -- true 2>"$D/err" || fail "h1 with a copied config: $(cat "$D/err")"
{ printf 'Host h1\n    HostName 10.231.0.250\n'; cat "$MRH_SSH_CONFIG"; } >"$D/cfg.new"
cat "$D/cfg.new" >"$D/cfg" # in place: the same path, another content and mtime
MESHRUN_SSH_CONFIG=$D/cfg $MR1 -- true >/dev/null 2>"$D/err"; rc=$?
[ $rc = 255 ] && grep -q "h1" "$D/err" && ok "edited ssh_config: h1's new HostName is used (unreachable)" ||
	fail "edited ssh_config: rc $rc (a stale lookup or connection?) $(cat "$D/err")"
cat "$MRH_SSH_CONFIG" >"$D/cfg"
touch -d '+2 seconds' "$D/cfg" 2>/dev/null || sleep 1.1
MESHRUN_SSH_CONFIG=$D/cfg $MR1 -- true 2>"$D/err" && ok "edited back: h1 reachable again" ||
	fail "edited back: $(cat "$D/err")"
# only the first daemon stays for what follows (the others' sockets go too)
for p in $(daemon_pids); do [ "$p" = "$DPID" ] || kill -9 "$p"; done
for x in $(sock); do [ "$x" = "$s" ] || rm -f "$x"; done
wait_for sh -c '[ "$(ss -xlpn 2>/dev/null | grep -c '"$XDG_RUNTIME_DIR/meshrun/"')" -le 1 ]'

# exit statuses and errors as over libssh2
$MR --persist 30s -- sh -c '[ "$MLX_RANK" = 2 ] && exit 3; exit 0' 2>"$D/err"; rc=$?
[ $rc = 3 ] && ok "rank exit 3 -> meshrun 3" || fail "exit 3: rc $rc $(cat "$D/err")"
out=$(printf 'hello\n' | $MR --persist 30s -- cat 2>"$D/err")
[ "$(echo "$out" | grep -c '^hello$')" = 4 ] && ok "stdin to every rank" || fail "stdin: '$out' $(cat "$D/err")"
printf '[{"ssh": "unreach", "ips": ["10.231.0.250"]}]\n' >"$D/hf-unreach.json"
$T $BIN/meshrun --persist 30s --hostfile "$D/hf-unreach.json" -- true >/dev/null 2>"$D/err"; rc=$?
[ $rc = 255 ] && grep -q "unreach" "$D/err" && ok "unreachable -> 255 naming the host" || fail "unreach: rc $rc $(cat "$D/err")"

# 3. kill -9 of meshrun: no rank and no job directory left
$BIN/meshrun --persist 30s --hostfile "$f" -- sh -c 'dirname "$MLX_HOSTFILE" >'"$D"'/dir.$MLX_RANK; exec sleep 33' >/dev/null 2>&1 &
mp=$!
n=0
for _ in $(seq 1 50); do
	n=$(ls "$D"/dir.* 2>/dev/null | wc -l)
	[ "$n" = 4 ] && ! ranks_left "sleep 33" && break
	sleep 0.1
done
[ "$n" = 4 ] || fail "kill -9: only $n ranks started"
sleep 0.5 # as e2e_kill9.sh: the watchdogs have their registrations
kill -9 $mp
wait $mp 2>/dev/null
wait_for ranks_left "sleep 33" && ok "kill -9 of meshrun leaves no rank" || fail "kill -9: ranks left"
dirs_gone() { for x in "$D"/dir.*; do [ -d "$(cat "$x")" ] && return 1; done; return 0; }
wait_for dirs_gone && ok "kill -9 of meshrun leaves no job directory" || fail "kill -9: job dirs left: $(cat "$D"/dir.*)"
[ "$(daemon_pids)" = "$DPID" ] && ok "the daemon outlives its killed client" || fail "daemon gone after kill -9 of a client"

# 4. a dead daemon's stale socket is replaced
kill -9 "$DPID"
wait_for sh -c "! kill -0 $DPID 2>/dev/null"
[ -S "$s" ] || fail "socket gone with the killed daemon (expected it stale)"
wait_for no_spares && ok "the killed daemon's spare shells end with its connections" ||
	fail "spares left after kill -9 of the daemon: $(for i in 1 2 3 4; do spare_pids $i; done)"
out=$($MR --persist 30s -- echo x 2>"$D/err") && [ "$out" = "x
x
x
x" ] && ok "stale socket: a new daemon" || fail "stale socket: rc $? '$out' $(cat "$D/err")"
DPID=$(daemon_pids)
[ -n "$DPID" ] || fail "no new daemon"

# 5. meshrun --persist stop ends it and removes the socket
$T $BIN/meshrun --persist stop 2>"$D/err"; rc=$?
[ $rc = 0 ] && grep -q "stopped" "$D/err" && wait_for sh -c "! kill -0 $DPID 2>/dev/null" && [ -z "$(sock)" ] &&
	ok "meshrun --persist stop: daemon gone, socket removed" || fail "stop: rc $rc $(cat "$D/err") sock '$(sock)'"
wait_for no_spares && ok "no spare shell left after --persist stop" ||
	fail "spares left after stop: $(for i in 1 2 3 4; do spare_pids $i; done)"
DPID=""
$T $BIN/meshrun --persist stop 2>"$D/err"; rc=$?
[ $rc = 0 ] && grep -q "no persist daemon" "$D/err" && ok "stop with none running" || fail "stop again: rc $rc $(cat "$D/err")"

# 6. idle expiry
$MR --persist 1s -- true 2>"$D/err" || fail "--persist 1s: $(cat "$D/err")"
p=$(daemon_pids)
[ -n "$p" ] || fail "no daemon with --persist 1s"
sleep 1.5
wait_for sh -c "! kill -0 ${p:-0} 2>/dev/null" && [ -z "$(sock)" ] && [ -z "$(conns)" ] &&
	ok "idle 1s: the daemon exits, socket and connections gone" || fail "idle: daemon ${p:-?} still there, sock '$(sock)'"

# usage
$T $BIN/meshrun --persist soon -- true >/dev/null 2>"$D/err"; rc=$?
[ $rc = 2 ] && grep -q -- "--persist 'soon'" "$D/err" && ok "--persist soon -> 2" || fail "bad duration: rc $rc $(cat "$D/err")"

[ $FAILS = 0 ] || { echo "$FAILS check(s) failed"; exit 1; }
echo "all checks passed"
