#!/usr/bin/env bash
# embgw --check-config: examples pass with a summary, a broken file fails
# with every error as file:line, nothing needs EAL or a device. The
# command line: the gateway takes operator options only and refuses each
# load option, naming embgw-gen (the third argument, where DPDK built it),
# which refuses numbers out of range.
# usage: check_config.sh EMBGW SRCDIR [EMBGW-GEN]
set -u
embgw=$1
src=$2
gen=${3:-}
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

# what is at payload.path and at the attach path: --check-config refuses
# what the start refuses, in the start's words (the start calls the same
# checks; tests/integration pool-file-stranger shows the start's)
mkdir "$t/adir"
echo "a stranger's data" >"$t/stranger"
# pool_at PATH [ATTACH]: a language configuration with its pool file at
# PATH and an attach group ATTACH
pool_at() {
	cat >"$t/at.cfg" <<CFG
gateway = { name = "x"; roles = ["language"]; key_file = "k";
  pool = { capacity_tokens = 65536; hidden_size = 64; }; ${2-} };
ports = ( { name = "p"; device = "net_ring0"; address = "10.0.0.1/24";
  lcores = [1]; payload = { driver = "shm"; path = "$1"; }; } );
CFG
}
for c in "$t/adir:a directory" "$t/stranger:not an embgw pool file" \
	 "/dev/null:a character device"; do
	path=${c%%:*} what=${c#*:}
	pool_at "$path"
	out=$("$embgw" --check-config "$t/at.cfg" 2>&1); rc=$?
	case $what in
	not*) msg="payload.path $path exists and is not an embgw pool file: refused, left untouched" ;;
	*) msg="payload.path $path exists and is $what: refused, left untouched" ;;
	esac
	[ $rc -eq 1 ] && grep -qF "$msg" <<<"$out" ||
		{ echo "FAIL: payload.path $path ($what): exit $rc: $out"; fail=1; }
done
[ "$(cat "$t/stranger")" = "a stranger's data" ] || { echo "FAIL: the stranger's file changed"; fail=1; }
echo "not a socket" >"$t/file.sock"
for c in "path = \"$t/nodir/a.sock\";|attach: cannot serve $t/nodir/a.sock: its directory $t/nodir: No such file or directory" \
	 "path = \"$t/a.sock\"; group = \"egw-no-such-group\";|attach: cannot give $t/a.sock to group egw-no-such-group: no such group" \
	 "path = \"$t/file.sock\";|attach: $t/file.sock exists and is not a socket; not replacing it"; do
	pool_at "$t/pool" "attach = { ${c%%|*} };"
	out=$("$embgw" --check-config "$t/at.cfg" 2>&1); rc=$?
	[ $rc -eq 1 ] && grep -qF "at.cfg: ${c#*|}" <<<"$out" ||
		{ echo "FAIL: attach { ${c%%|*} }: exit $rc: $out"; fail=1; }
done
# a socket mode every local user can connect to: a warning, not a refusal
pool_at "$t/pool" "attach = { path = \"$t/a.sock\"; mode = \"0777\"; };"
out=$("$embgw" --check-config "$t/at.cfg" 2>&1); rc=$?
[ $rc -eq 0 ] && grep -qF "at.cfg: warning: attach: $t/a.sock gets mode 0777: every local user can connect to it" <<<"$out" ||
	{ echo "FAIL: attach mode 0777: exit $rc: $out"; fail=1; }
pool_at "$t/pool" "attach = { path = \"$t/a.sock\"; };"
out=$("$embgw" --check-config "$t/at.cfg" 2>&1); rc=$?
[ $rc -eq 0 ] && ! grep -q "warning" <<<"$out" || { echo "FAIL: a good attach group: exit $rc: $out"; fail=1; }
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
# gateway.cluster: checked like the rest, shown in the summary
cat >"$t/cluster.cfg" <<'CFG'
gateway = { name = "x"; roles = ["encode"]; key_file = "k";
  cluster = { name = "prod";
    endpoints = ["http://10.0.0.5:2379", "10.0.0.6:2379"]; }; };
ports = ( { name = "p"; device = "net_ring0"; address = "10.0.0.1/24";
  lcores = [1]; payload = { driver = "shm"; path = "/x"; }; } );
