#!/bin/bash
# run.sh [BUILD_DIR] [ROUNDS]: bring up 8 sshd hosts (the hal integration harness)
# and compare `true` on all 8 through the hal's ssh backend (libssh2), its openssh
# backend (control masters) and 8 parallel plain OpenSSH `ssh` processes, in the
# same run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
rounds=${2:-15}
exec "$here/../../tests/integration/hal/sshd_hosts.sh" 8 "$build/bin/bench_hal_ssh" "$rounds"
