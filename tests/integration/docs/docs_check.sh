#!/usr/bin/env bash
# docs_check.sh MODE SOURCE_DIR BUILD_DIR
#   reference   docs/reference/TOOL.md equals what the build generated
#   man         each man page renders without a warning (groff -ww, man -l),
#               and `cmake --install` puts pages and completions in place
#   flags       every flag of every --help (meshsim: of every subcommand) is in
#               docs/reference/TOOL.md, and meshrun's/meshconfig's in docs/migration.md
#   migration   docs/migration.md has a row for every flag and environment
#               variable of MLX 0.32's launch.py and config.py (listed below) and
#               for every flag of --help and variable meshrun sets, each marked
#               same, different or extra; no row names a flag that does not exist
#   completion  the generated bash and zsh completions offer flags and choices
#   laptop      the blocks of docs/guide-laptop.md marked "# test: laptop" run
#               as written, leaving nothing where they ran but their scratch
#               folder (and "# test: laptop-root" ones when root, with the
#               cluster name "docs" replaced by one of this run's own); without
#               rdma_rxe the cluster's hostfile is a ring one and its job passed
#   progress    meshconfig's step line counts hosts one by one on a terminal
#               (as docs/contracts.md says), and is silent in a log
#   contracts   the generated blocks of docs/contracts.md (the environment tables
#               from src/common/envmap.h) equal what the build generated
#   layers      every #include under src/ and sim/ names only the modules that
#               docs/architecture.md's table allows its module (calls go down)
#   progress-sim  the same for meshsim up, and meshconfig over its sshd (root;
#               cluster "docsp" and random hex, with --pretend-rdma)
#   own-program the laptop guide's section 4 ("Write and run your own
#               program"): its blocks, hello.c and CMakeLists.txt as written,
#               against an install prefix (cmake --install to a temporary
#               HOME), 4 local ranks and (root) a simulated cluster; examples/
#               built with find_package and pkg-config
set -u
mode=$1 src=$2 build=$3
tools="meshrun meshconfig meshsim"
# the pages of every installed tool (meshrun-rdma-probe: where verbs were found)
doc_tools=$tools
[ -x "$build/bin/meshrun-rdma-probe" ] && doc_tools="$tools meshrun-rdma-probe"
gen=$build/docs
fail() { echo "FAIL: $*"; exit 1; }

need_generated() {
	for t in $doc_tools; do
		[ -f "$gen/reference/$t.md" ] && [ -f "$gen/man/$t.1" ] && [ -f "$gen/completion/$t" ] ||
			fail "$gen: the generated docs of $t are missing (build the target $t-docs)"
	done
}

