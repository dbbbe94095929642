# cmake/toolchain-zig-macos.cmake - cross-build meshrun for macOS on Linux with
# Zig's C compiler (clang + macOS's libc headers + libSystem stubs, no SDK).
#
#   cmake -S . -B build/macos-aarch64 \
#         -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-zig-macos.cmake \
#         -DMESHRUN_ZIG=/path/to/zig -DMESHRUN_MACOS_ARCH=aarch64 \
#         -DMESHRUN_MACOS_STAGE=/path/to/stage
#
# scripts/macos-cross.sh fetches the compiler, makes the stage and runs this; use
# it rather than this file by hand. The stage holds what a Mac would get from
# Homebrew and the SDK, and nothing of this Linux host:
#   include/    libssh2, cJSON and verbs headers only (never glibc's)
#   lib/        lib{ssh2,cjson,rdma}.tbd: link stubs listing each library's exports
#   lib/pkgconfig/  libssh2.pc, libcjson.pc pointing into the stage
# The compiler searches only Zig's own macOS headers plus the stage: no
# /usr/include of the host can leak in.
#
# Inputs (cache variables, also read from the environment of the same name):
#   MESHRUN_ZIG          the zig binary (0.11)
#   MESHRUN_MACOS_ARCH   aarch64 or x86_64
#   MESHRUN_MACOS_STAGE  the stage folder described above

if(CMAKE_VERSION VERSION_LESS 3.19)
  message(FATAL_ERROR "toolchain-zig-macos: needs CMake 3.19 or later (file(CHMOD))")
endif()
foreach(v MESHRUN_ZIG MESHRUN_MACOS_ARCH MESHRUN_MACOS_STAGE)
  if(NOT ${v} AND DEFINED ENV{${v}})
    set(${v} "$ENV{${v}}")
  endif()
  if(NOT ${v})
    message(FATAL_ERROR "toolchain-zig-macos: set ${v} (see the top of this file)")
  endif()
  set(${v} "${${v}}" CACHE STRING "zig macOS cross-build: ${v}" FORCE)
endforeach()
if(NOT MESHRUN_MACOS_ARCH MATCHES "^(aarch64|x86_64)$")
  message(FATAL_ERROR "toolchain-zig-macos: MESHRUN_MACOS_ARCH is aarch64 or x86_64, not '${MESHRUN_MACOS_ARCH}'")
endif()
# try_compile() projects read this file again: hand them the same inputs.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES MESHRUN_ZIG MESHRUN_MACOS_ARCH MESHRUN_MACOS_STAGE)

set(CMAKE_SYSTEM_NAME Darwin)
# Darwin 20 = macOS 11, the oldest release Zig's headers describe. CMake's
# Darwin platform file gives rpath support (@rpath install names, -rpath) only
# when it knows the version.
set(CMAKE_SYSTEM_VERSION 20.0.0)
if(MESHRUN_MACOS_ARCH STREQUAL "aarch64")
  set(CMAKE_SYSTEM_PROCESSOR arm64)
else()
  set(CMAKE_SYSTEM_PROCESSOR x86_64)
endif()

# CMake wants one program per tool, so each zig subcommand gets a wrapper. The
# wrappers live in the stage, one folder per arch; they are rewritten only when
# their text changes (this file runs once per try_compile too). Zig's caches go
# next to the zig binary, not into $HOME/.cache/zig or the build tree.
get_filename_component(_zig_home "${MESHRUN_ZIG}" DIRECTORY)
set(_zig_cache "${_zig_home}/../cache")
set(_wrap "${MESHRUN_MACOS_STAGE}/bin-${MESHRUN_MACOS_ARCH}")
function(_zig_wrapper name body)
  set(text "#!/bin/sh\n# written by cmake/toolchain-zig-macos.cmake\nZIG_GLOBAL_CACHE_DIR='${_zig_cache}' ZIG_LOCAL_CACHE_DIR='${_zig_cache}' \\\nexec '${MESHRUN_ZIG}' ${body}\n")
  set(old "")
  if(EXISTS "${_wrap}/${name}")
    file(READ "${_wrap}/${name}" old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE "${_wrap}/${name}.tmp" "${text}")
    file(CHMOD "${_wrap}/${name}.tmp" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
         GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
    file(RENAME "${_wrap}/${name}.tmp" "${_wrap}/${name}")
  endif()
endfunction()
_zig_wrapper(cc "cc -target ${MESHRUN_MACOS_ARCH}-macos \"$@\"")
_zig_wrapper(ar "ar \"$@\"")
_zig_wrapper(ranlib "ranlib \"$@\"")

set(CMAKE_C_COMPILER "${_wrap}/cc")
set(CMAKE_AR "${_wrap}/ar" CACHE FILEPATH "zig ar" FORCE)
set(CMAKE_RANLIB "${_wrap}/ranlib" CACHE FILEPATH "zig ranlib" FORCE)
# Zig knows its SDK-less target: no -isysroot, no -arch, no xcrun.
set(CMAKE_OSX_SYSROOT "" CACHE PATH "" FORCE)
set(CMAKE_OSX_ARCHITECTURES "" CACHE STRING "" FORCE)
set(CMAKE_OSX_DEPLOYMENT_TARGET "" CACHE STRING "" FORCE)
# @rpath install names and -rpath, as on a Mac (see that file for why)
set(CMAKE_USER_MAKE_RULES_OVERRIDE_C "${CMAKE_CURRENT_LIST_DIR}/toolchain-zig-macos-rules.cmake")
# install_name_tool is not needed: nothing is installed from a cross-build.
set(CMAKE_INSTALL_NAME_TOOL "/bin/false" CACHE FILEPATH "" FORCE)

# Libraries, headers and pkg-config files come from the stage only.
set(CMAKE_FIND_ROOT_PATH "${MESHRUN_MACOS_STAGE}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_LIBDIR} "${MESHRUN_MACOS_STAGE}/lib/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
set(PKG_CONFIG_USE_CMAKE_PREFIX_PATH OFF)
