# cmake/toolchain-zig-macos-rules.cmake - read by CMake after its Darwin platform
# file (CMAKE_USER_MAKE_RULES_OVERRIDE_C, set by toolchain-zig-macos.cmake).
# That file turns on -rpath only when `sw_vers` (a Mac's) reports 10.5 or later;
# on Linux it is absent, and libmeshrun.dylib would get its build path as
# install name instead of @rpath/libmeshrun.0.dylib.
set(CMAKE_SHARED_LIBRARY_RUNTIME_C_FLAG "-Wl,-rpath,")
