#!/bin/bash
# kill -9 of meshrun mid-job on simulated Macs (issue 13): on 3 meshsim hosts
# whose login shell is zsh, as on macOS, a long job is started with meshrun over
# ssh and meshrun is SIGKILLed (no cleanup of its own runs). Within 3 s no rank
# process and no job directory may remain on any host: the per-host watchdog
# (run under /bin/sh whatever the login shell) sees its connection drop and
# kills the rank groups and removes the job directories. Prints the measured time.
#   e2e_kill9.sh BIN_DIR [FIXTURE]
. "$(dirname "$0")/lib.sh"
N=k$$ # unique to this run: suites on one machine do not collide
LIMIT_MS=${MESHRUN_KILL9_LIMIT_MS:-3000}

fix=${2:-fixtures/tb4-ring3}
case $fix in /*) ;; *) fix=$SRC/$fix ;; esac
up "$N" "$fix"
hosts=(${HOSTS//,/ })
[ ${#hosts[@]} -eq 3 ] || { fail "expected 3 hosts, got ${#hosts[@]} ($HOSTS)"; finish; }

# Every host logs in like a Mac, through the same ssh_config meshrun uses.
for h in "${hosts[@]}"; do
	got=$(ssh -F "$CFG" "$h" 'echo "${ZSH_VERSION:-none} $(hostname) $(uname -s)"' </dev/null 2>&1)
	case $got in
	none*|"") fail "$h: the login shell is not zsh: '$got'" ;;
	*" $h Darwin") ok "$h: zsh $got" ;;
	*) fail "$h: expected 'ZSH_VERSION $h Darwin', got '$got'" ;;
	esac
done

# A hostfile of the management addresses (no meshconfig needed for this).
awk '$1 == "Host" { h = $2 } $1 == "HostName" { printf "%s{\"ssh\": \"%s\", \"ips\": [\"%s\"]}", sep, h, $2; sep = ", " }
     BEGIN { printf "[" } END { print "]" }' "$CFG" >"$TMP/hosts.json"

MARK=86$$ # the ranks' sleep argument: finds them and only them
"$MESHRUN" --hostfile "$TMP/hosts.json" --ssh-config "$CFG" -- /bin/sh -c \
	'echo "ready $MLX_RANK $(hostname) ${MLX_HOSTFILE%/*}"; exec sleep "$0"' "$MARK" \
	</dev/null >"$TMP/job.out" 2>&1 &
mpid=$!

# ranks_in NS: pids of our ranks in the namespace (the hosts share one PID namespace)
ranks_in() {
	local p
	for p in $(pgrep -f "^sleep $MARK\$"); do
		[ "$(ip netns identify "$p" 2>/dev/null)" = "$1" ] && echo "$p"
	done
}
for _ in $(seq 1 100); do # up to 20 s
	[ "$(grep -c '^ready ' "$TMP/job.out")" -eq 3 ] && [ "$(pgrep -fc "^sleep $MARK\$")" -eq 3 ] && break
	kill -0 $mpid 2>/dev/null || break
	sleep 0.2
done
if [ "$(grep -c '^ready ' "$TMP/job.out")" -ne 3 ]; then
	fail "the 3 ranks did not start"; show "$TMP/job.out"; kill -9 $mpid 2>/dev/null; finish
fi
dirs=$(awk '$1 == "ready" { print $4 }' "$TMP/job.out" | sort -u)
for h in "${hosts[@]}"; do
	grep -q "^ready [0-9] $h /" "$TMP/job.out" && ok "$h: rank runs, hostname $h" ||
		fail "$h: no rank reported hostname $h"; 
	[ -n "$(ranks_in "$N-$h")" ] && ok "$h: its rank runs in its namespace" || fail "$h: no rank in $N-$h"
done
for d in $dirs; do
	[ -d "$d" ] && ok "job directory $d exists while the job runs" || fail "no job directory $d"
done
sleep 0.5 # the watchdogs have their registrations

t0=$(date +%s%N)
kill -9 $mpid
wait $mpid 2>/dev/null
left=1
while :; do
	left=0
	for h in "${hosts[@]}"; do
		[ -z "$(ranks_in "$N-$h")" ] || left=1
		for d in $dirs; do ip netns exec "$N-$h" test -e "$d" && left=1; done
	done
	el=$(( ($(date +%s%N) - t0) / 1000000 ))
	[ $left = 0 ] && break
	[ $el -gt 10000 ] && break
	sleep 0.05
done
echo "# kill -9 of meshrun -> no rank and no job directory on any host: ${el} ms"
if [ $left = 0 ] && [ $el -le "$LIMIT_MS" ]; then
	ok "kill -9 of meshrun: every rank and job directory gone on all 3 zsh hosts in ${el} ms (limit ${LIMIT_MS} ms)"
else
	fail "kill -9 of meshrun: after ${el} ms still left: ranks $(pgrep -f "^sleep $MARK\$" | tr '\n' ' ') dirs $(for d in $dirs; do [ -e "$d" ] && echo "$d"; done)"
fi
check "only sshd runs in the hosts" only_sshd_left "$N"
down "$N"
finish
