#!/bin/sh
# ssh_config the way `ssh` reads it (issue 21), through meshrun (a job) and
# meshconfig (its ssh step: discovery; the topology step fails later, no Macs):
#   - hosts named only in an Included file (ssh -G, and the built-in fallback,
#     which also names the directives it skips in one warning);
#   - a host reachable only through another (10.232.0.9, routed only inside h2's
#     namespace, where a second sshd listens) via ProxyJump (one hop and two)
#     and via ProxyCommand (`ssh -W`);
#   - IdentityAgent pointing at an ssh-agent that holds the only accepted key;
#   - Match host choosing the User.
# Run by sshd_hosts.sh (h1, h2). usage: sshd_hosts.sh 2 ssh_config_paths.sh BINDIR
set -u
# the libssh2 backend is under test (auto could route jump hosts to OpenSSH)
export MESHRUN_SSH=libssh2
BIN=$1
[ -n "${MRH_SSH_CONFIG:-}" ] || { echo "skip: run me through sshd_hosts.sh"; exit 77; }
command -v ssh-agent >/dev/null 2>&1 && command -v ssh-add >/dev/null 2>&1 ||
	{ echo "skip: ssh-agent/ssh-add not found"; exit 77; }
D=$(mktemp -d /tmp/mrh-cfg.XXXXXX) || exit 1
AGENT_PID=""
cleanup() {
	[ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null
	rm -rf "$D"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
unset MESHRUN_SSH_CONFIG SSH_AUTH_SOCK
M=$MRH_DIR
HID=10.232.0.9

# The hidden host: an address on h2's loopback and an sshd of its own there.
# Nothing in the root namespace routes to it (the 'direct' check below).
ip -n mrh-h2 addr add "$HID/32" dev lo || fail "address $HID in mrh-h2"
sed -e "s/^ListenAddress .*/ListenAddress $HID/" -e "s|^PidFile .*|PidFile $D/hid.pid|" \
	"$M/h2/sshd_config" >"$D/hid_sshd_config"
ip netns exec mrh-h2 /usr/sbin/sshd -D -f "$D/hid_sshd_config" -E "$D/hid.log" </dev/null >/dev/null 2>&1 &
echo "$HID $(cut -d' ' -f1-2 "$M/h2/host_ed25519.pub")" >>"$M/known_hosts"
for _ in $(seq 1 100); do
	ip netns exec mrh-h2 sh -c "exec 3<>/dev/tcp/$HID/22" 2>/dev/null && break
	ip netns exec mrh-h2 bash -c "exec 3<>/dev/tcp/$HID/22" 2>/dev/null && break
	sleep 0.05
done

# meshrun on HOSTS with config CFG: each rank prints its user and loopback
# addresses (a hostfile: the ring backend wants an address per host, unused here).
job() { # CFG HOSTS WHAT
	hf="[" i=0
	for h in $(echo "$2" | tr ',' ' '); do
		i=$((i + 1))
		[ $i -gt 1 ] && hf="$hf, "
		hf="$hf{\"ssh\": \"$h\", \"ips\": [\"10.231.0.$((10 + i))\"]}"
	done
	echo "$hf]" >"$D/hf.json"
	"$BIN/meshrun" --ssh-config "$1" --hostfile "$D/hf.json" -- sh -c 'echo "R$MLX_RANK $(id -un) $(ip -4 -o addr show dev lo | awk "{print \$4}" | tr "\n" " ")"' \
		>"$D/out" 2>"$D/err" || fail "$3: meshrun rc $? $(cat "$D/err")"
}
reach() { # CFG HOSTS N WHAT
	"$BIN/meshconfig" --ssh-config "$1" --hosts "$2" --verbose >"$D/mout" 2>"$D/merr"
	grep -q "$3 hosts\? reachable" "$D/merr" || fail "$4: meshconfig: $(cat "$D/merr")"
}

# 1. Include: the host blocks live only in an included file (glob, relative path).
mkdir -p "$D/conf.d"
printf 'Host ia1\n  HostName 10.231.0.11\nHost ia2\n  HostName 10.231.0.12\n' >"$D/conf.d/hosts.conf"
{ echo "Include $D/conf.d/*.conf"; echo "ForwardAgent no"; cat "$M/ssh_config.tail"; } >"$D/include.cfg"
for r in ssh builtin; do
	export MESHRUN_SSH_RESOLVER=$r
	job "$D/include.cfg" ia1,ia2 "Include ($r)"
	grep -q "^R0 root" "$D/out" && grep -q "^R1 root" "$D/out" || fail "Include ($r): $(cat "$D/out")"
	reach "$D/include.cfg" ia1,ia2 2 "Include ($r)"
done
# the fallback names what it does not support, in one warning; ssh -G is silent
grep -q "not supported.*ForwardAgent" "$D/err" || fail "no warning naming ForwardAgent: $(cat "$D/err")"
export MESHRUN_SSH_RESOLVER=ssh
job "$D/include.cfg" ia1 "Include (ssh)"
grep -q "not supported" "$D/err" && fail "ssh -G warned: $(cat "$D/err")"

# 2. ProxyJump (shared by two hosts behind it; two hops) and ProxyCommand.
{
	printf 'Host h1\n  HostName 10.231.0.11\nHost h2\n  HostName 10.231.0.12\n'
	printf 'Host hid hid2\n  HostName %s\n  ProxyJump h2\n' "$HID"
	printf 'Host hid2hop\n  HostName %s\n  ProxyJump h1,root@10.231.0.12:22\n' "$HID"
	printf 'Host hidcmd\n  HostName %s\n  ProxyCommand ssh -F %s -W %%h:%%p h2\n' "$HID" "$D/jump.cfg"
	printf 'Host hiddirect\n  HostName %s\n  ConnectTimeout 1\n' "$HID"
	cat "$M/ssh_config.tail"
} >"$D/jump.cfg"
for r in ssh builtin; do
	export MESHRUN_SSH_RESOLVER=$r
	job "$D/jump.cfg" hid,hid2 "ProxyJump ($r)"
	grep -q "^R0 root .*$HID/32" "$D/out" && grep -q "^R1 root .*$HID/32" "$D/out" ||
		fail "ProxyJump ($r): $(cat "$D/out")"
	# both hosts behind h2 share one connection to it (the most seen while ranks run)
	printf '[{"ssh": "hid", "ips": ["10.231.0.11"]}, {"ssh": "hid2", "ips": ["10.231.0.12"]}]' >"$D/hf2.json"
	"$BIN/meshrun" --ssh-config "$D/jump.cfg" --hostfile "$D/hf2.json" -- sleep 2 >"$D/out" 2>"$D/err" &
	mpid=$! max=0
	for _ in 1 2 3 4 5 6 7 8 9; do
		sleep 0.2
		n=$(ss -Htn state established dst 10.231.0.12 | wc -l)
		[ "$n" -gt "$max" ] && max=$n
	done
	wait $mpid || fail "ProxyJump ($r) sleep: $(cat "$D/err")"
	[ "$max" = 1 ] || fail "ProxyJump ($r): $max connections to the jump host at once (want 1, shared)"
	job "$D/jump.cfg" hid2hop "ProxyJump two hops ($r)"
	grep -q "$HID/32" "$D/out" || fail "ProxyJump two hops ($r): $(cat "$D/out")"
	job "$D/jump.cfg" hidcmd,h1 "ProxyCommand ($r)"
	grep -q "^R0 root .*$HID/32" "$D/out" || fail "ProxyCommand ($r): $(cat "$D/out")"
	reach "$D/jump.cfg" hid,hidcmd 2 "ProxyJump+ProxyCommand ($r)"
done
printf '[{"ssh": "hiddirect", "ips": ["10.231.0.11"]}]' >"$D/hf1.json"
"$BIN/meshrun" --ssh-config "$D/jump.cfg" --hostfile "$D/hf1.json" -- true >"$D/out" 2>"$D/err" &&
	fail "hiddirect reached $HID without a jump: the test network is wrong"

# 3. IdentityAgent: the only accepted key is in an agent at a socket of our own.
ssh-keygen -q -t ed25519 -N '' -C mrh-agentkey -f "$D/agentkey" || fail "ssh-keygen"
cat "$D/agentkey.pub" >>"$M/authorized_keys"
eval "$(ssh-agent -s -a "$D/agent.sock")" >/dev/null || fail "ssh-agent"
AGENT_PID=$SSH_AGENT_PID
SSH_AUTH_SOCK=$D/agent.sock ssh-add -q "$D/agentkey" 2>/dev/null || fail "ssh-add"
rm -f "$D/agentkey"
unset SSH_AUTH_SOCK SSH_AGENT_PID
sed -e "s|IdentityFile .*|IdentityFile $D/nokey|" "$M/ssh_config.tail" >"$D/agent.tail"
{
	printf 'Host ag1\n  HostName 10.231.0.11\n  IdentityAgent %s\n' "$D/agent.sock"
	printf 'Host ag2\n  HostName 10.231.0.12\n  IdentityAgent %s\n' "$D/agent.sock"
	printf 'Host agnone\n  HostName 10.231.0.12\n  IdentityAgent none\n'
	cat "$D/agent.tail"
} >"$D/agent.cfg"
for r in ssh builtin; do
	export MESHRUN_SSH_RESOLVER=$r
	job "$D/agent.cfg" ag1,ag2 "IdentityAgent ($r)"
	grep -q "^R1 root" "$D/out" || fail "IdentityAgent ($r): $(cat "$D/out")"
	reach "$D/agent.cfg" ag1,ag2 2 "IdentityAgent ($r)"
	printf '[{"ssh": "agnone", "ips": ["10.231.0.11"]}]' >"$D/hf1.json"
	"$BIN/meshrun" --ssh-config "$D/agent.cfg" --hostfile "$D/hf1.json" -- true >"$D/out" 2>"$D/err" &&
		fail "IdentityAgent none ($r) authenticated"
	grep -q "authentication as 'root' failed" "$D/err" || fail "IdentityAgent none ($r): $(cat "$D/err")"
done

# 4. Match host chooses the User: m1 (matched) logs in as root, m2 gets the default.
{
	printf 'Host m1\n  HostName 10.231.0.11\nHost m2\n  HostName 10.231.0.12\n'
	printf 'Match host 10.231.0.11\n  User root\nHost *\n  User mrh-nouser\n'
	cat "$M/ssh_config.tail"
} >"$D/match.cfg"
for r in ssh builtin; do
	export MESHRUN_SSH_RESOLVER=$r
	job "$D/match.cfg" m1 "Match host ($r)"
	grep -q "^R0 root" "$D/out" || fail "Match host ($r): $(cat "$D/out")"
	reach "$D/match.cfg" m1 1 "Match host ($r)"
	printf '[{"ssh": "m2", "ips": ["10.231.0.11"]}]' >"$D/hf1.json"
	"$BIN/meshrun" --ssh-config "$D/match.cfg" --hostfile "$D/hf1.json" -- true >"$D/out" 2>"$D/err" &&
		fail "Match host ($r): m2 logged in"
	grep -q "as 'mrh-nouser'" "$D/err" || fail "Match host ($r) m2: $(cat "$D/err")"
done
echo "ssh_config paths (Include, ProxyJump, ProxyCommand, IdentityAgent, Match host): meshrun and meshconfig pass"
