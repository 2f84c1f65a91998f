#!/usr/bin/env bash
# Integration tests: real embgw processes (DPDK, --no-pci, net_memif, shm
# payload) on this host. Each case is bounded in time and in rooms.
# Last line: "integration: N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh

T=$(mktemp -d /tmp/embgw-it.XXXXXX)
trap 'stop_all; rm -rf "$T"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $1"; }
ko() { failed=$((failed + 1)); echo "FAIL $1: $2"; [ -n "${3:-}" ] && tail -25 "$3" | sed 's/^/     /'; }

# expect LOG PREFIX KEY OP VALUE [PORT]
expect() {
	local v
	v=$(field "$1" "$2" "$3" "${6:-p0}")
	[ -n "$v" ] && [ "$v" "$4" "$5" ]
}

# ---- 1. the seeds' scenarios, both defaults -----------------------------
scenarios() {
	local def=$1 d=$T/scen$1 want=$2
	scripts/gen-configs.sh "$d" "$def" 262144 >/dev/null
	start_gw enc 1 "$d/encode.cfg" "$d/enc.log" --produce >/dev/null
	wait_socket "$d/memif0.sock"
	run_gw lang 0 "$d/language.cfg" "$d/lang.log" 60 --exit-when-done \
		--drive 4 --lengths 500,2000,10000,50000
	stop_all
	if expect "$d/lang.log" result errors -eq 0 && expect "$d/lang.log" result leaked -eq 0 &&
	   expect "$d/lang.log" result rounds -eq "$want" &&
	   expect "$d/lang.log" result bytes -eq 33000256 &&
	   expect "$d/enc.log" result-encode leaked -eq 0 && expect "$d/enc.log" result-encode ok -eq 4; then
		ok "seeds' scenarios, default $def: 4 rooms byte-exact, $want resume rounds, nothing leaked"
	else
		ko "seeds' scenarios, default $def" "see log" "$d/lang.log"
	fi
}
scenarios 1024 3
scenarios 8192 2

# ---- 2. control-packet loss, duplication and reordering -----------------
d=$T/loss
scripts/gen-configs.sh "$d" 1024 262144 >/dev/null
start_gw enc 1 "$d/encode.cfg" "$d/enc.log" --produce --ctl-drop 10 --ctl-dup 10 --ctl-reorder 10 --seed 7 >/dev/null
wait_socket "$d/memif0.sock"
run_gw lang 0 "$d/language.cfg" "$d/lang.log" 90 --exit-when-done --drive 40 --concurrency 4 \
	--lengths 129,2000,10000,700 --ctl-drop 10 --ctl-dup 10 --ctl-reorder 10 --seed 9
stop_all
if expect "$d/lang.log" result errors -eq 0 && expect "$d/lang.log" result leaked -eq 0 &&
   expect "$d/enc.log" result-encode leaked -eq 0 &&
   grep -q "retransmissions" "$d/lang.log"; then
	ok "10% loss + 10% duplication + 10% reordering both ways: 40 rooms byte-exact"
else
	ko "lossy control path" "see log" "$d/lang.log"
fi

# ---- 3. pool exhaustion on the language side ---------------------------
d=$T/pool
# 16384 tokens (128 blocks) for 8 concurrent rooms of 10000 tokens (79 blocks)
scripts/gen-configs.sh "$d" 1024 16384 "alloc_ms = 1000;" >/dev/null
start_gw enc 1 "$d/encode.cfg" "$d/enc.log" --produce >/dev/null
wait_socket "$d/memif0.sock"
run_gw lang 0 "$d/language.cfg" "$d/lang.log" 90 --exit-when-done --drive 24 --concurrency 8 \
	--lengths 10000,3000
stop_all
okrooms=$(grep -oE "\(([0-9]+) ok" "$d/lang.log" | grep -oE "[0-9]+" | head -1)
other=$(grep -E "^  failed:" "$d/lang.log" | grep -vcE "pool exhausted|aborted")
if expect "$d/lang.log" result leaked -eq 0 && expect "$d/enc.log" result-encode leaked -eq 0 &&
   ! grep -q " bad, " <(grep -E "[1-9][0-9]* bad, " "$d/lang.log") &&
   [ "${okrooms:-0}" -ge 1 ] && [ "$other" -eq 0 ] &&
   grep -qE "0 not finished" "$d/lang.log"; then
	ok "pool exhaustion: 8 rooms at once for 1 room's worth of memory: $okrooms of 24 completed, any other failed as pool-exhausted; nothing leaked on either side"
