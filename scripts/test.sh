#!/usr/bin/env bash
# Runs every test: installs what is missing, builds twice (plain and ASan+UBSan,
# warnings as errors) and runs ctest on both, then builds the portable-only
# configuration (the macOS code paths) and runs its unit and loopback tests,
# then the libFuzzer harnesses (clang) for 20 s each.
# Exits non-zero on any failure.
# Tests that need root or a kernel feature skip with a reason when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh

jobs=$(nproc 2>/dev/null || echo 2)
status=0
# Tests run as root in CI: none may replace /dev/null (or the /dev/std* links)
# with a regular file. Checked after each suite, failing loudly.
dev_intact() {
	local bad=0
	[ -c /dev/null ] || { echo "!!! /dev/null is not a character device any more: $(ls -l /dev/null)"; bad=1; }
	for l in /dev/stdin /dev/stdout /dev/stderr; do
		[ -L "$l" ] || [ ! -e "$l" ] || { echo "!!! $l is not a symlink any more: $(ls -l "$l")"; bad=1; }
	done
	return $bad
}
dev_intact || { echo "!!! /dev was already damaged before the tests: fix the machine first"; exit 1; }
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
	dev_intact || { echo "!!! a test of the $cfg build damaged /dev (see above)"; status=1; }
done
# Third build: the portable fallbacks (the interfaces a Mac has) instead of the
# Linux-only ones, running the unit tests and the loopback ring, launcher and
# hal tests, so the code that runs on a Mac is executed here, not just compiled.
dir=build/portable
echo "=== build (portable-only)"
cmake -S . -B "$dir" -DMESHRUN_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMESHRUN_PORTABLE_ONLY=ON >/dev/null
cmake --build "$dir" -j "$jobs"
echo "=== test (portable-only)"
if ! ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 600 \
	-R '^(unit/|coll/(ring_n|fault_kill|foreign|listen_guard|tcp_cc)|integration/launch/|integration/hal_ssh)' \
	-E 'extern_|mixed_hosts'; then
	status=1
fi
dev_intact || { echo "!!! a test of the portable build damaged /dev (see above)"; status=1; }
# Fourth build: the libFuzzer harnesses (tests/fuzz) with clang, coverage and
# ASan+UBSan, only the library objects they need; each harness fuzzes 20 s from
# its seed corpus, two at a time (about 2 minutes), failing on any crash, leak,
# UB report or hang.
dir=build/fuzz
echo "=== build (fuzz, clang)"
if CC=clang cmake -S . -B "$dir" -DMESHRUN_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
	cmake --build "$dir" --target fuzzers -j "$jobs"; then
	echo "=== test (fuzz)"
	if ! ctest --test-dir "$dir" --output-on-failure -j 2 -L fuzz --timeout 300; then
		status=1
	fi
else
	echo "!!! the fuzz build failed"
	status=1
fi
exit $status
