#!/bin/sh
# bench: wall time of `meshrun -n 8 true` vs `mpirun -n 8 true` (Open MPI), and of a
# 4-host remote launch through meshsim (root: `meshsim up mesh:4 --name mslb`)
# `meshrun --hostfile <h1..h4> --ssh-config <its ssh_config> true` vs
# `mpirun --host h1,h2,h3,h4 --mca plm_rsh_args "-F <ssh_config>" true`, in one run;
# then the same 4-host launch with --persist: the first (daemon started, connections
# made), a second right after it and a relaunch after 1 s idle (connections reused),
# in rounds.
# usage: bench_launch.sh MESHRUN [ITERATIONS] [MESHSIM]
#        (a benchmark, not a test: no assertions; the remote part needs root and MESHSIM)
# Times come from bench-timeit ($BENCH_TIMEIT, else next to MESHRUN): `$(date +%s%N)`
# around each launch would add the exec of date, milliseconds on a VM.
set -eu
MESHRUN=$1
N=${2:-${BENCH_ITERS:-20}}
MESHSIM=${3:-}
TIMEIT=${BENCH_TIMEIT:-$(dirname "$MESHRUN")/bench-timeit}
[ -x "$TIMEIT" ] || { echo "bench: no bench-timeit at '$TIMEIT' (build the bench-timeit target)" >&2; exit 1; }
MPIRUN=$(command -v mpirun || true)
MPIFLAGS="--oversubscribe"
[ "$(id -u)" = 0 ] && MPIFLAGS="$MPIFLAGS --allow-run-as-root"

# mean wall time in microseconds of N runs of "$@" (output discarded)
mean_us() {
	"$TIMEIT" "$N" "$@" || { echo "bench: '$*' failed" >&2; exit 1; }
}

m1=$(mean_us "$MESHRUN" -n 1 true)
m8=$(mean_us "$MESHRUN" -n 8 true)
echo "meshrun -n 1 true: $m1 us per launch ($N runs)"
echo "meshrun -n 8 true: $m8 us per launch ($N runs)"
echo "meshrun overhead per rank: $(((m8 - m1) / 7)) us marginal, $((m8 / 8)) us average"
if [ -n "$MPIRUN" ]; then
	# shellcheck disable=SC2086
	p8=$(mean_us "$MPIRUN" $MPIFLAGS -n 8 true)
	echo "mpirun -n 8 true:  $p8 us per launch ($N runs, $("$MPIRUN" --version 2>/dev/null | head -1))"
	awk -v m="$m8" -v p="$p8" 'BEGIN { printf "ratio mpirun/meshrun: %.1fx (target: >= 3x)\n", p / m }'
else
	echo "mpirun not installed: no comparison"
fi

# --- remote: 4 meshsim hosts over ssh ---
remote_skip() {
	echo "remote part skipped: $*"
	exit 0
}
[ -n "$MESHSIM" ] && [ -x "$MESHSIM" ] || remote_skip "no meshsim given"
[ "$(id -u)" = 0 ] || remote_skip "meshsim needs root"
[ -x /usr/sbin/sshd ] || remote_skip "sshd is not installed"
SIMDIR=$(mktemp -d "${TMPDIR:-/tmp}/mslb-bench.XXXXXX")
export MESHSIM_STATE_DIR="$SIMDIR/state"
trap '"$MESHSIM" down mslb >/dev/null 2>&1; rm -rf "$SIMDIR"' EXIT
trap 'exit 1' INT TERM
"$MESHSIM" up mesh:4 --name mslb >"$SIMDIR/up.log" 2>&1 || { cat "$SIMDIR/up.log"; exit 1; }
CONF=$MESHSIM_STATE_DIR/mslb/ssh_config
# the ring needs each host's address (--hosts h1,... names carry none): the same hosts as a hostfile
sep='['
for h in h1 h2 h3 h4; do
	ip=$(ip netns exec "mslb-$h" ip -o -4 addr show en0 | awk '{ split($4, a, "/"); print a[1] }')
	printf '%s{"ssh": "%s", "ips": ["%s"]}' "$sep" "$h" "$ip"
	sep=', '
