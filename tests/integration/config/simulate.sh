#!/usr/bin/env bash
# meshconfig --simulate against the shipped fixtures: output and exit codes of the
# real binary. Usage: simulate.sh MESHCONFIG FIXTURES_DIR
set -u
mc=$1 fx=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# expect CODE DESCRIPTION -- ARGS...: run meshconfig, check the exit code.
expect() {
	local want=$1 what=$2
	shift 3
	"$mc" "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	if [ "$rc" -ne "$want" ]; then
		echo "FAIL: $what: exit $rc, want $want: meshconfig $*"
		sed 's/^/  stderr: /' "$tmp/err" | head -20
		fails=$((fails + 1))
		return 1
	fi
	echo "ok: $what (exit $rc)"
}

# grep_in FILE PATTERN DESCRIPTION
grep_in() {
	if ! grep -qF -- "$2" "$1"; then
		echo "FAIL: $3: '$2' not in $(basename "$1")"
		sed 's/^/  /' "$1" | head -20
		fails=$((fails + 1))
	fi
}

expect 0 "mesh4-m3ultra gives jaccl" -- --simulate "$fx/mesh4-m3ultra"
grep_in "$tmp/out" '"backend": "jaccl"' "jaccl hostfile on stdout"
grep_in "$tmp/out" '"rdma_en2"' "rdma devices in the hostfile"
grep_in "$tmp/err" "verdict: mesh" "verdict printed"
grep_in "$tmp/err" "Setup for m1" "setup commands printed without --auto-setup"
grep_in "$tmp/err" "sudo ifconfig en2 inet 192.168.0.1 netmask 255.255.255.252" "setup command"

expect 0 "ring8 gives jaccl-ring, --auto-setup simulated" -- \
	--simulate "$fx/ring8" --auto-setup --output-hostfile "$tmp/ring8.json" --verbose
grep_in "$tmp/ring8.json" '"backend": "jaccl-ring"' "hostfile written to --output-hostfile"
grep_in "$tmp/err" "Running auto setup for n8" "auto setup ran"
grep_in "$tmp/err" "all 16 link ends answer" "links verified"

expect 0 "MLX's --output prefix" -- --simulate "$fx/ring4" --output "$tmp/ring4.json" \
	--env MLX_METAL_FAST_SYNCH=1
grep_in "$tmp/ring4.json" '"MLX_METAL_FAST_SYNCH=1"' "envs in the hostfile"

expect 0 "ethernet" -- --simulate "$fx/mesh4-m3ultra" --over ethernet
grep_in "$tmp/out" '"10.0.1.3"' "en0 address in the ethernet hostfile"

expect 0 "the hostfile meshconfig wrote is accepted as --hostfile" -- \
	--simulate "$fx/ring4" --hostfile "$tmp/ring4.json"
grep_in "$tmp/out" '"ssh": "a4"' "hosts from --hostfile"

expect 1 "miswired4 is neither mesh nor ring" -- --simulate "$fx/miswired4"
grep_in "$tmp/err" "[ERROR]" "error printed"
[ -s "$tmp/out" ] && { echo "FAIL: stdout not empty after a topology failure"; fails=$((fails + 1)); }

expect 1 "--backend jaccl on a ring" -- --simulate "$fx/ring4" --backend jaccl
expect 2 "unknown flag" -- --frobnicate
expect 2 "bad --backend" -- --backend nccl
expect 2 "bad --env name" -- --simulate "$fx/ring4" --env "9X=1"
expect 2 "missing fixture" -- --simulate "$tmp/no-such-fixture"
expect 3 "host not in the fixture is unreachable" -- --simulate "$fx/ring4" --hosts a1,a2,zz
grep_in "$tmp/err" "zz" "unreachable host named"
expect 0 "--help" -- --help
grep_in "$tmp/out" "Exit status:" "exit codes documented in --help"

# Output paths that are no plain file (as root a rename over them would replace
# the device or the link in /dev): /dev/null, and /dev/stdout into a file.
expect 0 "--output-hostfile /dev/null" -- --simulate "$fx/ring4" --output-hostfile /dev/null
[ -c /dev/null ] || { echo "FAIL: /dev/null is no longer a character device"; fails=$((fails + 1)); }
"$mc" --simulate "$fx/ring4" --output-hostfile /dev/stdout >"$tmp/stdout.json" 2>"$tmp/err" ||
	{ echo "FAIL: --output-hostfile /dev/stdout into a file"; fails=$((fails + 1)); }
grep_in "$tmp/stdout.json" '"ssh": "a4"' "--output-hostfile /dev/stdout reaches the redirected file"
[ -L /dev/stdout ] || { echo "FAIL: /dev/stdout is no longer a symlink"; fails=$((fails + 1)); }
ls /dev/stdout.tmp.* >/dev/null 2>&1 && { echo "FAIL: temporary files left in /dev"; fails=$((fails + 1)); }

# No arguments on a machine that is no Mac (no system_profiler on PATH): the
# default host 127.0.0.1 fails discovery (4), with what meshconfig is for and
# the two flags that help (issue 37)
if ! command -v system_profiler >/dev/null 2>&1; then
	expect 4 "no arguments, not a Mac" -- &&
		grep_in "$tmp/err" "hint: system_profiler and networksetup are macOS commands" "the hint for a non-Mac" &&
		grep_in "$tmp/err" "--simulate DIR" "the hint names --simulate"
fi

if [ "$fails" -ne 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "all meshconfig --simulate checks passed"
