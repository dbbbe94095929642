#!/usr/bin/env bash
# Runs every test: installs what is missing, builds twice (plain and ASan+UBSan,
# warnings as errors), and runs ctest on both. Exits non-zero on any failure.
# Tests that need root or a kernel feature skip with a reason when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh

jobs=$(nproc 2>/dev/null || echo 2)
status=0
for cfg in plain asan; do
	dir=build/$cfg
	flags=(-DMESHRUN_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo)
	[ "$cfg" = asan ] && flags+=(-DMESHRUN_ASAN=ON)
	echo "=== build ($cfg)"
	cmake -S . -B "$dir" "${flags[@]}" >/dev/null
	cmake --build "$dir" -j "$jobs"
	echo "=== test ($cfg)"
	if ! ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 600; then
		status=1
	fi
done
exit $status
