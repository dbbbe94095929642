#!/bin/bash
# ssh_config the way `ssh` reads it (issue 21 acceptance), on meshsim's Mac-like
# hosts (fixtures replayed; sudo, ifconfig, route act like a Mac's): each case runs
# meshconfig (discovery + --auto-setup: the /30 of the cable between its two hosts
# is applied over ssh+sudo, checked in the hosts' namespaces) and then meshrun (a
# job on both hosts, each rank saying which host it is), once with --ssh libssh2
# and once with --ssh openssh. One cluster (mesh:3) serves every case:
#   include   hosts named only in an Included file (h1, h2)
#   jump1     h3 through ProxyJump h1 (h1, h3)
#   jump2     h3 through ProxyJump h1,root@<h2>:22, two hops (h2, h3)
#   proxycmd  h3 through ProxyCommand `ssh -W %h:%p h2` (h2, h3)
#   agent     IdentityAgent: the only accepted key is in an ssh-agent (h1, h2)
#   match     Match host chooses the User (h1, h2; Host * says a user that does not exist)
# h3 is reachable only through the other hosts: inside h3's namespace the route
# back to the management bridge's own address is "prohibit" (checked: a direct
# ssh from here fails), while h1 and h2 reach it over the bridge. The route dies
# with the namespace: a killed run leaves nothing in this machine's routes.
#   ssh_config_sim.sh BIN_DIR        (~35 s: 25 s of cases, one cluster up and down)
. "$(dirname "$0")/../e2e/lib.sh"
for p in ssh-agent ssh-add; do
	command -v "$p" >/dev/null 2>&1 || skip "'$p' is not installed"