case $mode in
layers)
	table=$(grep -E '^\| `(src/[a-z]+|sim)` \|' "$src/docs/architecture.md")
	[ -n "$table" ] || fail "docs/architecture.md: no module table"
	while IFS='|' read -r _ mod _ _ _; do
		mod=$(echo "$mod" | tr -d ' `')
		[ -d "$src/$mod" ] || fail "docs/architecture.md names '$mod', which is not a folder"
	done <<<"$table"
	# every project include of every module against the table, in one awk
	# (a process per include line took a minute on a loaded 2-core machine)
	# and the subfolders that backends of one module may share (the rest are
	# backends or transports, which include no sibling's files)
	shared=$(grep -E '^shared subfolders:' "$src/docs/architecture.md" | grep -oE '`src/[a-z_/]+`' | tr -d '`' | tr '\n' ' ')
	[ -n "$shared" ] || fail "docs/architecture.md: no 'shared subfolders:' line"
	for d in src/* sim; do
		[ -d "$src/$d" ] && grep -rHE '^#include "[a-z_]+/' "$src/$d" --include='*.c' --include='*.h'
	done | awk -v src="$src/" -v table="$table" -v shared=" $shared " '
		BEGIN {
			n = split(table, rows, "\n")
			for (i = 1; i <= n; i++) {
				split(rows[i], f, "|")
				mod = f[2]; gsub(/[ `]/, "", mod)
				own = mod; sub(/.*\//, "", own)
				allowed[mod] = " " own " " f[4] " "
			}
		}
		{
			file = $0; sub(/:.*/, "", file); rel = substr(file, length(src) + 1)
			mod = rel; sub(/\/[^\/]*$/, "", mod)
			while (!(mod in allowed) && mod ~ /\//)
				sub(/\/[^\/]*$/, "", mod) # a subfolder: the module is the folder above
			if (!(mod in allowed))
				next
			path = $0; sub(/^[^"]*"/, "", path); sub(/".*/, "", path)
			dep = path; sub(/\/.*/, "", dep)
			count++
			# a backend subfolder (src/M/X/) may include another subfolder of
			# its module (M/Y/) only where Y is shared
			if (rel ~ /^src\/[a-z_]+\/[a-z_0-9]+\// && split(rel, rp, "/") && split(path, dp, "/") > 2 &&
			    dp[1] == rp[2] && dp[2] != rp[3] && index(shared, " src/" dp[1] "/" dp[2] " ") == 0) {
				printf "FAIL: %s: includes %s, a sibling backend'"'"'s file (only shared subfolders: %s)\n", rel, path, shared
				bad = 1
			}
			if (index(allowed[mod], " " dep " ") == 0) {
				printf "FAIL: %s: includes %s/, which %s may not (docs/architecture.md)\n", rel, dep, mod
				bad = 1
			}
		}
		END {
			if (bad)
				exit 1
			printf "ok: %d project includes follow docs/architecture.md'"'"'s layers\n", count
		}' || exit 1
	;;
reference)
	need_generated
	for t in $doc_tools; do
		if ! diff -u "$src/docs/reference/$t.md" "$gen/reference/$t.md"; then
			fail "docs/reference/$t.md is out of date: run 'cmake --build $build --target update-docs' and commit it"
		fi
		echo "ok: docs/reference/$t.md is current"
	done
	;;
contracts)
	blocks=$gen/blocks/contracts.md
	[ -f "$blocks" ] || fail "$blocks is missing (build the target blocks-contracts_md)"
	tmp=$(mktemp)
	trap 'rm -f "$tmp"' EXIT
	sed -n '/^<!-- BEGIN /,/^<!-- END /p' "$src/docs/contracts.md" >"$tmp"
	if ! diff -u "$tmp" "$blocks"; then
		fail "docs/contracts.md's generated tables are out of date: run 'cmake --build $build --target update-docs' and commit it"
	fi
	echo "ok: docs/contracts.md's environment tables are current"
	;;
man)
	need_generated
	command -v groff >/dev/null || { echo "skip: groff is not installed (scripts/deps.sh installs man-db)"; exit 77; }
	command -v man >/dev/null || { echo "skip: man is not installed (scripts/deps.sh installs man-db)"; exit 77; }
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	for t in $doc_tools; do
		page=$gen/man/$t.1
		groff -man -Tutf8 -ww -z "$page" 2>"$tmp/groff" || fail "$t.1: groff failed"
		[ -s "$tmp/groff" ] && { cat "$tmp/groff"; fail "$t.1: groff warnings"; }
		LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" >"$tmp/out" 2>"$tmp/warn" ||
			fail "$t.1: man -l failed: $(cat "$tmp/warn")"
		[ -s "$tmp/warn" ] && { cat "$tmp/warn"; fail "$t.1: man -l warnings"; }
		for sec in NAME SYNOPSIS DESCRIPTION "EXIT STATUS"; do
			grep -q "^$sec" "$tmp/out" || fail "$t.1: no $sec section"
		done
		# every long option of the table is on the page
		for f in $("$build/bin/$t" --help | grep -oE '^ +(-[a-zA-Z], )?--[a-z][a-z0-9-]*' | grep -oE -- '--[a-z0-9-]+'); do
			grep -q -- "$f" "$tmp/out" || fail "$t.1: $f is not on the page"
		done
		echo "ok: $t.1 renders without warnings"
	done
	cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 ||
		{ cat "$tmp/install.log"; fail "cmake --install failed"; }
	for t in $tools; do
		[ -f "$tmp/prefix/share/man/man1/$t.1" ] || fail "cmake --install: no share/man/man1/$t.1"
		[ -f "$tmp/prefix/share/bash-completion/completions/$t" ] ||
			fail "cmake --install: no share/bash-completion/completions/$t"
		[ -f "$tmp/prefix/share/zsh/site-functions/_$t" ] ||
			fail "cmake --install: no share/zsh/site-functions/_$t"
		MANPATH=$tmp/prefix/share/man MANWIDTH=80 man "$t" 2>&1 | grep -q "^NAME" ||
			fail "'man $t' does not find the installed page"
	done
	echo "ok: 'man meshrun|meshconfig|meshsim' work after cmake --install"
	;;
