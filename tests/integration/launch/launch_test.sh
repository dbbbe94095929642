#!/bin/sh
# Integration tests of meshrun with local ranks (no root needed).
# usage: launch_test.sh MESHRUN BINDIR CASE
# Every case checks real outcomes: exit codes, output, and that no rank process
# (nor a child of one) is left afterwards (pidfiles + kill -0).
set -u
MESHRUN=$1
BINDIR=$2
CASE=$3

D=$(mktemp -d "${TMPDIR:-/tmp}/meshrun-launch-test.XXXXXX") || exit 1
mkdir "$D/tmp"
export TMPDIR="$D/tmp" # job directories of meshrun land here: must be empty after each run
BGPID=
cleanup() {
	[ -n "$BGPID" ] && kill -9 "$BGPID" 2>/dev/null
	for f in "$D"/*.pid; do
		[ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
	done
	rm -rf "$D"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
	echo "FAIL ($CASE): $*" >&2
	exit 1
}

# alive PID: the process exists and is not a zombie
alive() {
	kill -0 "$1" 2>/dev/null || return 1
	st=$(sed -n 's/^[0-9]* (.*) \([A-Z]\).*/\1/p' "/proc/$1/stat" 2>/dev/null)
	[ "$st" != Z ]
}

# After meshrun returned, every recorded process must be gone. An orphaned
# grandchild may still wait for init to reap it: allow that a moment.
check_no_process_left() {
	n=0
	for f in "$D"/*.pid; do
		[ -f "$f" ] || continue
		n=$((n + 1))
		pid=$(cat "$f")
		tries=0
		while alive "$pid"; do
			tries=$((tries + 1))
			[ $tries -gt 50 ] && fail "process $pid ($(basename "$f")) is still running"
			sleep 0.1
		done
	done
	[ "$n" -ge "$1" ] || fail "expected at least $1 pidfiles, found $n"
	[ -z "$(ls -A "$D/tmp")" ] || fail "meshrun left files in TMPDIR: $(ls -A "$D/tmp")"
}

wait_for_files() { # N: wait until N pidfiles exist
	tries=0
	while [ "$(ls "$D" | grep -c '\.pid$')" -lt "$1" ]; do
		tries=$((tries + 1))
		[ $tries -gt 300 ] && fail "ranks did not start (pidfiles: $(ls "$D"))"
		sleep 0.05
	done
}

# A rank body: record its pid and a child's pid, then wait on the child.
RANK_BODY='echo $$ > "$0/rank$MLX_RANK.pid"; sleep 300 & echo $! > "$0/child$MLX_RANK.pid"; wait'

case "$CASE" in
exit_code)
	# rank 2 exits 3 once all 4 ranks run; the others (and their children) must be stopped
	"$MESHRUN" -n 4 -- sh -c '
		if [ "$MLX_RANK" = 2 ]; then
			echo $$ > "$0/rank2.pid"
			while [ "$(ls "$0" | grep -c "\.pid$")" -lt 7 ]; do sleep 0.05; done
			exit 3
		fi
		'"$RANK_BODY" "$D" >"$D/out" 2>"$D/err"
	rc=$?
	[ $rc = 3 ] || fail "exit code $rc, expected 3; stderr: $(cat "$D/err")"
	grep -q 'rank 2 (127.0.0.1): exit status 3' "$D/err" || fail "no summary line: $(cat "$D/err")"
	# ranks on one host: no pointer to meshconfig doctor (integration/doctor
	# checks it where ranks talk between hosts)
	! grep -q "meshconfig doctor" "$D/err" || fail "a doctor hint for local ranks: $(cat "$D/err")"
	check_no_process_left 7
	;;
signal_rank)
	"$MESHRUN" -n 3 -- sh -c '
		if [ "$MLX_RANK" = 1 ]; then
			while [ "$(ls "$0" | grep -c "\.pid$")" -lt 4 ]; do sleep 0.05; done
			kill -9 $$
		fi
		'"$RANK_BODY" "$D" 2>"$D/err"
	rc=$?
	[ $rc = 137 ] || fail "exit code $rc, expected 137 (128+SIGKILL); stderr: $(cat "$D/err")"
	grep -q 'rank 1 (127.0.0.1): killed by signal 9' "$D/err" || fail "no summary line: $(cat "$D/err")"
	check_no_process_left 4
	;;
sigint)
	"$MESHRUN" -n 4 -- sh -c "$RANK_BODY" "$D" 2>"$D/err" &
	BGPID=$!
	wait_for_files 8
	kill -INT "$BGPID"
	wait "$BGPID"
	rc=$?
	BGPID=
	[ $rc = 130 ] || fail "exit code $rc after SIGINT, expected 130; stderr: $(cat "$D/err")"
	check_no_process_left 8
	;;
killed)
	# meshrun itself SIGKILLed: no cleanup of its own runs, its watchdog
	# (a separate session) kills the rank groups and removes the job directory
	setsid "$MESHRUN" -n 3 -- sh -c "$RANK_BODY" "$D" 2>"$D/err" &
	BGPID=$!
	wait_for_files 6
	[ -n "$(ls -A "$D/tmp")" ] || fail "no job directory in TMPDIR while the ranks run"
	# the liveness mark a later job's sweep reads: this host and the live watchdog
	read -r mh mp <"$(ls -d "$D"/tmp/meshrun.*)/.meshrun-watchdog" ||
		fail "no .meshrun-watchdog mark in the job directory: $(ls -A "$D"/tmp/meshrun.*)"
	[ "$mh" = "$(uname -n)" ] || fail "the mark names host '$mh', not '$(uname -n)'"
	case $(ps -ww -o args= -p "$mp" 2>/dev/null) in
	*meshrun-watchdog*) ;;
	*) fail "the mark's pid $mp is not the job's watchdog" ;;
	esac
	kill -KILL -"$BGPID" # meshrun's whole process group, as a terminal or CI would
	wait "$BGPID"
	rc=$?
	BGPID=
	[ $rc = 137 ] || fail "exit code $rc, expected 137 (SIGKILL)"
	tries=0
	while [ -n "$(ls -A "$D/tmp")" ]; do
		tries=$((tries + 1))
		[ $tries -gt 100 ] && fail "the job directory stayed: $(ls -A "$D/tmp")"
		sleep 0.1
	done
	check_no_process_left 6
	;;
sigterm)
	"$MESHRUN" -n 2 -- sh -c "$RANK_BODY" "$D" 2>"$D/err" &
	BGPID=$!
	wait_for_files 4
	kill -TERM "$BGPID"
	wait "$BGPID"
	rc=$?
	BGPID=
	[ $rc = 143 ] || fail "exit code $rc after SIGTERM, expected 143; stderr: $(cat "$D/err")"
	check_no_process_left 4
	;;
stdin)
	printf 'typed once\n' | "$MESHRUN" -n 4 --tag-output -- sh -c 'read -r l; echo "got:$l"' >"$D/out" ||
		fail "exit code $?"
	sort "$D/out" >"$D/sorted"
	printf '[rank %s 127.0.0.1] got:typed once\n' 0 1 2 3 >"$D/want"
	cmp -s "$D/sorted" "$D/want" || fail "stdin did not reach every rank: $(cat "$D/out")"
	# the end of our stdin reaches every rank: wc ends only at EOF (--timeout: a
	# rank left waiting fails with 124 in seconds instead of hanging the test)
	printf 'a\nb\nc\n' | "$MESHRUN" -n 3 --timeout 10 -- sh -c 'wc -l' >"$D/outeof" ||
		fail "EOF: exit code $?"
	[ "$(tr -d ' ' <"$D/outeof" | sort | tr '\n' ' ')" = "3 3 3 " ] || fail "EOF: ranks counted $(cat "$D/outeof")"
	# --stdin 0: only rank 0 reads it, the others see EOF at once
	printf 'only zero\n' | "$MESHRUN" -n 3 --stdin 0 --tag-output -- sh -c 'if read -r l; then echo "got:$l"; else echo got:none; fi' |
		sort >"$D/out0" || fail "--stdin 0: exit code $?"
	printf '[rank 0 127.0.0.1] got:only zero\n[rank 1 127.0.0.1] got:none\n[rank 2 127.0.0.1] got:none\n' >"$D/want0"
	cmp -s "$D/out0" "$D/want0" || fail "--stdin 0: $(cat "$D/out0")"
	# a terminal on stdin (script(1) gives meshrun a pty): what is typed reaches
	# every rank (macOS's poll() refuses ttys; the portable build relays them)
	if command -v script >/dev/null 2>&1; then
		(sleep 1; printf 'typed on a tty\n'; sleep 2) |
			script -qec "'$MESHRUN' -n 2 --tag-output -- sh -c 'read -r l; echo got:\$l'" /dev/null |
			tr -d '\r' | grep '^\[rank' | sort >"$D/outtty" || fail "tty stdin: exit code $?"
		printf '[rank %s 127.0.0.1] got:typed on a tty\n' 0 1 >"$D/wanttty"
		cmp -s "$D/outtty" "$D/wanttty" || fail "tty stdin did not reach every rank: $(cat "$D/outtty")"
	else
		echo "note: no script(1): the terminal case is not run"
	fi
	check_no_process_left 0
	;;
lines)
	# 10,000 lines per rank and stream from 4 ranks: complete, whole, in order per rank
	P=abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghij
	"$MESHRUN" -n 4 -- sh -c '
		i=0
		while [ $i -lt 10000 ]; do
			printf "out r%s l%s %s\n" "$MLX_RANK" $i "$0"
			printf "err r%s l%s %s\n" "$MLX_RANK" $i "$0" >&2
			i=$((i + 1))
		done' "$P" >"$D/out" 2>"$D/err"
	rc=$?
	[ $rc = 0 ] || fail "exit code $rc"
	for s in out err; do
		awk -v s="$s" -v p="$P" '
			$0 !~ "^" s " r[0-3] l[0-9]+ " p "$" { print "bad line " NR ": " $0; bad = 1; exit 1 }
			{ r = substr($2, 2); l = substr($3, 2) + 0
			  if (l != next_l[r] + 0) { print "rank " r ": line " l " after " next_l[r] - 1; bad = 1; exit 1 }
			  next_l[r] = l + 1; n++ }
			END { if (bad) exit 1
			      for (r = 0; r < 4; r++) if (next_l[r] != 10000) { print "rank " r ": " next_l[r] " lines"; exit 1 }
			      if (n != 40000) { print n " lines"; exit 1 } }' "$D/$s" >"$D/why" ||
			fail "std$s: $(cat "$D/why")"
	done
	check_no_process_left 0
	;;
args)
	"$MESHRUN" -n 2 -- printf '%s|\n' 'a b' "it's" '$HOME' 'x"y' '' 'tab	end' >"$D/out" || fail "exit code $?"
	printf '%s|\n' 'a b' "it's" '$HOME' 'x"y' '' 'tab	end' 'a b' "it's" '$HOME' 'x"y' '' 'tab	end' >"$D/want"
	cmp -s "$D/out" "$D/want" || fail "arguments changed: $(cat "$D/out")"
	"$MESHRUN" -n 1 --env 'V=sp ace $X "q"' -- sh -c 'printf "%s\n" "$V"' >"$D/env" || fail "exit code $?"
	[ "$(cat "$D/env")" = 'sp ace $X "q"' ] || fail "--env value changed: $(cat "$D/env")"
	check_no_process_left 0
	;;
usage)
	"$MESHRUN" 2>"$D/err"; rc=$?
	[ $rc = 2 ] || fail "no command: exit code $rc, expected 2"
	"$MESHRUN" -n 2 --env 'BAD-NAME=1' -- true 2>"$D/err"; rc=$?
	[ $rc = 2 ] && grep -q "invalid variable name 'BAD-NAME'" "$D/err" || fail "bad --env: $rc $(cat "$D/err")"
	"$MESHRUN" --backend bogus -- true 2>"$D/err"; rc=$?
	[ $rc = 2 ] && grep -q "bogus" "$D/err" || fail "bad --backend: $rc $(cat "$D/err")"
	printf '[{"ssh": "a", "ips": [1]}]' >"$D/hosts.json"
	"$MESHRUN" --hostfile "$D/hosts.json" -- true 2>"$D/err"; rc=$?
	[ $rc = 2 ] && grep -q 'hosts.json' "$D/err" && grep -q 'ips\[0\]' "$D/err" ||
		fail "bad hostfile: $rc $(cat "$D/err")"
	printf '{"backend": "jaccl", "hosts": [{"ssh": "127.0.0.1", "ips": ["127.0.0.1"], "rdma": ["rdma_x", null]}, {"ssh": "127.0.0.1", "ips": ["127.0.0.1"], "rdma": ["rdma_en2", null]}]}' >"$D/jaccl.json"
	"$MESHRUN" --hostfile "$D/jaccl.json" -- true 2>"$D/err"; rc=$?
	[ $rc = 2 ] && grep -q 'malformed hostfile' "$D/err" && grep -q "host 0" "$D/err" ||
		fail "bad rdma matrix: $rc $(cat "$D/err")"
	"$MESHRUN" -n 0 -- true 2>"$D/err"; rc=$?
	[ $rc = 2 ] || fail "-n 0: exit code $rc"
	;;
prelaunch)
	"$MESHRUN" -n 2 --cwd "$D/nonexistent" -- true 2>"$D/err"; rc=$?
	[ $rc = 255 ] && grep -q "127.0.0.1: working directory '$D/nonexistent' does not exist" "$D/err" ||
		fail "--cwd missing: $rc $(cat "$D/err")"
	"$MESHRUN" -n 2 -- meshrun-no-such-program 2>"$D/err"; rc=$?
	[ $rc = 255 ] && grep -q "127.0.0.1: command 'meshrun-no-such-program' not found" "$D/err" ||
		fail "missing command: $rc $(cat "$D/err")"
	"$MESHRUN" -n 2 --cwd "$D" -- sh -c 'pwd' >"$D/out" || fail "--cwd: exit code $?"
	[ "$(sort -u "$D/out")" = "$D" ] || fail "--cwd: ranks ran in $(cat "$D/out")"
	check_no_process_left 0
	;;
timeout)
	"$MESHRUN" -n 2 --timeout 0.5 -- sh -c "$RANK_BODY" "$D" 2>"$D/err"; rc=$?
	[ $rc = 124 ] || fail "exit code $rc, expected 124; $(cat "$D/err")"
	check_no_process_left 4
	;;
env)
	"$MESHRUN" -n 3 -p 4000 --env A=1 -- sh -c 'echo "$MLX_RANK $A $(cat "$MLX_HOSTFILE") ${#MESHRUN_JOB_TOKEN}"' |
		sort >"$D/out" || fail "exit code $?"
	H='[["127.0.0.1:4000"], ["127.0.0.1:4001"], ["127.0.0.1:4002"]]'
	printf '%s\n' "0 1 $H 32" "1 1 $H 32" "2 1 $H 32" >"$D/want"
	cmp -s "$D/out" "$D/want" || fail "environment: $(cat "$D/out")"
	# an MLX object-form hostfile: its envs, two local names, 2 connections per IP
	printf '{"backend": "ring", "envs": ["HF=1"], "hosts": [{"ssh": "localhost", "ips": ["127.0.0.1", "127.0.0.1"]}, {"ssh": "127.0.0.1", "ips": ["127.0.0.1"]}]}' >"$D/hosts.json"
	"$MESHRUN" --hostfile "$D/hosts.json" --connections-per-ip 2 --env B=2 -- \
		sh -c 'echo "$MLX_RANK $HF $B $(cat "$MLX_HOSTFILE")"' | sort >"$D/out" || fail "hostfile: exit code $?"
	H='[["127.0.0.1:32323", "127.0.0.1:32324", "127.0.0.1:32325", "127.0.0.1:32326"], ["127.0.0.1:32327", "127.0.0.1:32328"]]'
	printf '%s\n' "0 1 2 $H" "1 1 2 $H" >"$D/want"
	cmp -s "$D/out" "$D/want" || fail "hostfile environment: $(cat "$D/out")"
	check_no_process_left 0
	;;
allreduce)
	T="$BINDIR/meshrun-allreduce-test"
	if [ ! -x "$T" ]; then
		echo "SKIP: $T is not built (libmeshrun's test program)"
		exit 77
	fi
	"$MESHRUN" -n 4 --backend ring -- "$T" --max-size 1M >"$D/out" 2>"$D/err"; rc=$?
	[ $rc = 0 ] || fail "exit code $rc: $(cat "$D/out" "$D/err")"
	[ "$(grep -c ' of 4 (ring): .* 0 failed' "$D/out")" = 4 ] || fail "not 4 passing ranks: $(cat "$D/out")"
	check_no_process_left 0
	;;
parity)
	# mlx.launch 0.32 parity (issue 15): --python before every command
	"$MESHRUN" --python /bin/echo -n 1 -- true >"$D/out" 2>"$D/err" || fail "--python: $(cat "$D/err")"
	[ "$(cat "$D/out")" = true ] || fail "--python /bin/echo -- true printed '$(cat "$D/out")'"
	# --print-python: sys.executable of the chosen Python, and how on stderr
	printf '#!/bin/sh\necho /opt/real/python3\n' >"$D/py" && chmod +x "$D/py"
	"$MESHRUN" --print-python --python "$D/py" >"$D/out" 2>"$D/err" || fail "--print-python: $?"
	[ "$(cat "$D/out")" = /opt/real/python3 ] && grep -q -- "--python: $D/py" "$D/err" ||
		fail "--print-python: $(cat "$D/out" "$D/err")"
	# --no-verify-script: accepted, one line of deprecation
	"$MESHRUN" --no-verify-script -- true 2>"$D/err" || fail "--no-verify-script: exit $?"
	[ "$(grep -c 'no-verify-script is deprecated' "$D/err")" = 1 ] || fail "no deprecation note: $(cat "$D/err")"
	# COLUMNS/LINES from the terminal (script(1) gives meshrun a pty), not over --env
	if command -v script >/dev/null 2>&1; then
		env -u COLUMNS -u LINES script -qec "stty cols 97 rows 31; $MESHRUN -- sh -c 'echo C=\$COLUMNS L=\$LINES'" \
			/dev/null </dev/null | tr -d '\r' >"$D/out"
		grep -qx 'C=97 L=31' "$D/out" || fail "terminal size: $(cat "$D/out")"
		env -u COLUMNS -u LINES script -qec "stty cols 97 rows 31; $MESHRUN --env COLUMNS=5 -- sh -c 'echo C=\$COLUMNS L=\${LINES:-unset}'" \
			/dev/null </dev/null | tr -d '\r' >"$D/out"
		grep -qx 'C=5 L=unset' "$D/out" || fail "--env COLUMNS: $(cat "$D/out")"
	fi
	# --hosts with --hostfile: the hostfile wins, with a warning
	printf '[{"ssh": "127.0.0.1", "ips": ["127.0.0.1"]}]' >"$D/one.json"
	"$MESHRUN" --hosts a,b --hostfile "$D/one.json" -- echo ran >"$D/out" 2>"$D/err" ||
		fail "--hosts with --hostfile: $? $(cat "$D/err")"
	[ "$(cat "$D/out")" = ran ] && grep -q "using the hosts of '$D/one.json'" "$D/err" ||
		fail "--hosts with --hostfile: $(cat "$D/out" "$D/err")"
	# one --hosts prefix, the entry named
	"$MESHRUN" --hosts "127.0.0.1, 127.0.0.1" -- true 2>"$D/err"; rc=$?
	[ $rc = 2 ] && grep -q "^meshrun: --hosts: entry 2 ' 127.0.0.1'" "$D/err" && ! grep -q -- "--hosts: --hosts" "$D/err" ||
		fail "--hosts with a space: $rc $(cat "$D/err")"
	# jaccl without a hostfile: say what it needs and how to make it
	"$MESHRUN" --backend jaccl -n 2 -- true 2>"$D/err"; rc=$?
	[ $rc = 2 ] && grep -q "needs a hostfile with an rdma matrix" "$D/err" && grep -q "meshconfig --backend jaccl" "$D/err" &&
		! grep -q "malformed" "$D/err" || fail "jaccl without hostfile: $rc $(cat "$D/err")"
	# every installed program answers --help (usage on stdout, exit 0, nothing run)
	for p in meshrun meshconfig meshsim meshrun-allreduce-demo meshrun-allreduce-test meshrun-nccl-check; do
		[ -x "$BINDIR/$p" ] || continue
		timeout 10 "$BINDIR/$p" --help >"$D/out" 2>"$D/err" </dev/null; rc=$?
		[ $rc = 0 ] && grep -qi "usage" "$D/out" && ! grep -q "all_sum =" "$D/out" ||
			fail "$p --help: $rc $(head -3 "$D/out" "$D/err")"
	done
	;;
same_way)
	# every rank fails on its own, the same way (issue 37): a program whose
	# shared library is gone exits 127 on all 4 ranks, within milliseconds of
	# each other. Each rank's end is what it was (never "stopped by meshrun
	# (exit status 127)"), and one line says that they all failed alike, with
	# the first lines of the stderr and a hint naming meshrun's own flags.
	command -v cc >/dev/null 2>&1 || { echo "SKIP: no C compiler (cc)"; exit 77; }
	printf 'int gone(void) { return 0; }\n' >"$D/gone.c"
	printf 'int gone(void);\nint main(void) { return gone(); }\n' >"$D/prog.c"
	cc -shared -fPIC -o "$D/libi37gone.so" "$D/gone.c" && cc -o "$D/prog" "$D/prog.c" -L"$D" -li37gone ||
		fail "cannot build the test program"
	rm "$D/libi37gone.so"
	"$MESHRUN" -n 4 -- "$D/prog" >"$D/out" 2>"$D/err"; rc=$?
	[ $rc = 127 ] || fail "exit code $rc, expected 127: $(cat "$D/err")"
	grep -Eq '^\[ERROR\] (every rank \(4 of 4\)|[2-4] of 4 ranks) failed the same way: exit status 127' "$D/err" ||
		fail "no 'failed the same way' line: $(cat "$D/err")"
	grep -q '^\[ERROR\]   | .*libi37gone.so' "$D/err" || fail "the stderr's first lines are not shown: $(cat "$D/err")"
	grep -q 'stopped by meshrun (exit status 127)' "$D/err" && fail "a rank that exited 127 by itself is said to be stopped: $(cat "$D/err")"
	grep -q '^\[ERROR\] hint: exit status 127 .* --env LD_LIBRARY_PATH' "$D/err" || fail "no hint: $(cat "$D/err")"
	"$MESHRUN" --help | grep -q -- '--env' || fail "the hint's --env is not in --help"
	# a rank that exits on its own while meshrun stops the others is said so
	# (rank 1 fails once the others have their trap: a TERM before it would
	# end them by the signal, which is "stopped by meshrun")
	"$MESHRUN" -n 3 -- sh -c 'if [ "$MLX_RANK" = 1 ]; then
		while ! [ -e "$0/ready0" ] || ! [ -e "$0/ready2" ]; do sleep 0.05; done; exit 3; fi
		trap "exit 5" TERM; : >"$0/ready$MLX_RANK"; sleep 30 & wait' "$D" \
		2>"$D/err"; rc=$?
	[ $rc = 3 ] && grep -q '^\[ERROR\] rank 1 (127.0.0.1): exit status 3$' "$D/err" &&
		grep -Eq '^\[ERROR\] rank [02] \(127.0.0.1\): exit status 5, as meshrun was stopping it after rank 1' "$D/err" ||
		fail "own exit while stopping: $rc $(cat "$D/err")"
	;;
*)
	fail "unknown case"
	;;
esac
echo "ok: $CASE"
exit 0