else
	ko "pool exhaustion" "see log" "$d/lang.log"
fi

# ---- 4. malformed, forged, replayed and stranger datagrams -------------
d=$T/junk
scripts/gen-configs.sh "$d" 1024 262144 >/dev/null
start_gw enc 1 "$d/encode.cfg" "$d/enc.log" --produce --inject-junk 3 --seed 3 >/dev/null
wait_socket "$d/memif0.sock"
start_gw lang 0 "$d/language.cfg" "$d/lang.log" --exit-when-done --drive 60 --concurrency 4 \
	--lengths 2000,10000 --start-delay-ms 300 >/dev/null
sleep 1
tel=$(printf '/embgw/stats\n/embgw/pool\n/embgw/rooms\n' | \
	timeout 10 dpdk-telemetry.py -f "egw-enc-$$" 2>/dev/null || true)
for _ in $(seq 1 600); do grep -q "^result:" "$d/lang.log" && break; sleep 0.1; done
stop_all
line=$(grep -E "^port p0: .* dropped before" "$d/lang.log")
mal=$(sed -nE 's/.*malformed\/unauthenticated ([0-9]+).*/\1/p' <<<"$line")
rep=$(sed -nE 's/.*replay ([0-9]+)\).*/\1/p' <<<"$line")
unk=$(sed -nE 's/.*unknown peer ([0-9]+),.*/\1/p' <<<"$line")
if expect "$d/lang.log" result errors -eq 0 && expect "$d/lang.log" result leaked -eq 0 &&
   [ "${mal:-0}" -gt 0 ] && [ "${rep:-0}" -gt 0 ] && [ "${unk:-0}" -gt 0 ]; then
	ok "junk at the port (malformed $mal, replayed $rep, unknown source $unk): dropped, counted, 60 rooms unaffected"
else
	ko "junk at the port" "line: $line" "$d/lang.log"
fi
if grep -q '"drop_malformed_or_unauthenticated"' <<<"$tel" && grep -q '"blocks_in_use"' <<<"$tel" &&
   grep -q '"encode_rooms_opened"' <<<"$tel" && grep -q '"inj_junk"' <<<"$tel"; then
	ok "telemetry: /embgw/stats, /embgw/pool, /embgw/rooms answer through dpdk-telemetry.py"
else
	ko "telemetry" "dpdk-telemetry.py said: $(head -c 300 <<<"$tel")"
fi

# ---- 5. a peer killed in the middle of a transfer ----------------------
d=$T/kill
scripts/gen-configs.sh "$d" 1024 262144 "heartbeat_ms = 50; peer_dead_ms = 500;" 2 >/dev/null
start_gw enc0 1 "$d/encode.cfg" "$d/enc0.log" --produce >/dev/null
start_gw enc1 0 "$d/encode1.cfg" "$d/enc1.log" --produce >/dev/null
enc1_job=${PIDS[-1]}
wait_socket "$d/memif0.sock"; wait_socket "$d/memif1.sock"
start_gw lang 0,1 "$d/language.cfg" "$d/lang.log" --exit-when-done --drive 30 --concurrency 2 \
	--lengths 50000,10000 >/dev/null