flags)
	migration=$src/docs/migration.md
	[ -f "$migration" ] || fail "docs/migration.md is missing"
	n=0
	for t in $tools; do
		ref=$src/docs/reference/$t.md
		helps=$("$build/bin/$t" --help) || fail "$t --help failed"
		if [ "$t" = meshsim ]; then
			for sub in $("$build/bin/$t" --help | awk '/^  [a-z]+ /{print $1}'); do
				helps+=$'\n'$("$build/bin/$t" "$sub" --help) || fail "$t $sub --help failed"
			done
		fi
		flags=$(printf '%s\n' "$helps" | grep -oE '^ +(-[a-zA-Z], )?--[a-z][a-z0-9-]*|^ +-[a-zA-Z],' |
			grep -oE -- '--[a-z0-9-]+|-[a-zA-Z]' | sort -u)
		[ -n "$flags" ] || fail "$t --help lists no flags"
		for f in $flags; do
			# as `--flag` (a table entry), or for meshsim also inside the
			# subcommands' --help blocks
			grep -qE -- "\`$f([\` =]|\$)" "$ref" ||
				{ [ "$t" = meshsim ] && grep -qE -- "(^|[ ,\[])$f([ ,=]|\$)" "$ref"; } ||
				fail "$t: flag $f of --help is not in docs/reference/$t.md"
			if [ "$t" != meshsim ]; then
				grep -qE -- "\`$f([\` =]|\$)" "$migration" || fail "$t: flag $f of --help is not in docs/migration.md"
			fi
			n=$((n + 1))
		done
		echo "ok: $t: every --help flag is documented"
	done
	echo "$n flags checked"
	;;
