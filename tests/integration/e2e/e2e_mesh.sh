#!/bin/bash
# The mesh backend on a meshsim full mesh (issue 19), end to end:
#   e2e_mesh.sh BIN_DIR [FIXTURE]
# fixtures/mesh4-double: 4 hosts, every pair cabled, m1-m2 by two cables.
# meshconfig --backend ring --auto-setup writes "mesh_ips" on every host;
# meshrun then runs the mesh by default (every op and dtype up to 1 MiB), and
# every cable end, both m1-m2 cables included (striping), carries data;
# --backend ring still runs the ring; libmeshrun-mpi (--backend mpi --mpi-impl
# meshrun) runs the mesh too; a cable pulled mid all_sum fails every
# rank within MESHRUN_TIMEOUT naming a rank; nothing is left behind.
. "$(dirname "$0")/lib.sh"
N=$(uniq_name msm)

up_ring "$N" "${2:-fixtures/mesh4-double}"
nmesh=$(grep -c '"mesh_ips"' "$TMP/hosts.json")
[ "$nmesh" -eq 4 ] && ok "meshconfig wrote mesh_ips on all 4 hosts of the full mesh" ||
	{ fail "mesh_ips on $nmesh of 4 hosts"; show "$TMP/hosts.json"; finish; }
MR=("$MESHRUN" --hostfile "$TMP/hosts.json" --ssh-config "$CFG")

mapfile -t cab < <(cables "$N")
declare -A rx0=()
snap() { local c h1 i1 h2 i2; for c in "${cab[@]}"; do read -r h1 i1 h2 i2 <<<"$c"; rx0[$h1:$i1]=$(counter "$N" "$h1" "$i1" rx_bytes); rx0[$h2:$i2]=$(counter "$N" "$h2" "$i2" rx_bytes); done; }
snap
"${MR[@]}" -- "$ARTEST" --max-size 1M </dev/null >"$TMP/mesh.out" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c ' of 4 (mesh): .* 0 failed' "$TMP/mesh.out")" = 4 ] &&
	ok "meshrun picks the mesh on the full mesh: every op and dtype up to 1 MiB on 4 ranks" ||
	{ fail "mesh job (exit $rc)"; show "$TMP/mesh.out"; }
bad=0
for c in "${cab[@]}"; do
	read -r h1 i1 h2 i2 <<<"$c"
	for e in "$h1:$i1" "$h2:$i2"; do
		d=$(($(counter "$N" "${e%%:*}" "${e#*:}" rx_bytes) - ${rx0[$e]}))
		[ $d -gt 1000000 ] || { bad=1; echo "  $e received only $d bytes"; }
	done
done
[ $bad = 0 ] && ok "every end of all ${#cab[@]} cables received data (both m1-m2 cables: striped)" ||
	fail "not every cable carried the mesh's data"

"${MR[@]}" --backend ring -- "$ARTEST" --max-size 64K </dev/null >"$TMP/ring.out" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c ' of 4 (ring): .* 0 failed' "$TMP/ring.out")" = 4 ] &&
	ok "--backend ring forces the ring on the same hostfile" || { fail "ring job (exit $rc)"; show "$TMP/ring.out"; }

# libmeshrun-mpi on the full mesh (issue 18): `--backend mpi --mpi-impl meshrun`
# gives the shim the mesh's addresses too, so MLX's mpi calls run on the mesh
# (its version string says so) over every cable
SHIMTEST=$BIN/mpishim-mlx-test
if [ -x "$SHIMTEST" ] && [ -e "$BIN/../lib/libmeshrun-mpi.so" ]; then
	snap
	"${MR[@]}" --backend mpi --mpi-impl meshrun -- "$SHIMTEST" </dev/null >"$TMP/shim.out" 2>&1
	rc=$?
	[ $rc -eq 0 ] && [ "$(grep -cE 'rank [0-3] of 4: ok \(libmeshrun-mpi .*\(mesh\)\)' "$TMP/shim.out")" = 4 ] &&
		ok "--backend mpi --mpi-impl meshrun on the full mesh: MLX's mpi calls pass on libmeshrun-mpi over the mesh" ||
		{ fail "mpishim job on the mesh (exit $rc)"; show "$TMP/shim.out"; }
	bad=0
	for c in "${cab[@]}"; do
		read -r h1 i1 h2 i2 <<<"$c"
		for e in "$h1:$i1" "$h2:$i2"; do
			d=$(($(counter "$N" "${e%%:*}" "${e#*:}" rx_bytes) - ${rx0[$e]}))
			[ $d -gt 100000 ] || { bad=1; echo "  $e received only $d bytes"; }
		done
	done
	[ $bad = 0 ] && ok "libmeshrun-mpi's job: every end of all ${#cab[@]} cables received data" ||
		fail "libmeshrun-mpi's job did not use every cable"
else
	echo "skip - mpishim-mlx-test or libmeshrun-mpi is not built: no libmeshrun-mpi step"
fi

# a cable pulled mid all_sum (m3's end of its cable to m4): every rank stops,
# meshrun exits with a rank's failure, the error names a rank
read -r h1 i1 h2 i2 < <(printf '%s\n' "${cab[@]}" | awk '($1 == "m3" && $3 == "m4") || ($1 == "m4" && $3 == "m3")' | head -1)
"${MR[@]}" --env MESHRUN_TIMEOUT=3 -- "$ARTEST" --fault-loop --max-size 4M --ignore-sigterm \
	</dev/null >"$TMP/pull.out" 2>&1 &
mpid=$!
for ((i = 0; i < 300; i++)); do grep -q "iteration 2 done" "$TMP/pull.out" 2>/dev/null && break; sleep 0.1; done
t0=$(date +%s%N)
check "fault unplug $h1:$i1 mid all_sum" "$MESHSIM" fault --name "$N" unplug "$h1:$i1"
for ((i = 0; i < 600; i++)); do kill -0 $mpid 2>/dev/null || break; sleep 0.1; done
if kill -0 $mpid 2>/dev/null; then
	fail "meshrun still running 60 s after the cable was pulled"; kill -9 $mpid
fi
wait $mpid; rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
named=$(grep -m1 -E "all_sum failed: .*rank [0-3] \(" "$TMP/pull.out")
[ $rc -ne 0 ] && [ -n "$named" ] && ok "cable pulled: meshrun exit $rc after ${ms} ms, naming a rank: $named" ||
	{ fail "cable pull (exit $rc)"; show "$TMP/pull.out"; }
check "fault plug $h1:$i1" "$MESHSIM" fault --name "$N" plug "$h1:$i1"

check "no rank left, only sshd runs in the hosts" only_sshd_left "$N"
down "$N"
finish