# kill enc-1 once its first rooms are under way
for _ in $(seq 1 200); do grep -q "peer enc-1 registered" "$d/lang.log" && break; sleep 0.05; done
sleep 0.4
# SIGKILL the gateway itself (not its timeout wrapper): no goodbye at all
pkill -9 -f -- "--file-prefix egw-enc1-$$ "
wait "$enc1_job" 2>/dev/null # reap it quietly
t0=$(date +%s%N)
for _ in $(seq 1 600); do [ "$(grep -c '^result:' "$d/lang.log")" -ge 2 ] && break; sleep 0.1; done
t1=$(date +%s%N)
stop_all
dead=$(sed -nE 's/^  failed: ([0-9]+) x peer dead.*/\1/p' "$d/lang.log")
if expect "$d/lang.log" result errors -eq 0 p0 && expect "$d/lang.log" result leaked -eq 0 p0 &&
   expect "$d/lang.log" result leaked -eq 0 p1 && [ "${dead:-0}" -ge 1 ] &&
   grep -q "0 not finished" <(sed -n '/^port p1:/,/^result: port=p1 /p' "$d/lang.log") &&
   expect "$d/enc0.log" result-encode leaked -eq 0; then
	ok "peer killed mid-transfer: its rooms failed as peer-dead ($dead), the other peer's 30 rooms byte-exact, zero blocks in use, done $(( (t1 - t0) / 1000000 )) ms after the kill"
else
	ko "peer killed" "dead=$dead p0: $(grep -E '^result: port=p0 ' "$d/lang.log") p1: $(grep -E '^result: port=p1 ' "$d/lang.log") $(grep -E '^  failed:' "$d/lang.log" | tr '\n' ';') enc0: $(grep -E '^result-encode' "$d/enc0.log")" "$d/lang.log"
fi

# ---- 6. the Wireshark dissector over a capture of real gateway traffic ----
d=$T/dissect
scripts/gen-configs.sh "$d" 1024 262144 >/dev/null
start_gw enc 1 "$d/encode.cfg" "$d/enc.log" --produce >/dev/null
wait_socket "$d/memif0.sock"
run_gw lang 0 "$d/language.cfg" "$d/lang.log" 60 --exit-when-done --drive 6 --ranks 2 --dummy-rank \
	--lengths 500,50000,2000 --ctl-drop 10 --capture "$d/cap.pcap"
stop_all
if command -v tshark >/dev/null 2>&1; then
	ts() { tshark -X lua_script:tools/wireshark/embgw.lua -r "$d/cap.pcap" "$@" 2>/dev/null; }
	udp=$(ts -Y "udp.port == 9471" | wc -l)
	dec=$(ts -Y "embgw.type" | wc -l)
	bad=$(ts -Y "_ws.malformed || _ws.expert.severity >= 0x00800000" | wc -l)
	types=$(ts -Y embgw -T fields -e embgw.type | sort -un | tr '\n' ' ')
	names=$(ts -Y "embgw.type == 7" -T fields -e embgw.reg.name | sort -u | tr '\n' ' ')
	rx=$(ts -Y "embgw && ip.src == 192.168.77.1" | wc -l)
	want_rx=$(sed -nE 's/^port p0: ([0-9]+) datagrams in.*/\1/p' "$d/lang.log")
	tags=$(ts -Y "embgw" -T fields -e embgw.tag_len | sort -u | tr '\n' ' ')
	if [ "$udp" -gt 0 ] && [ "$udp" = "$dec" ] && [ "$bad" = 0 ] &&
	   [ "$types" = "1 2 3 4 7 " ] && [ "$names" = "enc-0 lang-0 " ] &&
	   [ "$rx" = "$want_rx" ] && [ "$tags" = "16 " ]; then
		ok "dissector: $dec/$udp control frames decoded (types $types), MAC length 16 on all, $rx received = the gateway's own count"
	else
		ko "dissector" "udp=$udp decoded=$dec bad=$bad types='$types' names='$names' rx=$rx/$want_rx tags='$tags'"
	fi
else
	ko "dissector" "tshark missing"
fi

# ---- 7. embgw-gen: open loop with a flood, against an encode gateway ----
d=$T/gen
scripts/gen-configs.sh "$d" 1024 262144 >/dev/null
start_gw enc 1 "$d/encode.cfg" "$d/enc.log" --produce >/dev/null
wait_socket "$d/memif0.sock"
timeout -s INT 90 build/app/embgw/embgw-gen -l 0 $EAL_COMMON --file-prefix egw-gen-$$ -- \
	-f "$d/language.cfg" --drive 300 --rate 1000 --concurrency 128 --lengths 700,3000 \
	--flood-pps 10000 > "$d/gen.log" 2>&1
