#!/bin/bash
# run.sh [--jump] [BUILD_DIR] [ROUNDS]: bring up 8 sshd hosts (the hal integration
# harness) and compare `true` on all 8 through the hal's ssh backend (libssh2), its
# openssh backend (control masters) and 8 parallel plain OpenSSH `ssh` processes,
# in the same run. --jump: every host through h1 (ProxyJump; bench/hal/jump.sh).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
jump=""
if [[ "${1:-}" == --jump ]]; then
	jump=1
	shift
fi
build=${1:-$here/../../build}
rounds=${2:-15}
if [[ -n "$jump" ]]; then
	exec "$here/../../tests/integration/hal/sshd_hosts.sh" 8 "$here/jump.sh" "$build/bin/bench_hal_ssh" "$rounds"
fi
exec "$here/../../tests/integration/hal/sshd_hosts.sh" 8 "$build/bin/bench_hal_ssh" "$rounds"
