# guest_lib.sh - sourced by the scripts that run INSIDE the soft-RoCE guest
# (tests/integration/rdma/guest_jaccl.sh, bench/rdma/guest_bench.sh): cables,
# rxe devices, MLX hostfiles for meshrun, IPv4 over the cables.
#
# Every "cable" is a veth pair with an rxe device on each end, all in ONE
# network namespace: rxe on the guest's 6.1 kernel does not work across
# namespaces, and between devices of one namespace only GID index 0 (the
# link-local fe80:: RoCE v2 GID) works, so ranks get MESHRUN_IB_GID_INDEX=0.
# IPv6 DAD is off, else modify_qp(RTR) fails with ETIMEDOUT while addresses
# are tentative. Names: mesh cable i-j is veth m<i>_<j> / rxe_<i>_<j> on rank
# i's end; ring cable k between i and i+1 is r<i>_<j>_<k> / rxe_<i>_<j>_<k>.
# The caller sets T (a scratch directory).

echo 0 > /proc/sys/net/ipv6/conf/all/accept_dad
echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad
# A veth hands every packet to the receiving side's backlog, which drops above
# netdev_max_backlog (1000): jaccl's UC queue pairs do not retransmit, and a
# few 512 KiB frames in flight (512 packets each at MTU 1024) overflowed it
# ("frame 7 arrived where frame 5 was expected"). A Thunderbolt cable drops
# nothing; neither does the simulated one.
echo 100000 > /proc/sys/net/core/netdev_max_backlog

# cable IF_A IF_B RXE_A RXE_B
cable() {
	ip link add "$1" type veth peer name "$2" && ip link set "$1" up && ip link set "$2" up &&
	rdma link add "$3" type rxe netdev "$1" && rdma link add "$4" type rxe netdev "$2"
}

# Under TCG every program started in the guest costs a good part of a second
# (exec over 9p, emulated): the helpers below use bash builtins where they can.

wait_ready() { # devices...
	local i d st okall
	for ((i = 0; i < 300; i++)); do
		okall=1
		for d in "$@"; do
			st=
			read -r st <"/sys/class/infiniband/$d/ports/1/state" 2>/dev/null
			[ "$st" = "4: ACTIVE" ] || { okall=0; break; }
		done
		[ $okall = 1 ] && [ -z "$(ip -6 addr show tentative)" ] && return 0
		sleep 0.1
	done
	echo "devices not ready: $*"; return 1
}

# has FILE REGEX: some line of FILE matches the (bash, extended) REGEX
has() {
	local l
	while IFS= read -r l; do [[ $l =~ $2 ]] && return 0; done <"$1"
	return 1
}

# count FILE REGEX: how many lines match
count() {
	local l n=0
	while IFS= read -r l; do [[ $l =~ $2 ]] && n=$((n + 1)); done <"$1"
	echo $n
}

# Seconds since a $EPOCHREALTIME value, one decimal (no date/awk).
since() {
	local d=$(( (${EPOCHREALTIME/./} - ${1/./}) / 100000 ))
	echo "$((d / 10)).$((d % 10))"
}

# mesh_cables N: one cable (veth pair + 2 rxe devices) per pair of ranks
mesh_cables() {
	local n=$1 i j devs=()
	for ((i = 0; i < n; i++)); do for ((j = i + 1; j < n; j++)); do
		[ -e /sys/class/infiniband/rxe_${i}_${j} ] || cable m${i}_${j} m${j}_${i} rxe_${i}_${j} rxe_${j}_${i} || return 1
		devs+=(rxe_${i}_${j} rxe_${j}_${i})
	done; done
	wait_ready "${devs[@]}"
}

# ring_cables N K: K cables between every rank i and i+1
ring_cables() {
	local n=$1 k=$2 i j c devs=()
	for ((i = 0; i < n; i++)); do
		j=$(((i + 1) % n))
		for ((c = 0; c < k; c++)); do
			[ -e /sys/class/infiniband/rxe_${i}_${j}_$c ] || cable r${i}_${j}_$c r${j}_${i}_$c rxe_${i}_${j}_$c rxe_${j}_${i}_$c || return 1
			devs+=(rxe_${i}_${j}_$c rxe_${j}_${i}_$c)
		done
	done
	wait_ready "${devs[@]}"
}

# The rdma cell of rank I for column J (JSON): mesh_cell I J / ring_cell N K I J
mesh_cell() { if [ "$1" = "$2" ]; then echo null; else echo "\"rxe_$1_$2\""; fi; }
ring_cell() {
	local n=$1 k=$2 i=$3 j=$4 c cell=
	if [ "$j" != $(((i + 1) % n)) ] && [ "$j" != $(((i + n - 1) % n)) ]; then echo null; return; fi
	for ((c = 0; c < k; c++)); do [ $c -gt 0 ] && cell+=', '; cell+="\"rxe_${i}_${j}_$c\""; done
	echo "[$cell]"
}