stop_all
junk=$(sed -nE 's/^port p0: .*malformed\/unauthenticated ([0-9]+).*/\1/p' "$d/enc.log")
if expect "$d/gen.log" result errors -eq 0 && expect "$d/gen.log" result leaked -eq 0 &&
   grep -qE "p99\.9 [0-9.]+ ms.* rooms/s" "$d/gen.log" && grep -q "^flood: " "$d/gen.log" &&
   [ "${junk:-0}" -gt 0 ] && expect "$d/enc.log" result-encode leaked -eq 0; then
	ok "embgw-gen: 300 rooms open-loop at 1000/s with a 10k/s flood: byte-exact, $junk junk dropped by the gateway; $(grep -oE '[0-9]+ rooms/s' "$d/gen.log")"
else
	ko "embgw-gen" "junk seen by the gateway: ${junk:-none}; gateway: $(grep -E '^(port p0|result-encode)' "$d/enc.log" | tr '\n' ' ')" "$d/gen.log"
	echo "     the gateway's log:"; tail -15 "$d/enc.log" | sed 's/^/     /'
fi

# ---- 8. embgw-gen into a pcap file (for tcpreplay, TRex, net_pcap) -------
d=$T/pcap
mkdir -p "$d"
head -c 48 /dev/urandom > "$d/psk.key"
printf '\xd4\xc3\xb2\xa1\x02\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x00\x00\x01\x00\x00\x00' > "$d/empty.pcap"
cat > "$d/gen.cfg" <<CFG
gateway = { name = "gen"; roles = ["language"]; key_file = "psk.key";
  pool = { capacity_tokens = 16384; hidden_size = 32; }; };
ports = ( { name = "p0"; device = "net_pcap0,tx_pcap=$d/out.pcap,rx_pcap=$d/empty.pcap";
  address = "10.99.0.2/24"; lcores = [0];
  payload = { driver = "shm"; path = "$d/pool"; };
  neighbours = ( { address = "10.99.0.1"; mac = "02:00:00:00:99:01"; } );
  peers = ( { name = "dut"; address = "10.99.0.1"; } ); } );
CFG
timeout -s INT 30 build/app/embgw/embgw-gen -l 0 $EAL_COMMON --file-prefix egw-genp-$$ -- \
	-f "$d/gen.cfg" --flood-pps 5000 --duration-ms 1000 > "$d/gen.log" 2>&1
sent=$(sed -nE 's/^flood: ([0-9]+) junk.*/\1/p' "$d/gen.log")
frames=$(tshark -r "$d/out.pcap" -Y "udp && ip.dst == 10.99.0.1" 2>/dev/null | wc -l)
if [ "${sent:-0}" -gt 1000 ] && [ "$frames" -ge "$sent" ]; then
	ok "embgw-gen wrote $frames frames ($sent junk) to a pcap a third-party generator can replay"
else
	ko "embgw-gen pcap" "sent=$sent frames=$frames" "$d/gen.log"
fi

# ---- 9. embgw-gen plays 8 language peers from one port -------------------
# The gateway under test lists 8 peers (own addresses, own shm pool files);
# the generator answers ARP for all 8 addresses and shares the rooms out.
d=$T/ids
scripts/gen-configs.sh "$d" 1024 16384 "" 1 8 >/dev/null
start_gw enc 1 "$d/encode.cfg" "$d/enc.log" --produce >/dev/null
wait_socket "$d/memif0.sock"
timeout -s INT 90 build/app/embgw/embgw-gen -l 0 $EAL_COMMON --file-prefix egw-gids-$$ -- \
	-f "$d/language.cfg" --identities 8 --drive 400 --concurrency 32 \
	--lengths 300,2500 > "$d/gen.log" 2>&1
stop_all
regs=$(grep -cE "peer lang-0\.[0-7] registered" "$d/enc.log")
each=$(grep -cE "^result: port=p0\.[0-7] rooms=50 .*errors=0 leaked=0" "$d/gen.log")
if grep -qE "^result-total: identities=8 rooms=400 .*errors=0 leaked=0" "$d/gen.log" &&
   [ "$regs" -eq 8 ] && [ "$each" -eq 8 ] &&
   expect "$d/enc.log" result-encode ok -eq 400 && expect "$d/enc.log" result-encode leaked -eq 0; then
	ok "embgw-gen --identities 8: 8 peers registered at the gateway, 8 x 50 rooms byte-exact, nothing leaked; $(grep -A1 '^generator:' "$d/gen.log" | grep -oE '[0-9]+ rooms/s')"
