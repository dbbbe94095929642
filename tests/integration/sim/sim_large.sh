#!/bin/bash
# meshsim up mesh:16 and ring:32 come up (every sshd answers) and go down cleanly.
. "$(dirname "$0")/lib.sh"

CLUSTERS=""
for spec in mesh:16/mstm16/h16 ring:32/mstr32/h32; do
	topo=${spec%%/*}; rest=${spec#*/}; n=$(uniq_name "${rest%/*}"); last=${rest#*/}
	CLUSTERS="$CLUSTERS $n"
	check "up $topo" "$MESHSIM" up "$topo" --name "$n"
	cfg=$MESHSIM_STATE_DIR/$n/ssh_config
	hosts=$(awk '$1=="Host"{print $2}' "$cfg")
	bad=0
	for h in $hosts; do
		ssh -F "$cfg" -o ConnectTimeout=5 "$h" true || bad=$((bad + 1))
	done
	check "$topo: every host answers over ssh ($(echo $hosts | wc -w) hosts)" test $bad -eq 0
	check "$topo: $last has its cables" test "$(ssh -F "$cfg" "$last" 'ip -o link show master bridge0 | wc -l')" -ge 2
	check "down $n" "$MESHSIM" down "$n"
	check "$n: nothing left" nothing_left "$n"
done
finish