migration)
	m=$src/docs/migration.md
	# MLX 0.32.1: python/mlx/_distributed_utils/launch.py and config.py
	mlx_launch="--print-python --verbose --hosts --repeat-hosts -n --hostfile --backend --env --mpi-arg
		--connections-per-ip --starting-port -p --cwd --nccl-port --python -h --help"
	mlx_config="--verbose --hosts --hostfile --over --output-hostfile --dot --backend --auto-setup
		--no-auto-setup --env --ignore-unreachable -h --help"
	mlx_env="MLX_RANK MLX_HOSTFILE MLX_RING_VERBOSE MLX_JACCL_COORDINATOR MLX_IBV_DEVICES MLX_JACCL_RING
		NCCL_HOST_IP NCCL_PORT MLX_WORLD_SIZE CUDA_VISIBLE_DEVICES NCCL_DEBUG COLUMNS LINES
		DYLD_LIBRARY_PATH MLX_MPI_LIBNAME"
	# the rows of the section whose heading starts with $1
	rows() { awk -v h="$1" 'index($0, "## " h) == 1 { on = 1; next } /^## / { on = 0 }
		on && /^\| / && !/^\| --- / { print }' "$m" | tail -n +2; }
	col() { awk -F' \\| ' -v c="$1" '{ print $c }'; }
	bad=0 n=0
	check_section() { # HEADING MLX_ITEMS OUR_ITEMS
		r=$(rows "$1")
		[ -n "$r" ] || fail "docs/migration.md: no table under '## $1'"
		while IFS= read -r row; do
			notes=$(printf '%s\n' "$row" | col 3)
			case $notes in
			same*|different*|extra*) ;;
			*) echo "FAIL: migration.md '## $1': row not marked same/different/extra: $row"; bad=1 ;;
			esac
			n=$((n + 1))
		done <<<"$r"
		c1=$(printf '%s\n' "$r" | col 1) c2=$(printf '%s\n' "$r" | col 2)
		for x in $2; do
			printf '%s\n' "$c1" | grep -qE -- "\`$x\`" ||
				{ echo "FAIL: migration.md '## $1': MLX's $x has no row"; bad=1; }
		done
		for x in $3; do
			printf '%s\n' "$c2" | grep -qE -- "\`$x\`" ||
				{ echo "FAIL: migration.md '## $1': our $x has no row"; bad=1; }
		done
		# no row names an MLX flag or one of ours that does not exist
		for x in $(printf '%s\n' "$c1" | grep -oE -- '`-[-a-z]+`' | tr -d '`'); do
			case " $(echo $2) " in *" $x "*) ;; *) echo "FAIL: migration.md '## $1': $x is not MLX's"; bad=1 ;; esac
		done
		for x in $(printf '%s\n' "$c2" | grep -oE -- '`-[-a-z]+`' | tr -d '`'); do
			case " $(echo $3) " in *" $x "*) ;; *) echo "FAIL: migration.md '## $1': $x is not ours"; bad=1 ;; esac
		done
	}
	flags_of() {
		"$build/bin/$1" --help | grep -oE '^ +(-[a-zA-Z], )?--[a-z][a-z0-9-]*|^ +-[a-zA-Z],' |
			grep -oE -- '--[a-z0-9-]+|-[a-zA-Z]' | sort -u
	}
	check_section "mlx.launch → meshrun" "$mlx_launch" "$(flags_of meshrun)"
	check_section "mlx.distributed_config → meshconfig" "$mlx_config" "$(flags_of meshconfig)"
	set_vars=$("$build/bin/meshrun" --help-env | sed -n '/BEGIN env-set/,/END env-set/p' |
		grep -oE '^\| [^|]+ \| `[A-Z_]+`' | grep -oE '[A-Z_]+`$' | tr -d '`')
	[ -n "$set_vars" ] || fail "meshrun --help-env lists no variable it sets"
	check_section "Environment: mlx.launch → meshrun" "$mlx_env" "$set_vars"
	[ $bad = 0 ] || exit 1
	echo "ok: docs/migration.md: $n rows, every MLX 0.32 flag and variable and every one of ours, each marked"
	;;
