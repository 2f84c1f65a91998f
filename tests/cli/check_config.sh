#!/usr/bin/env bash
# embgw --check-config: examples pass with a summary, a broken file fails
# with every error as file:line, nothing needs EAL or a device.
set -u
embgw=$1
src=$2
fail=0
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

for f in "$src"/config/*.cfg; do
	if ! out=$("$embgw" --check-config "$f" 2>&1); then
		echo "FAIL: $f should pass: $out"; fail=1
	elif ! grep -q "^port " <<<"$out" || ! grep -q "^pool: " <<<"$out"; then
		echo "FAIL: $f: no summary: $out"; fail=1
	fi
done

cp "$src/config/keys/demo.key" "$t/k"
cat >"$t/bad.cfg" <<'CFG'
gateway = {
  name = "x";
  roles = ["encode"];
  key_file = "k";
  pool = { block_tokens = 0; };
};
ports = ( { name = "p"; device = "net_ring0"; address = "10.0.0.1/24";
  lcores = [1]; mtu = 10; payload = { driver = "shm"; path = "/x"; }; } );
CFG
out=$("$embgw" --check-config "$t/bad.cfg" 2>&1); rc=$?
[ $rc -eq 1 ] || { echo "FAIL: bad.cfg exit $rc"; fail=1; }
grep -q "bad.cfg:5: gateway.pool.block_tokens: out of range" <<<"$out" || { echo "FAIL: block_tokens error missing: $out"; fail=1; }
grep -q "bad.cfg:8: ports\[0\].mtu: out of range 576..9000 (got 10)" <<<"$out" || { echo "FAIL: mtu error missing: $out"; fail=1; }
grep -q "2 error(s)" <<<"$out" || { echo "FAIL: error count: $out"; fail=1; }

"$embgw" --check-config "$t/none.cfg" >/dev/null 2>&1 && { echo "FAIL: missing file passed"; fail=1; }
"$embgw" >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: no arguments should exit 2"; fail=1; }
[ $fail -eq 0 ] && echo "check-config: all cases behaved"
exit $fail
