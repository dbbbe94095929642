#!/usr/bin/env bash
# Time `meshconfig --simulate` (discovery parse, topology, ring search, plan,
# hostfile, and with --auto-setup the simulated apply + ping batches) on generated
# clusters. Prints the median of RUNS runs per case. Usage: run.sh [BUILD_DIR] [RUNS]
# Then (root, meshsim built) seq.sh: a 32-host meshsim ring configured over ssh by
# meshconfig vs the same commands one ssh after another (the seed's way), once.
set -euo pipefail
build=${1:-build}
runs=${2:-5}
mc=$build/bin/meshconfig
gen=$build/bin/meshconfig-bench-gen
[ -x "$mc" ] && [ -x "$gen" ] || { echo "build meshconfig and meshconfig-bench-gen first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# GNU time gives the peak RSS; without it only the wall time is printed.
timer=()
[ -x /usr/bin/time ] && timer=(/usr/bin/time -f %M -o "$tmp/rss")

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

printf '%-10s %-14s %6s %10s %12s\n' topology mode hosts "median ms" "max RSS KiB"
for spec in mesh:12 mesh:64 ring:64; do
	dir=$tmp/${spec/:/_}
	"$gen" "$spec" "$dir"
	n=$(ls -d "$dir"/*/ | wc -l)
	for mode in plan auto-setup dot; do
		case $mode in
		plan) extra=() ;;
		auto-setup) extra=(--auto-setup) ;;
		dot) extra=(--dot) ;;
		esac
		times=() rss=0
		for _ in $(seq "$runs"); do
			t0=$(date +%s%N)
			"${timer[@]}" "$mc" --simulate "$dir" "${extra[@]}" \
				--output-hostfile "$tmp/hf.json" >/dev/null 2>"$tmp/err" ||
				{ echo "meshconfig failed on $spec ($mode):" >&2; cat "$tmp/err" >&2; exit 1; }
			t1=$(date +%s%N)
			times+=($(((t1 - t0) / 1000)))
			if [ -s "$tmp/rss" ]; then r=$(tail -1 "$tmp/rss"); [ "$r" -gt "$rss" ] && rss=$r; fi
		done
		med=$(printf '%s\n' "${times[@]}" | median)
		printf '%-10s %-14s %6d %10.1f %12s\n' "$spec" "$mode" "$n" \
			"$(awk -v us="$med" 'BEGIN {print us / 1000}')" "${rss/#0/n/a}"
	done
done

# the root-only part: real sshd in meshsim hosts (seq.sh says why when it cannot run)
if [ -x "$build/bin/meshsim" ]; then
	echo
	"$(dirname "$0")/seq.sh" "$build" ring:32 1
fi
