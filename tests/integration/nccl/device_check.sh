#!/bin/sh
# ctest driver of bench/nccl/run.sh (see there): skips in the ASan build.
# usage: device_check.sh BIN_DIR
case "${MESHRUN_ASAN:-OFF}" in ON|on|1|TRUE|true)
	echo "skip: the GPU check runs in the plain build only (the CUDA runtime and ASan's shadow memory collide)"; exit 77;;
esac
exec "$(dirname "$0")/../../../bench/nccl/run.sh" --bin "$1"
