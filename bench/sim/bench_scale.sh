#!/bin/bash
# meshsim at scale (issue 14, part 5), root: for each topology spec, from nothing
# to a checked all-reduce and back, timing every phase:
#   up         meshsim up SPEC --name <unique>
#   configure  meshconfig --hosts ... --backend ring --auto-setup --verbose
#              (its step lines, with their times, are printed below the table)
#   launch     meshrun --hostfile ... -- /bin/true (ssh to every host and back)
#   all-reduce meshrun --hostfile ... -- bench-ar-ours --sizes 4M --repeats 1
#              (launch included; the program checks the sum on every rank)
#   down       meshsim down
# Goal (issue 14): 64 hosts up to a checked all-reduce in under 20 s, 256 in
# under 90 s.
# usage: bench_scale.sh BIN_DIR [SPEC...]   (default: ring:64 ring:256 rings:16x16,
# 16 rings of 16 hosts joined by a second ring)
# A benchmark, not a test: prints times; without root, sshd or network
# namespaces it says why and exits 0. Leaves nothing behind (trap).
set -uo pipefail
BIN=$(cd "${1:?usage: $0 BIN_DIR [SPEC...]}" && pwd) || exit 1
shift
SPECS=${*:-ring:64 ring:256 rings:16x16}
MESHSIM=$BIN/meshsim
MESHCONFIG=$BIN/meshconfig
MESHRUN=$BIN/meshrun
AR=$BIN/bench-ar-ours

skip() { echo "bench_scale: skipped: $*"; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "meshsim needs root"
[ -x /usr/sbin/sshd ] || skip "sshd is not installed (openssh-server)"
for p in "$MESHSIM" "$MESHCONFIG" "$MESHRUN" "$AR"; do
	[ -x "$p" ] || { echo "bench_scale: $p is not built" >&2; exit 1; }
done
ip netns add bsprobe$$ 2>/dev/null || skip "cannot create network namespaces here"
ip netns del bsprobe$$

TMP=$(mktemp -d "${TMPDIR:-/tmp}/bench-scale.XXXXXX")
export MESHSIM_STATE_DIR=$TMP/state
# one name per run (meshsim allows 9 characters): two runs never share a cluster
NAME=bs$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n' | cut -c1-7)
UP=0

cleanup() {
	local rc=$?
	[ "$UP" -eq 0 ] || "$MESHSIM" down "$NAME" >/dev/null 2>&1
	rm -rf "$TMP"
	exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

now() { date +%s.%N; }
# timed VAR CMD...: runs CMD (output to $TMP/VAR.log), sets T_VAR to its seconds
timed() {
	local v=$1 t0 t1 rc
	shift
	t0=$(now)
	"$@" >"$TMP/$v.log" 2>&1 </dev/null
	rc=$?
	t1=$(now)
	printf -v "T_$v" '%s' "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')"
	return $rc
}
fail() {
	echo "bench_scale: $spec: $1 failed; its output:" >&2
	sed 's/^/    | /' "$TMP/$2.log" | tail -30 >&2
}

echo "cpus: $(nproc)   load: $(cut -d' ' -f1-3 /proc/loadavg)   kernel: $(uname -r)"
rows=""
for spec in $SPECS; do
	T_up=- T_cfg=- T_launch=- T_ar=- T_down=- status=ok
	if timed up "$MESHSIM" up "$spec" --name "$NAME"; then
		UP=1
		CFG=$MESHSIM_STATE_DIR/$NAME/ssh_config
		HOSTS=$(awk '$1 == "Host" { printf "%s%s", sep, $2; sep = "," }' "$CFG")
		nhosts=$(grep -c '^Host ' "$CFG")
		if ! timed cfg "$MESHCONFIG" --hosts "$HOSTS" --backend ring --auto-setup --verbose \
			--ssh-config "$CFG" --output-hostfile "$TMP/hosts.json"; then
			fail configure cfg; status="configure failed"
		elif ! timed launch "$MESHRUN" --hostfile "$TMP/hosts.json" --ssh-config "$CFG" -- /bin/true; then
			fail launch launch; status="launch failed"
		elif ! timed ar "$MESHRUN" --hostfile "$TMP/hosts.json" --ssh-config "$CFG" -- \
			"$AR" --sizes 4M --repeats 1; then
			fail all-reduce ar; status="all-reduce failed"
		fi
		timed down "$MESHSIM" down "$NAME" || { fail down down; status="down failed"; }
		UP=0
	else
		fail up up; status="up failed"; nhosts=-
		"$MESHSIM" down "$NAME" >/dev/null 2>&1
	fi
	total=$(echo "$T_up $T_cfg $T_ar $T_down" | awk '{ for (i = 1; i <= NF; i++) s += $i; printf "%.2f", s }')
	rows+=$(printf '%-10s %5s %7s %9s %7s %10s %7s %8s  %s' "$spec" "$nhosts" "$T_up" "$T_cfg" \
		"$T_launch" "$T_ar" "$T_down" "$total" "$status")$'\n'
	if [ -s "$TMP/cfg.log" ]; then
		echo "== $spec: where configure spends its time (meshconfig --verbose steps)"
		grep -E '\([0-9.]+ ms\)' "$TMP/cfg.log" | sed 's/^/   /'
	fi
	if [ -s "$TMP/ar.log" ]; then
		echo "== $spec: the all-reduce program's own rows"
		grep -vE '^\s*$' "$TMP/ar.log" | tail -4 | sed 's/^/   /'
	fi
	rm -f "$TMP"/*.log
done
echo
echo "seconds per phase (all-reduce includes its launch; total = up + configure + all-reduce + down)"
printf '%-10s %5s %7s %9s %7s %10s %7s %8s  %s\n' spec hosts up configure launch all-reduce down total status
printf '%s' "$rows"
