# The portability layer's configure-time checks (src/common/port.c reads them).
#
# Every Linux-only interface the tree uses is probed here by feature, never by
# OS name, and written as MR_HAVE_<NAME> 0/1 into gen/common/port_config.h.
# MESHRUN_PORTABLE_ONLY=ON reports every Linux-only one as missing, so a Linux
# build compiles and runs the code paths a Mac takes (CI does so).
include(CheckSymbolExists)
include(CheckIncludeFile)
include(CheckStructHasMember)

option(MESHRUN_PORTABLE_ONLY
  "Compile the portable fallbacks instead of the Linux-only interfaces (the macOS code paths, run on Linux)" OFF)

set(_mr_saved_defs ${CMAKE_REQUIRED_DEFINITIONS})
set(CMAKE_REQUIRED_DEFINITIONS -D_GNU_SOURCE)

# NAME|symbol|header,header -- the Linux interfaces that have a portable fallback.
set(_mr_linux_checks
  "PIPE2|pipe2|unistd.h,fcntl.h"
  "ACCEPT4|accept4|sys/types.h,sys/socket.h"
  "SOCK_CLOEXEC|SOCK_CLOEXEC|sys/types.h,sys/socket.h"
  "MSG_NOSIGNAL|MSG_NOSIGNAL|sys/types.h,sys/socket.h"
  "TCP_CONGESTION|TCP_CONGESTION|netinet/in.h,netinet/tcp.h"
  "TCP_QUICKACK|TCP_QUICKACK|netinet/in.h,netinet/tcp.h"
  "TCP_USER_TIMEOUT|TCP_USER_TIMEOUT|netinet/in.h,netinet/tcp.h"
  "TCP_INFO|TCP_INFO|netinet/in.h,netinet/tcp.h"
  "GETRANDOM|getrandom|sys/random.h"
  "MEMRCHR|memrchr|string.h"
  "STRCHRNUL|strchrnul|string.h"
  "SIGDESCR_NP|sigdescr_np|string.h"
  "PIDFD_OPEN|SYS_pidfd_open|sys/syscall.h"
  "CLOSE_RANGE|SYS_close_range|sys/syscall.h"
  "SCHED_GETAFFINITY|sched_getaffinity|sched.h")
# The interfaces a Mac has instead (kept in the portable build where Linux has them).
set(_mr_other_checks
  "SO_NOSIGPIPE|SO_NOSIGPIPE|sys/types.h,sys/socket.h"
  "TCP_CONNECTION_INFO|TCP_CONNECTION_INFO|netinet/in.h,netinet/tcp.h"
  "ARC4RANDOM_BUF|arc4random_buf|stdlib.h"
  "NSGETENVIRON|_NSGetEnviron|crt_externs.h"
  "GETPEEREID|getpeereid|sys/types.h,sys/socket.h,unistd.h"
  "SO_PEERCRED|SO_PEERCRED|sys/types.h,sys/socket.h")

foreach(entry ${_mr_linux_checks} ${_mr_other_checks})
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 name)
  list(GET parts 1 sym)
  list(GET parts 2 headers)
  string(REPLACE "," ";" headers "${headers}")
  check_symbol_exists(${sym} "${headers}" MR_CHECK_${name})
  if(MR_CHECK_${name})
    set(MR_HAVE_${name} 1)
  else()
    set(MR_HAVE_${name} 0)
  endif()
endforeach()

check_include_file(sys/vfs.h MR_CHECK_SYS_VFS_H)
check_struct_has_member("struct statfs" f_fstypename "sys/param.h;sys/mount.h" MR_CHECK_STATFS_FSTYPENAME)
set(MR_HAVE_SYS_VFS_H 0)
set(MR_HAVE_STATFS_FSTYPENAME 0)
if(MR_CHECK_SYS_VFS_H)
  set(MR_HAVE_SYS_VFS_H 1)
endif()
if(MR_CHECK_STATFS_FSTYPENAME)
  set(MR_HAVE_STATFS_FSTYPENAME 1)
endif()
# POSIX 2008's st_mtim; a Mac has st_mtimespec
check_struct_has_member("struct stat" st_mtim "sys/types.h;sys/stat.h" MR_CHECK_STAT_MTIM)
set(MR_HAVE_STAT_MTIM 0)
if(MR_CHECK_STAT_MTIM)
  set(MR_HAVE_STAT_MTIM 1)
endif()
set(CMAKE_REQUIRED_DEFINITIONS ${_mr_saved_defs})

set(MR_PORTABLE_ONLY 0)
if(MESHRUN_PORTABLE_ONLY)
  set(MR_PORTABLE_ONLY 1)
  foreach(entry ${_mr_linux_checks})
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 name)
    set(MR_HAVE_${name} 0)
  endforeach()
  message(STATUS "meshrun: portable-only build (the fallbacks a Mac uses, not the Linux interfaces)")
endif()

configure_file(${PROJECT_SOURCE_DIR}/src/common/port_config.h.in
               ${PROJECT_BINARY_DIR}/gen/common/port_config.h)
include_directories(${PROJECT_BINARY_DIR}/gen)
