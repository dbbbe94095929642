#!/bin/bash
# mpishim_exports.sh LIB SYMBOLS - the dynamic symbols LIB defines must be
# exactly the names in SYMBOLS (src/mpishim/symbols.txt): a name MLX resolves
# that is missing fails here, not in a user's dlsym; an extra one is ABI we
# did not mean to give.
set -u
lib=$1 list=$2
command -v nm >/dev/null || { echo "SKIP: no nm (binutils)"; exit 77; }
if [ "$(uname)" = Darwin ]; then
	got=$(nm -gU "$lib" | awk '{print $3}' | sed 's/^_//')
else
	# GNU nm: "ADDR T NAME@@VERSION"; the version node itself is an A symbol
	got=$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}' | sed 's/@.*//')
fi
want=$(grep -v '^#' "$list" | sed '/^$/d')
missing=$(comm -23 <(sort -u <<<"$want") <(sort -u <<<"$got"))
extra=$(comm -13 <(sort -u <<<"$want") <(sort -u <<<"$got"))
[ -z "$missing" ] || echo "FAIL: $lib does not export: $(echo $missing)"
[ -z "$extra" ] || echo "FAIL: $lib exports names not in $list: $(echo $extra)"
[ -z "$missing$extra" ] || exit 1
echo "ok: $lib exports exactly the $(wc -l <<<"$want") names of $list"
