#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run meshrun's
# main job on an embedded default.
#
# As root (network namespaces and sshd available): meshsim brings up a simulated
# cluster of 4 Mac Studios cabled as a full Thunderbolt mesh (fixtures/mesh4-m3ultra),
# meshconfig discovers the cabling over ssh and configures one /30 per cable
# (--auto-setup), meshrun starts an all-reduce on the 4 hosts over those cables,
# and the cluster is taken down again (always, also on failure or Ctrl-C).
# Without root: the same all-reduce with 4 local ranks (meshrun -n 4).
set -uo pipefail

usage() {
	cat <<'EOF'
usage: scripts/demo.sh [--no-build] [--build-dir DIR] [--local] [--name NAME] [--fixture DIR]

  --no-build       use an existing build (skip installing packages and building)
  --build-dir DIR  build directory (default: build/demo)
  --local          4 local ranks even as root (no simulated cluster)
  --name NAME      meshsim cluster name (default: mrdemo)
  --fixture DIR    cluster to simulate (default: fixtures/mesh4-m3ultra)

Exit status: 0 when every rank got the right sum, non-zero otherwise.
EOF
}

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/demo
do_build=1 local_only=0 name=mrdemo fixture=$root/fixtures/mesh4-m3ultra
while [ $# -gt 0 ]; do
	case $1 in
	--no-build) do_build=0 ;;
	--build-dir) build=${2:?--build-dir needs a directory}; shift ;;
	--local) local_only=1 ;;
	--name) name=${2:?--name needs a name}; shift ;;
	--fixture) fixture=${2:?--fixture needs a folder}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "demo.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
case $build in /*) ;; *) build=$PWD/$build ;; esac
bin=$build/bin

step=0
say() { step=$((step + 1)); printf '\n==> [%d] %s\n' "$step" "$*"; }
info() { printf '    %s\n' "$*"; }
die() { printf '\ndemo.sh: %s\n' "$*" >&2; exit 1; }
run() { printf '    $ %s\n' "$*"; "$@"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/meshrun-demo.XXXXXX") || die "mktemp failed"
cluster_up=0
cleanup() {
	trap '' PIPE # stdout may be a closed pipe (demo.sh | head): still clean up
	if [ $cluster_up = 1 ]; then
		say "taking the simulated cluster down"
		run "$bin/meshsim" down "$name"
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 141' PIPE
trap 'exit 143' TERM

# quietly: run CMD... with its output in a log that is shown when it fails
quietly() {
	printf '    $ %s\n' "$*"
	"$@" >"$work/log" 2>&1 && return 0
	tail -n 40 "$work/log" | sed 's/^/      /' >&2
	return 1
}

if [ $do_build = 1 ]; then
	say "installing missing packages (scripts/deps.sh; nothing to do when all are there)"
	"$root/scripts/deps.sh" || die "installing packages failed"
	say "building meshsim, meshconfig, meshrun, libmeshrun and the demo program in $build"
	quietly cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo || die "cmake configure failed"
	quietly cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target \
		meshsim meshconfig meshrun_cli meshrun-allreduce-demo || die "build failed"
fi
for p in meshsim meshconfig meshrun meshrun-allreduce-demo; do
	[ -x "$bin/$p" ] || die "$bin/$p is missing: build first (drop --no-build)"
done
demo=$bin/meshrun-allreduce-demo

# The result: every rank prints one line ending in ": OK" when its sum is right.
summarize() { # summarize OUTPUT_FILE RANKS
	local okn
	okn=$(grep -c ': OK$' "$1")
	if [ "$okn" -eq "$2" ]; then
		printf '\n    all %d ranks got the sum 1+2+...+%d = %d: OK\n' "$2" "$2" $(($2 * ($2 + 1) / 2))
		return 0
	fi
	printf '\n    only %d of %d ranks report the right sum\n' "$okn" "$2"
	return 1
}

# Why the cluster cannot be simulated here, or "" when it can.
no_cluster_reason() {
	[ $local_only = 1 ] && { echo "--local given"; return; }
	[ "$(id -u)" -eq 0 ] || { echo "not root (meshsim needs network namespaces)"; return; }
	[ -x /usr/sbin/sshd ] || { echo "sshd is not installed"; return; }
	command -v ip >/dev/null 2>&1 || { echo "iproute2 is not installed"; return; }
	if ! ip netns add "${name}probe$$" 2>/dev/null; then
		echo "cannot create network namespaces here"
		return
	fi
	ip netns del "${name}probe$$"
}
why=$(no_cluster_reason)

if [ -n "$why" ]; then
	say "all-reduce with 4 local ranks ($why; as root the demo simulates a 4-Mac cluster)"
	info "each rank contributes rank+1; all_sum must give 1+2+3+4 = 10 on every rank"
	run "$bin/meshrun" -n 4 --tag-output -- "$demo" </dev/null | tee "$work/out"
	rc=${PIPESTATUS[0]}
	[ "$rc" -eq 0 ] || die "meshrun exited $rc"
	summarize "$work/out" 4 || exit 1
	exit 0
fi

state=${MESHSIM_STATE_DIR:-/run/meshsim}
hosts=$(for d in "$fixture"/*/; do [ -f "$d/system_profiler.json" ] && basename "$d"; done | paste -sd, -)
n=$(echo "$hosts" | tr ',' '\n' | grep -c .)
[ "$n" -ge 2 ] || die "no hosts in fixture '$fixture'"

say "simulating a cluster of $n Macs cabled with Thunderbolt ($(basename "$fixture"): $hosts)"
info "one network namespace + sshd per Mac, one veth pair per cable, macOS commands replayed"
"$bin/meshsim" down "$name" >/dev/null 2>&1 # leftovers of an interrupted demo
cluster_up=1
run "$bin/meshsim" up "$fixture" --name "$name" || die "meshsim up failed"
cfg=$state/$name/ssh_config

say "meshconfig: discovering the cabling over ssh and configuring the links"
info "(--backend ring: the simulated Macs have no RDMA devices unless the kernel has rdma_rxe,"
info " so the all-reduce runs over TCP on the Thunderbolt links; on real Macs meshconfig picks jaccl)"
run "$bin/meshconfig" --hosts "$hosts" --over thunderbolt --backend ring --auto-setup \
	--ssh-config "$cfg" --output-hostfile "$work/hosts.json" || die "meshconfig failed"
info "hostfile written by meshconfig (MLX's format; ips = the rank's address on its cable):"
sed 's/^/      /' "$work/hosts.json"
echo
info "the cluster now (addresses meshconfig set on each cable end):"
"$bin/meshsim" status "$name" | sed -n '/^hosts:/,$p' | sed 's/^/      /'

say "meshrun: one rank per simulated Mac, over ssh, talking over the cables"
info "(a full mesh: the hostfile's mesh_ips make meshrun run the mesh backend, every rank"
info " talking to every other over its own cable; --backend ring would use two per host)"
info "each rank contributes rank+1; all_sum must give 1+2+...+$n = $((n * (n + 1) / 2)) on every rank"
run "$bin/meshrun" --hostfile "$work/hosts.json" --ssh-config "$cfg" --tag-output -- "$demo" \
	</dev/null | tee "$work/out"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || die "meshrun exited $rc"
summarize "$work/out" "$n" || exit 1
exit 0