# hostfile FILE BACKEND N CELLFN [CELLARGS...]: MLX object-form hostfile, every
# host 127.0.0.1 (so meshrun starts the ranks locally), ips ["127.0.0.1"]
# (rank 0's is the jaccl coordinator), rdma rows from CELLFN ... I J.
# HOSTFILE_IPS, when set, is a function giving rank I's ips instead.
hostfile() {
	local f=$1 backend=$2 n=$3 fn=$4 i j row ips
	shift 4
	{
		printf '{"backend": "%s", "envs": [], "hosts": [\n' "$backend"
		for ((i = 0; i < n; i++)); do
			row=
			for ((j = 0; j < n; j++)); do
				[ $j -gt 0 ] && row+=', '
				row+=$("$fn" "$@" $i $j)
			done
			ips='"127.0.0.1"'
			[ -n "${HOSTFILE_IPS:-}" ] && ips=$("$HOSTFILE_IPS" $i)
			printf '  {"ssh": "127.0.0.1", "ips": [%s], "rdma": [%s]}%s\n' "$ips" "$row" "$([ $i -lt $((n - 1)) ] && echo ,)"
		done
		printf ']}\n'
	} >"$f"
}

# IPv4 on the mesh cables so that TCP (the ring backend) crosses the same veths
# as RDMA. Cable i-j (i < j) is 10.77.<i*16+j>.0/30: .1 on m<i>_<j>, .2 on
# m<j>_<i>. In one namespace every such address is local and would be reached
# over lo, so: locally sent packets (iif lo) look up table 100 first, which
# routes each cable address out of the OTHER end of its cable; the local table
# moves behind it; accept_local/rp_filter let a packet from a local source in.
cable_ip() { # I J: rank I's address on cable I-J
	local a=$1 b=$2
	if [ "$a" -lt "$b" ]; then echo "10.77.$((a * 16 + b)).1"; else echo "10.77.$((b * 16 + a)).2"; fi
}

mesh_ipv4() {
	local n=$1 i j
	sysctl -qw net.ipv4.conf.all.accept_local=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
	for ((i = 0; i < n; i++)); do for ((j = 0; j < n; j++)); do
		[ $i = $j ] && continue
		ip addr replace "$(cable_ip $i $j)/30" dev m${i}_${j}
		sysctl -qw net.ipv4.conf.m${i}_${j}.accept_local=1 net.ipv4.conf.m${i}_${j}.rp_filter=0
		# to rank j's end: out of rank i's end
		ip route replace "$(cable_ip $j $i)/32" dev m${i}_${j} src "$(cable_ip $i $j)" table 100
	done; done
	ip rule show | grep -q "lookup 100" || ip rule add pref 100 iif lo lookup 100
	ip rule show | grep -q "^1000:" || ip rule add pref 1000 lookup local
	ip rule show | grep -q "^0:.*lookup local" && ip rule del pref 0
	return 0
}

# IPv4 on ring cables (K per neighbour pair of a ring of N), which Apple's RDMA
# layer needs for its GID 1: cable k between i and i+1 is 10.79.<i*16+k>.0/30
# (.1 on rank i's end). Nothing is routed over them: the address is all.
ring_ipv4() {
	local n=$1 k=$2 i j c net
	for ((i = 0; i < n; i++)); do
		j=$(((i + 1) % n))
		for ((c = 0; c < k; c++)); do
			net=10.79.$((i * 16 + c))
			ip addr replace $net.1/30 dev r${i}_${j}_$c && ip addr replace $net.2/30 dev r${j}_${i}_$c || return 1
		done
	done
}

# Rank I's address for the ring backend in a ring 0..N-1 over mesh cables: its
# end of the cable to its left neighbour (the left one connects to it).
ring_ip_json() { echo "\"$(cable_ip $1 $(((${1} + RING_N - 1) % RING_N)))\""; }
null_cell() { echo null; }

# Bytes sent over the mesh veths (sum of tx_bytes of every m*_* interface).
mesh_tx_bytes() {
	cat /sys/class/net/m*_*/statistics/tx_bytes 2>/dev/null | awk '{s += $1} END {print s + 0}'
}

# rank_pid MESHRUN_PID RANK: the pid of that rank (a child of meshrun with MLX_RANK=RANK)
rank_pid() {
	local p kids e env
	kids=
	read -r kids <"/proc/$1/task/$1/children" # no newline at the end: read says 1
	[ -n "$kids" ] || return 1
	for p in $kids; do
		env=()
		mapfile -t -d '' env <"/proc/$p/environ" 2>/dev/null
		for e in "${env[@]}"; do [ "$e" = "MLX_RANK=$2" ] && { echo "$p"; return 0; }; done
	done
	return 1
}
