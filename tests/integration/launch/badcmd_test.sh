#!/bin/sh
# Bad command lines of meshrun and meshconfig, table-driven (issue 15): each
# case gives the exit status expected and two strings the first error line must
# hold, the flag (or what stands for it) and the value; nothing may run.
# usage: badcmd_test.sh BINDIR
set -u
BIN=$1
D=$(mktemp -d "${TMPDIR:-/tmp}/meshrun-badcmd.XXXXXX") || exit 1
trap 'rm -rf "$D"' EXIT
FIX=$(cd "$(dirname "$0")/../../.." && pwd)/fixtures
nfail=0
ncase=0
# bad RC FLAG VALUE PROG ARGS...
bad() {
	want=$1 flag=$2 val=$3 prog=$4
	shift 4
	ncase=$((ncase + 1))
	env -u OMPI_ALLOW_RUN_AS_ROOT -u COLUMNS "$BIN/$prog" "$@" >"$D/out" 2>"$D/err" </dev/null
	rc=$?
	line=$(grep -v '^\[INFO\]' "$D/err" | head -1)
	if [ "$rc" != "$want" ]; then
		echo "FAIL: $prog $*: exit $rc, expected $want: $line" >&2
		nfail=$((nfail + 1))
	elif ! printf '%s' "$line" | grep -qF -- "$flag" || ! printf '%s' "$line" | grep -qF -- "$val"; then
		echo "FAIL: $prog $*: '$line' does not name '$flag' and '$val'" >&2
		nfail=$((nfail + 1))
	elif [ -s "$D/out" ]; then
		echo "FAIL: $prog $*: wrote to stdout: $(head -2 "$D/out")" >&2
		nfail=$((nfail + 1))
	fi
}
printf '[{"ssh": "a;b", "ips": []}]' >"$D/hostile.json"
printf '[{"ssh": "h1", "ips": [1]}]' >"$D/types.json"
printf '{"backend": "gloo", "hosts": [{"ssh": "h1", "ips": ["10.0.0.1"]}]}' >"$D/gloo.json"

# meshrun: each flag's bad values
bad 2 --repeat-hosts "'0'" meshrun -n 0 -- true
bad 2 --repeat-hosts "'abc'" meshrun -n abc -- true
bad 2 --repeat-hosts "'70000'" meshrun --repeat-hosts 70000 -- true
bad 2 --starting-port "'0'" meshrun -p 0 -- true
bad 2 --starting-port "'x'" meshrun --starting-port x -- true
bad 2 --connections-per-ip "'0'" meshrun --connections-per-ip 0 -- true
bad 2 --nccl-port "'99999'" meshrun --nccl-port 99999 -- true
bad 2 --backend "'gloo'" meshrun --backend gloo -- true
bad 2 --launcher "'pbs'" meshrun --launcher pbs -- true
bad 2 --stdin "'2'" meshrun --stdin 2 -- true
bad 2 --timeout "'abc'" meshrun --timeout abc -- true
bad 2 --timeout "'-1'" meshrun --timeout -1 -- true
bad 2 --env "'1X=2'" meshrun --env 1X=2 -- true
bad 2 --env "'A-B=1'" meshrun --env A-B=1 -- true
bad 2 --cwd "(DIR)" meshrun --cwd -- true
bad 2 --python "(PATH)" meshrun --python
bad 2 --hostfile "/nonexistent/h.json" meshrun --hostfile /nonexistent/h.json -- true
bad 2 "[0].ssh" "'a;b'" meshrun --hostfile "$D/hostile.json" -- true
bad 2 "[0].ips[0]" "types.json" meshrun --hostfile "$D/types.json" -- true
bad 2 "backend" "'gloo'" meshrun --hostfile "$D/gloo.json" -- true
bad 2 --mpi-arg "'unterminated" meshrun --backend mpi --mpi-arg "'unterminated" --mpi-arg --allow-run-as-root -- true
bad 2 --no-such-flag "--no-such-flag" meshrun --no-such-flag -- true
bad 2 "no command" "COMMAND" meshrun --hosts 127.0.0.1
# conflicting flags
bad 2 "--launcher meshrun" "mpi" meshrun --launcher meshrun --backend mpi -- true
bad 2 "--backend jaccl" "rdma matrix" meshrun --backend jaccl -n 2 -- true
bad 2 "--backend jaccl-ring" "rdma matrix" meshrun --backend jaccl-ring --hosts 10.0.0.1,10.0.0.2 -- true
# empty and hostile host lists
bad 2 --hosts "''" meshrun --hosts "" -- true
bad 2 --hosts "'a,,b'" meshrun --hosts a,,b -- true
bad 2 --hosts "'a,'" meshrun --hosts a, -- true
bad 2 --hosts "'-oProxyCommand=id'" meshrun --hosts -oProxyCommand=id -- true
bad 2 --hosts "'a;id'" meshrun --hosts "a;id" -- true
bad 2 --hosts "'a b'" meshrun --hosts "a b" -- true
bad 2 --hosts "'\$(id)'" meshrun --hosts '$(id)' -- true
bad 2 --hosts "'\`id\`'" meshrun --hosts '`id`' -- true
bad 2 --hosts "'me@'" meshrun --hosts me@ -- true
bad 2 --hosts "'@h'" meshrun --hosts @h -- true
bad 2 --hosts "' 127.0.0.1'" meshrun --hosts "127.0.0.1, 127.0.0.1" -- true
bad 2 --hosts "'me@-h'" meshrun --hosts me@-h -- true
bad 2 --env "'NOEQ'" meshrun --env NOEQ -- true

# meshconfig
bad 2 --over "'wifi'" meshconfig --over wifi
bad 2 --backend "'mpi'" meshconfig --backend mpi
bad 2 --timeout "'abc'" meshconfig --timeout abc
bad 2 --env "'1X=2'" meshconfig --env 1X=2
bad 2 --png "(FILE)" meshconfig --png
bad 2 --hostfile "/nonexistent/h.json" meshconfig --hostfile /nonexistent/h.json
bad 2 --hosts "'a,,b'" meshconfig --hosts a,,b
bad 2 --hosts "'-oX=y'" meshconfig --hosts -oX=y
bad 2 --hosts "'x;y'" meshconfig --hosts "x;y"
bad 2 --simulate "/nonexistent" meshconfig --simulate /nonexistent
bad 2 --output-hostfile "/no/such/dir/h.json" meshconfig --simulate "$FIX/ring4" --output-hostfile /no/such/dir/h.json
bad 2 --bogus "--bogus" meshconfig --bogus
# meshconfig doctor (issue 35)
bad 2 --hostfile "give the hosts" meshconfig doctor
bad 2 --env "'NOEQ'" meshconfig doctor --hosts a --env NOEQ
bad 2 --starting-port "'0'" meshconfig doctor --hosts a --starting-port 0
bad 2 --connect-timeout "0.1 to 600" meshconfig doctor --hosts a --connect-timeout 0
bad 2 --backend "'gloo'" meshconfig doctor --hosts a --backend gloo
bad 2 --hostfile "/nonexistent/h.json" meshconfig doctor --hostfile /nonexistent/h.json
bad 2 --hostfile "'gloo'" meshconfig doctor --hostfile "$D/gloo.json"
bad 2 --hosts "'x;y'" meshconfig doctor --hosts "x;y"
bad 2 doctor-probe "listen|connect" meshconfig doctor-probe listen

echo "$ncase bad command lines, $nfail failed"
[ "$nfail" = 0 ] && [ "$ncase" -ge 30 ]
