#!/bin/bash
# meshsim up on bad input: a clear error naming the file and field, non-zero
# exit, and nothing half-created left behind (also when a step fails half-way).
. "$(dirname "$0")/lib.sh"

N=$(uniq_name mstbad)
CLUSTERS=$N
make_fixture good mesh:4

# expect_fail DESCRIPTION PATTERN ARGS...: up fails, stderr matches, nothing left
expect_fail() {
	d=$1; pat=$2; shift 2
	out=$("$MESHSIM" up "$@" --name $N 2>&1); rc=$?
	echo "# $out" | head -3
	if [ $rc -eq 0 ]; then fail "$d: up succeeded"; "$MESHSIM" down $N >/dev/null; return; fi
	echo "$out" | grep -q -- "$pat" && ok "$d: error names it ($pat)" || fail "$d: error does not match '$pat'"
	nothing_left $N && ok "$d: nothing left" || fail "$d: something left"
}

cp -r "$TMP/good" "$TMP/json"
printf '{"SPThunderboltDataType": [ {"_name": ' >"$TMP/json/h2/system_profiler.json"
expect_fail "malformed JSON" "h2.*system_profiler.*malformed JSON" "$TMP/json"

cp -r "$TMP/good" "$TMP/uuid"
# h3's first peer entry points at a domain UUID no host has
sed -i '0,/"domain_uuid_key": "[^"]*"/s//"domain_uuid_key": "deadbeef-0000-4000-8000-000000000000"/' "$TMP/uuid/h3/system_profiler.json"
expect_fail "peer UUID on no host" "h3/system_profiler.json.*domain_uuid_key 'deadbeef-0000-4000-8000-000000000000' is on no host" "$TMP/uuid"

cp -r "$TMP/good" "$TMP/dup"
sed -i 's/"name": "h4"/"name": "h3"/' "$TMP/dup/cluster.json"
expect_fail "two hosts with one name" "cluster.json: hosts\[3\].*h3" "$TMP/dup"

expect_fail "no such folder" "'$TMP/none': neither a fixture folder nor a topology" "$TMP/none"
expect_fail "bad topology" "mesh:1" "mesh:1"

# A failure half-way (sshd cannot start, after namespaces and links exist).
mkdir -p "$TMP/fakebin"
printf '#!/bin/sh\necho "fake sshd: refusing to start" >&2\nexit 1\n' >"$TMP/fakebin/sshd"
chmod +x "$TMP/fakebin/sshd"
out=$(PATH="$TMP/fakebin:$PATH" "$MESHSIM" up "$TMP/good" --name $N 2>&1); rc=$?
echo "# $out" | head -2
check "a failing sshd fails up" test $rc -ne 0
echo "$out" | grep -q "host 'h[0-9]': start sshd.*refusing to start" && ok "error names the host and step" || fail "error names the host and step"
check "the half-made cluster was torn down" nothing_left $N

out=$("$MESHSIM" up "$TMP/good" --name BAD 2>&1); rc=$?
check "a bad cluster name is a usage error" test $rc -eq 2
finish
