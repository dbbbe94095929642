#!/bin/bash
# meshconfig doctor against a simulated cluster (issue 35): one cluster of four
# Macs (fixtures/mesh4-m3ultra, --pretend-rdma) set up by meshconfig, then
#   - healthy: the jaccl hostfile (RDMA) and the ring one pass every check (exit 0);
#   - each meshsim doctor fault in turn: exactly the expected cells fail, with the
#     expected code and a fix (exit 1), then the fault is cleared;
#   - hostfiles that disagree with the hosts: a wrong ip, rdma devices that do
#     not exist or are on the wrong cable;
#   - at the end, with every fault cleared and a job directory of a dead run left
#     on one host: no failure, that directory is a warning with its rm.
# Decisions are on the --json codes and cells, never on message text.
#   doctor.sh BIN_DIR
. "$(dirname "$0")/../e2e/lib.sh"
command -v jq >/dev/null 2>&1 || skip "'jq' is not installed"
command -v nft >/dev/null 2>&1 || skip "'nft' is not installed (the firewall fault)"
command -v nsenter >/dev/null 2>&1 || skip "'nsenter' is not installed (the diskfull fault)"
N=$(uniq_name msd)
T0=$(date +%s)

up "$N" "$SRC/fixtures/mesh4-m3ultra" --pretend-rdma
F() { "$MESHSIM" fault --name "$N" "$@" >"$TMP/fault.out" 2>&1 || { fail "meshsim fault $*"; show "$TMP/fault.out"; }; }
"$MESHCONFIG" --hosts "$HOSTS" --auto-setup --ssh-config "$CFG" --output-hostfile "$TMP/jaccl.json" \
	>"$TMP/mc.out" 2>&1 || { fail "meshconfig --auto-setup"; show "$TMP/mc.out"; finish; }
"$MESHCONFIG" --hosts "$HOSTS" --backend ring --ssh-config "$CFG" --output-hostfile "$TMP/ring.json" \
	>"$TMP/mc.out" 2>&1 || { fail "meshconfig --backend ring"; show "$TMP/mc.out"; finish; }
[ "$(jq -r .backend "$TMP/jaccl.json")" = jaccl ] || { fail "the first hostfile is a jaccl one"; finish; }

# doctor HOSTFILE TAG: meshconfig doctor --json (a long --timeout: this
# machine's other suites can load it so that a host's script takes more than
# the default 30 s); sets RC, BADCELLS (sorted
# "host:check" of the failing cells) and BADCODES ("host:check:code" of the
# failures), and checks that every failure has a fix.
doctor() {
	"$MESHCONFIG" doctor --hostfile "$1" --ssh-config "$CFG" --timeout 90 --json >"$TMP/out-$2.json" 2>"$TMP/out-$2.err"
	RC=$?
	BADCELLS=$(jq -r '. as $d | .hosts[] as $h | $d.checks[] | select($h[.] == "fail") | "\($h.host):\(.)"' \
		"$TMP/out-$2.json" 2>/dev/null | sort | tr '\n' ' ')
	BADCELLS=${BADCELLS% }
	BADCODES=$(jq -r '.problems[] | select(.status == "fail") | "\(.host):\(.check):\(.code)"' "$TMP/out-$2.json" 2>/dev/null |
		sort -u | tr '\n' ' ')
	if [ "$(jq '[.problems[] | select(.status == "fail" and .fix == null)] | length' "$TMP/out-$2.json" 2>/dev/null)" != 0 ]; then
		fail "$2: a failure without a fix"
		jq -c '.problems[] | select(.fix == null)' "$TMP/out-$2.json" | show
	fi
}

# expect TAG HOSTFILE "host:check ..." "host:check:code ...": exactly those cells
# fail (exit 1), and each code is among the failures' codes.
expect() {
	local tag=$1 hf=$2 cells=$3 codes=$4 c
	doctor "$hf" "$tag"
	if [ "$RC" = 1 ] && [ "$BADCELLS" = "$cells" ]; then
		ok "$tag: exit 1, failing: $cells"
	else
		fail "$tag: exit $RC, failing '$BADCELLS', expected '$cells'"
		jq -c '.problems[]' "$TMP/out-$tag.json" 2>/dev/null | show
		show "$TMP/out-$tag.err"
	fi
	for c in $codes; do
		case " $BADCODES " in
		*" $c "*) ok "$tag: $c" ;;
		*) fail "$tag: no $c among: $BADCODES" ;;
		esac
	done
}

# healthy HOSTFILE TAG CELLS: exit 0, no failure, and every host's cells as given
# (ok or warn: "y"; not applicable: "-")
healthy() {
	local bad
	doctor "$1" "$2"
	bad=$(jq -r --arg want "$3" '. as $d | .hosts[] as $h | [$d.checks[] | $h[.] | if . == "-" then "-" elif . == "ok" or . == "warn" then "y" else . end] | join("") | select(. != $want)' "$TMP/out-$2.json")
	if [ "$RC" = 0 ] && [ -z "$BADCELLS" ] && [ -z "$bad" ] && [ "$(jq -r .ok "$TMP/out-$2.json")" = true ]; then
		ok "$2: exit 0, every check passed (cells $3 on each host)"
	else
		fail "$2: exit $RC, failing '$BADCELLS', cells not $3: $bad"
		jq -c '.problems[]' "$TMP/out-$2.json" 2>/dev/null | show
		show "$TMP/out-$2.err"
	fi
}

host_of_rank() { jq -r ".hosts[$2].ssh" "$1"; }

