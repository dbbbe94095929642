#!/bin/bash
# A 64-host cluster end to end (issue 33): meshsim up ring:64, meshconfig
# --auto-setup on every host, then a checked all-reduce on 64 ranks three ways:
#   e2e_scale.sh BIN_DIR [SPEC]      (SPEC default ring:64)
# - the default ssh path (libssh2, hosts resolved through `ssh -G`: more hosts
#   than one batch of parallel `ssh -G` runs, which lost the first 16 hosts to a
#   use-after-free before issue 33);
# - --ssh openssh (the OpenSSH client with a control master per host);
# - --persist (a per-user daemon holding the 64 connections; run twice, the
#   second through the kept connections), then 24 ranks on one host and 8
#   clients of the daemon at once (8 hosts each), then --persist stop.
# Every rank must report its checks passed; after each job no process but the
# sshd listener is left on any host, and no job directory; the persist daemon
# is gone after stop; meshsim down leaves nothing.
. "$(dirname "$0")/lib.sh"
SPEC=${2:-ring:64}
N=$(uniq_name msx)

# The persist daemon's socket lives under XDG_RUNTIME_DIR (else /tmp): a
# private one, so that this test never meets another run's daemon.
export XDG_RUNTIME_DIR=$TMP/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
unset MESHRUN_SSH MESHRUN_SSH_PERSIST MESHRUN_SSH_RESOLVER

up_ring "$N" "$SPEC"
nranks=$(wc -l <"$TMP/ranks")
nhosts=$(echo "${HOSTS//,/ }" | wc -w)
[ "$nranks" -eq "$nhosts" ] && [ "$nhosts" -ge 32 ] &&
	ok "hostfile: $nranks ranks, one per host, on cable addresses" ||
	{ fail "hostfile: $nranks ranks for $nhosts hosts"; show "$TMP/hosts.json"; finish; }

# no_rank_left: no all-reduce test process in any host's namespace.
no_rank_left() {
	local h p bad=0
	for h in ${HOSTS//,/ }; do
		for p in $(ip netns pids "$N-$h" 2>/dev/null); do
			case $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) in
			*meshrun-allreduce-test*) echo "  left in $h: rank $p"; bad=1 ;;
			esac
		done
	done
	return $bad
}

# job TAG ARGS...: meshrun ARGS -- the all-reduce test on every rank; every rank
# must say "N checks, 0 failed", and no rank may be left after it (nothing at
# all but the sshd listeners, except for the persist daemon's spare shells).
job() {
	local tag=$1 rc good t0
	shift
	t0=$(date +%s%N)
	"$MESHRUN" --hostfile "$TMP/hosts.json" --ssh-config "$CFG" "$@" -- \
		"$ARTEST" --max-size 1 </dev/null >"$TMP/$tag.out" 2>"$TMP/$tag.err"
	rc=$?
	echo "# $tag: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
	good=$(grep -cE "^meshrun-allreduce-test: rank [0-9]+ of $nranks \(ring\): [0-9]+ checks, 0 failed$" "$TMP/$tag.out")
	if [ $rc -eq 0 ] && [ "$good" -eq "$nranks" ] &&
		[ "$(grep -oE 'rank [0-9]+ of' "$TMP/$tag.out" | sort -u | wc -l)" -eq "$nranks" ]; then
		ok "$tag: all-reduce on $nranks hosts, every rank's checks passed"
	else
		fail "$tag: exit $rc, $good of $nranks ranks passed"
		show "$TMP/$tag.err" "$TMP/$tag.out"
	fi
	check "$tag: no rank left on any host" no_rank_left
	case " $* " in
	*" --persist "*) ;;
	*) check "$tag: only the sshd listeners left on the hosts" only_sshd_left "$N" ;;
	esac
	check "$tag: no job directory left" no_jobdir_left "$N"
}