completion)
	need_generated
	out=$(bash -c '
		set -e
		for f in "$1"/completion/*; do source "$f"; done
		complete -p meshrun meshconfig meshsim >/dev/null
		comp() { local fn=$1; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); $fn; echo "${COMPREPLY[*]}"; }
		echo "A $(comp _meshrun meshrun --back)"
		echo "B $(comp _meshrun meshrun --backend j)"
		echo "C $(comp _meshconfig meshconfig --ov)"
		echo "D $(comp _meshconfig meshconfig --over "")"
		echo "E $(comp _meshsim meshsim f)"
		echo "F $(comp _meshsim meshsim gen --o)"
	' _ "$gen") || fail "sourcing the completions failed"
	echo "$out"
	grep -qx 'A --backend' <<<"$out" || fail "meshrun --back<TAB>"
	grep -qx 'B jaccl jaccl-ring' <<<"$out" || fail "meshrun --backend j<TAB>"
	grep -qx 'C --over' <<<"$out" || fail "meshconfig --ov<TAB>"
	grep -qx 'D thunderbolt ethernet' <<<"$out" || fail "meshconfig --over <TAB>"
	grep -qx 'E fault' <<<"$out" || fail "meshsim f<TAB>"
	grep -qx 'F --output' <<<"$out" || fail "meshsim gen --o<TAB>"
	echo "ok: bash completions"
	# zsh (a Mac's shell): the generated _TOOL files, typed into a real zsh
	for t in $tools; do
		[ -f "$gen/zsh-completion/_$t" ] || fail "$gen/zsh-completion/_$t is missing (build the target $t-docs)"
	done
	if command -v zsh >/dev/null; then
		PATH=$build/bin:$PATH zsh -f "$(dirname "$0")/zsh_complete.zsh" "$gen/zsh-completion" ||
			fail "zsh completion"
	else
		echo "skip: zsh is not installed: the zsh completion is not tried"
	fi
	;;
progress)
	command -v script >/dev/null || { echo "skip: script(1) (util-linux) is not installed"; exit 77; }
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	cmd="'$build/bin/meshconfig' --simulate '$src/fixtures/ring8' --output-hostfile '$tmp/h.json'"
	# on a terminal: one line rewritten per host as it finishes, in every step
	script -qec "$cmd" /dev/null </dev/null >"$tmp/tty" 2>&1 || fail "meshconfig under script(1) failed: $(cat "$tmp/tty")"
	tr '\r' '\n' <"$tmp/tty" >"$tmp/lines"
	for k in 1 2 3 4 5 6 7; do
		grep -qE "^.*\[1/4\] ssh check: $k/8 hosts \(n[1-8]\)" "$tmp/lines" ||
			fail "ssh check: no '$k/8 hosts (HOST)' line on the terminal"
		grep -qE "^.*\[2/4\] getting the Thunderbolt connectivity of every host: $k/8 hosts \(n[1-8]\)" "$tmp/lines" ||
			fail "discovery: no '$k/8 hosts (HOST)' line on the terminal"
	done
	grep -q "8/8 hosts done" "$tmp/lines" || fail "no '8/8 hosts done' line"
	# NO_PROGRESS on a terminal, and a log: no count lines at all
	NO_PROGRESS=1 script -qec "$cmd" /dev/null </dev/null >"$tmp/tty2" 2>&1 || fail "meshconfig with NO_PROGRESS failed"
	grep -q "/8 hosts" "$tmp/tty2" && fail "NO_PROGRESS: a progress line was printed"
	eval "$cmd" 2>"$tmp/log" || fail "meshconfig into a log failed"
	grep -q "/8 hosts" "$tmp/log" && fail "a log got progress lines"
	echo "ok: meshconfig counts hosts one by one on a terminal, nothing in a log"
	;;
progress-sim)
	command -v script >/dev/null || { echo "skip: script(1) (util-linux) is not installed"; exit 77; }
	[ "$(id -u)" -eq 0 ] || { echo "skip: meshsim up needs root (network namespaces)"; exit 77; }
	tmp=$(mktemp -d)
	# one cluster name per run (random hex): two suites can run on one machine
	cl=docsp$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
	trap '"$build/bin/meshsim" down $cl >/dev/null 2>&1; rm -rf "$tmp"' EXIT
	# --pretend-rdma: the fixture's RDMA devices are listed, so the verdict is jaccl-ring
	script -qec "'$build/bin/meshsim' up --name $cl --pretend-rdma ring:4" /dev/null </dev/null >"$tmp/tty" 2>&1 ||
		fail "meshsim up under script(1) failed: $(cat "$tmp/tty")"
	tr '\r' '\n' <"$tmp/tty" >"$tmp/lines"
	for step in "ssh keys" "namespaces and cables" "sshd"; do
		for k in 1 2 3; do
			grep -qE "\] $step: $k/4 hosts \(h[1-4]\)" "$tmp/lines" ||
				fail "meshsim up: $step: no '$k/4 hosts (HOST)' line on the terminal"
		done
	done
	# meshconfig over real sshd (the ssh backend reports each command as it ends)
	cfg=${MESHSIM_STATE_DIR:-/run/meshsim}/$cl/ssh_config
	script -qec "'$build/bin/meshconfig' --hosts h1,h2,h3,h4 --ssh-config '$cfg' --output-hostfile '$tmp/h.json'" \
		/dev/null </dev/null >"$tmp/tty2" 2>&1 || fail "meshconfig over ssh failed: $(cat "$tmp/tty2")"
	tr '\r' '\n' <"$tmp/tty2" >"$tmp/lines2"
	for k in 1 2 3; do
		grep -qE "\] getting the Thunderbolt connectivity of every host: $k/4 hosts \(h[1-4]\)" "$tmp/lines2" ||
			fail "meshconfig over ssh: no '$k/4 hosts (HOST)' line on the terminal"
	done
	grep -q '"backend": "jaccl-ring"' "$tmp/h.json" || fail "meshconfig over ssh: unexpected hostfile: $(cat "$tmp/h.json")"
	"$build/bin/meshsim" down $cl >/dev/null || fail "meshsim down $cl failed"
	ip netns list | grep -q "^$cl-" && fail "namespaces $cl-* left behind"
	echo "ok: meshsim up and meshconfig over ssh count hosts one by one on a terminal"
	;;
laptop)
	guide=$src/docs/guide-laptop.md
	tmp=$(mktemp -d)
	root=false
	[ "$(id -u)" -eq 0 ] && root=true
	# the guide's cluster "docs", under a name of this run's own (random hex)
	cl=docs$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
	cleanup() {
		if $root && { [ -d "/run/meshsim/$cl" ] || ip netns list 2>/dev/null | grep -q "^$cl-"; }; then
			"$build/bin/meshsim" down "$cl" >/dev/null 2>&1
		fi
		rm -rf "$tmp"
	}
	trap cleanup EXIT
	# Each block: from a line "# test: laptop" or "# test: laptop-root" to the
	# fence; root blocks' lines come out marked "@root@" for the renaming.
	awk -v root="$root" '
		/^```sh$/ { inblk = 1; first = 1; keep = 0; next }
		/^```$/ && inblk { inblk = 0; next }
		inblk && first { first = 0
			if ($0 == "# test: laptop") keep = 1
			else if ($0 == "# test: laptop-root") keep = (root == "true") ? 2 : 0
			if (keep) print "echo \"+++ block at line " NR "\""
			next }
		inblk && keep == 1 { print }
		inblk && keep == 2 { print "@root@" $0 }
	' "$guide" >"$tmp/guide.raw"
	if $root; then
		grep -q '^@root@meshsim up --name docs ' "$tmp/guide.raw" ||
			fail "the guide's root part does not start its cluster with 'meshsim up --name docs'"
	fi
	sed -E "/^@root@/ s/\<docs\>/$cl/g; s/^@root@//" "$tmp/guide.raw" >"$tmp/guide.sh"
	nblocks=$(grep -c '^echo "+++ block' "$tmp/guide.sh")
	[ "$nblocks" -gt 0 ] || fail "no '# test: laptop' blocks in $guide"
	ln -s "$src/fixtures" "$tmp/fixtures"
	# the guide's scratch folder (mktemp -d) under $tmp, so it goes with it
	(cd "$tmp" && TMPDIR=$tmp PATH=$build/bin:$PATH bash -eu -o pipefail guide.sh) >"$tmp/log" 2>&1
	rc=$?
	cat "$tmp/log"
	[ $rc -eq 0 ] || fail "a command of the laptop guide failed (exit $rc); the guide is wrong or a tool is"
	# nothing but the scripts and the scratch folder where the guide was run
	left=$(cd "$tmp" && ls -A | grep -vxE 'fixtures|guide\.raw|guide\.sh|log|tmp\..*')
	[ -z "$left" ] || fail "the guide wrote into the folder it was run from: $left"
	if $root; then
		ip netns list | grep -q "^$cl-" && fail "namespaces $cl-* left behind"
		# without rdma_rxe: no RDMA anywhere, a ring hostfile, and the all-reduce passed
		if grep -q '^meshsim: no RDMA on every host' "$tmp/log"; then
			hj=$(ls "$tmp"/tmp.*/hosts.json 2>/dev/null | head -1)
			[ -n "$hj" ] || fail "the guide's scratch folder has no hosts.json"
			grep -q '"backend": "ring"' "$hj" ||
				fail "no rdma_rxe, yet the hostfile is not a ring one: $(cat "$hj")"
			[ "$(grep -c 'all_sum = 10 (expected 10).*: OK$' "$tmp/log")" -eq 4 ] ||
				fail "the guide's all-reduce: not 4 ranks with the right sum"
			echo "ok: without rdma_rxe the guide's cluster got a ring hostfile and its all-reduce passed"
		fi
		echo "ok: $nblocks blocks of the laptop guide ran as written (with the root part, cluster $cl)"
	else
		echo "ok: $nblocks blocks ran; the meshsim part needs root"
		echo "skip: the '# test: laptop-root' blocks need root (network namespaces)"
		exit 77
	fi
	;;
