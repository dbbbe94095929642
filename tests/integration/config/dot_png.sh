#!/usr/bin/env bash
# meshconfig --simulate FIXTURE --dot | dot -Tpng gives a PNG for every fixture.
# Usage: dot_png.sh MESHCONFIG FIXTURES_DIR
set -u
mc=$1 fx=$2
if ! command -v dot >/dev/null; then
	echo "skip: GraphViz 'dot' is not installed"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
for d in "$fx"/*/; do
	[ -f "$d/cluster.json" ] || continue
	name=$(basename "$d")
	set -o pipefail
	if ! "$mc" --simulate "$d" --dot 2>"$tmp/err" | dot -Tpng -o "$tmp/$name.png"; then
		echo "FAIL: $name: meshconfig --dot | dot -Tpng failed"
		cat "$tmp/err"
		exit 1
	fi
	if [ "$(head -c 8 "$tmp/$name.png" | od -An -tx1 | tr -d ' \n')" != "89504e470d0a1a0a" ]; then
		echo "FAIL: $name: not a PNG"
		exit 1
	fi
	echo "ok: $name.png ($(stat -c %s "$tmp/$name.png") bytes)"
	# --png FILE: the same picture, written by meshconfig itself (dot as a child)
	if ! "$mc" --simulate "$d" --png "$tmp/$name-direct.png" 2>"$tmp/err" >"$tmp/out"; then
		echo "FAIL: $name: meshconfig --png failed"
		cat "$tmp/err"
		exit 1
	fi
	if [ "$(head -c 8 "$tmp/$name-direct.png" | od -An -tx1 | tr -d ' \n')" != "89504e470d0a1a0a" ] ||
	   [ -s "$tmp/out" ]; then
		echo "FAIL: $name: --png wrote no PNG, or wrote to stdout"
		exit 1
	fi
	n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "FAIL: no fixtures in $fx"; exit 1; }
# Without GraphViz on PATH, --png is a clear error and no file.
d=$(ls -d "$fx"/*/ | head -1)
if PATH=/nonexistent "$mc" --simulate "$d" --png "$tmp/nodot.png" 2>"$tmp/err"; then
	echo "FAIL: --png without dot on PATH exited 0"
	exit 1
fi
grep -q "'dot' is not installed" "$tmp/err" || { echo "FAIL: no clear error without dot:"; cat "$tmp/err"; exit 1; }
[ ! -e "$tmp/nodot.png" ] || { echo "FAIL: --png without dot left a file"; exit 1; }
echo "$n PNGs rendered"
