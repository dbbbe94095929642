#!/bin/sh
# mpi_netns_wrap.sh NS_PREFIX STATE_DIR program args...
# Run by mpirun (in the root namespace) for each rank: exec the program as
# that rank inside namespace NS_PREFIX<rank + MPI_NETNS_RANK_BASE (default 0)>.
# Open MPI's ranks reach mpirun's PMIx server over TCP on 127.0.0.1, which is another loopback inside the
# namespace, so a socat relay carries that one control connection through a
# unix socket (paths cross namespaces): ns 127.0.0.1:PORT -> STATE_DIR/pmix-rR.sock
# -> root 127.0.0.1:PORT. The MPI traffic itself uses the ring links
# (btl tcp, btl_tcp_if_include). Relay pids go to STATE_DIR/relay-*.pid.
set -eu
prefix=$1 state=$2
shift 2
r=${OMPI_COMM_WORLD_RANK:?not started by mpirun}
# MPI_NETNS_RANK_BASE: the first namespace's number (meshsim's hosts are h1..)
ns=$prefix$((r + ${MPI_NETNS_RANK_BASE:-0}))
uri=${PMIX_SERVER_URI41:-${PMIX_SERVER_URI4:-${PMIX_SERVER_URI3:-}}}
port=${uri##*:}
case $uri in
*tcp4://127.0.0.1:*) ;;
*) echo "mpi_netns_wrap: unexpected PMIx server URI '$uri'" >&2; exit 1 ;;
esac
command -v socat >/dev/null 2>&1 ||
	{ echo "mpi_netns_wrap: rank $r: 'socat' is not installed (the PMIx relay; run.sh installs it unless --no-deps)" >&2; exit 1; }
sock=$state/pmix-r$r.sock
rm -f "$sock"
socat "UNIX-LISTEN:$sock,fork" "TCP:127.0.0.1:$port" </dev/null >/dev/null 2>&1 &
echo $! >"$state/relay-root-r$r.pid"
ip netns exec "$ns" socat "TCP-LISTEN:$port,bind=127.0.0.1,fork,reuseaddr" "UNIX-CONNECT:$sock" \
	</dev/null >/dev/null 2>&1 &
echo $! >"$state/relay-ns-r$r.pid"
i=0
until [ -S "$sock" ] && ip netns exec "$ns" ss -Hltn "sport = :$port" | grep -q LISTEN; do
	i=$((i + 1))
	[ $i -gt 200 ] && { echo "mpi_netns_wrap: rank $r: relay did not come up" >&2; exit 1; }
	sleep 0.01
done
exec ip netns exec "$ns" "$@"
