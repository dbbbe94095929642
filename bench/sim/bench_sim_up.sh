#!/bin/bash
# meshsim bring-up benchmark (root): time and peak memory of `meshsim up` for
# ring topologies of 8, 16 and 32 hosts (and a 16-host full mesh: 120 cables),
# then of `meshsim down`. Target: 32 hosts up in under 15 s on 2 cores.
# usage: bench_sim_up.sh path/to/meshsim [SIZES...]
set -u
MESHSIM=${1:?usage: $0 path/to/meshsim [specs...]}
shift
SPECS=${*:-ring:8 ring:16 ring:32 mesh:16}
[ "$(id -u)" -eq 0 ] || { echo "bench_sim_up: needs root"; exit 77; }
command -v /usr/bin/time >/dev/null || { echo "bench_sim_up: needs /usr/bin/time"; exit 77; }
export MESHSIM_STATE_DIR=$(mktemp -d /tmp/mst-bench.XXXXXX)
trap '"$MESHSIM" down mstbench >/dev/null 2>&1; rm -rf "$MESHSIM_STATE_DIR"' EXIT

echo "cpus: $(nproc)   kernel: $(uname -r)"
printf '%-10s %6s %10s %14s %16s %10s\n' spec hosts "up (s)" "meshsim RSS" "sshd RSS total" "down (s)"
for spec in $SPECS; do
	"$MESHSIM" down mstbench >/dev/null 2>&1
	/usr/bin/time -f '%e %M' -o "$MESHSIM_STATE_DIR/t.up" "$MESHSIM" up "$spec" --name mstbench >/dev/null ||
		{ echo "$spec: up failed"; exit 1; }
	hosts=$(grep -c '^Host ' "$MESHSIM_STATE_DIR/mstbench/ssh_config")
	sshd_kb=$(ps -o rss= -p "$(cat "$MESHSIM_STATE_DIR"/mstbench/*/sshd.pid | paste -sd,)" | awk '{s+=$1} END {print s}')
	/usr/bin/time -f '%e %M' -o "$MESHSIM_STATE_DIR/t.down" "$MESHSIM" down mstbench >/dev/null
	read -r up_s up_kb <"$MESHSIM_STATE_DIR/t.up"
	read -r down_s _ <"$MESHSIM_STATE_DIR/t.down"
	printf '%-10s %6s %10s %11s KB %13s KB %10s\n' "$spec" "$hosts" "$up_s" "$up_kb" "$sshd_kb" "$down_s"
done