# hinted DESC RC PATTERN HOSTFILE [CMD...]: meshrun --hostfile HOSTFILE -- CMD
# (default true) exits RC and its output has a line matching PATTERN (meshrun
# pointing to meshconfig doctor: launch/hints.h)
hinted() {
	local desc=$1 want=$2 pat=$3 hf=$4 rc
	shift 4
	[ $# -gt 0 ] || set -- true
	"$MESHRUN" --hostfile "$hf" --ssh-config "$CFG" -- "$@" >"$TMP/mr.out" 2>&1
	rc=$?
	if [ $rc = "$want" ] && grep -q "$pat" "$TMP/mr.out"; then
		ok "$desc: exit $rc, pointing to meshconfig doctor"
	else
		fail "$desc: exit $rc"
		show "$TMP/mr.out"
	fi
}

# --- healthy, both hostfiles; the table for people once
"$MESHCONFIG" doctor --hostfile "$TMP/jaccl.json" --ssh-config "$CFG" --timeout 90 >"$TMP/table.out" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q '^HOST  *reach  *software  *cables  *rdma  *path  *housekeeping$' "$TMP/table.out" &&
	grep -q '^all 4 hosts ready for backend jaccl' "$TMP/table.out" && ! grep -q FAIL "$TMP/table.out"; then
	ok "the table: every host ready (exit 0)"
else
	fail "the table (exit $rc)"
	show "$TMP/table.out"
fi
healthy "$TMP/jaccl.json" healthy-jaccl yyyyyy
healthy "$TMP/ring.json" healthy-ring yyy-yy

# --- one fault at a time
F noipv4 m2:en2
expect noipv4 "$TMP/jaccl.json" "m2:cables m2:rdma" "m2:cables:no-ipv4 m2:rdma:rdma-no-ipv4-gid"
F ipv4 m2:en2

F bridge m4:en3
expect bridge "$TMP/ring.json" "m4:cables" "m4:cables:bridge-member"
F unbridge m4:en3

F mtu m3:en4 9000
expect mtu "$TMP/ring.json" "m3:cables" "m3:cables:mtu-mismatch"
F mtu m3:en4 off

F macos m2 26.2 25C99
expect macos "$TMP/ring.json" "m2:software" "m2:software:macos-differs"
F macos m2 off

F rdma-nodev m3
expect rdma-nodev "$TMP/jaccl.json" "m3:rdma" "m3:rdma:rdma-no-devices"
F rdma-dev m3

# rank 1 listens on 32324 (meshrun's ring ports: --starting-port 32323 + 1)
r1=$(host_of_rank "$TMP/ring.json" 1)
F firewall "$r1" 32324
expect firewall "$TMP/ring.json" "$r1:path" "$r1:path:port-blocked"
F firewall "$r1" off

F clock m4 30
expect clock "$TMP/ring.json" "m4:housekeeping" "m4:housekeeping:clock-skew"
F clock m4 0

F diskfull m1
expect diskfull "$TMP/ring.json" "m1:housekeeping" "m1:housekeeping:disk-full"
hinted "meshrun on the full disk" 255 "hint: a full disk? 'meshconfig doctor --hostfile $TMP/ring.json'" "$TMP/ring.json"
F diskfree m1

# --- hostfiles that disagree with the hosts
r2=$(host_of_rank "$TMP/ring.json" 2)
jq '.hosts[2].ips = ["192.168.9.9"]' "$TMP/ring.json" >"$TMP/wrong-ip.json"
expect wrong-ip "$TMP/wrong-ip.json" "$r2:cables" "$r2:cables:hostfile-ip"
# m2 names a device it lacks; m4's rdma_en5 exists but has no cable (to m1)
jq '.hosts[1].rdma[0] = "rdma_en9" | .hosts[3].rdma[0] = "rdma_en5"' "$TMP/jaccl.json" >"$TMP/wrong-rdma.json"
expect wrong-rdma "$TMP/wrong-rdma.json" "m2:rdma m4:rdma" "m2:rdma:hostfile-rdma m4:rdma:rdma-wrong-cable"

# --- meshrun's other pointers: a rank of a job between hosts that fails on
# its own, and a host it cannot reach
hinted "a failed rank" 3 "hint: ranks that cannot connect .*'meshconfig doctor --hostfile $TMP/ring.json'" \
	"$TMP/ring.json" sh -c 'exit 3'
jq '.hosts[0].ssh = "nohost.invalid"' "$TMP/ring.json" >"$TMP/nohost.json"
hinted "an unreachable host" 255 "hint: 'meshconfig doctor --hostfile $TMP/nohost.json' checks every host" \
	"$TMP/nohost.json"

# --- every fault cleared; a dead run's job directory on m3 (its watchdog's
# pid does not exist) is a warning with its fix
d=$MESHSIM_STATE_DIR/$N/m3/tmp/meshrun.doctortest01
mkdir -m 700 "$d" && echo "m3 999999999" >"$d/.meshrun-watchdog"
healthy "$TMP/ring.json" cleared yyy-yy
if jq -e '.problems[] | select(.host == "m3" and .code == "stale-jobdir" and .status == "warn" and (.fix | test("meshrun.doctortest01")))' \
	"$TMP/out-cleared.json" >/dev/null; then
	ok "the dead run's job directory is a warning with its rm"
else
	fail "no stale-jobdir warning for m3"
	jq -c '.problems[]' "$TMP/out-cleared.json" | show
fi
rm -rf "$d"
"$MESHSIM" status "$N" | grep -q '^faults: none' && ok "meshsim status: no fault left" || fail "faults left"
echo "# doctor checks took $(($(date +%s) - T0)) s with the cluster's bring-up"

down "$N"
finish