CFG
out=$("$embgw" --check-config "$t/cluster.cfg" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -qF "cluster.cfg:3: gateway.cluster.endpoints[1]: not http://host:port or https://host:port: '10.0.0.6:2379'" <<<"$out" ||
	{ echo "FAIL: bad gateway.cluster: exit $rc: $out"; fail=1; }
sed -i 's|"10.0.0.6:2379"|"https://etcd-2:2379"|' "$t/cluster.cfg"
out=$("$embgw" --check-config "$t/cluster.cfg" 2>&1); rc=$?
[ $rc -eq 0 ] && grep -qF "cluster prod: keys under /embgw/prod/, lease 10 s, endpoints http://10.0.0.5:2379,https://etcd-2:2379" <<<"$out" ||
	{ echo "FAIL: gateway.cluster summary: exit $rc: $out"; fail=1; }

# command-line numbers: refused whole, never wrapped or read as 0; an EAL
# --vdev naming a configured device: refused (before EAL starts)
gateway=0
"$embgw" --help 2>&1 | grep -q "EAL args" && gateway=1  # built with DPDK
# a test build (-Dtest_hooks=true) takes the test options; a production
# build lists none and refuses each, naming the build that takes it
testbuild=0
"$embgw" --help 2>&1 | grep -q "^test-build options" && testbuild=1
numbers=("--ranks 65537" "--identities 65537" "--duration-ms soon"
	 "--drive 12abc" "--concurrency 0" "--lengths 100,0")
[ $testbuild = 1 ] && numbers+=("--ctl-drop 51" "--inject-junk 65")
for a in "${numbers[@]}"; do
	[ -n "$gen" ] || break
	# shellcheck disable=SC2086 # $a is the option and its value, two words
	out=$("$gen" -- -f "$src/config/language.cfg" $a 2>&1); rc=$?
	opt=${a%% *}; val=${a#* }; val=${val##*,}
	[ $rc -eq 2 ] && grep -q "^embgw-gen: $opt: '$val' is not a number in " <<<"$out" ||
		{ echo "FAIL: embgw-gen $a: exit $rc: $(head -1 <<<"$out")"; fail=1; }
done
# the load options are embgw-gen's: the gateway lists none and refuses
# each, valid or not, naming it and the program that takes it
load=(--produce --drive --concurrency --lengths --ranks --dummy-rank --peer
      --rate --start-delay-ms --exit-when-done --duration-ms --seed
      --identities --flood-pps)
if [ $gateway = 1 ]; then
	help=$("$embgw" --help 2>&1)
	genhelp=$([ -z "$gen" ] || "$gen" --help 2>&1)
	for o in "${load[@]}"; do
		grep -q -- "$o\b" <<<"$help" &&
			{ echo "FAIL: embgw --help lists $o"; fail=1; }
		[ -z "$gen" ] || grep -q -- "^  $o\b" <<<"$genhelp" ||
			{ echo "FAIL: embgw-gen --help does not list $o"; fail=1; }
		out=$("$embgw" -- -f "$src/config/language.cfg" "$o" 1 2>&1); rc=$?
		[ $rc -eq 2 ] && grep -qF "embgw: $o is a load option: embgw-gen takes it (the gateway takes operator options only)" <<<"$out" ||
			{ echo "FAIL: embgw $o: exit $rc: $(head -1 <<<"$out")"; fail=1; }
	done
fi
dev=$(sed -n 's/^ *device = "\(net_[a-z_]*[0-9]*\).*/\1/p' "$src/config/language.cfg" | head -1)
if [ -n "$dev" ] && [ $gateway = 1 ]; then
	out=$("$embgw" --vdev "$dev,x=1" -- -f "$src/config/language.cfg" 2>&1); rc=$?
	[ $rc -eq 1 ] && grep -q "EAL argument --vdev $dev,x=1 names port .*'s device" <<<"$out" ||
		{ echo "FAIL: --vdev $dev: exit $rc: $(tail -1 <<<"$out")"; fail=1; }
fi
if [ $gateway = 1 ] && [ $testbuild = 0 ]; then
	help=$("$embgw" --help 2>&1)
	for o in --ctl-drop --ctl-dup --ctl-reorder --inject-junk \
		 --fault-qp-error --fault-stale-write --test-session; do
		grep -q -- "$o" <<<"$help" &&
			{ echo "FAIL: a production build's --help lists $o"; fail=1; }
		out=$("$embgw" -- -f "$src/config/language.cfg" "$o" 5 2>&1); rc=$?
		[ $rc -eq 2 ] && grep -qF "embgw: $o is a test option: only a test build (meson -Dtest_hooks=true) takes it" <<<"$out" ||
			{ echo "FAIL: $o in a production build: exit $rc: $(head -1 <<<"$out")"; fail=1; }
	done
fi
# --test-session takes digits only: strtoull would read "-1" as 2^64 - 1
for bad in -1 +5 " 7" 0; do
	[ $testbuild = 1 ] || break
	out=$("$embgw" -- -f "$src/config/language.cfg" --test-session "$bad" 2>&1); rc=$?
	[ $rc -eq 2 ] && grep -q "test-session: '$bad' is not a non-zero 64-bit session id" <<<"$out" ||
		{ echo "FAIL: --test-session '$bad': exit $rc: $out"; fail=1; }
done
"$embgw" >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: no arguments should exit 2"; fail=1; }
# one configuration: -f twice is refused, naming both
if [ $gateway = 1 ]; then
	out=$("$embgw" -- -f "$src/config/language.cfg" -f "$src/config/encode.cfg" 2>&1); rc=$?
	[ $rc -eq 2 ] && grep -qF "embgw: -f given twice ($src/config/language.cfg and $src/config/encode.cfg)" <<<"$out" ||
		{ echo "FAIL: -f twice: exit $rc: $(head -1 <<<"$out")"; fail=1; }
fi
[ $fail -eq 0 ] && echo "check-config: all cases behaved"
exit $fail
