#!/bin/bash
# sshd_hosts.sh N COMMAND [ARGS...]
#
# Test harness of the HAL's ssh backend: brings up N virtual hosts h1..hN, each a
# network namespace mrh-hI with a veth to the bridge mrh-br0 in the root namespace
# and its own sshd on 10.231.0.(10+I), runs COMMAND in the root namespace, tears
# everything down (also on failure or Ctrl-C) and exits with COMMAND's status.
#
# Exit 77 with a one-line reason when not root or when a tool is missing (ctest's
# SKIP_RETURN_CODE).
#
# COMMAND sees:
#   MRH_DIR         temporary directory (keys, configs, sshd pid files)
#   MRH_SSH_CONFIG  ssh_config naming h1..hN (OpenSSH's ssh -F reads it too), plus
#                   "badkey" (h2's address, but known_hosts holds another key) and
#                   "unreach" (10.231.0.250: nothing there, ConnectTimeout 2)
#   MRH_HOSTS       "h1 h2 ... hN"
#   MRH_NETNS_PREFIX  "mrh-" (namespace of hI is mrh-hI)
#   MRH_ZSH_HOSTS   the hosts whose login shell is zsh, as on a Mac: the even ones
#                   (h2, h4, ...) when zsh is installed, else none
# The zsh hosts' sshd runs in a mount namespace of its own where a copy of
# /etc/passwd with root's shell set to zsh is bind-mounted over /etc/passwd:
# nothing on the machine changes, and it ends with that sshd.
# Addresses: 10.231.0.0/24 only; the bridge holds 10.231.0.1.
set -u

