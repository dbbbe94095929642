#!/bin/bash
# bench/nccl/run.sh - the nccl backend on a GPU machine: correctness on device
# buffers and the 256 MiB all_sum bandwidth, in one short run.
#
#   bench/nccl/run.sh [--bin DIR] [--out DIR] [--size 256M]
#       run meshrun-nccl-check under `meshrun --backend nccl` with 1 rank, and
#       with 2 ranks when the machine has 2 GPUs or NCCL accepts 2 ranks on
#       one (it usually refuses: "Duplicate GPU detected"; that is recorded,
#       not a failure), then meshrun-allreduce-test with 1 rank (host buffers,
#       the staging path). Exit 0 when every run that NCCL accepted passed;
#       77 with a reason when there is no NVIDIA GPU.
#   bench/nccl/run.sh --pack DIR [--bin DIR]
#       copy meshrun, the two check programs, libmeshrun and the non-system
#       libraries they need (cJSON, libssh2, ...) into DIR, for a GPU machine
#       that cannot install packages: there, `run.sh --bin DIR/bin` uses them.
#
# CUDA's runtime and NCCL are found as libmeshrun finds them (dlopen of
# libcudart.so*, libnccl.so.2), with the directories of pip's nvidia-* wheels
# and /usr/local/cuda added to LD_LIBRARY_PATH when present.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$root/build/plain/bin
out=
size=256M
pack=
while [ $# -gt 0 ]; do
	case $1 in
	--bin) bin=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--pack) pack=$2; shift 2 ;;
	-h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
	esac
done
bin=$(cd "$bin" 2>/dev/null && pwd) || { echo "run.sh: no build at '$bin' (build first, or --bin DIR)" >&2; exit 2; }
for p in meshrun meshrun-nccl-check meshrun-allreduce-test; do
	[ -x "$bin/$p" ] || { echo "run.sh: $bin/$p is not built" >&2; exit 2; }
done

if [ -n "$pack" ]; then
	mkdir -p "$pack/bin" "$pack/lib" || exit 1
	cp "$bin/meshrun" "$bin/meshrun-nccl-check" "$bin/meshrun-allreduce-test" "$pack/bin/" || exit 1
	# every library the programs load that is not the C library's own
	ldd "$bin/meshrun" "$bin/meshrun-nccl-check" "$bin/meshrun-allreduce-test" |
		awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
		grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' |
		while read -r l; do cp -L "$l" "$pack/lib/" || exit 1; done || exit 1
	echo "packed into $pack: $(ls "$pack/bin" | tr '\n' ' ')+ $(ls "$pack/lib" | wc -l) libraries"
	exit 0
fi

if [ ! -e /dev/nvidia0 ] && [ ! -e /proc/driver/nvidia/version ]; then
	echo "skip: no NVIDIA GPU here (/dev/nvidia0 and /proc/driver/nvidia/version absent)"
	exit 77
fi
[ -d "$bin/../lib" ] && export LD_LIBRARY_PATH="$bin/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia, os; p = nvidia.__path__[0]; print(" ".join(os.path.join(p, d, "lib") for d in sorted(os.listdir(p))))' 2>/dev/null); do
	[ -d "$d" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done
export LD_LIBRARY_PATH
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/meshrun-nccl.XXXXXX")}
mkdir -p "$out" || exit 1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
{
	echo "date: $(date -Is)"
	echo "gpus: ${gpus:-?}"
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
	echo "LD_LIBRARY_PATH: $LD_LIBRARY_PATH"
} >"$out/env.txt"
cat "$out/env.txt"

fail=0
step() { # NAME RANKS MAY_REFUSE PROGRAM ARGS...
	local name=$1 n=$2 may=$3 rc
	shift 3
	echo "== $name: meshrun -n $n --backend nccl -- $*"
	"$bin/meshrun" -n "$n" --backend nccl --tag-output --timeout 300 -- "$@" >"$out/$name.log" 2>&1
	rc=$?
	cat "$out/$name.log"
	if [ $rc = 0 ]; then
		echo "== $name: passed"
	elif [ "$may" = 1 ] && grep -qi "duplicate gpu\|invalid usage" "$out/$name.log"; then
		echo "== $name: NCCL refuses $n ranks on ${gpus:-?} GPU(s) (recorded, not a failure)"
	else
		echo "== $name: FAILED (exit $rc)"
		fail=1
	fi
}
step check-n1 1 0 "$bin/meshrun-nccl-check" --size "$size"
if [ "${gpus:-1}" -ge 2 ]; then
	step check-n2 2 0 "$bin/meshrun-nccl-check" --size "$size"
else
	step check-n2 2 1 "$bin/meshrun-nccl-check" --size "$size"
fi
step allreduce-test-n1 1 0 "$bin/meshrun-allreduce-test" --max-size 64M -q
echo "results: $out"
exit $fail
