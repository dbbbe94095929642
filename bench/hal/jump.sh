#!/bin/sh
# jump.sh BENCH ROUNDS: run by sshd_hosts.sh (bench/hal/run.sh --jump): the same
# bench, every host reached through h1 (ProxyJump), as aliases j1..jN.
set -eu
bench=$1
rounds=$2
cfg=$MRH_DIR/ssh_config_jump
hosts=""
i=0
for h in $MRH_HOSTS; do
	i=$((i + 1))
	printf 'Host j%d\n    HostName 10.231.0.%d\n    ProxyJump h1\n' "$i" $((10 + i))
	hosts="$hosts j$i"
done >"$cfg"
cat "$MRH_SSH_CONFIG" >>"$cfg"
MRH_SSH_CONFIG=$cfg MRH_HOSTS=${hosts# } exec "$bench" "$rounds"
