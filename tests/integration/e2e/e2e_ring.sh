#!/bin/bash
# libmeshrun's ring backend across meshsim namespaces (issue 5):
#   e2e_ring.sh BIN_DIR [FIXTURE]
# 4 ranks, one per virtual host, started in the hosts' namespaces (meshsim exec,
# no launcher), over the Thunderbolt cable links that meshconfig set up; every op
# and dtype of meshrun-allreduce-test up to 1 MiB; 1 and 2 connections per IP;
# then a cable pulled in the middle of an all_sum.
. "$(dirname "$0")/lib.sh"
N=$(uniq_name mse4)

up_ring "$N" "${2:-}"
n=$(wc -l <"$TMP/ranks")
[ "$n" -eq 4 ] || { fail "4 ranks in the hostfile"; show "$TMP/hosts.json"; finish; }
mapfile -t rhost < <(cut -d' ' -f1 "$TMP/ranks")
mapfile -t rip < <(cut -d' ' -f2 "$TMP/ranks")
ifof() { ip -n "$N-$1" -4 -o addr show | awk -v a="$2" '$4 ~ "^" a "/" { print $2; exit }'; }

for conns in 1 2; do
	# MLX's ring hostfile: per rank CONNS "ip:port" on its cable address
	hf=$TMP/ring.c$conns.json
	{
		printf '['
		for ((r = 0; r < n; r++)); do
			[ $r -gt 0 ] && printf ', '
			printf '['
			for ((c = 0; c < conns; c++)); do
				[ $c -gt 0 ] && printf ', '
				printf '"%s:%d"' "${rip[$r]}" $((41000 + r * conns + c))
			done
			printf ']'
		done
		printf ']\n'
	} >"$hf"
	declare -A rx0=()
	for ((r = 0; r < n; r++)); do
		i=$(ifof "${rhost[$r]}" "${rip[$r]}")
		rx0[$r]=$(counter "$N" "${rhost[$r]}" "$i" rx_bytes)
	done
	pids=()
	# setsid: one session per rank, as on separate machines (with the kernel's
	# autogroup scheduling, ranks sharing our session would share one CPU share)
	for ((r = 0; r < n; r++)); do
		setsid -w "$MESHSIM" exec --name "$N" "${rhost[$r]}" -- env MLX_RANK=$r MLX_HOSTFILE="$hf" \
			MLX_RING_VERBOSE=1 MESHRUN_JOB_TOKEN=e2e-ring-$$ MESHRUN_TIMEOUT=60 \
			"$ARTEST" --max-size 1M -q >"$TMP/r$r.c$conns.out" 2>&1 &
		pids+=($!)
	done
	bad=0
	for ((r = 0; r < n; r++)); do
		wait "${pids[$r]}" || { bad=1; echo "  rank $r on ${rhost[$r]}: exit $?"; show "$TMP/r$r.c$conns.out"; }
	done
	[ $bad = 0 ] && ok "4 ranks in namespaces, $conns connection(s) per ip: every op and dtype up to 1 MiB" ||
		fail "ring over the cables, $conns connection(s) per ip"
	grep -q "connected: $conns data connection(s) each way" "$TMP/r0.c$conns.out" &&
		ok "rank 0 reports $conns data connection(s) each way" ||
		{ fail "rank 0's connection count"; show "$TMP/r0.c$conns.out"; }
	for ((r = 0; r < n; r++)); do
		i=$(ifof "${rhost[$r]}" "${rip[$r]}")
		d=$(( $(counter "$N" "${rhost[$r]}" "$i" rx_bytes) - ${rx0[$r]} ))
		[ $d -gt 4000000 ] && ok "rank $r: ${rhost[$r]}:$i (${rip[$r]}) received $d bytes" ||
			fail "rank $r: ${rhost[$r]}:$i received only $d bytes: not over the cable"
	done
done

# A cable pulled mid all_sum: rank 1's end of its cable to rank 0 goes down.
# Every rank must fail (exit 3) within the timeout, naming rank 0 or 1, the
# two ends of that cable (the first to notice floods the abort round the ring
# the other way); none may hang.
pids=()
for ((r = 0; r < n; r++)); do
	setsid -w "$MESHSIM" exec --name "$N" "${rhost[$r]}" -- env MLX_RANK=$r MLX_HOSTFILE="$TMP/ring.c1.json" \
		MESHRUN_JOB_TOKEN=e2e-pull-$$ MESHRUN_TIMEOUT=5 \
		"$ARTEST" --fault-loop --max-size 4M >"$TMP/p$r.out" 2>&1 &
	pids+=($!)
done
for ((i = 0; i < 300; i++)); do grep -q "iteration 2 done" "$TMP/p0.out" 2>/dev/null && break; sleep 0.1; done
pif=$(ifof "${rhost[1]}" "${rip[1]}")
check "fault unplug ${rhost[1]}:$pif mid all_sum" "$MESHSIM" fault --name "$N" unplug "${rhost[1]}:$pif"
for ((i = 0; i < 600; i++)); do
	alive=0
	for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
	[ $alive = 0 ] && break
	sleep 0.1
done
[ $alive = 0 ] || { fail "ranks still running 60 s after the cable was pulled"; kill "${pids[@]}" 2>/dev/null; }
bad=0
for ((r = 0; r < n; r++)); do
	wait "${pids[$r]}"; rc=$?
	if [ $rc != 3 ] || ! grep -Eq "all_sum failed: .*rank [01] \(" "$TMP/p$r.out"; then
		bad=1; echo "  rank $r: exit $rc"; show "$TMP/p$r.out"
	fi
done
[ $bad = 0 ] && ok "cable pulled mid all_sum: every rank failed naming rank 0 or 1 (the ends of that cable)" ||
	fail "cable pulled mid all_sum"
grep -h "all_sum failed" "$TMP"/p[0-3].out | sed 's/^/    /'
check "fault plug ${rhost[1]}:$pif" "$MESHSIM" fault --name "$N" plug "${rhost[1]}:$pif"

check "no rank left, only sshd runs in the hosts" only_sshd_left "$N"
down "$N"
finish