own-program)
	# section 4 of the laptop guide as written: install to a prefix ($HOME/.local,
	# HOME a temporary folder), the C program and CMakeLists.txt as the page
	# shows them, built with pkg-config and with find_package, run on 4 local
	# ranks, and (root) on a simulated cluster; examples/ built both ways
	# against the same prefix; a program linked without the run-time path
	# fails every rank the same way, which meshrun says in one line.
	guide=$src/docs/guide-laptop.md
	command -v cc >/dev/null && command -v pkg-config >/dev/null ||
		{ echo "skip: no cc or pkg-config"; exit 77; }
	tmp=$(mktemp -d)
	root=false
	[ "$(id -u)" -eq 0 ] && root=true
	cl=own$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
	cleanup() {
		$root && "$build/bin/meshsim" down "$cl" >/dev/null 2>&1
		rm -rf "$tmp"
	}
	trap cleanup EXIT
	mkdir -p "$tmp/home" "$tmp/src"
	ln -s "$build" "$tmp/src/build"
	# sh blocks "# test: own-program" (and -root when root, with the cluster
	# "mine" renamed), a c block "/* NAME */" and a cmake block "# NAME" as files
	awk -v root="$root" '
		/^```(sh|c|cmake)$/ { inblk = 1; first = 1; keep = 0; next }
		/^```$/ && inblk { inblk = 0; if (keep == 3) print "MESHRUN_GUIDE_EOF"; next }
		inblk && first { first = 0
			if ($0 == "# test: own-program") keep = 1
			else if ($0 == "# test: own-program-root") keep = (root == "true") ? 2 : 0
			else if ($0 ~ /^\/\* [A-Za-z0-9_.]+ \*\/$/ || $0 ~ /^# [A-Za-z0-9_.]+\.txt$/) {
				keep = 3; name = $2
				print "cat > " name " <<'"'"'MESHRUN_GUIDE_EOF'"'"'"; print }
			if (keep == 1 || keep == 2) print "echo \"+++ block at line " NR "\""
			next }
		inblk && keep == 1 { print }
		inblk && keep == 2 { print "@root@" $0 }
		inblk && keep == 3 { print }
	' "$guide" | sed -E "/^@root@/ s/\<mine\>/$cl/g; s/^@root@//" >"$tmp/guide.sh"
	grep -q '^cat > hello.c' "$tmp/guide.sh" && grep -q '^cat > CMakeLists.txt' "$tmp/guide.sh" ||
		fail "the guide's section 4 has no hello.c or CMakeLists.txt block"
	# an ASan+UBSan libmeshrun needs its programs built likewise
	wrap=
	if grep -q '^MESHRUN_ASAN:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
		mkdir "$tmp/wrap"
		printf '#!/bin/sh\nexec %s -fsanitize=address,undefined "$@"\n' "$(command -v cc)" >"$tmp/wrap/cc"
		chmod +x "$tmp/wrap/cc"
		wrap=$tmp/wrap:
		export CFLAGS=-fsanitize=address,undefined LDFLAGS=-fsanitize=address,undefined
	fi
	(cd "$tmp/src" && HOME=$tmp/home PATH=$wrap$build/bin:$PATH bash -eu -o pipefail "$tmp/guide.sh") >"$tmp/log" 2>&1
	rc=$?
	cat "$tmp/log"
	[ $rc -eq 0 ] || fail "a command of the guide's section 4 failed (exit $rc); the guide is wrong or a tool is"
	want=8
	$root && want=12
	n=$(grep -cE '^rank [0-3] of 4: sum 10$' "$tmp/log")
	[ "$n" -eq $want ] || fail "$n lines 'rank N of 4: sum 10', expected $want"
	pfx=$tmp/home/.local
	# examples/: with find_package against the prefix, and with pkg-config
	export PATH=$wrap$pfx/bin:$PATH PKG_CONFIG_PATH=$pfx/lib/pkgconfig
	cmake -S "$src/examples" -B "$tmp/ex" -DCMAKE_PREFIX_PATH="$pfx" >"$tmp/ex.log" 2>&1 &&
		cmake --build "$tmp/ex" >>"$tmp/ex.log" 2>&1 || { cat "$tmp/ex.log"; fail "examples/ with find_package"; }
	cc -o "$tmp/demo-pc" "$src/examples/allreduce_demo.c" $(pkg-config --cflags --libs meshrun) ||
		fail "examples/ with pkg-config"
	for d in "$tmp/ex/meshrun-allreduce-demo" "$tmp/demo-pc"; do
		meshrun -n 4 -- "$d" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "meshrun -n 4 -- $d"; }
		[ "$(grep -c 'all_sum = 10 (expected 10).*: OK$' "$tmp/out")" -eq 4 ] || { cat "$tmp/out"; fail "$d: not 4 ranks OK"; }
	done
	# the build tree as a prefix (meshrun-uninstalled.pc), no install needed
	PKG_CONFIG_PATH=$build/lib/pkgconfig cc -o "$tmp/hello-bt" "$tmp/home/hello/hello.c" \
		$(PKG_CONFIG_PATH=$build/lib/pkgconfig pkg-config --cflags --libs meshrun) || fail "hello.c against the build tree"
	meshrun -n 2 -- "$tmp/hello-bt" | grep -c 'of 2: sum 3' | grep -qx 2 || fail "hello against the build tree"
	# without the run-time path: every rank 127, said in one line with the loader's words
	cc -o "$tmp/hello-norpath" "$tmp/home/hello/hello.c" -I"$pfx/include" -L"$pfx/lib" -lmeshrun || fail "link without rpath"
	meshrun -n 4 -- "$tmp/hello-norpath" >"$tmp/out" 2>&1
	rc=$?
	[ $rc = 127 ] && grep -qE 'failed the same way: exit status 127' "$tmp/out" && grep -q 'libmeshrun' "$tmp/out" ||
		{ cat "$tmp/out"; fail "a program without the run-time path: exit $rc"; }
	echo "ok: section 4 of the laptop guide ran as written ($n ranks said 'sum 10'), examples/ built with find_package and pkg-config"
	$root || { echo "skip: the '# test: own-program-root' block needs root (network namespaces)"; exit 77; }
	;;
*)
	fail "unknown mode '$mode'"
	;;
esac