done
N=$(uniq_name sshcf)
AGENT_PID=""
cleanup_sim() {
	[ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null
	cleanup
}
trap cleanup_sim EXIT
unset MESHRUN_SSH_CONFIG MESHRUN_SSH MESHRUN_SSH_RESOLVER SSH_AUTH_SOCK
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

t_up=$(date +%s.%N)
up "$N" mesh:3
echo "# meshsim up: $(elapsed "$t_up") s"
S=$MESHSIM_STATE_DIR/$N
D=$TMP/cfg
mkdir -p "$D"
hostaddr() { awk -v h="$1" '$1=="Host"{f=($2==h)} f&&$1=="HostName"{print $2; exit}' "$CFG"; }
read -r H1 H2 H3 <<<"${HOSTS//,/ }"
A1=$(hostaddr "$H1") A2=$(hostaddr "$H2") A3=$(hostaddr "$H3")
[ -n "$A1" ] && [ -n "$A2" ] && [ -n "$A3" ] || { fail "host addresses in $CFG"; finish; }
cables "$N" >"$TMP/cables"

# h3 only through h1 or h2 (the bridge's address is .254 of the subnet, sim/plan.h)
BR=${A3%.*}.254
ip -n "$N-$H3" route add prohibit "$BR/32" || { fail "$H3: route to $BR prohibited"; finish; }
if ssh -F "$CFG" -o ConnectTimeout=2 "$H3" true 2>/dev/null; then
	fail "$H3 ($A3) is reachable without a jump: the test network is wrong"; finish
fi
ok "$H3 ($A3) is reachable only through $H1 or $H2"

# The options every config ends with (meshsim's per-host ones, for every alias);
# a generous ConnectTimeout: each hop of a jump is a login (zsh) on a loaded machine.
tail_opts() { # [IDENTITYFILE]
	printf 'Host *\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n' "${1:-$S/id_ed25519}"
	printf '  UserKnownHostsFile %s/known_hosts\n  StrictHostKeyChecking yes\n' "$S"
	printf '  BatchMode yes\n  LogLevel ERROR\n  ConnectTimeout 20\n'
}

# include: the host blocks live only in an included file (glob)
mkdir -p "$D/conf.d"
printf 'Host i1\n  HostName %s\nHost i2\n  HostName %s\n' "$A1" "$A2" >"$D/conf.d/hosts.conf"
{ echo "Include $D/conf.d/*.conf"; tail_opts; } >"$D/include.cfg"
# jump1, jump2, proxycmd
{
	printf 'Host j1\n  HostName %s\nHost j2\n  HostName %s\n' "$A1" "$A2"
	printf 'Host j3\n  HostName %s\n  ProxyJump j1\n' "$A3"
	printf 'Host k3\n  HostName %s\n  ProxyJump j1,root@%s:22\n' "$A3" "$A2"
	printf 'Host c3\n  HostName %s\n  ProxyCommand ssh -F %s -W %%h:%%p j2\n' "$A3" "$D/jump.cfg"
	tail_opts
} >"$D/jump.cfg"
# agent: the only accepted key for a1, a2 is in an agent at a socket of ours
ssh-keygen -q -t ed25519 -N '' -C sshcf-agentkey -f "$D/agentkey" || { fail "ssh-keygen"; finish; }
cat "$D/agentkey.pub" >>"$S/authorized_keys"
eval "$(ssh-agent -s -a "$D/agent.sock")" >/dev/null || { fail "ssh-agent"; finish; }
AGENT_PID=$SSH_AGENT_PID
SSH_AUTH_SOCK=$D/agent.sock ssh-add -q "$D/agentkey" 2>/dev/null || { fail "ssh-add"; finish; }
rm -f "$D/agentkey"
unset SSH_AUTH_SOCK SSH_AGENT_PID
{
	printf 'Host a1\n  HostName %s\n  IdentityAgent %s\n' "$A1" "$D/agent.sock"
	printf 'Host a2\n  HostName %s\n  IdentityAgent %s\n' "$A2" "$D/agent.sock"
	tail_opts "$D/nokey" | sed -e '/IdentitiesOnly/d'
} >"$D/agent.cfg"
# match: only Match host gives the user that exists
{
	printf 'Host m1\n  HostName %s\nHost m2\n  HostName %s\n' "$A1" "$A2"
	printf 'Match host %s,%s\n  User root\nHost *\n  User sshcf-nouser\n' "$A1" "$A2"
	tail_opts | sed -e '/User root/d'
} >"$D/match.cfg"

# the cable between two hosts: "hostA ifA hostB ifB"
cable_of() {
	awk -v a="$1" -v b="$2" '($1==a && $3==b) || ($1==b && $3==a) { print; exit }' "$TMP/cables"
}
flush_cables() {
	local ha ia hb ib
	while read -r ha ia hb ib; do
		ip -n "$N-$ha" -4 addr flush dev "$ia"
		ip -n "$N-$hb" -4 addr flush dev "$ib"
	done <"$TMP/cables"
}

# case NAME CFG ALIAS_A HOST_A ALIAS_B HOST_B BACKEND
run_case() {
	local name=$1 cfg=$2 xa=$3 ha=$4 xb=$5 hb=$6 be=$7 what ca ia cb ib aa ab rc t0
	what="$name --ssh $be"
	t0=$(date +%s.%N)
	flush_cables
	"$MESHCONFIG" --hosts "$xa,$xb" --backend ring --auto-setup --ssh "$be" --ssh-config "$cfg" \
		--output-hostfile "$TMP/hf.json" >"$TMP/mc.out" 2>&1
	rc=$?
	read -r ca ia cb ib <<<"$(cable_of "$ha" "$hb")"
	aa=$(addr4 "$N" "$ca" "$ia") ab=$(addr4 "$N" "$cb" "$ib")
	if [ $rc -eq 0 ] && [[ "$aa" == 192.168.*/30 && "$ab" == 192.168.*/30 && "$aa" != "$ab" ]]; then
		ok "$what: meshconfig set up $ca:$ia $aa <-> $cb:$ib $ab ($(elapsed "$t0") s)"
	else
		fail "$what: meshconfig exit $rc, $ca:$ia '$aa' $cb:$ib '$ab'"; show "$TMP/mc.out"; return
	fi
	"$MESHRUN" --ssh "$be" --ssh-config "$cfg" --hostfile "$TMP/hf.json" -- \
		/bin/sh -c 'echo "R$MLX_RANK $(id -un) $(ip -4 -o addr show dev en0 | awk "{print \$4}")"' \
		>"$TMP/mr.out" 2>"$TMP/mr.err"
	rc=$?
	if [ $rc -eq 0 ] && grep -q "^R[01] root $(hostaddr "$ha")/" "$TMP/mr.out" &&
		grep -q "^R[01] root $(hostaddr "$hb")/" "$TMP/mr.out"; then
		ok "$what: meshrun ran a rank on $ha and on $hb ($(elapsed "$t0") s)"
	else
		fail "$what: meshrun exit $rc"; show "$TMP/mr.out" "$TMP/mr.err"
	fi
}

for be in libssh2 openssh; do
	run_case include "$D/include.cfg" i1 "$H1" i2 "$H2" "$be"
	run_case jump1 "$D/jump.cfg" j1 "$H1" j3 "$H3" "$be"
	run_case jump2 "$D/jump.cfg" j2 "$H2" k3 "$H3" "$be"
	run_case proxycmd "$D/jump.cfg" j2 "$H2" c3 "$H3" "$be"
	run_case agent "$D/agent.cfg" a1 "$H1" a2 "$H2" "$be"
	run_case match "$D/match.cfg" m1 "$H1" m2 "$H2" "$be"
done
down "$N"
finish