job ssh-default
grep -q "ssh -G" "$TMP/ssh-default.err" && { fail "ssh-default: an ssh -G error"; show "$TMP/ssh-default.err"; }
job openssh --ssh openssh
job persist --persist 2m
job persist-again --persist 2m

# 24 ranks on one host, through the daemon: more jobs on one connection than
# its tables start with, all alive at once (the ring waits for every rank)
read -r h1 ip1 <"$TMP/ranks"
{
	printf '['
	for ((r = 0; r < 24; r++)); do
		[ $r -gt 0 ] && printf ', '
		printf '{"ssh": "%s", "ips": ["%s"]}' "$h1" "$ip1"
	done
	printf ']\n'
} >"$TMP/one24.json"
"$MESHRUN" --hostfile "$TMP/one24.json" --ssh-config "$CFG" --persist 2m -- \
	"$ARTEST" --max-size 1 </dev/null >"$TMP/one24.out" 2>&1
rc=$?
good=$(grep -cE "rank [0-9]+ of 24 \(ring\): [0-9]+ checks, 0 failed$" "$TMP/one24.out")
[ $rc -eq 0 ] && [ "$good" -eq 24 ] && ok "24 ranks on $h1 through the persist daemon: every rank passed" ||
	{ fail "24 ranks on $h1: exit $rc, $good of 24 passed"; show "$TMP/one24.out"; }
check "24 ranks on $h1: no rank left" no_rank_left

# 8 clients of the one daemon at once, each a job on 8 hosts (on all 64 the
# 8 jobs' 1024 sessions would take this 2-core machine's processors for longer
# than a job's setup may wait)
jq '.hosts |= .[0:8]' "$TMP/hosts.json" >"$TMP/hosts8.json"
pids=()
for ((k = 0; k < 8; k++)); do
	"$MESHRUN" --hostfile "$TMP/hosts8.json" --ssh-config "$CFG" --persist 2m --env "K=$k" -- \
		/bin/sh -c 'echo "client=$K rank=$MLX_RANK"' </dev/null >"$TMP/client$k.out" 2>&1 &
	pids+=($!)
done
bad=0
for ((k = 0; k < 8; k++)); do
	wait "${pids[$k]}"
	rc=$?
	[ $rc -eq 0 ] || { bad=1; echo "  client $k: exit $rc"; show "$TMP/client$k.out"; }
	n=$(grep -E "^client=$k rank=[0-7]$" "$TMP/client$k.out" | sort -u | wc -l)
	[ "$n" -eq 8 ] || { bad=1; echo "  client $k: $n of 8 ranks answered"; show "$TMP/client$k.out"; }
done
[ $bad = 0 ] && ok "8 clients of one persist daemon at once, 8 ranks each: every rank answered its own client" ||
	fail "8 concurrent persist clients"
"$MESHRUN" --persist stop --ssh-config "$CFG" >"$TMP/stop.out" 2>&1
check "--persist stop" test $? -eq 0
# the daemon listens on a socket in our private runtime directory
daemon_pids() {
	ss -xlpn 2>/dev/null | grep "$XDG_RUNTIME_DIR/" | grep -oE 'pid=[0-9]+' | cut -d= -f2 | sort -u
}
daemon_gone() {
	local i
	for ((i = 0; i < 50; i++)); do
		[ -z "$(daemon_pids)" ] && [ -z "$(find "$XDG_RUNTIME_DIR" -type s)" ] && return 0
		sleep 0.1
	done
	echo "  left: daemon $(daemon_pids), sockets $(find "$XDG_RUNTIME_DIR" -type s)"
	return 1
}
check "the persist daemon and its socket are gone" daemon_gone
# its spare shells go with it (they end at EOF)
spares_gone() {
	local i
	for ((i = 0; i < 50; i++)); do
		only_sshd_left "$N" >/dev/null && return 0
		sleep 0.1
	done
	only_sshd_left "$N"
}
check "after --persist stop: only the sshd listeners left on the hosts" spares_gone
down "$N"
finish