N=${1:-}
shift || true
if [[ -z "$N" || ! "$N" =~ ^[0-9]+$ || "$N" -lt 1 || "$N" -gt 200 || $# -lt 1 ]]; then
	echo "usage: $0 NHOSTS COMMAND [ARGS...]" >&2
	exit 2
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "skip: needs root (network namespaces and sshd)"
	exit 77
fi
for t in /usr/sbin/sshd ssh-keygen ip flock; do
	if ! command -v "$t" >/dev/null 2>&1; then
		echo "skip: '$t' not found"
		exit 77
	fi
done

PREFIX=mrh-
BR=mrh-br0
NET=10.231.0

# One cluster at a time on this machine: the bridge and subnet are fixed.
exec 9>/tmp/mrh-harness.lock
flock 9

DIR=""

cleanup() {
	local ns pid f l
	if [[ -n "$DIR" ]]; then
		for f in "$DIR"/h*/sshd.pid "$DIR"/h*/sshd.bgpid; do
			[[ -f "$f" ]] && kill "$(cat "$f")" 2>/dev/null
		done
	fi
	# Everything still running inside our namespaces (sessions, leftovers).
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX"); do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null
		done
		ip netns delete "$ns" 2>/dev/null
	done
	for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^mrh"); do
		ip link delete "$l" 2>/dev/null
	done
	[[ -n "$DIR" ]] && rm -rf "$DIR"
	DIR=""
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

fail() {
	echo "sshd_hosts.sh: $*" >&2
	exit 1
}

# Leftovers of a crashed run (we hold the lock, so they are not someone else's).
cleanup
DIR=$(mktemp -d /tmp/mrh.XXXXXX)
mkdir -p /run/sshd
ZSH=$(command -v zsh 2>/dev/null || true)
command -v unshare >/dev/null 2>&1 || ZSH=""
ZSH_HOSTS=""

ip link add "$BR" type bridge || fail "cannot create bridge $BR"
ip addr add "$NET.1/24" dev "$BR"
ip link set "$BR" up

ssh-keygen -q -t ed25519 -N '' -C mrh-user -f "$DIR/id_ed25519" || fail "ssh-keygen"
cp "$DIR/id_ed25519.pub" "$DIR/authorized_keys"
: >"$DIR/known_hosts"
{
	echo "Host *"
	echo "    User root"
	echo "    IdentityFile $DIR/id_ed25519"
	echo "    UserKnownHostsFile $DIR/known_hosts"
	echo "    StrictHostKeyChecking yes"
	echo "    BatchMode yes"
	echo "    ConnectTimeout 5"
	echo "    LogLevel ERROR"
	echo
} >"$DIR/ssh_config.tail"
: >"$DIR/ssh_config"

HOSTS=""
for i in $(seq 1 "$N"); do
	h=h$i
	ns=$PREFIX$h
	addr=$NET.$((10 + i))
	hd=$DIR/$h
	mkdir -p "$hd"
	ssh-keygen -q -t ed25519 -N '' -C "mrh-$h" -f "$hd/host_ed25519" || fail "ssh-keygen"
	ip netns add "$ns" || fail "ip netns add $ns"
	ip link add "mrh$i" type veth peer name "mrhp$i" || fail "veth for $h"
	ip link set "mrhp$i" netns "$ns"
	ip link set "mrh$i" master "$BR" up
	ip -n "$ns" link set lo up
	ip -n "$ns" link set "mrhp$i" name eth0
	ip -n "$ns" addr add "$addr/24" dev eth0
	ip -n "$ns" link set eth0 up
	cat >"$hd/sshd_config" <<-EOF
		ListenAddress $addr
		Port 22
		HostKey $hd/host_ed25519
		PidFile $hd/sshd.pid
		AuthorizedKeysFile $DIR/authorized_keys
		PubkeyAuthentication yes
		PasswordAuthentication no
		KbdInteractiveAuthentication no
		UsePAM no
		StrictModes no
		PermitRootLogin yes
		MaxSessions 30
		MaxStartups 100
		SetEnv SHLVL=1
		ClientAliveInterval 2
		PrintMotd no
		LogLevel ERROR
	EOF
	# -D: no daemon(), we keep the pid (cleanup kills it) and reap it. Its
	# stdio is not ours: a daemon holding ctest's pipe would hang the test.
	wrap=()
	if [[ -n "$ZSH" && $((i % 2)) -eq 0 ]]; then
		awk -F: -v OFS=: -v sh="$ZSH" '$1 == "root" { $7 = sh } 1' /etc/passwd >"$hd/passwd"
		wrap=(unshare --mount --propagation private -- /bin/sh -c
		      'mount --bind "$0" /etc/passwd && exec "$@"' "$hd/passwd")
		ZSH_HOSTS="$ZSH_HOSTS $h"
	fi
	ip netns exec "$ns" "${wrap[@]}" /usr/sbin/sshd -D -f "$hd/sshd_config" -E "$hd/sshd.log" \
		</dev/null >>"$hd/sshd.log" 2>&1 &
	echo $! >"$hd/sshd.bgpid"
	echo "$addr $(cut -d' ' -f1-2 "$hd/host_ed25519.pub")" >>"$DIR/known_hosts"
	{
		echo "Host $h"
		echo "    HostName $addr"
	} >>"$DIR/ssh_config"
	HOSTS="$HOSTS $h"
done
# "badkey": h2's address (h1's when N = 1) but known_hosts claims h1's key for it.
bad_i=$((N >= 2 ? 2 : 1))
bad_addr=$NET.$((10 + bad_i))
echo "$bad_addr $(cut -d' ' -f1-2 "$DIR/h1/host_ed25519.pub")" >"$DIR/known_hosts_wrong"
[[ $bad_i -eq 1 ]] && ssh-keygen -q -t ed25519 -N '' -f "$DIR/other" &&
	echo "$bad_addr $(cut -d' ' -f1-2 "$DIR/other.pub")" >"$DIR/known_hosts_wrong"
{
	echo "Host badkey"
	echo "    HostName $bad_addr"
	echo "    UserKnownHostsFile $DIR/known_hosts_wrong"
	echo "Host unreach"
	echo "    HostName $NET.250"
	echo "    ConnectTimeout 2"
	cat "$DIR/ssh_config.tail"
} >>"$DIR/ssh_config"

# Wait until every sshd accepts connections.
for i in $(seq 1 "$N"); do
	addr=$NET.$((10 + i))
	ok=0
	for _ in $(seq 1 100); do
		if timeout 1 bash -c "exec 3<>/dev/tcp/$addr/22" 2>/dev/null; then
			ok=1
			break
		fi
		sleep 0.05
	done
	[[ $ok -eq 1 ]] || fail "sshd of h$i does not answer on $addr:22: $(cat "$DIR/h$i/sshd.log" 2>/dev/null)"
done

# The zsh hosts run commands with zsh, the others with bash.
for h in $HOSTS; do
	v=$(ssh -F "$DIR/ssh_config" "$h" 'echo "${ZSH_VERSION:-none}"' 2>&1)
	case " $ZSH_HOSTS " in
	*" $h "*) [[ "$v" != none && -n "$v" ]] || fail "$h: login shell is not zsh (\$ZSH_VERSION: '$v')" ;;
	*) [[ "$v" == none ]] || fail "$h: login shell is zsh, expected bash ('$v')" ;;
	esac
done
[[ -n "$ZSH_HOSTS" ]] && echo "sshd_hosts.sh: login shell zsh on$ZSH_HOSTS"

export MRH_DIR=$DIR
export MRH_ZSH_HOSTS="${ZSH_HOSTS# }"
export MRH_SSH_CONFIG=$DIR/ssh_config
export MRH_HOSTS="${HOSTS# }"
export MRH_NETNS_PREFIX=$PREFIX
"$@"
rc=$?
exit $rc
