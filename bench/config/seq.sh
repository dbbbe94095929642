#!/usr/bin/env bash
# meshconfig vs the seed's host-by-host ssh (issue 4): on a simulated ring
# (meshsim, root), time
#   A. meshconfig --hosts h1,...,hN --over thunderbolt --backend ring --auto-setup
#      (libssh2: one connection per host, every step one parallel batch)
#   B. the same per-host commands run the way mlx.distributed_config runs them:
#      one `ssh -F CFG HOST CMD` (OpenSSH client, a new connection each) after
#      another; only the ssh check runs in parallel (the seed's threads).
# Each variant gets a freshly brought-up cluster (`meshsim up` is not timed), so
# both start from the same state and make the same changes; afterwards the cable
# addresses and routes of both clusters are compared (they must be equal).
#
# The commands of B are those meshconfig sends (src/config: run.c, tb.c, setup.c):
#   check     true; sudo -n true                                 (parallel per host)
#   discovery system_profiler SPThunderboltDataType -json; networksetup
#             -listallhardwareports; ibv_devices; the route-table probe; ipconfig
#             getifaddr en0; ipconfig getifaddr en1              (command by command,
#                                                                 host by host)
#   setup     the host's printed setup commands (`meshconfig` without --auto-setup)
#             joined with " ; " in one ssh per host, as the seed's IPConfigurator
#   ping      each link end pings its peer through its interface (meshconfig's
#             check after setup; the seed has none: the ratio without it is
#             printed too)
#
# Usage: seq.sh BUILD_DIR [TOPOLOGY (ring:32)] [RUNS (1)]
# A benchmark, not a test: it prints times and ratios; without root, sshd or
# network namespaces it says why and exits 0.
set -uo pipefail
build=$(cd "${1:-build}" && pwd) || exit 1
topo=${2:-ring:32}
runs=${3:-1}
name=msbc
MESHSIM=$build/bin/meshsim
MESHCONFIG=$build/bin/meshconfig

