#!/usr/bin/env bash
# docs/gen-pictures.sh [BUILD_DIR] - draw every shipped fixture into docs/img/
# with `meshconfig --simulate DIR --png FILE`, and list them in docs/pictures.md.
# Needs GraphViz (dot). Default BUILD_DIR: build-docs, else build/plain, else build.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-}
if [ -z "$build" ]; then
	for b in build-docs build/plain build; do
		[ -x "$b/bin/meshconfig" ] && { build=$b; break; }
	done
fi
mc=$build/bin/meshconfig
[ -x "$mc" ] || { echo "gen-pictures: no meshconfig in '$build' (build first)" >&2; exit 1; }
command -v dot >/dev/null || { echo "gen-pictures: GraphViz 'dot' is not installed" >&2; exit 1; }
mkdir -p docs/img
list=
for d in fixtures/*/; do
	[ -f "$d/cluster.json" ] || continue
	name=$(basename "$d")
	"$mc" --simulate "$d" --png "docs/img/$name.png" 2>/dev/null
	desc=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("description", ""))' "$d/cluster.json" 2>/dev/null || true)
	list+="### $name"$'\n\n'"${desc:+$desc}${desc:+$'\n\n'}![$name](img/$name.png)"$'\n\n'
	echo "docs/img/$name.png"
done
python3 - "$list" <<'PY'
import sys, re
p = "docs/pictures.md"
s = open(p).read()
start = s.index("<!-- pictures: begin") if "<!-- pictures: begin" in s else None
block = "<!-- pictures: begin (docs/gen-pictures.sh) -->\n\n" + sys.argv[1] + "<!-- pictures: end -->"
if start is None:
    s = s.replace("PICTURES", block)
else:
    end = s.index("<!-- pictures: end -->") + len("<!-- pictures: end -->")
    s = s[:start] + block + s[end:]
open(p, "w").write(s)
PY