done >"$SIMDIR/hosts.json"
echo ']' >>"$SIMDIR/hosts.json"
r4=$(mean_us "$MESHRUN" --hostfile "$SIMDIR/hosts.json" --ssh-config "$CONF" true)
echo "meshrun 4 hosts (ssh) true: $r4 us per launch ($N runs, one libssh2 connection per host)"

# --persist (issue 21 part 5): per round, from no daemon, the first launch (it
# starts the daemon, which makes the connections), a second one right after it
# (no handshake; the daemon's spare shells, started when the first left, are
# still starting), and a relaunch after a second of idle (spares ready, as for
# a user who relaunches within the persist time); a private runtime dir keeps
# the user's daemon out
export XDG_RUNTIME_DIR="$SIMDIR/run"
mkdir -m 700 "$XDG_RUNTIME_DIR"
once_us() {
	"$TIMEIT" 1 "$@" || { echo "bench: '$*' failed" >&2; exit 1; }
}
pf=0 ps=0 pr=0 i=0
while [ $i -lt "$N" ]; do
	"$MESHRUN" --persist stop --ssh-config "$CONF" >/dev/null 2>&1
	pf=$((pf + $(once_us "$MESHRUN" --persist 10m --hostfile "$SIMDIR/hosts.json" --ssh-config "$CONF" true)))
	ps=$((ps + $(once_us "$MESHRUN" --persist 10m --hostfile "$SIMDIR/hosts.json" --ssh-config "$CONF" true)))
	sleep 1
	pr=$((pr + $(once_us "$MESHRUN" --persist 10m --hostfile "$SIMDIR/hosts.json" --ssh-config "$CONF" true)))
	i=$((i + 1))
done
"$MESHRUN" --persist stop --ssh-config "$CONF" >/dev/null 2>&1
pf=$((pf / N)) ps=$((ps / N)) pr=$((pr / N))
echo "meshrun 4 hosts --persist, first (starts the daemon, connects): $pf us per launch ($N rounds)"
echo "meshrun 4 hosts --persist, second, right after the first:      $ps us per launch ($N rounds)"
echo "meshrun 4 hosts --persist, relaunch after 1 s idle:            $pr us per launch ($N rounds)"
awk -v f="$pf" -v s="$ps" -v r="$pr" -v d="$r4" 'BEGIN {
	printf "ratio first/relaunch with --persist: %.1fx (target: >= 5x)\n", f / r
	printf "ratio first/second (back to back) with --persist: %.1fx\n", f / s
	printf "ratio first with --persist / without: %.2fx (target: <= 1, no slower than without)\n", f / d }'
if [ -n "$MPIRUN" ]; then
	# orted on each host must reach mpirun over the management network (not the cables);
	# meshsim's hosts share this machine's hostname and /tmp, where the 4 orteds would race
	# for one session directory ("mkdir: File exists"): each gets its own TMPDIR ($$ is
	# the remote shell's pid). Neither changes what a launch costs.
	net=$(ip -o -4 route show dev mslb-br | awk '{ print $1; exit }')
	mkdir "$SIMDIR/orte"
	# shellcheck disable=SC2086
	q4=$(mean_us "$MPIRUN" $MPIFLAGS --host h1,h2,h3,h4 --mca plm_rsh_args "-F $CONF" \
		--mca oob_tcp_if_include "$net" --mca orte_launch_agent "env TMPDIR=$SIMDIR/orte/\$\$ orted" true)
	echo "mpirun 4 hosts (ssh) true:  $q4 us per launch ($N runs)"
	awk -v m="$r4" -v p="$q4" 'BEGIN { printf "ratio mpirun/meshrun (4 remote hosts): %.1fx (target: >= 3x)\n", p / m }'
fi