skip() { echo "meshconfig vs sequential ssh: skipped: $*"; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "meshsim needs root"
[ -x /usr/sbin/sshd ] || skip "sshd is not installed (openssh-server)"
command -v ssh >/dev/null || skip "the OpenSSH client is not installed"
[ -x "$MESHSIM" ] && [ -x "$MESHCONFIG" ] || { echo "build meshsim and meshconfig first" >&2; exit 1; }
ip netns add msbcprobe$$ 2>/dev/null || skip "cannot create network namespaces here"
ip netns del msbcprobe$$

TMP=$(mktemp -d "${TMPDIR:-/tmp}/msbc-bench.XXXXXX")
export MESHSIM_STATE_DIR=$TMP/state
UP=0

# nothing of the cluster may be left: namespaces, links, processes, state
nothing_left() {
	if ip netns list | grep -q "^$name-"; then echo "left: namespace $(ip netns list | grep "^$name-" | head -1)"; return 1; fi
	if ip -o link show | grep -q ": $name-"; then echo "left: link $(ip -o link show | grep ": $name-" | head -1)"; return 1; fi
	if pgrep -f "$MESHSIM_STATE_DIR/" >/dev/null; then echo "left: process $(pgrep -af "$MESHSIM_STATE_DIR/" | head -1)"; return 1; fi
	[ ! -e "$MESHSIM_STATE_DIR/$name" ] || { echo "left: state dir"; return 1; }
}
down() {
	[ "$UP" -eq 1 ] || return 0
	"$MESHSIM" down "$name" >/dev/null 2>&1
	UP=0
	nothing_left
}
cleanup() {
	local rc=$?
	# the sequential run's background checks, if interrupted
	jobs -p | xargs -r kill 2>/dev/null
	down || rc=1
	rm -rf "$TMP"
	exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

die() { echo "bench: $*" >&2; exit 1; }

# fresh: a new cluster (the old one removed first); sets CFG and HOSTS
fresh() {
	down || die "meshsim down left something behind"
	"$MESHSIM" up "$topo" --name "$name" >"$TMP/up.log" 2>&1 || { cat "$TMP/up.log" >&2; die "meshsim up $topo failed"; }
	UP=1
	CFG=$MESHSIM_STATE_DIR/$name/ssh_config
	HOSTS=$(awk '$1 == "Host" { printf "%s%s", sep, $2; sep = "," }' "$CFG")
}

# the cable addresses and routes of every host (to compare the two variants)
state() {
	local h
	for h in ${HOSTS//,/ }; do
		echo "== $h"
		ip -n "$name-$h" -4 -o addr show | awk '$2 != "lo" && $2 != "en0" { print $2, $4 }'
		ip -n "$name-$h" -4 route show | grep -v ' dev en0 '
		ip -n "$name-$h" -o link show master bridge0 | awk '{ print "in bridge0:", $2 }'
	done
}

now_us() { echo $(($(date +%s%N) / 1000)); }
ms() { awk -v us="$1" 'BEGIN { printf "%.0f", us / 1000 }'; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

mc() {
	"$MESHCONFIG" --hosts "$HOSTS" --over thunderbolt --backend ring --ssh-config "$CFG" "$@"
}

# --- A: meshconfig ---
run_meshconfig() {
	local t0 t1
	fresh
	t0=$(now_us)
	mc --auto-setup --output-hostfile "$TMP/hf.A" >"$TMP/A.log" 2>&1 || { cat "$TMP/A.log" >&2; die "meshconfig --auto-setup failed"; }
	t1=$(now_us)
	state >"$TMP/state.A"
	RES=$((t1 - t0))
}

# --- B: the same commands, one ssh after another ---
SSH_CHECK=(-o BatchMode=yes -o ConnectTimeout=5) # the seed's ssh check options
ROUTES_PROBE="sh -c '[ \"\$(uname -s)\" = Darwin ] || exit 1; exec netstat -rn -f inet'"
PING_PROBE="sh -c 'if [ \"\$(uname -s)\" = Linux ]; then exec ping -c 1 -W 1 -I \"\$1\" \"\$2\"; else exec ping -c 1 -t 1 \"\$2\"; fi' sh"
DISCOVERY=(
	"system_profiler SPThunderboltDataType -json"
	"networksetup -listallhardwareports"
	"ibv_devices"
	"$ROUTES_PROBE"
	"ipconfig getifaddr en0"
	"ipconfig getifaddr en1"
)

# The setup commands meshconfig prints without --auto-setup, one file per host
# ($TMP/setup/<host>), untimed: this run only reads (it changes nothing).
capture_plan() {
	rm -rf "$TMP/setup"
	mkdir "$TMP/setup"
	mc --output-hostfile "$TMP/hf.B" >"$TMP/plan.log" 2>&1 || { cat "$TMP/plan.log" >&2; die "meshconfig (plan only) failed"; }
	awk -v dir="$TMP/setup" '
		/^Setup for / { host = $3; next }
		/^=+$/ { next }
		/^$/ { host = ""; next }
		host != "" && /^sudo / { print > (dir "/" host) }
	' "$TMP/plan.log"
	local h
	for h in ${HOSTS//,/ }; do
		[ -s "$TMP/setup/$h" ] || die "no setup commands printed for $h"
	done
}

run_sequential() {
	local h c t0 t1 t2 t3 t4 pids=() bad=0 peer ifname
	fresh
	capture_plan
	mkdir -p "$TMP/out"
	t0=$(now_us)
	# check: in parallel, as the seed's threads (ssh, then sudo, per host)
	for h in ${HOSTS//,/ }; do
		{ ssh -F "$CFG" "${SSH_CHECK[@]}" "$h" true && ssh -F "$CFG" "${SSH_CHECK[@]}" "$h" sudo -n true; } \
			</dev/null >/dev/null 2>&1 &
		pids+=($!)
	done
	for c in "${pids[@]}"; do wait "$c" || bad=1; done
	[ $bad -eq 0 ] || die "sequential: the ssh check failed on a host"
	t1=$(now_us)
	# discovery: each command on every host in turn (exit status kept: the route
	# probe and ipconfig en1 fail on meshsim's hosts, for both variants)
	for c in "${!DISCOVERY[@]}"; do
		for h in ${HOSTS//,/ }; do
			ssh -F "$CFG" "$h" "${DISCOVERY[$c]}" </dev/null >"$TMP/out/$h.$c" 2>/dev/null
		done
	done
	for h in ${HOSTS//,/ }; do
		[ -s "$TMP/out/$h.0" ] && [ -s "$TMP/out/$h.1" ] || die "sequential: no discovery output from $h"
	done
	t2=$(now_us)
	# setup: one ssh per host, its commands joined with " ; "
	for h in ${HOSTS//,/ }; do
		ssh -F "$CFG" "$h" "$(awk '{ printf "%s%s", sep, $0; sep = " ; " }' "$TMP/setup/$h")" \
			</dev/null >/dev/null 2>&1 || die "sequential: the setup of $h failed"
	done
	t3=$(now_us)
	# ping check: every link end, one ssh each ("sudo route change PEER -interface IF")
	for h in ${HOSTS//,/ }; do
		while read -r _ _ _ peer _ ifname; do
			ssh -F "$CFG" "$h" "$PING_PROBE $ifname $peer" </dev/null >/dev/null 2>&1 ||
				die "sequential: $h cannot ping $peer through $ifname"
		done < <(grep '^sudo route change ' "$TMP/setup/$h")
	done
	t4=$(now_us)
	state >"$TMP/state.B"
	cmp -s "$TMP/hf.A" "$TMP/hf.B" || die "the two variants planned different hostfiles"
	cmp -s "$TMP/state.A" "$TMP/state.B" || { diff "$TMP/state.A" "$TMP/state.B" | head -20 >&2; die "the two variants left different cable addresses/routes"; }
	RES="$((t1 - t0)) $((t2 - t1)) $((t3 - t2)) $((t4 - t3))"
}

nhosts=0
A=() B=() Bnp=()
for r in $(seq "$runs"); do
	run_meshconfig
	a=$RES
	[ "$nhosts" -gt 0 ] || nhosts=$(echo "$HOSTS" | tr ',' '\n' | wc -l)
	run_sequential
	read -r check disc setup ping <<<"$RES"
	A+=("$a")
	B+=($((check + disc + setup + ping)))
	Bnp+=($((check + disc + setup)))
	printf 'run %d: meshconfig %s ms; sequential %s ms (check %s, discovery %s, setup %s, ping %s)\n' \
		"$r" "$(ms "$a")" "$(ms "${B[-1]}")" "$(ms "$check")" "$(ms "$disc")" "$(ms "$setup")" "$(ms "$ping")"
done
a=$(printf '%s\n' "${A[@]}" | median)
b=$(printf '%s\n' "${B[@]}" | median)
bnp=$(printf '%s\n' "${Bnp[@]}" | median)
nssh=$((nhosts * (2 + ${#DISCOVERY[@]} + 1) + $(cat "$TMP"/setup/* | grep -c '^sudo route change ')))
echo "topology $topo ($nhosts hosts), median of $runs run(s):"
printf '  meshconfig --auto-setup (libssh2, parallel):      %8s ms\n' "$(ms "$a")"
printf '  sequential ssh, same commands (%d ssh calls):    %8s ms\n' "$nssh" "$(ms "$b")"
printf '  sequential ssh without the ping check (the seed): %8s ms\n' "$(ms "$bnp")"
awk -v a="$a" -v b="$b" -v c="$bnp" 'BEGIN {
	printf "  ratio sequential/meshconfig: %.1fx (same commands), %.1fx (without pings); target >= 5x\n", b / a, c / a }'
down || exit 1
echo "  cluster removed, nothing left"