else
	ko "embgw-gen --identities" "regs=$regs each=$each" "$d/gen.log"
fi

# ---- 10. embgw-gen as the encode side, against a language gateway -------
d=$T/genenc
scripts/gen-configs.sh "$d" 1024 262144 >/dev/null
timeout -s INT 90 build/app/embgw/embgw-gen -l 1 $EAL_COMMON --file-prefix egw-gene-$$ -- \
	-f "$d/encode.cfg" --produce > "$d/gen.log" 2>&1 &
PIDS+=($!)
wait_socket "$d/memif0.sock"
run_gw lang 0 "$d/language.cfg" "$d/lang.log" 60 --exit-when-done \
	--drive 60 --concurrency 8 --lengths 1500,9000 --ranks 2
stop_all
if expect "$d/lang.log" result errors -eq 0 && expect "$d/lang.log" result leaked -eq 0 &&
   expect "$d/gen.log" result-encode ok -eq 60 && expect "$d/gen.log" result-encode leaked -eq 0; then
	ok "embgw-gen --produce as the encode peer: 60 rooms x 2 ranks served to a language gateway, byte-exact"
else
	ko "embgw-gen encode side" "see logs" "$d/gen.log"
fi

# ---- 11. embgw-gen plays 4 encode peers; the language gateway uses all of them
d=$T/encids
mkdir -p "$d"
head -c 48 /dev/urandom > "$d/psk.key"
cat > "$d/gen.cfg" <<CFG
gateway = { name = "enc"; roles = ["encode"]; key_file = "psk.key";
  pool = { capacity_tokens = 65536; hidden_size = 256; }; };
ports = ( { name = "p0";
  device = "net_memif0,role=server,socket=$d/memif.sock,socket-abstract=no";
  address = "192.168.79.101/24"; lcores = [1];
  payload = { driver = "shm"; path = "$d/lang-pool"; };
  peers = ( { name = "lang"; address = "192.168.79.2"; } ); } );
CFG
cat > "$d/lang.cfg" <<CFG
gateway = { name = "lang"; roles = ["language"]; key_file = "psk.key";
  pool = { capacity_tokens = 65536; hidden_size = 256;
           policy = { kind = "fixed"; tokens = 1024; }; }; };
ports = ( { name = "p0";
  device = "net_memif0,role=client,socket=$d/memif.sock,socket-abstract=no";
  address = "192.168.79.2/24"; lcores = [0];
  payload = { driver = "shm"; path = "$d/lang-pool"; };
  peers = ( { name = "enc.0"; address = "192.168.79.101"; },
            { name = "enc.1"; address = "192.168.79.102"; },
            { name = "enc.2"; address = "192.168.79.103"; },
            { name = "enc.3"; address = "192.168.79.104"; } ); } );
CFG
timeout -s INT 90 build/app/embgw/embgw-gen -l 1 $EAL_COMMON --file-prefix egw-genei-$$ -- \
	-f "$d/gen.cfg" --produce --identities 4 > "$d/gen.log" 2>&1 &
PIDS+=($!)
wait_socket "$d/memif.sock"
run_gw lang 0 "$d/lang.cfg" "$d/lang.log" 60 --exit-when-done --peer all \
	--drive 80 --concurrency 8 --lengths 700,5000
stop_all
per=$(grep -cE "^result-encode: port=p0\.[0-3] rooms=20 ok=20 failed=0 leaked=0" "$d/gen.log")
if expect "$d/lang.log" result errors -eq 0 && expect "$d/lang.log" result leaked -eq 0 &&
   expect "$d/lang.log" result rooms -eq 80 && [ "$per" -eq 4 ]; then
	ok "embgw-gen --produce --identities 4: a language gateway with --peer all fetched 80 rooms, 20 from each encode identity, byte-exact"
else
	ko "embgw-gen encode identities" "per=$per" "$d/gen.log"
fi

echo "integration: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
