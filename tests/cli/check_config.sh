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
		# production-sized pools: refused only where this machine
		# lacks the memory or the space for them
		if grep -v -e "the machine has [0-9]* available$" \
			-e "its filesystem has [0-9]* free$" <<<"$out" | grep -q .; then
			echo "FAIL: $f should pass: $out"; fail=1
		fi
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

# a FIFO as the configuration: a clear error at once, not a wait for a
# writer (the check runs under a timeout that would show a hang)
mkfifo "$t/fifo.cfg"
out=$(timeout 20 "$embgw" --check-config "$t/fifo.cfg" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "fifo.cfg: cannot read: is a FIFO, not a regular file" <<<"$out" ||
	{ echo "FAIL: a FIFO as the configuration: exit $rc: $out"; fail=1; }

# a language pool file larger than its filesystem's free space: refused
# by the check as the start would refuse it
free=$(df -B1 --output=avail "$t" | tail -1)
cap=$(((free / (65536 * 2) / 1024 + 2) * 1024))
cat >"$t/huge.cfg" <<CFG
gateway = { name = "x"; roles = ["language"]; key_file = "k";
  pool = { capacity_tokens = $cap; hidden_size = 65536; }; };
ports = ( { name = "p"; device = "net_ring0"; address = "10.0.0.1/24";
  lcores = [1]; payload = { driver = "shm"; path = "$t/pool"; }; } );
CFG
out=$("$embgw" --check-config "$t/huge.cfg" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "huge.cfg: port p: payload.path $t/pool: the pool file takes [0-9]* bytes, its filesystem has [0-9]* free" <<<"$out" ||
	{ echo "FAIL: a pool file over the free space: exit $rc: $out"; fail=1; }

# gateway.metrics: checked like the rest, shown in the summary
cat >"$t/metrics.cfg" <<'CFG'
gateway = { name = "x"; roles = ["encode"]; key_file = "k";
  metrics = { address = "localhost";
    port = 70000; }; };
ports = ( { name = "p"; device = "net_ring0"; address = "10.0.0.1/24";
  lcores = [1]; payload = { driver = "shm"; path = "/x"; }; } );
CFG
out=$("$embgw" --check-config "$t/metrics.cfg" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "metrics.cfg:2: gateway.metrics.address: not an IPv4 address (a.b.c.d): 'localhost'" <<<"$out" &&
	grep -q "metrics.cfg:3: gateway.metrics.port: out of range 1..65535 (got 70000)" <<<"$out" ||
	{ echo "FAIL: bad gateway.metrics: exit $rc: $out"; fail=1; }
sed -i 's/address = "localhost";/address = "0.0.0.0";/; s/port = 70000;/port = 9999;/' "$t/metrics.cfg"
out=$("$embgw" --check-config "$t/metrics.cfg" 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q "^metrics: http://0.0.0.0:9999/metrics$" <<<"$out" ||
	{ echo "FAIL: gateway.metrics summary: exit $rc: $out"; fail=1; }

# command-line numbers: refused whole, never wrapped or read as 0; an EAL
# --vdev naming a configured device: refused (before EAL starts)
gateway=0
"$embgw" --help 2>&1 | grep -q "EAL args" && gateway=1  # built with DPDK
for a in "--ranks 65537" "--identities 65537" "--duration-ms soon" \
	 "--drive 12abc" "--concurrency 0" "--ctl-drop 51"; do
	[ $gateway = 1 ] || break
	out=$("$embgw" -- -f "$src/config/language.cfg" $a 2>&1); rc=$?
	opt=${a%% *}; val=${a#* }
	[ $rc -eq 2 ] && grep -q "^embgw: $opt: '$val' is not a number in " <<<"$out" ||
		{ echo "FAIL: $a: exit $rc: $(head -1 <<<"$out")"; fail=1; }
done
dev=$(sed -n 's/^ *device = "\(net_[a-z_]*[0-9]*\).*/\1/p' "$src/config/language.cfg" | head -1)
if [ -n "$dev" ] && [ $gateway = 1 ]; then
	out=$("$embgw" --vdev "$dev,x=1" -- -f "$src/config/language.cfg" 2>&1); rc=$?
	[ $rc -eq 1 ] && grep -q "EAL argument --vdev $dev,x=1 names port .*'s device" <<<"$out" ||
		{ echo "FAIL: --vdev $dev: exit $rc: $(tail -1 <<<"$out")"; fail=1; }
fi
# --test-session takes digits only: strtoull would read "-1" as 2^64 - 1
for bad in -1 +5 " 7" 0; do
	out=$("$embgw" -- -f "$src/config/language.cfg" --test-session "$bad" 2>&1); rc=$?
	[ $rc -eq 2 ] && grep -q "test-session: '$bad' is not a non-zero 64-bit session id" <<<"$out" ||
		{ echo "FAIL: --test-session '$bad': exit $rc: $out"; fail=1; }
done
"$embgw" >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: no arguments should exit 2"; fail=1; }
[ $fail -eq 0 ] && echo "check-config: all cases behaved"
exit $fail
