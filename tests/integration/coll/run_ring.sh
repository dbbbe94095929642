#!/bin/bash
# run_ring.sh - run N local ranks of a program on a loopback ring (no root).
#
#   run_ring.sh -n N [-c CONNS] [-t TOKEN] [-o OUTDIR] [-m] -- program args...
#
# -m: also write the mesh backend's address matrix (MESHRUN_MESH_HOSTFILE,
# OUTDIR/mesh.json): rank r is reached at 127.0.0.1:<its first port>, CONNS
# cables per pair (striped), so libmeshrun picks the mesh over the ring.
# Writes an MLX ring hostfile (per rank a list of CONNS "127.0.0.1:port"
# entries, as mlx.launch writes it) with free ports, starts every rank with
# MLX_RANK / MLX_HOSTFILE / MESHRUN_JOB_TOKEN set, waits for all of them and
# exits 0 only when every rank exited 0 (else the first non-zero status).
# Rank r's stdout/stderr go to OUTDIR/rank<r>.out / .err (printed at the end).
# Extra environment for the ranks: export it before calling.
set -u
n=2 conns=1 token="job-$$-$RANDOM" outdir="" mesh=0
while getopts "n:c:t:o:m" opt; do
	case $opt in
	n) n=$OPTARG ;;
	c) conns=$OPTARG ;;
	t) token=$OPTARG ;;
	o) outdir=$OPTARG ;;
	m) mesh=1 ;;
	*) echo "usage: run_ring.sh -n N [-c CONNS] [-t TOKEN] [-o OUTDIR] [-m] -- prog args" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "run_ring.sh: no program given" >&2; exit 2; }

own_dir=0
if [ -z "$outdir" ]; then
	outdir=$(mktemp -d /tmp/mr-coll-XXXXXX)
	own_dir=1
fi
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	[ $own_dir = 1 ] && rm -rf "$outdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free ports: random candidates not in use by a listener
used=$(ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://' | sort -u)
ports=()
while [ ${#ports[@]} -lt $((n * conns)) ]; do
	# below the kernel's ephemeral range (32768-60999 by default): a port in it
	# may be taken as the local end of any test's outgoing connection meanwhile
	p=$((20000 + RANDOM % 12000))
	if ! grep -qx "$p" <<<"$used" && [[ " ${ports[*]} " != *" $p "* ]]; then
		ports+=("$p")
	fi
done
hf="$outdir/hostfile.json"
{
	echo "["
	for ((r = 0; r < n; r++)); do
		line="    ["
		for ((c = 0; c < conns; c++)); do
			[ $c -gt 0 ] && line+=", "
			line+="\"127.0.0.1:${ports[$((r * conns + c))]}\""
		done
		line+="]"
		[ $r -lt $((n - 1)) ] && line+=","
		echo "$line"
	done
	echo "]"
} >"$hf"
echo "$hf" >"$outdir/hostfile.path"
if [ $mesh = 1 ]; then
	{
		echo "["
		for ((r = 0; r < n; r++)); do
			line="    ["
			for ((c = 0; c < n; c++)); do
				[ $c -gt 0 ] && line+=", "
				if [ $c = $r ]; then
					line+="null"
				else
					cell="["
					for ((k = 0; k < conns; k++)); do
						[ $k -gt 0 ] && cell+=", "
						cell+="\"127.0.0.1:${ports[$((r * conns))]}\""
					done
					line+="$cell]"
				fi
			done
			line+="]"
			[ $r -lt $((n - 1)) ] && line+=","
			echo "$line"
		done
		echo "]"
	} >"$outdir/mesh.json"
	export MESHRUN_MESH_HOSTFILE=$outdir/mesh.json
fi

for ((r = 0; r < n; r++)); do
	if [ $r = 1 ] && [ -n "${RUN_RING_HOOK:-}" ]; then
		# test hook: runs after rank 0 started, before the others (MR_PORT0: its first port)
		MR_PORT0=${ports[0]} MR_OUTDIR=$outdir bash -c "$RUN_RING_HOOK" || exit 1
	fi
	MLX_RANK=$r MLX_HOSTFILE=$hf MESHRUN_JOB_TOKEN=$token "$@" \
		>"$outdir/rank$r.out" 2>"$outdir/rank$r.err" &
	pids+=($!)
	echo "$!" >"$outdir/rank$r.pid"
done
status=0
for ((r = 0; r < n; r++)); do
	wait "${pids[$r]}"
	s=$?
	[ $status = 0 ] && [ $s != 0 ] && status=$s
done
pids=()
for ((r = 0; r < n; r++)); do
	sed "s/^/[rank $r] /" "$outdir/rank$r.out"
	sed "s/^/[rank $r] /" "$outdir/rank$r.err" >&2
done
exit $status
