#!/usr/bin/env bash
# Integration tests: real embgw processes (DPDK, --no-pci, shm payload) on
# this host, joined by net_af_packet on veth pairs that each case makes for
# itself and removes (lib.sh's veth_up; doc/gateway.md, "Same-host
# devices"). Each case is a function that sets up and tears down its own
# processes and links in its own temporary directory, so any one runs
# alone; each is bounded in time and in rooms. Checks read the key=value
# report lines the gateways print when they stop.
# EMBGW_IT_LINK=memif runs the cases over net_memif instead, to show what
# that device does when a peer leaves (peer-exit-cycles, encode-restart).
#
#   tests/integration/run.sh --list        the cases, one a line
#   tests/integration/run.sh CASE [CASE..] those cases
#   tests/integration/run.sh               every case
#
# Last line: "integration: N passed, N failed". The logs of a failed case
# are kept (their directory is named).
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/integration/lib.sh
. tests/integration/cluster.sh

CASES=()
declare -A ABOUT
# define NAME DESCRIPTION: NAME runs the function case_NAME (- read as _)
define() { CASES+=("$1"); ABOUT[$1]=$2; }

# Every case sets MSG (what it saw, for the ok/FAIL line) and may set LOG
# (the log whose tail explains a failure); T is its own directory.
MSG=""
LOG=""
T=""
# Every configuration gives a peer 5 s of silence before it is dead (the
# default is 1 s): on a loaded machine a live gateway can go without CPU
# for that long, and only peer-killed is about liveness (a SIGKILLed peer
# is dead all the same, 5 s later).
SLACK="peer_dead_ms = 5000;"

# gen_configs ARGS...: scripts/gen-configs.sh over this case's links
gen_configs() {
	if [ "${EMBGW_IT_LINK:-veth}" = memif ]; then
		scripts/gen-configs.sh --memif "$@"
	else
		scripts/gen-configs.sh --veth "$VETH" "$@"
	fi
}

# encode_server START LOG [args]: the encode side (START: start_gen, or
# start_gen) on lcore 1 with $T/encode.cfg, --produce, up once its port is
encode_server() {
	local start=$1 log=$2
	shift 2
	"$start" enc 1 "$T/encode.cfg" "$log" --produce "$@"
	wait_ready enc
}

# language_client RUN LOG SECONDS [args]: the language side (RUN: run_gw or
# run_gen) on lcore 0 with $T/language.cfg until it ends; then the server
# is stopped, so that both reports are written
language_client() {
	local run=$1 log=$2 secs=$3
	shift 3
	LOG=$log
	"$run" lang 0 "$T/language.cfg" "$log" "$secs" "$@"
	stop_all
}

# ---- the reference design's scenarios, both defaults ----------------------
define scenarios-1024 "500, 2000, 10000, 50000 tokens against a default of 1024: byte-exact, 3 resume rounds"
define scenarios-8192 "the same against a default of 8192: byte-exact, 2 resume rounds"
scenarios() { # default, resume rounds expected
	local def=$1 want=$2
	gen_configs "$T" "$def" 262144 "$SLACK" >/dev/null
	encode_server start_gen "$T/enc.log" || return 1
	language_client run_gen "$T/lang.log" 60 --exit-when-done \
		--drive 4 --lengths 500,2000,10000,50000
	MSG="lang: $(report "$T/lang.log") enc: $(report "$T/enc.log")"
	expect "$T/lang.log" result errors -eq 0 && expect "$T/lang.log" result leaked -eq 0 &&
		expect "$T/lang.log" result rounds -eq "$want" &&
		expect "$T/lang.log" result bytes -eq 33000256 &&
		expect "$T/enc.log" result-encode leaked -eq 0 &&
		expect "$T/enc.log" result-encode ok -eq 4 &&
		expect "$T/lang.log" device tx_not_sent -eq 0 &&
		expect "$T/lang.log" device tx_link_down -eq 0 || return 1
	MSG="4 rooms byte-exact, $want resume rounds, nothing leaked, no frame lost at start"
}
case_scenarios_1024() { scenarios 1024 3; }
case_scenarios_8192() { scenarios 8192 2; }

# ---- control-packet loss, duplication and reordering ----------------------
define lossy-control "10% loss, duplication and reordering of control packets both ways: 40 rooms byte-exact"
case_lossy_control() {
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	encode_server start_gen "$T/enc.log" \
		--ctl-drop 10 --ctl-dup 10 --ctl-reorder 10 --seed 7 || return 1
	language_client run_gen "$T/lang.log" 90 --exit-when-done --drive 40 \
		--concurrency 4 --lengths 129,2000,10000,700 \
		--ctl-drop 10 --ctl-dup 10 --ctl-reorder 10 --seed 9
	MSG="lang: $(report "$T/lang.log") enc: $(report "$T/enc.log")"
	expect "$T/lang.log" result errors -eq 0 && expect "$T/lang.log" result leaked -eq 0 &&
		expect "$T/lang.log" language ok -eq 40 &&
		expect "$T/lang.log" language retransmits -gt 0 &&
		expect "$T/enc.log" result-encode leaked -eq 0 || return 1
	MSG="40 rooms byte-exact through $(field "$T/lang.log" language retransmits) retransmissions"
}

# ---- pool exhaustion on the language side ---------------------------------
define pool-exhaustion "8 rooms at once for 1 room's worth of memory: they wait for admission instead of failing, all 24 complete byte-exact, nothing leaks"
case_pool_exhaustion() {
	# 16384 tokens (128 blocks) for 8 concurrent rooms of 10000 tokens (79 blocks)
	gen_configs "$T" 1024 16384 "$SLACK alloc_ms = 1000;" >/dev/null
	encode_server start_gen "$T/enc.log" || return 1
	language_client run_gen "$T/lang.log" 90 --exit-when-done --drive 24 \
		--concurrency 8 --lengths 10000,3000
	MSG="lang: $(report "$T/lang.log") enc: $(report "$T/enc.log")"
	expect "$T/lang.log" result leaked -eq 0 && expect "$T/enc.log" result-encode leaked -eq 0 &&
		expect "$T/lang.log" result errors -eq 0 &&
		expect "$T/lang.log" language bad -eq 0 &&
		expect "$T/lang.log" language ok -eq 24 &&
		expect "$T/lang.log" admission queue_max -gt 0 || return 1
	MSG="24 of 24 completed byte-exact (admission queue up to $(field "$T/lang.log" admission queue_max) rooms, wait p50/p99/max $(field "$T/lang.log" admission wait_p50_ms)/$(field "$T/lang.log" admission wait_p99_ms)/$(field "$T/lang.log" admission wait_max_ms) ms, $(field "$T/lang.log" admission restarts) restarts); nothing leaked on either side"
}

# ---- many rooms, tight pools on both sides ---------------------------------
# The proof of admission and backpressure at scale: 2,000 rooms (4 drivers
# x 500; ADMISSION_ROOMS=N for another count), lengths cycling 500..50,000
# tokens, all opened at once by 4 language identities of one embgw-gen
# whose pools hold 10 rooms at the default of 8192 tokens each, against an
# encode gateway whose pool holds 20. About 15 s on a 2-core machine.
define admission-many "2,000 rooms of 500..50,000 tokens opened at once by 4 drivers, language pools of 10 default rooms, an encode pool of 20: all byte-exact, 0 failed, 0 leaked, admission wait p50/p99/max"
case_admission_many() {
	local rooms=${ADMISSION_ROOMS:-2000} each=0 per
	per=$((rooms / 4))
	gen_configs --hidden 16 --enc-capacity $((20 * 8192)) "$T" 8192 \
		$((10 * 8192)) "$SLACK" 1 4 >/dev/null
	encode_server start_gen "$T/enc.log" || return 1
	language_client run_gen "$T/gen.log" 300 --identities 4 --drive "$rooms" \
		--concurrency "$rooms" \
		--lengths 500,2000,5000,8000,12000,20000,35000,50000
	for i in 0 1 2 3; do
		expect "$T/gen.log" language ok -eq "$per" "p0.$i" &&
			expect "$T/gen.log" result errors -eq 0 "p0.$i" &&
			expect "$T/gen.log" result leaked -eq 0 "p0.$i" &&
			expect "$T/gen.log" language bad -eq 0 "p0.$i" && each=$((each + 1))
	done
	MSG="drivers all ok: $each of 4; gen: $(report "$T/gen.log") enc: $(report "$T/enc.log")"
	[ "$each" -eq 4 ] &&
		expect "$T/gen.log" result-total rooms -eq "$rooms" "" &&
		expect "$T/gen.log" result-total errors -eq 0 "" &&
		expect "$T/gen.log" result-total leaked -eq 0 "" &&
		expect "$T/enc.log" result-encode ok -eq "$rooms" &&
		expect "$T/enc.log" result-encode leaked -eq 0 || return 1
	MSG="$rooms rooms byte-exact, 0 failed, 0 leaked; admission wait p50/p99/max (ms) per driver:"
	for i in 0 1 2 3; do
		MSG="$MSG $(field "$T/gen.log" admission wait_p50_ms "p0.$i")/$(field "$T/gen.log" admission wait_p99_ms "p0.$i")/$(field "$T/gen.log" admission wait_max_ms "p0.$i")"
	done
	MSG="$MSG; restarts $(field "$T/gen.log" admission restarts p0.0) (driver 0); encode queue_max $(field "$T/enc.log" encode queue_max)"
}

# ---- malformed, forged, replayed and stranger datagrams --------------------
define room-table-burst "120 rooms opened at once (--concurrency 120) against a language max_rooms of 16: the rooms beyond the table wait for a slot (as rooms short of memory wait for admission) instead of failing NO_SLOT; all 120 byte-exact"
case_room_table_burst() {
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	sed -i 's/^  timers = {/  limits = { max_rooms = 16; };\n  timers = {/' "$T/language.cfg"
	grep -q "max_rooms = 16" "$T/language.cfg" || { MSG="no limits group written"; return 1; }
	encode_server start_gen "$T/enc.log" || return 1
	LOG=$T/lang.log
	run_gen lang 0 "$T/language.cfg" "$T/lang.log" 90 --exit-when-done --drive 120 \
		--concurrency 120 --lengths 500,2000
	stop_all
	MSG="lang: $(report "$T/lang.log")"
	expect "$T/lang.log" language ok -eq 120 && expect "$T/lang.log" language failed -eq 0 &&
		expect "$T/lang.log" language slot_waits -gt 0 && expect "$T/lang.log" result errors -eq 0 &&
		grep -q "the room table is full (max_rooms 16): rooms wait for a slot" "$T/lang.log" || return 1
	MSG="120 rooms at once into a table of 16: $(field "$T/lang.log" language slot_waits) waits for a slot, 120 byte-exact, none failed"
}

define junk "malformed, forged, replayed and unknown-source datagrams at the port: dropped, counted, 60 rooms unaffected"
case_junk() {
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	encode_server start_gen "$T/enc.log" --inject-junk 3 --seed 3 || return 1
	language_client run_gen "$T/lang.log" 60 --exit-when-done --drive 60 \
		--concurrency 4 --lengths 2000,10000 --start-delay-ms 300
	MSG="lang: $(report "$T/lang.log")"
	expect "$T/lang.log" result errors -eq 0 && expect "$T/lang.log" result leaked -eq 0 &&
		expect "$T/lang.log" language ok -eq 60 &&
		expect "$T/lang.log" node drop_proto -gt 0 &&
		expect "$T/lang.log" node drop_replay -gt 0 &&
		expect "$T/lang.log" node drop_unknown_peer -gt 0 || return 1
	MSG="malformed $(field "$T/lang.log" node drop_proto), replayed $(field "$T/lang.log" node drop_replay), unknown source $(field "$T/lang.log" node drop_unknown_peer): dropped and counted; 60 rooms byte-exact"
}

# ---- rte_telemetry through dpdk-telemetry.py -------------------------------
define telemetry "/embgw/stats, /embgw/rooms and /embgw/pool answer through dpdk-telemetry.py with the gateway's counts"
case_telemetry() {
	local stats rooms pool okr
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	encode_server start_gen "$T/enc.log" || return 1
	LOG=$T/lang.log
	# junk from the language side, so that the encode gateway counts drops
	run_gen lang 0 "$T/language.cfg" "$T/lang.log" 60 --exit-when-done --drive 20 \
		--concurrency 4 --lengths 2000,10000 --inject-junk 3 --seed 5
	expect "$T/lang.log" language ok -eq 20 || { MSG="lang: $(report "$T/lang.log")"; return 1; }
	# the encode gateway still runs: its counters hold the 20 rooms (the
	# last ones complete at its end a moment after the language side's)
	wait_counter enc /embgw/rooms p0 encode_rooms_ok 20 20
	rooms=$TEL
	okr=$(tel_value "$rooms" /embgw/rooms p0 encode_rooms_ok)
	stats=$(telemetry enc /embgw/stats)
	pool=$(telemetry enc /embgw/pool)
	LOG=$T/enc.log
	MSG="stats: ${stats:0:300} rooms: ${rooms:0:300} pool: ${pool:0:300}"
	stop_all
	[ "${okr:-0}" -eq 20 ] &&
		[ "$(tel_value "$rooms" /embgw/rooms p0 encode_rooms_opened)" = 20 ] &&
		[ "$(tel_value "$stats" /embgw/stats p0 drop_proto)" -gt 0 ] &&
		[ "$(tel_value "$pool" /embgw/pool p0 blocks_total)" -gt 0 ] || return 1
	MSG="the encode gateway answered: 20 rooms opened and ok, $(tel_value "$stats" /embgw/stats p0 drop_proto) junk datagrams dropped, $(tel_value "$pool" /embgw/pool p0 blocks_total) blocks in its pool"
}

define telemetry-stop "/embgw/rooms and /embgw/clients read in a loop while the language gateway stops mid-transfer, 6 times: each stop a clean one (status 3 or 4, its exit line), never a crash"
case_telemetry_stop() {
	local i pid gw rc cmd n seen=""
	gen_configs --attach "$T" 1024 262144 "$SLACK" >/dev/null
	encode_server start_gen "$T/enc.log" || return 1
	for i in 1 2 3 4 5 6; do
		LOG=$T/lang-$i.log
		start_gen lang 0 "$T/language.cfg" "$LOG" --drive 1000000 \
			--concurrency 2 --lengths 20000
		pid=${PIDS[-1]}
		wait_registered "$LOG" 20 || return 1
		gw=$(child_of "$pid") || return 1
		# the commands that walk the identities, the pool and the clients
		cmd=/embgw/rooms
		[ $((i % 2)) = 0 ] && cmd=/embgw/clients
		tel_hammer lang "$cmd" "$T/answers-$i"
		sleep 0.5
		kill -TERM "$gw"
		wait_exit "$pid"
		rc=$?
		wait "$TEL_HAMMER"
		n=$(cat "$T/answers-$i" 2>/dev/null)
		MSG="stop $i (reading $cmd): exit $rc, ${n:-no} answers, last line: $(tail -1 "$LOG")"
		{ [ "$rc" -eq 3 ] || [ "$rc" -eq 4 ]; } && [ "${n:-0}" -gt 0 ] &&
			tail -1 "$LOG" | grep -q "^exit: status=$rc .* signal=SIGTERM$" || return 1
		seen="$seen $rc"
	done
	MSG="6 stops under a telemetry read loop (/embgw/rooms, /embgw/clients): exit statuses$seen, each with its exit line"
}

# ---- operators' tools: Prometheus, dpdk-dumpcap, dpdk-proc-info -----------
# free_tcp_port: a loopback TCP port nothing listens on now
free_tcp_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 20000))
		ss -Hltn "sport = :$p" | grep -q . || { echo "$p"; return 0; }
	done
	echo "     no free TCP port found" >&2
	return 1
}

# metrics_on PORT CFG: CFG's gateway serves its metrics on 127.0.0.1:PORT
metrics_on() {
	sed -i "0,/^  name = /s|^\(  name = \"[^\"]*\";\)|\1\n  metrics = { port = $1; };|" "$2" &&
		grep -q "^  metrics = { port = $1; };" "$2"
}

# scrape PORT FILE: one GET of /metrics, as Prometheus asks for it
scrape() {
	curl -sf --max-time 5 -H 'Accept: application/openmetrics-text; version=1.0.0' \
		-o "$2" "http://127.0.0.1:$1/metrics"
}

# om_value FILE SAMPLE: the value of one sample line (name{labels}) of FILE
om_value() {
	awk -v k="$2" '$1 == k { print $2 }' "$1"
}

# wait_om PORT FILE SAMPLE MIN SECONDS: scrape PORT into FILE until SAMPLE
# reaches MIN
wait_om() {
	local v deadline=$((SECONDS + $5))
	while :; do
		scrape "$1" "$2" && v=$(om_value "$2" "$3")
		[ "${v:-0}" -ge "$4" ] 2>/dev/null && return 0
		[ "$SECONDS" -ge "$deadline" ] && break
		sleep 0.2
	done
	echo "     :$1 $3 is ${v:-unanswered}, not $4, after $5 s" >&2
	return 1
}

# prom_query PORT QUERY: the value of an instant query's first result
prom_query() {
	curl -sf --max-time 5 "http://127.0.0.1:$1/api/v1/query" --data-urlencode "query=$2" |
		/usr/bin/python3 -c '
import json, sys
try:
    print(json.load(sys.stdin)["data"]["result"][0]["value"][1])
except (ValueError, KeyError, IndexError):
    pass'
}

# prom_targets PORT: "health lastError" of each target, one a line
prom_targets() {
	curl -sf --max-time 5 "http://127.0.0.1:$1/api/v1/targets" |
		/usr/bin/python3 -c '
import json, sys
for t in json.load(sys.stdin)["data"]["activeTargets"]:
    print(t["scrapeUrl"], t["health"], repr(t["lastError"]))'
}

define metrics-scrape "Prometheus scrapes a gateway pair's metrics during and after 30 rooms: OpenMetrics with HELP and TYPE, cumulative histograms, and rooms ok, bytes, resume rounds and the histograms' counts exactly as the exit reports say; a wrong value fails the check"
case_metrics_scrape() {
	local me ml mp prom n=30 during=0 partial=0 lok lbytes lrounds eok q targets chk
	command -v prometheus >/dev/null 2>&1 || { MSG="prometheus missing (scripts/deps.sh installs it)"; return 1; }
	gen_configs --attach "$T" 1024 262144 "$SLACK" >/dev/null
	me=$(free_tcp_port) && ml=$(free_tcp_port) && mp=$(free_tcp_port) || return 1
	[ "$me" != "$ml" ] && [ "$me" != "$mp" ] && [ "$ml" != "$mp" ] || { MSG="port draw collided, run again"; return 1; }
	metrics_on "$me" "$T/encode.cfg" && metrics_on "$ml" "$T/language.cfg" || { MSG="no gateway group in the configurations"; return 1; }
	"$EMBGW" --check-config "$T/language.cfg" | grep -q "^metrics: http://127.0.0.1:$ml/metrics$" || { MSG="--check-config does not show the endpoint"; return 1; }
	# Debian's Prometheus, on loopback, with its own config and data
	# directory; it scrapes both gateways every second
	cat >"$T/prometheus.yml" <<-EOF
	global: { scrape_interval: 1s, scrape_timeout: 1s }
	scrape_configs:
	  - job_name: embgw
	    static_configs: [ { targets: ['127.0.0.1:$me', '127.0.0.1:$ml'] } ]
	EOF
	timeout -s INT 120 prometheus --config.file="$T/prometheus.yml" \
		--storage.tsdb.path="$T/prometheus" --web.listen-address="127.0.0.1:$mp" \
		>"$T/prometheus.log" 2>&1 &
	prom=$!
	PIDS+=("$prom")
	encode_server start_gen "$T/enc.log" || return 1
	LOG=$T/lang.log
	start_gen lang 0 "$T/language.cfg" "$T/lang.log" --drive $n --concurrency 2 \
		--lengths 2000,10000,50000 --seed 7 --duration-ms 120000
	local lang=${PIDS[-1]}
	# scrapes during the run: each one a valid page
	local deadline=$((SECONDS + 60)) v
	while :; do
		if scrape "$ml" "$T/during.om"; then
			during=$((during + 1))
			chk=$(tests/integration/metrics_check.py "$T/during.om") ||
				{ MSG="a scrape during the run: $chk"; return 1; }
			v=$(om_value "$T/during.om" 'embgw_rooms_ok_total{port="p0",role="language"}')
			[ "${v:-0}" -ge $n ] && break
			[ "${v:-0}" -gt 0 ] && partial=$((partial + 1))
		fi
		[ "$SECONDS" -ge "$deadline" ] && { MSG="language rooms ok ${v:-unanswered} of $n after 60 s"; return 1; }
		sleep 0.2
	done
	# the rooms have ended: the final pages of both gateways
	scrape "$ml" "$T/lang.om" || { MSG="no scrape of the language gateway after the rooms"; return 1; }
	wait_om "$me" "$T/enc.om" 'embgw_rooms_ok_total{port="p0",role="encode"}' $n 20 ||
		{ MSG="the encode gateway's rooms did not reach $n"; return 1; }
	# Prometheus has scraped both and sees the same count (the targets'
	# scrapes are spread over the interval: the language one may come
	# first and the encode one up to a second later)
	for _ in $(seq 1 100); do
		q=$(prom_query "$mp" 'embgw_rooms_ok_total{role="language"}')
		targets=$(prom_targets "$mp")
		[ "$q" = "$n" ] && [ "$(grep -c " up ''$" <<<"$targets")" = 2 ] && break
		sleep 0.2
	done
	kill -INT "$prom"
	wait_exit "$prom"
	[ "$q" = "$n" ] || { MSG="Prometheus: language rooms ok '$q', not $n; targets: $targets"; return 1; }
	[ "$(grep -c " up ''$" <<<"$targets")" = 2 ] || { MSG="Prometheus targets not both up without error: $targets"; return 1; }
	end_gw INT "$lang"
	stop_all
	lok=$(field "$T/lang.log" language ok)
	lbytes=$(field "$T/lang.log" result bytes)
	lrounds=$(field "$T/lang.log" result rounds)
	eok=$(field "$T/enc.log" encode ok)
	# counters the report prints on lines of their own: fenced peers,
	# quarantines ended by their deadline, the attach socket's refusals
	local fenced qexp aref ahello
	fenced=$(field "$T/lang.log" node peers_fenced)
	qexp=$(field "$T/lang.log" admission quarantine_expired)
	aref=$(grep -o 'attach: refused=[0-9]*' "$T/lang.log" | tail -n 1 | cut -d= -f2)
	ahello=$(grep -o 'hello_timeouts=[0-9]*' "$T/lang.log" | tail -n 1 | cut -d= -f2)
	MSG="lang report: ok=$lok bytes=$lbytes rounds=$lrounds fenced=$fenced quarantine_expired=$qexp attach refused=$aref hello_timeouts=$ahello; enc ok=$eok"
	[ "$lok" = $n ] && [ "$eok" = $n ] && [ "${lrounds:-0}" -gt 0 ] || return 1
	[ -n "$fenced" ] && [ -n "$qexp" ] && [ -n "$aref" ] && [ -n "$ahello" ] || return 1
	chk=$(tests/integration/metrics_check.py "$T/lang.om" \
		--expect "embgw_rooms_ok_total{port=\"p0\",role=\"language\"}=$lok" \
		--expect "embgw_rooms_opened_total{port=\"p0\",role=\"language\"}=$lok" \
		--expect "embgw_rooms_failed_total{port=\"p0\",role=\"language\"}=0" \
		--expect "embgw_resume_rounds_total{port=\"p0\",role=\"language\"}=$lrounds" \
		--expect "embgw_delivered_bytes_total{port=\"p0\"}=$lbytes" \
		--expect "embgw_room_size_bytes_sum{port=\"p0\",peer=\"enc-0\"}=$lbytes" \
		--expect "embgw_room_size_bytes_count{port=\"p0\",peer=\"enc-0\"}=$lok" \
		--expect "embgw_room_duration_seconds_count{port=\"p0\",peer=\"enc-0\"}=$lok" \
		--expect "embgw_rooms_active{port=\"p0\",role=\"language\"}=0" \
		--expect "embgw_pool_in_use_blocks{port=\"p0\"}=0" \
		--expect "embgw_peer_registered{port=\"p0\",peer=\"enc-0\"}=1" \
		--expect "embgw_clients_attached{port=\"p0\"}=0" \
		--expect "embgw_peers_fenced_total{port=\"p0\"}=$fenced" \
		--expect "embgw_quarantine_released_total{port=\"p0\",cause=\"deadline\"}=$qexp" \
		--expect "embgw_attach_refusals_total{reason=\"not_allowed\"}=$aref" \
		--expect "embgw_attach_refusals_total{reason=\"hello_timeout\"}=$ahello") ||
		{ MSG="language page: $chk"; return 1; }
	chk=$(tests/integration/metrics_check.py "$T/enc.om" \
		--expect "embgw_rooms_ok_total{port=\"p0\",role=\"encode\"}=$eok" \
		--expect "embgw_rooms_failed_total{port=\"p0\",role=\"encode\"}=0") ||
		{ MSG="encode page: $chk"; return 1; }
	# the check fails on a wrong value: one room less than the report
	sed "s/^\(embgw_rooms_ok_total{port=\"p0\",role=\"language\"}\) .*/\1 $((lok - 1))/" \
		"$T/lang.om" >"$T/wrong.om"
	tests/integration/metrics_check.py "$T/wrong.om" \
		--expect "embgw_rooms_ok_total{port=\"p0\",role=\"language\"}=$lok" >/dev/null &&
		{ MSG="the check passed a page with a wrong room count"; return 1; }
	chk=$(tests/integration/metrics_check.py "$T/lang.om" --names-from "$T/enc.om" \
		--dashboard tools/grafana/embgw-dashboard.json) ||
		{ MSG="dashboard: $chk"; return 1; }
	MSG="$during scrapes during the run ($partial with rooms in progress), Prometheus up on both and counting $q; $(grep -c '^# TYPE' "$T/lang.om") families; ok=$lok bytes=$lbytes rounds=$lrounds as the exit report says; a wrong value fails"
}

# cfg_value CFG KEY: the first `KEY = "value"` of CFG, up to a comma or
# a slash (a device's name without its arguments, an address without its
# prefix length)
cfg_value() {
	sed -n "s|^ *$2 = \"\([^,/\"]*\).*|\1|p" "$1" | head -1
}

# Pages for one gateway with hugepages (it used 81 of them, measured) and
# the capture's own pool; the other gateway of these cases runs --no-huge.
TOOLS_HUGEPAGES=192

define dumpcap "dpdk-dumpcap (a secondary process) captures the encode gateway's port during 10 rooms: every frame on embgw's UDP port decodes with tools/wireshark/embgw.lua, as many from the language gateway as it sent"
case_dumpcap() {
	local dc dev lang_ip udp dec bad from sent types
	command -v dpdk-dumpcap >/dev/null 2>&1 && command -v tshark >/dev/null 2>&1 ||
		{ MSG="dpdk-dumpcap or tshark missing (scripts/deps.sh installs dpdk and tshark)"; return 1; }
	hugepages_up $TOOLS_HUGEPAGES "$T/hugepages" || { MSG="no hugepages for the gateway"; return 1; }
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	dev=$(cfg_value "$T/encode.cfg" device)
	lang_ip=$(cfg_value "$T/language.cfg" address)
	# only the captured gateway needs hugepages: a secondary process maps
	# its primary's memory from the hugepage files
	EAL_COMMON="--huge-dir $HUGE_DIR" encode_server start_gen "$T/enc.log" || return 1
	timeout -s INT 90 dpdk-dumpcap --file-prefix "egw-enc-$$" -i "$dev" \
		-w "$T/cap.pcapng" >"$T/dumpcap.log" 2>&1 &
	dc=$!
	PIDS+=("$dc")
	# its progress line (stderr) starts once the gateway has enabled the
	# capture; "Capturing on" goes to a buffered stdout
	for _ in $(seq 1 100); do
		grep -q "Packets captured:" "$T/dumpcap.log" && break
		sleep 0.1
	done
	grep -q "Packets captured:" "$T/dumpcap.log" ||
		{ MSG="dpdk-dumpcap did not start capturing in 10 s: $(tr '\n' ' ' <"$T/dumpcap.log" | cut -c1-300)"; return 1; }
	LOG=$T/lang.log
	run_gen lang 0 "$T/language.cfg" "$T/lang.log" 60 --exit-when-done --drive 10 \
		--lengths 500,50000,2000
	kill -INT "$dc"
	wait_exit "$dc" || { MSG="dpdk-dumpcap failed: $(tr '\n' ' ' <"$T/dumpcap.log" | cut -c1-300)"; return 1; }
	stop_all
	expect "$T/lang.log" language ok -eq 10 || { MSG="lang: $(report "$T/lang.log")"; return 1; }
	ts() { tshark -X lua_script:tools/wireshark/embgw.lua -r "$T/cap.pcapng" "$@" 2>/dev/null; }
	udp=$(ts -Y "udp.port == 9471" | wc -l)
	dec=$(ts -Y "embgw.type" | wc -l)
	bad=$(ts -Y "_ws.malformed || _ws.expert.severity >= 0x00800000" | wc -l)
	types=$(ts -Y embgw -T fields -e embgw.type | sort -un | tr '\n' ' ')
	from=$(ts -Y "embgw && ip.src == $lang_ip" | wc -l)
	# what left its port: the node's datagrams less those that found no
	# MAC yet (arp_miss: its first REGISTER when it starts before it has
	# heard from a peer that asks less often for a host that was down)
	sent=$(($(field "$T/lang.log" node tx_datagrams) - $(field "$T/lang.log" node arp_miss)))
	MSG="dumpcap on $dev: udp=$udp decoded=$dec bad=$bad types='$types' from the language gateway $from of $sent sent"
	[ "$udp" -gt 0 ] && [ "$udp" = "$dec" ] && [ "$bad" = 0 ] &&
		[ "$from" = "$sent" ] || return 1
	MSG="dpdk-dumpcap captured $udp frames on UDP 9471 of $dev, all decoded (types $types), $from from the language gateway = its own count"
}

define proc-info "dpdk-proc-info with the encode gateway's file prefix after 5 rooms: its port's statistics (frames received as the gateway counted them) and its mbuf pool"
case_proc_info() {
	local rx want
	command -v dpdk-proc-info >/dev/null 2>&1 || { MSG="dpdk-proc-info missing (scripts/deps.sh installs dpdk)"; return 1; }
	hugepages_up $TOOLS_HUGEPAGES "$T/hugepages" || { MSG="no hugepages for the gateway"; return 1; }
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	EAL_COMMON="--huge-dir $HUGE_DIR" encode_server start_gen "$T/enc.log" || return 1
	LOG=$T/lang.log
	run_gen lang 0 "$T/language.cfg" "$T/lang.log" 60 --exit-when-done --drive 5 \
		--lengths 2000
	expect "$T/lang.log" language ok -eq 5 || { MSG="lang: $(report "$T/lang.log")"; return 1; }
	# the language gateway has gone: nothing more arrives at the port
	LOG=$T/proc-info.log
	timeout 30 dpdk-proc-info --file-prefix "egw-enc-$$" --no-pci -- \
		--stats --show-mempool >"$T/proc-info.log" 2>&1 ||
		{ MSG="dpdk-proc-info failed"; return 1; }
	rx=$(sed -n 's/^ *RX-packets: *\([0-9]*\) .*/\1/p' "$T/proc-info.log" | head -1)
	want=$(tel_value "$(telemetry enc /embgw/stats)" /embgw/stats p0 rx_pkts)
	MSG="proc-info: RX-packets '$rx', the gateway's rx_pkts '$want'"
	grep -q "NIC statistics for port 0" "$T/proc-info.log" &&
		grep -q "^mempool <embgw_mbuf_s0>" "$T/proc-info.log" &&
		[ -n "$rx" ] && [ "$rx" -gt 0 ] && [ "$rx" = "$want" ] || return 1
	MSG="dpdk-proc-info shows port 0 with $rx frames received (the gateway counted $want) and the mempool embgw_mbuf_s0"
}

# ---- a peer killed in the middle of a transfer -----------------------------
define peer-killed "an encode peer SIGKILLed mid-transfer: its rooms fail as peer_dead, the other peer's 30 rooms byte-exact, nothing leaked"
case_peer_killed() {
	local enc1 t0 t1
	gen_configs "$T" 1024 262144 "$SLACK" 2 >/dev/null
	start_gen enc0 1 "$T/encode.cfg" "$T/enc0.log" --produce
	start_gen enc1 0 "$T/encode1.cfg" "$T/enc1.log" --produce
	enc1=${PIDS[-1]}
	wait_ready enc0 && wait_ready enc1 || return 1
	LOG=$T/lang.log
	# paced (10 rooms/s: 3 s), so that rooms to enc-1 are still to come
	# when it is killed, however fast the pair moves them
	start_gen lang 0,1 "$T/language.cfg" "$T/lang.log" --exit-when-done --drive 30 \
		--rate 10 --concurrency 2 --lengths 50000,10000
	# kill enc-1 once rooms to it are under way (one telemetry round trip
	# takes a fraction of a second: the kill lands within the first rooms)
	wait_counter lang /embgw/rooms p1 language_rooms_opened 1 20 ||
		echo "     killed anyway" >&2
	kill_gw "$enc1"
	t0=$(date +%s%N)
	wait_line "$T/lang.log" result 60 2
	t1=$(date +%s%N)
	stop_all
	MSG="lang: $(report "$T/lang.log") enc0: $(report "$T/enc0.log")"
	expect "$T/lang.log" result errors -eq 0 p0 && expect "$T/lang.log" result leaked -eq 0 p0 &&
		expect "$T/lang.log" language ok -eq 30 p0 &&
		expect "$T/lang.log" result leaked -eq 0 p1 &&
		[ "$(failed_count "$T/lang.log" p1 peer_dead)" -ge 1 ] &&
		expect "$T/lang.log" language unfinished -eq 0 p1 &&
		expect "$T/enc0.log" result-encode leaked -eq 0 || return 1
	MSG="$(failed_count "$T/lang.log" p1 peer_dead) rooms failed as peer_dead, the other peer's 30 byte-exact, zero blocks in use, done $(((t1 - t0) / 1000000)) ms after the kill"
}

# ---- restarts: one side killed and started again, the other stays up -------
# Each restart is a new incarnation (a new random session): the side that
# stays up fails the rooms it shared with the old one, lets go of its
# memory, and serves the new one; no room is ever corrupt.
RESTART_GAPS="0 0.1 0.5 2"

# restarted_cleanly LOG PORT: every room of PORT's report is byte-exact or
# failed with a reason, none unfinished, nothing leaked
restarted_cleanly() {
	expect "$1" language bad -eq 0 "$2" && expect "$1" language unfinished -eq 0 "$2" &&
		expect "$1" result leaked -eq 0 "$2"
}

define restart-language "the language gateway SIGKILLed mid-transfer and started again, 4 times (gaps $RESTART_GAPS s), against an encode gateway that stays up: 4 peer restarts on the encode side, nothing leaked there, the last run's rooms byte-exact"
case_restart_language() {
	local i=0 lang
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	encode_server start_gen "$T/enc.log" || return 1
	for gap in $RESTART_GAPS; do
		start_gen lang 0 "$T/language.cfg" "$T/lang.$i.log" --drive 1000 \
			--concurrency 2 --lengths 50000,2000
		lang=${PIDS[-1]}
		LOG=$T/lang.$i.log
		wait_registered "$T/lang.$i.log" 20 || return 1
		sleep 0.5 # rooms under way
		kill_gw "$lang"
		sleep "$gap"
		i=$((i + 1))
	done
	language_client run_gen "$T/lang.$i.log" 60 --exit-when-done --drive 20 \
		--concurrency 2 --lengths 50000,2000
	MSG="lang: $(report "$T/lang.$i.log") enc: $(report "$T/enc.log")"
	expect "$T/enc.log" node peer_restarts -eq 4 && expect "$T/enc.log" node adoptions -eq 5 &&
		expect "$T/enc.log" result-encode leaked -eq 0 &&
		expect "$T/lang.$i.log" result errors -eq 0 &&
		expect "$T/lang.$i.log" language ok -eq 20 &&
		restarted_cleanly "$T/lang.$i.log" p0 || return 1
	MSG="encode side: $(field "$T/enc.log" node peer_restarts) peer restarts, $(field "$T/enc.log" result-encode failed) of its rooms failed with them, nothing leaked; the last language run: 20 rooms byte-exact"
}

define restart-encode "the encode gateway SIGKILLed and started again, 4 times (gaps $RESTART_GAPS s), under a language gateway that stays up and drives rooms throughout: 4 peer restarts on the language side, every room byte-exact or failed with a reason, the ones after the last failure byte-exact, nothing leaked"
case_restart_encode() {
	local enc i=0 fails
	# a process start can take seconds on a loaded machine: the encode
	# side is not declared dead while it restarts, and a room opened
	# meanwhile waits for the new incarnation rather than its deadline
	gen_configs "$T" 1024 262144 \
		"peer_dead_ms = 30000; bootstrap_ms = 10000;" >/dev/null
	LOG=$T/lang.log
	# 37 s of rooms on a schedule: the restarts fall in the first part,
	# the rooms after the last one show the recovery
	start_gen lang 0 "$T/language.cfg" "$T/lang.log" --exit-when-done --drive 150 \
		--concurrency 2 --rate 4 --lengths 50000,2000
	wait_ready lang || return 1
	start_gen enc 1 "$T/encode.cfg" "$T/enc.$i.log" --produce
	enc=${PIDS[-1]}
	for gap in $RESTART_GAPS; do
		# each incarnation serves before it is killed
		wait_registered "$T/enc.$i.log" 20 || return 1
		sleep 0.5 # rooms under way
		kill_gw "$enc"
		sleep "$gap"
		i=$((i + 1))
		start_gen enc 1 "$T/encode.cfg" "$T/enc.$i.log" --produce
		enc=${PIDS[-1]}
	done
	wait_line "$T/lang.log" result 90
	stop_all
	fails=$(failures "$T/lang.log" p0 | tr '\n' ' ')
	MSG="lang: $(report "$T/lang.log") failed: $fails enc: $(report "$T/enc.$i.log")"
	expect "$T/lang.log" node peer_restarts -eq 4 &&
		restarted_cleanly "$T/lang.log" p0 &&
		expect "$T/lang.log" language rooms -eq 150 &&
		expect "$T/lang.log" recovery after_last_failed -gt 0 &&
		[ "$(field "$T/lang.log" recovery after_last_failed_ok)" = \
		  "$(field "$T/lang.log" recovery after_last_failed)" ] &&
		expect "$T/enc.$i.log" result-encode leaked -eq 0 || return 1
	MSG="language side: $(field "$T/lang.log" node peer_restarts) peer restarts, $(field "$T/lang.log" language ok) rooms byte-exact, failed: ${fails:-none}, the $(field "$T/lang.log" recovery after_last_failed) after the last failure byte-exact, nothing leaked"
}

define restart-smaller-session "the language gateway restarted with a smaller session id than before (a clock set back): the encode gateway takes it as a new incarnation and serves it, byte-exact"
case_restart_smaller_session() {
	local lang
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	encode_server start_gen "$T/enc.log" || return 1
	start_gen lang 0 "$T/language.cfg" "$T/lang.0.log" --drive 1000 \
		--lengths 50000 --test-session 0x7000000000000000
	lang=${PIDS[-1]}
	LOG=$T/lang.0.log
	wait_registered "$T/lang.0.log" 20 || return 1
	sleep 0.5
	kill_gw "$lang"
	language_client run_gen "$T/lang.1.log" 60 --exit-when-done --drive 10 \
		--lengths 50000,2000 --test-session 5
	MSG="lang: $(report "$T/lang.1.log") enc: $(report "$T/enc.log")"
	grep -q "session 0x5\$" "$T/lang.1.log" &&
		grep -q "peer lang-0 restarted: session 0x5 replaces 0x7000000000000000" "$T/enc.log" &&
		expect "$T/enc.log" node peer_restarts -eq 1 &&
		expect "$T/lang.1.log" result errors -eq 0 &&
		expect "$T/lang.1.log" language ok -eq 10 &&
		expect "$T/enc.log" result-encode leaked -eq 0 || return 1
	MSG="session 0x7000000000000000 then 0x5: a new incarnation all the same, 10 rooms byte-exact"
}

# ---- peers that cannot register --------------------------------------------
# A peer that never registers: both sides log why once, count every
# refusal, and the rooms towards it end by their deadlines (not a hang).
MISMATCH_TIMERS="$SLACK bootstrap_ms = 1500;"

# unregistered_rooms_end LOG: 3 rooms asked for, all failed with a reason,
# none unfinished, nothing leaked, no peer registered
unregistered_rooms_end() {
	expect "$1" language failed -eq 3 && expect "$1" language unfinished -eq 0 &&
		expect "$1" result leaked -eq 0 && ! grep -q "peer .* registered" "$1"
}

define block-tokens-mismatch "a language gateway with another block_tokens: both sides refuse each other's REGISTER as geometry, say so once with what differs, answer ERROR(GEOMETRY); its 3 rooms fail by their deadlines, nothing leaked"
case_block_tokens_mismatch() {
	gen_configs "$T" 1024 262144 "$MISMATCH_TIMERS" >/dev/null
	sed -i 's/capacity_tokens = \([0-9]*\);/capacity_tokens = \1; block_tokens = 64;/' \
		"$T/language.cfg" || return 1
	grep -q "block_tokens = 64;" "$T/language.cfg" || return 1
	encode_server start_gen "$T/enc.log" || return 1
	language_client run_gen "$T/lang.log" 60 --exit-when-done --drive 3 --lengths 2000
	MSG="lang: $(report "$T/lang.log") enc: $(report "$T/enc.log")"
	unregistered_rooms_end "$T/lang.log" &&
		[ "$(grep -c "refused, geometry: block_tokens 128 (ours 64)" "$T/lang.log")" = 1 ] &&
		[ "$(grep -c "refused, geometry: block_tokens 64 (ours 128)" "$T/enc.log")" = 1 ] &&
		[ "$(grep -c "refused our REGISTER: geometry" "$T/lang.log")" = 1 ] &&
		expect "$T/lang.log" node register_refusals -gt 0 &&
		expect "$T/lang.log" node register_refused -gt 0 &&
		expect "$T/lang.log" node drop_geometry -gt 1 &&
		expect "$T/enc.log" node register_refused -gt 0 &&
		expect "$T/enc.log" node adoptions -eq 0 || return 1
	MSG="refused both ways as geometry (logged once each, $(field "$T/lang.log" node drop_geometry) REGISTERs refused, $(field "$T/lang.log" node register_refusals) ERRORs sent), 3 rooms failed: $(failures "$T/lang.log" p0 | tr '\n' ' ')"
}

define unreachable-repaired "the encode gateway cannot reach the language gateway's pool file at first (its path names nothing yet): it answers ERROR(UNREACHABLE), both sides say so once; once the path names the pool, the language side's next REGISTER repairs the link and 5 rooms land byte-exact"
case_unreachable_repaired() {
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	sed -i "s|path = \"$T/lang-pool-0\";|path = \"$T/late-pool\";|" "$T/encode.cfg" || return 1
	grep -q "late-pool" "$T/encode.cfg" || return 1
	encode_server start_gen "$T/enc.log" || return 1
	LOG=$T/lang.log
	start_gen lang 0 "$T/language.cfg" "$T/lang.log" --exit-when-done --drive 5 \
		--lengths 2000,50000
	for _ in $(seq 1 100); do
		grep -q "refused our REGISTER: unreachable" "$T/lang.log" && break
		sleep 0.1
	done
	ln -s "$T/lang-pool-0" "$T/late-pool"
	wait_line "$T/lang.log" result 60
	stop_all
	MSG="lang: $(report "$T/lang.log") enc: $(report "$T/enc.log")"
	[ "$(grep -c "refused, unreachable: cannot reach its pool" "$T/enc.log")" = 1 ] &&
		[ "$(grep -c "refused our REGISTER: unreachable" "$T/lang.log")" = 1 ] &&
		expect "$T/enc.log" node drop_payload -gt 0 &&
		expect "$T/lang.log" node register_refused -gt 0 &&
		expect "$T/lang.log" result errors -eq 0 &&
		expect "$T/lang.log" language ok -eq 5 &&
		expect "$T/enc.log" result-encode leaked -eq 0 || return 1
	MSG="$(field "$T/enc.log" node drop_payload) REGISTERs refused as unreachable (logged once a side), then repaired by the next one: 5 rooms byte-exact"
}

define key-mismatch "a language gateway with another key: its datagrams fail authentication at the encode gateway and the other way round, logged once per peer as a key mismatch and counted; its 3 rooms fail by their deadlines, nothing leaked"
case_key_mismatch() {
	gen_configs "$T" 1024 262144 "$MISMATCH_TIMERS" >/dev/null
	head -c 48 /dev/urandom > "$T/other.key"
	chmod 600 "$T/other.key"
	sed -i 's/key_file = "psk.key";/key_file = "other.key";/' "$T/language.cfg" || return 1
	grep -q '"other.key"' "$T/language.cfg" || return 1
	encode_server start_gen "$T/enc.log" || return 1
	language_client run_gen "$T/lang.log" 60 --exit-when-done --drive 3 --lengths 2000
	MSG="lang: $(report "$T/lang.log") enc: $(report "$T/enc.log")"
	unregistered_rooms_end "$T/lang.log" &&
		[ "$(grep -c "datagrams from peer enc-0 fail authentication: different key?" "$T/lang.log")" = 1 ] &&
		[ "$(grep -c "datagrams from peer lang-0 fail authentication: different key?" "$T/enc.log")" = 1 ] &&
		expect "$T/lang.log" node auth_failed -gt 1 &&
		expect "$T/enc.log" node auth_failed -gt 1 || return 1
	MSG="logged once per side, $(field "$T/enc.log" node auth_failed)/$(field "$T/lang.log" node auth_failed) datagrams failed authentication, 3 rooms failed: $(failures "$T/lang.log" p0 | tr '\n' ' ')"
}

# ---- a peer leaving, again and again: the survivor stays ---------------------
define peer-exit-cycles "50 exits of an encode peer under junk and load, SIGTERM and SIGKILL in turn at random moments, each time started again at once: the language gateway stays alive throughout, no room corrupt, nothing leaked, and it serves the last peer"
case_peer_exit_cycles() {
	local i sig pid lang child rc ok0 term=0 kills=0 lives=0
	RANDOM=13
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	LOG=$T/lang.log
	# the survivor: rooms open-loop at 100/s from its start to its end,
	# junk to its peer all along
	start "$EMBGW_GEN" lang 0 "$T/language.cfg" "$T/lang.log" 400 --drive 40000 \
		--rate 100 --concurrency 16 --lengths 129,2000,10000 --inject-junk 2 --seed 5
	lang=${PIDS[-1]}
	sleep 1
	child=$(pgrep -P "$lang")
	for i in $(seq 1 50); do
		start_gen enc 1 "$T/encode.cfg" "$T/enc-$i.log" --produce --inject-junk 2 --seed "$i"
		pid=${PIDS[-1]}
		# the peer leaves while rooms and junk flow both ways: after it has
		# registered, at a random moment in the next 0.4 s
		wait_registered "$T/enc-$i.log" 30 || { MSG="peer $i never registered"; LOG=$T/enc-$i.log; return 1; }
		sleep "0.$((RANDOM % 4))$((RANDOM % 10))"
		if [ $((i % 2)) = 1 ]; then sig=KILL; kills=$((kills + 1)); else sig=TERM; term=$((term + 1)); fi
		end_gw "$sig" "$pid"
		[ -n "$child" ] && alive "$child" ||
			{ MSG="the language gateway died after the peer's exit $i (SIG$sig)"; return 1; }
		lives=$((lives + 1))
		# a peer that left cleanly handed every block back
		[ "$sig" = KILL ] || expect "$T/enc-$i.log" result-encode leaked -eq 0 ||
			{ MSG="peer $i leaked: $(report "$T/enc-$i.log")"; LOG=$T/enc-$i.log; return 1; }
	done
	# the last peer stays: the survivor's rooms complete again
	start_gen enc 1 "$T/encode.cfg" "$T/enc-last.log" --produce --inject-junk 2 --seed 99
	wait_registered "$T/enc-last.log" 30 || { MSG="the last peer never registered"; return 1; }
	ok0=$(tel_value "$(telemetry lang /embgw/rooms)" /embgw/rooms p0 language_rooms_ok)
	wait_counter lang /embgw/rooms p0 language_rooms_ok $((${ok0:-0} + 50)) 30 ||
		{ MSG="the survivor completes no rooms with the last peer (${ok0:-?} before)"; return 1; }
	alive "$child" || { MSG="the language gateway died at the end"; return 1; }
	kill -INT "$child"
	wait "$lang"
	rc=$?
	stop_all
	MSG="rc=$rc lang: $(report "$T/lang.log")"
	# the survivor's own end: its report, written by its teardown
	[ "$rc" -lt 124 ] && expect "$T/lang.log" language bad -eq 0 &&
		expect "$T/lang.log" result leaked -eq 0 &&
		expect "$T/enc-last.log" result-encode leaked -eq 0 || return 1
	MSG="the language gateway outlived $lives exits of its peer ($term SIGTERM, $kills SIGKILL) under junk: 0 rooms corrupt, $(field "$T/lang.log" language ok) ok, $(field "$T/lang.log" language failed) failed ($(failures "$T/lang.log" p0 | tr '\n' ' ')), 0 blocks leaked, and the last peer served"
}

define language-exit-cycles "the mirror image: 50 exits of a language peer under junk and load (SIGTERM and SIGKILL in turn), each started again at once with nothing cleaned up: the encode gateway stays alive throughout, nothing leaked, and the last language peer's 50 rooms byte-exact"
case_language_exit_cycles() {
	local i sig pid enc child rc term=0 kills=0 lives=0
	RANDOM=17
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	LOG=$T/enc.log
	# the survivor: serves whatever rooms its peer opens, junk to it
	start "$EMBGW_GEN" enc 1 "$T/encode.cfg" "$T/enc.log" 400 --produce \
		--inject-junk 2 --seed 5
	enc=${PIDS[-1]}
	wait_ready enc || return 1
	child=$(pgrep -P "$enc")
	for i in $(seq 1 50); do
		start_gen lang 0 "$T/language.cfg" "$T/lang-$i.log" --drive 40000 --rate 100 \
			--concurrency 16 --lengths 129,2000,10000 --inject-junk 2 --seed "$i"
		pid=${PIDS[-1]}
		wait_registered "$T/lang-$i.log" 30 || { MSG="peer $i never registered"; LOG=$T/lang-$i.log; return 1; }
		sleep "0.$((RANDOM % 4))$((RANDOM % 10))"
		if [ $((i % 2)) = 1 ]; then sig=KILL; kills=$((kills + 1)); else sig=TERM; term=$((term + 1)); fi
		end_gw "$sig" "$pid"
		[ -n "$child" ] && alive "$child" ||
			{ MSG="the encode gateway died after the peer's exit $i (SIG$sig)"; return 1; }
		lives=$((lives + 1))
		# a peer that left cleanly verified what it received and freed it
		[ "$sig" = KILL ] || { expect "$T/lang-$i.log" language bad -eq 0 &&
			expect "$T/lang-$i.log" result leaked -eq 0; } ||
			{ MSG="peer $i: $(report "$T/lang-$i.log")"; LOG=$T/lang-$i.log; return 1; }
	done
	# the last peer: its rooms complete byte-exact against the survivor
	LOG=$T/lang-last.log
	run_gen lang 0 "$T/language.cfg" "$T/lang-last.log" 60 --exit-when-done \
		--drive 50 --concurrency 4 --lengths 129,2000,10000
	alive "$child" || { MSG="the encode gateway died at the end"; return 1; }
	kill -INT "$child"
	wait "$enc"
	rc=$?
	stop_all
	MSG="rc=$rc enc: $(report "$T/enc.log") last: $(report "$T/lang-last.log")"
	expect "$T/lang-last.log" language ok -eq 50 && expect "$T/lang-last.log" language bad -eq 0 &&
		expect "$T/lang-last.log" result leaked -eq 0 || return 1
	LOG=$T/enc.log
	[ "$rc" -lt 124 ] && expect "$T/enc.log" result-encode leaked -eq 0 || return 1
	MSG="the encode gateway outlived $lives exits of its peer ($term SIGTERM, $kills SIGKILL) under junk: $(field "$T/enc.log" result-encode ok) rooms ok, $(field "$T/enc.log" result-encode failed) failed, 0 blocks leaked; the last peer's 50 rooms byte-exact"
}

# ---- a killed encode gateway comes back on its own ---------------------------
define encode-restart "an encode gateway SIGKILLed under load and started again at once, nothing cleaned up: every language room opened after the restart completes byte-exact, none corrupt, nothing leaked"
case_encode_restart() {
	local enc at last after after_ok
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	encode_server start_gen "$T/enc.log" || return 1
	enc=${PIDS[-1]}
	LOG=$T/lang.log
	# 600 rooms open-loop at 40/s: 15 s, the restart within the first 4
	start_gen lang 0 "$T/language.cfg" "$T/lang.log" --exit-when-done --drive 600 \
		--rate 40 --concurrency 16 --lengths 700,3000,10000
	wait_counter lang /embgw/rooms p0 language_rooms_ok 40 30 ||
		{ MSG="no rooms before the kill: $(report "$T/lang.log")"; return 1; }
	kill_gw "$enc"
	# the same configuration, the same EAL file prefix, at once
	encode_server start_gen "$T/enc2.log" || { LOG=$T/enc2.log; MSG="no restart"; return 1; }
	# the restart is done once the language gateway has registered with
	# the new process: every room opened from then on must complete
	wait_registered "$T/enc2.log" 30 || { LOG=$T/enc2.log; MSG="the language gateway never registered again"; return 1; }
	at=$(tel_value "$(telemetry lang /embgw/rooms)" /embgw/rooms p0 language_rooms_opened)
	wait_line "$T/lang.log" result 60
	stop_all
	last=$(field "$T/lang.log" recovery last_failed)
	after=$(field "$T/lang.log" recovery after_last_failed)
	after_ok=$(field "$T/lang.log" recovery after_last_failed_ok)
	MSG="restarted with ${at:-?} rooms opened; last failed ${last:-none}; lang: $(report "$T/lang.log") enc2: $(report "$T/enc2.log")"
	[ -n "$at" ] && [ "$at" -le 550 ] &&
		expect "$T/lang.log" language bad -eq 0 &&
		expect "$T/lang.log" language unfinished -eq 0 &&
		expect "$T/lang.log" result leaked -eq 0 &&
		expect "$T/enc2.log" result-encode leaked -eq 0 || return 1
	# no room failed, or none since the restart: the rooms after the last
	# failed one all completed
	if [ -n "$last" ]; then
		[ "$last" -le "$at" ] && [ "$after_ok" = "$after" ] || return 1
	else
		expect "$T/lang.log" language ok -eq 600 || return 1
	fi
	MSG="restart with $at rooms opened: the $((600 - at)) opened after it all byte-exact; $(field "$T/lang.log" language failed) failed around the kill ($(failures "$T/lang.log" p0 | tr '\n' ' ')), none corrupt, nothing leaked"
}

# ---- the Wireshark dissector over a capture of real gateway traffic --------
define dissector "tools/wireshark/embgw.lua decodes every control frame of a real capture, as many received as the gateway counted; UDP checksums 0 by default, valid ones from a port with udp_checksum \"always\""
case_dissector() {
	local udp dec bad types names rx want_rx tags regs proofs ck0 ckgood
	command -v tshark >/dev/null 2>&1 || { MSG="tshark missing"; return 1; }
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	# the language side computes its UDP checksums (no offload on
	# af_packet or memif), the encode side sends 0 (the default)
	sed -i -E 's|^( *)address = "192.168.77.2/24";|&\n\1udp_checksum = "always";|' \
		"$T/language.cfg"
	grep -q 'udp_checksum = "always"' "$T/language.cfg" || { MSG="language.cfg has no address line to follow"; return 1; }
	encode_server start_gen "$T/enc.log" || return 1
	language_client run_gen "$T/lang.log" 60 --exit-when-done --drive 6 \
		--ranks 2 --dummy-rank --lengths 500,50000,2000 --ctl-drop 10 \
		--capture "$T/cap.pcap"
	ts() { tshark -X lua_script:tools/wireshark/embgw.lua -r "$T/cap.pcap" "$@" 2>/dev/null; }
	udp=$(ts -Y "udp.port == 9471" | wc -l)
	dec=$(ts -Y "embgw.type" | wc -l)
	bad=$(ts -Y "_ws.malformed || _ws.expert.severity >= 0x00800000" | wc -l)
	types=$(ts -Y embgw -T fields -e embgw.type | sort -un | tr '\n' ' ')
	names=$(ts -Y "embgw.type == 7" -T fields -e embgw.reg.name | sort -u | tr '\n' ' ')
	rx=$(ts -Y "embgw && ip.src == 192.168.77.1" | wc -l)
	want_rx=$(field "$T/lang.log" node rx_datagrams)
	tags=$(ts -Y "embgw" -T fields -e embgw.tag_len | sort -u | tr '\n' ' ')
	# REGISTER's peer_seq at offset 160: non-zero where a
	# REGISTER of the addressee was heard (all but the first ones)
	regs=$(ts -Y "embgw.type == 7" | wc -l)
	proofs=$(ts -Y "embgw.reg.peer_seq > 0" | wc -l)
	# frames from the encode side with UDP checksum 0; from the
	# language side, checksums Wireshark verifies as good
	ck0=$(ts -Y "embgw && ip.src == 192.168.77.1 && udp.checksum == 0" | wc -l)
	ckgood=$(ts -o udp.check_checksum:TRUE \
		-Y "embgw && ip.src == 192.168.77.2 && udp.checksum != 0 && udp.checksum.status == 1" | wc -l)
	MSG="udp=$udp decoded=$dec bad=$bad types='$types' names='$names' rx=$rx/$want_rx tags='$tags' registers=$regs with peer_seq=$proofs udp_checksum_0=$ck0/$rx good=$ckgood/$((dec - rx))"
	[ "$ck0" = "$rx" ] && [ "$ckgood" = "$((dec - rx))" ] &&
		[ "$proofs" -gt 0 ] && [ "$proofs" -le "$regs" ] &&
		[ "$udp" -gt 0 ] && [ "$udp" = "$dec" ] && [ "$bad" = 0 ] &&
		[ "$types" = "1 2 3 4 7 " ] && [ "$names" = "enc-0 lang-0 " ] &&
		[ "$rx" = "$want_rx" ] && [ "$tags" = "16 " ] || return 1
	MSG="$dec/$udp control frames decoded (types $types), MAC length 16 on all, $rx received = the gateway's own count, all with UDP checksum 0; the $((dec - rx)) sent with udp_checksum \"always\" all verified good"
}

# ---- UDP checksums by the device: net_tap offers transmit offload --------
define checksum-offload "over net_tap, which offers IPv4 and UDP checksum offload, the gateway leaves its checksums to the device: its capture shows them as the wire carries them, all verified good"
case_checksum_offload() {
	local tap good all
	command -v tshark >/dev/null 2>&1 || { MSG="tshark missing"; return 1; }
	[ -c /dev/net/tun ] || { MSG="no /dev/net/tun: net_tap cannot create its interface"; return 1; }
	tap=egwck$$
	gen_configs "$T" 1024 16384 >/dev/null
	# one gateway on a tap interface of its own, its peer's MAC given,
	# so its REGISTERs leave without an ARP answer
	sed -i -E -e "s|^( *device = ).*|\1\"net_tap0,iface=$tap\";|" \
		-e 's|^( *)address = "192.168.77.1/24";|&\n\1neighbours = ( { address = "192.168.77.2"; mac = "02:00:00:00:00:02"; } );|' \
		"$T/encode.cfg"
	grep -q "net_tap0" "$T/encode.cfg" && grep -q neighbours "$T/encode.cfg" ||
		{ MSG="encode.cfg has no device or address line to change"; return 1; }
	run_gen enc 1 "$T/encode.cfg" "$T/enc.log" 30 --duration-ms 1500 \
		--capture "$T/cap.pcap" || { MSG="the gateway failed: $(tail -3 "$T/enc.log" | tr '\n' ' ')"; return 1; }
	grep -q "UDP checksums sent by the device" "$T/enc.log" ||
		{ MSG="the gateway did not use the device's offload: $(grep -i checksum "$T/enc.log")"; return 1; }
	ts() { tshark -X lua_script:tools/wireshark/embgw.lua -r "$T/cap.pcap" \
		-o udp.check_checksum:TRUE -o ip.check_checksum:TRUE "$@" 2>/dev/null; }
	all=$(ts -Y "embgw" | wc -l)
	good=$(ts -Y "embgw && udp.checksum != 0 && udp.checksum.status == 1 && ip.checksum.status == 1" | wc -l)
	MSG="captured $all control frames, $good with IPv4 and UDP checksums verified good"
	[ "$all" -gt 0 ] && [ "$good" = "$all" ] || return 1
	MSG="$all REGISTERs sent through the device's checksum offload, all $good with IPv4 and UDP checksums verified good in the capture"
}

# ---- embgw-gen: open loop with a flood, against an encode gateway ----------
define gen-flood "embgw-gen: 300 rooms open-loop at 1000/s with a 10k/s junk flood against an encode gateway: byte-exact, junk dropped"
case_gen_flood() {
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	encode_server start_gen "$T/enc.log" || return 1
	language_client run_gen "$T/gen.log" 90 --drive 300 --rate 1000 \
		--concurrency 128 --lengths 700,3000 --flood-pps 10000
	MSG="gen: $(report "$T/gen.log") enc: $(report "$T/enc.log")"
	expect "$T/gen.log" result errors -eq 0 && expect "$T/gen.log" result leaked -eq 0 &&
		expect "$T/gen.log" language ok -eq 300 &&
		[ -n "$(field "$T/gen.log" latency p999_ms)" ] &&
		expect "$T/gen.log" flood sent -gt 0 &&
		expect "$T/enc.log" node drop_proto -gt 0 &&
		expect "$T/enc.log" result-encode leaked -eq 0 || return 1
	MSG="300 rooms byte-exact, p99.9 $(field "$T/gen.log" latency p999_ms) ms, $(field "$T/gen.log" latency rooms_per_s) rooms/s; $(field "$T/gen.log" flood sent) junk sent, $(field "$T/enc.log" node drop_proto) dropped by the gateway as malformed"
}

# ---- embgw-gen into a pcap file (for tcpreplay, TRex, net_pcap) ------------
define gen-pcap "embgw-gen over net_pcap: every junk datagram it counts is in the pcap file a third-party generator replays"
case_gen_pcap() {
	local sent frames
	command -v tshark >/dev/null 2>&1 || { MSG="tshark missing"; return 1; }
	gen_configs --pcap "$T" 1024 16384 "$SLACK" >/dev/null
	LOG=$T/gen.log
	run_gen genp 0 "$T/language.cfg" "$T/gen.log" 30 --flood-pps 5000 --duration-ms 1000
	sent=$(field "$T/gen.log" flood sent)
	frames=$(tshark -r "$T/out.pcap" -Y "udp && ip.dst == 192.168.77.1" 2>/dev/null | wc -l)
	MSG="sent=$sent frames=$frames; gen: $(report "$T/gen.log")"
	[ "${sent:-0}" -gt 0 ] && [ "$frames" -ge "$sent" ] || return 1
	MSG="$frames frames to the peer in the pcap, $sent of them junk"
}

# ---- embgw-gen plays 8 language peers from one port ------------------------
define gen-identities "embgw-gen --identities 8: 8 language peers from one port (own addresses, own pools), 8 x 50 rooms byte-exact"
case_gen_identities() {
	local each=0
	# the gateway under test lists 8 peers; the generator answers ARP for
	# all 8 addresses and shares the rooms out
	gen_configs "$T" 1024 16384 "$SLACK" 1 8 >/dev/null
	encode_server start_gen "$T/enc.log" || return 1
	language_client run_gen "$T/gen.log" 90 --identities 8 --drive 400 \
		--concurrency 32 --lengths 300,2500
	# each identity fetched its 50 rooms from the gateway, so each registered
	for i in $(seq 0 7); do
		expect "$T/gen.log" result rooms -eq 50 "p0.$i" &&
			expect "$T/gen.log" result errors -eq 0 "p0.$i" &&
			expect "$T/gen.log" result leaked -eq 0 "p0.$i" &&
			expect "$T/gen.log" language ok -eq 50 "p0.$i" && each=$((each + 1))
	done
	MSG="identities byte-exact: $each of 8; gen: $(report "$T/gen.log") enc: $(report "$T/enc.log")"
	[ "$each" -eq 8 ] &&
		expect "$T/gen.log" result-total identities -eq 8 "" &&
		expect "$T/gen.log" result-total rooms -eq 400 "" &&
		expect "$T/gen.log" result-total errors -eq 0 "" &&
		expect "$T/gen.log" result-total leaked -eq 0 "" &&
		expect "$T/enc.log" result-encode ok -eq 400 &&
		expect "$T/enc.log" result-encode leaked -eq 0 || return 1
	MSG="8 identities x 50 rooms byte-exact, the gateway served 400, nothing leaked; $(field "$T/gen.log" latency-total rooms_per_s "") rooms/s"
}

# ---- embgw-gen as the encode side, against a language gateway --------------
define gen-encode "embgw-gen --produce as the encode peer: 60 rooms x 2 ranks served to a language gateway, byte-exact"
case_gen_encode() {
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	encode_server start_gen "$T/gen.log" || return 1
	language_client run_gen "$T/lang.log" 60 --exit-when-done \
		--drive 60 --concurrency 8 --lengths 1500,9000 --ranks 2
	MSG="lang: $(report "$T/lang.log") gen: $(report "$T/gen.log")"
	expect "$T/lang.log" result errors -eq 0 && expect "$T/lang.log" result leaked -eq 0 &&
		expect "$T/lang.log" language ok -eq 60 &&
		expect "$T/gen.log" result-encode ok -eq 60 &&
		expect "$T/gen.log" result-encode leaked -eq 0 || return 1
	MSG="60 rooms x 2 ranks byte-exact"
}

define gen-encode-segments "embgw-gen --produce on an encode port cut into 4 segments where engines attach: its rooms come from segment 0, kept for it (20 rooms x 2 ranks byte-exact), and an engine that attaches meanwhile is given segment 1"
case_gen_encode_segments() {
	local seg
	gen_configs --attach "$T" 1024 262144 "$SLACK" >/dev/null
	sed -i "s|^\(  payload = { driver = \"shm\"; path = \"[^\"]*\";\) };|\1 segments = 4; };|" "$T/encode.cfg"
	grep -q "segments = 4;" "$T/encode.cfg" || { MSG="no payload group in encode.cfg"; return 1; }
	encode_server start_gen "$T/gen.log" || return 1
	wait_socket "$T/enc-0.sock" || return 1
	seg=$(env "EMBGW_CLIENT_LIB=$EMBGW_BUILD/lib/client/libegw_client.so" \
		timeout -s KILL 30 /usr/bin/python3 -c "import sys; sys.path.insert(0, 'python'); import embgw; c = embgw.Client(sys.argv[1], 'p0'); print('segment', c.pool_segment, c.first_block); c.close()" \
		"$T/enc-0.sock" 2>&1 | tail -1)
	language_client run_gen "$T/lang.log" 60 --exit-when-done \
		--drive 20 --concurrency 4 --lengths 1500,9000 --ranks 2
	MSG="engine: $seg; lang: $(report "$T/lang.log") gen: $(report "$T/gen.log")"
	[ "$seg" = "segment True 512" ] &&
		expect "$T/lang.log" result errors -eq 0 && expect "$T/lang.log" result leaked -eq 0 &&
		expect "$T/lang.log" language ok -eq 20 &&
		expect "$T/gen.log" result-encode ok -eq 20 &&
		expect "$T/gen.log" result-encode leaked -eq 0 || return 1
	MSG="20 rooms x 2 ranks byte-exact from segment 0; an engine got $seg"
}

# ---- embgw-gen plays 4 encode peers; the language gateway uses all of them --
define gen-encode-identities "embgw-gen --produce --identities 4: a language gateway with --peer all fetches 80 rooms, 20 from each encode identity"
case_gen_encode_identities() {
	local per=0
	gen_configs --encode-identities 4 "$T" 1024 65536 "$SLACK" >/dev/null
	encode_server start_gen "$T/gen.log" --identities 4 || return 1
	language_client run_gen "$T/lang.log" 60 --exit-when-done --peer all \
		--drive 80 --concurrency 8 --lengths 700,5000
	for i in 0 1 2 3; do
		expect "$T/gen.log" result-encode rooms -eq 20 "p0.$i" &&
			expect "$T/gen.log" result-encode ok -eq 20 "p0.$i" &&
			expect "$T/gen.log" result-encode failed -eq 0 "p0.$i" &&
			expect "$T/gen.log" result-encode leaked -eq 0 "p0.$i" && per=$((per + 1))
	done
	MSG="identities with 20 rooms ok: $per of 4; lang: $(report "$T/lang.log") gen: $(report "$T/gen.log")"
	[ "$per" -eq 4 ] &&
		expect "$T/lang.log" result errors -eq 0 && expect "$T/lang.log" result leaked -eq 0 &&
		expect "$T/lang.log" result rooms -eq 80 || return 1
	MSG="80 rooms byte-exact, 20 from each of the 4 encode identities"
}

# ---- inference engines attached through the client interface ----------------
# Python engine processes (tests/integration/engine.py, the embgw package
# over lib/client) against a gateway pair with attach sockets and no
# built-in workload: every room's bytes come from and go to an engine.
ENGINE=(env "EMBGW_CLIENT_LIB=$EMBGW_BUILD/lib/client/libegw_client.so"
	timeout -s KILL 120 /usr/bin/python3 tests/integration/engine.py)
ENGINE_PIDS=()

# engine LOG ARGS...: an engine process in the background
engine() {
	local log=$1
	shift
	"${ENGINE[@]}" "$@" >"$log" 2>&1 &
	ENGINE_PIDS+=($!)
}

# engine_kill PID: SIGKILL an engine (the python under our timeout
# wrapper PID, then the wrapper): no goodbye at all
engine_kill() {
	local child
	child=$(pgrep -P "$1")
	[ -n "$child" ] && kill -KILL "$child"
	kill -KILL "$1" 2>/dev/null
}

# engines_wait: every engine started ended with status 0
engines_wait() {
	local bad=0
	for p in "${ENGINE_PIDS[@]}"; do
		wait "$p" || bad=$((bad + 1))
	done
	ENGINE_PIDS=()
	[ "$bad" -eq 0 ]
}

# engine_gateways [gen-configs options]: the pair, up, their attach
# sockets there; ENGINE_TIMERS, when set, are the pair's timers
engine_gateways() {
	# Python engines on two shared cores can stall a room's progress for
	# seconds: 20 s before a round gives up (the default is 5 s)
	gen_configs --attach "$@" "$T" 1024 262144 \
		"${ENGINE_TIMERS:-$SLACK round_ms = 20000;}" >/dev/null
	# ENGINE_LANG_TIMERS: the language gateway's own timers, when set
	[ -z "${ENGINE_LANG_TIMERS:-}" ] || {
		sed -i "s|^  timers = { .* };\$|  timers = { $ENGINE_LANG_TIMERS };|" "$T/language.cfg"
		grep -qF "timers = { $ENGINE_LANG_TIMERS };" "$T/language.cfg" || return 1
	}
	# ENGINE_LANG_MAX_ROOMS: the language gateway's room table, when set
	[ -z "${ENGINE_LANG_MAX_ROOMS:-}" ] || {
		sed -i "s/^  timers = {/  limits = { max_rooms = $ENGINE_LANG_MAX_ROOMS; };\n  timers = {/" "$T/language.cfg"
		grep -q "max_rooms = $ENGINE_LANG_MAX_ROOMS;" "$T/language.cfg" || return 1
	}
	# ENGINE_LANG_FANOUT: the language port's fanout_ranks, when set
	[ -z "${ENGINE_LANG_FANOUT:-}" ] || {
		sed -i "s/^    lcores = \[0\];\$/    lcores = [0]; fanout_ranks = $ENGINE_LANG_FANOUT;/" "$T/language.cfg"
		grep -q "fanout_ranks = $ENGINE_LANG_FANOUT;" "$T/language.cfg" || return 1
	}
	# ENGINE_LEASE: the clients' lease in ms, when not the default
	[ -z "${ENGINE_LEASE:-}" ] ||
		attach_lease "$ENGINE_LEASE" "$T/encode.cfg" "$T/language.cfg" || return 1
	# ENGINE_SEGMENTS: the encode port's pool cut per client, when set
	[ -z "${ENGINE_SEGMENTS:-}" ] || {
		sed -i "s|^\(  payload = { driver = \"shm\"; path = \"[^\"]*\";\) };|\1 segments = $ENGINE_SEGMENTS; };|" "$T/encode.cfg"
		grep -q "segments = $ENGINE_SEGMENTS;" "$T/encode.cfg" || return 1
	}
	start_gw enc 1 "$T/encode.cfg" "$T/enc.log"
	wait_ready enc || return 1
	start_gw lang 0 "$T/language.cfg" "$T/lang.log"
	wait_socket "$T/lang-0.sock" && wait_socket "$T/enc-0.sock"
}

# room ids: length in the low 32 bits, a run number above
room_ids() { # base lengths...
	local base=$1 out="" i=0
	shift
	for n in "$@"; do
		out+="${out:+,}$(( (base << 40) + (i << 32) + n ))"
		i=$((i + 1))
	done
	echo "$out"
}

define engines "Python engines: 1 encode process, 2 language ranks and an aux-only rank (own processes), lengths 1..50000 in bf16, language-first then encode-first: bit-identical, nothing leaked on either gateway"
case_engines() {
	local first second r
	engine_gateways || return 1
	LOG=$T/lang.log
	first=$(room_ids 1 1 127 128 129 500 2000 10000 50000)
	second=$(room_ids 2 129 3000 40000)
	# the language ranks ask first; the encoder's data comes later
	for r in 0 1; do
		engine "$T/rank$r.log" language "$T/lang-0.sock" --rooms "$first" --rank $r --nranks 3
	done
	engine "$T/rank2.log" language "$T/lang-0.sock" --rooms "$first" --rank 2 --nranks 3 --aux-only
	sleep 1
	engine "$T/encode.log" encode "$T/enc-0.sock" --rooms "$first" --nranks 3
	engines_wait || { MSG="language first: $(cat "$T"/rank*.log "$T/encode.log" | tr '\n' ' ')"; return 1; }
	# the encoder commits first; the ranks come a second later
	engine "$T/encode2.log" encode "$T/enc-0.sock" --rooms "$second" --nranks 2
	sleep 1
	for r in 0 1; do
		engine "$T/rank$r-2.log" language "$T/lang-0.sock" --rooms "$second" --rank $r --nranks 2
	done
	engines_wait || { MSG="encode first: $(cat "$T"/rank*-2.log "$T/encode2.log" | tr '\n' ' ')"; return 1; }
	stop_all
	MSG="enc: $(report "$T/enc.log") lang: $(report "$T/lang.log")"
	expect "$T/enc.log" clients ok -eq 11 && expect "$T/enc.log" clients blocks_in_use -eq 0 &&
		expect "$T/lang.log" clients ok -eq 30 && expect "$T/lang.log" clients failed -eq 0 &&
		expect "$T/lang.log" clients blocks_in_use -eq 0 &&
		expect "$T/lang.log" clients refused -eq 0 || return 1
	MSG="11 rooms from the encode engine to 2 ranks and an aux-only rank, bit-identical ($(sed -nE 's/.* bytes=([0-9]+).*/\1/p' "$T/rank0.log") bytes to rank 0); zero blocks in use on both gateways"
}

# CLIENT: a Python process of the embgw package other than an engine
CLIENT=(env "EMBGW_CLIENT_LIB=$EMBGW_BUILD/lib/client/libegw_client.so"
	timeout -s KILL 150 /usr/bin/python3)

define client-gateway-restart "an engine's loop asleep in select() on Client.fileno(): the language gateway stopped (SIGTERM, then SIGKILL after a restart) wakes it, arm() and wait() raise ConnectionResetError within 10 s and the room ends Failed with the reason; Client.reconnect() attaches to the gateway started again and a NOP and a room go through"
case_client_gateway_restart() {
	local sig gw n=0
	gen_configs --attach "$T" 1024 262144 "$SLACK bootstrap_ms = 60000;" >/dev/null
	for sig in TERM KILL; do
		n=$((n + 1))
		start_gw lang 0 "$T/language.cfg" "$T/lang$n.log"
		gw=${PIDS[-1]}
		LOG=$T/lang$n.log
		wait_socket "$T/lang-0.sock" || { MSG="no attach socket"; return 1; }
		"${CLIENT[@]}" tests/integration/client_gateway.py "$T/lang-0.sock" p0 \
			"$T/stopped$n" >"$T/client$n.log" 2>&1 &
		ENGINE_PIDS+=($!)
		LOG=$T/client$n.log
		wait_line "$T/client$n.log" client-attached 30 ||
			{ MSG="the client did not attach: $(tr '\n' ' ' <"$T/client$n.log")"; return 1; }
		date +%s.%N >"$T/stopped$n"
		end_gw "$sig" "$gw"
		wait_line "$T/client$n.log" client-reset 30 ||
			{ MSG="no reset after SIG$sig: $(tr '\n' ' ' <"$T/client$n.log")"; return 1; }
		# the gateway again, at the same socket
		start_gw lang 0 "$T/language.cfg" "$T/lang$n-again.log"
		engines_wait ||
			{ MSG="SIG$sig: $(tr '\n' ' ' <"$T/client$n.log")"; return 1; }
		stop_all
	done
	grep -q "^client-reattached: .* ok=1" "$T/client1.log" &&
		grep -q "^client-reattached: .* ok=1" "$T/client2.log" ||
		{ MSG="$(cat "$T"/client*.log | tr '\n' ' ')"; return 1; }
	MSG="SIGTERM: $(sed -n 's/^client-reset: \(after_stop_s=[0-9.]*\).*/\1/p' "$T/client1.log"), $(sed -n 's/^client-reattached: \(after_s=[0-9.]*\).*/reattached \1/p' "$T/client1.log"); SIGKILL: $(sed -n 's/^client-reset: \(after_stop_s=[0-9.]*\).*/\1/p' "$T/client2.log"), $(sed -n 's/^client-reattached: \(after_s=[0-9.]*\).*/reattached \1/p' "$T/client2.log"); the old rooms Failed: $(sed -n 's/^client-reset: .*reason=//p' "$T/client1.log")"
}

define engines-content "Content keys: rooms keyed by their data land once; later requests of the same content on both ranks are looked up as landed and served from the language gateway's cache without a transfer, bit-identical; two requests of one content in flight share one transfer; attempt 1 of a room id goes through both gateways; nothing leaked"
case_engines_content() {
	local a b c1 c2 d r
	engine_gateways || return 1
	LOG=$T/lang.log
	a=$(room_ids 1 2000 10000)
	for r in 0 1; do
		engine "$T/rank$r.log" language "$T/lang-0.sock" --rooms "$a" --rank $r --nranks 2 --keyed
	done
	engine "$T/encode.log" encode "$T/enc-0.sock" --rooms "$a" --nranks 2
	engines_wait || { MSG="first transfer: $(cat "$T"/rank?.log "$T/encode.log" | tr '\n' ' ')"; return 1; }
	# the same content under new request ids, and no encoder at all
	b=$(room_ids 2 2000 10000)
	for r in 0 1; do
		engine "$T/rank$r-b.log" language "$T/lang-0.sock" --rooms "$b" --same-as "$a" --rank $r --nranks 2 --lookup --expect-cached 2
	done
	engines_wait || { MSG="from the cache: $(cat "$T"/rank?-b.log | tr '\n' ' ')"; return 1; }
	# two requests of one content open before its data is sent
	c1=$(room_ids 3 3000)
	c2=$(room_ids 4 3000)
	engine "$T/rank0-c.log" language "$T/lang-0.sock" --rooms "$c1,$c2" --same-as "$c1,$c1" --rank 0 --nranks 1 --expect-cached 1
	sleep 1
	engine "$T/encode-c.log" encode "$T/enc-0.sock" --rooms "$c1" --nranks 1
	engines_wait || { MSG="shared in flight: $(cat "$T/rank0-c.log" "$T/encode-c.log" | tr '\n' ' ')"; return 1; }
	# a retry's room id, the same on both gateways
	d=$(room_ids 5 500)
	engine "$T/rank0-d.log" language "$T/lang-0.sock" --rooms "$d" --rank 0 --nranks 1 --attempt 1
	engine "$T/encode-d.log" encode "$T/enc-0.sock" --rooms "$d" --nranks 1 --attempt 1
	engines_wait || { MSG="attempt 1: $(cat "$T/rank0-d.log" "$T/encode-d.log" | tr '\n' ' ')"; return 1; }
	stop_all
	MSG="enc: $(report "$T/enc.log") lang: $(report "$T/lang.log")"
	expect "$T/enc.log" clients ok -eq 4 && expect "$T/enc.log" clients blocks_in_use -eq 0 &&
		expect "$T/lang.log" clients ok -eq 11 && expect "$T/lang.log" clients failed -eq 0 &&
		expect "$T/lang.log" clients cache_hits -eq 4 &&
		expect "$T/lang.log" clients cache_shared -eq 1 &&
		expect "$T/lang.log" clients cache_misses -eq 3 &&
		expect "$T/lang.log" clients blocks_in_use -eq 0 || return 1
	MSG="2 rooms transferred once to 2 ranks, then served 4 times from the cache and 1 time by a shared transfer, bit-identical; attempt 1 served; zero blocks in use on both gateways"
}

define engines-fanout "Fan-out: 2 language ranks of 2 on one gateway receive each room once (fanout_ranks 8, the default): bit-identical on both ranks, the encode gateway writes one copy and both count the rooms as a group's; with fanout_ranks = 1 the same rooms cost two copies; nothing leaked"
case_engines_fanout() {
	local rooms r f one two
	rooms=$(room_ids 1 127 2000 10000 50000)
	for f in 8 1; do
		ENGINE_LANG_FANOUT=$f engine_gateways || return 1
		LOG=$T/lang.log
		for r in 0 1; do
			engine "$T/rank$r-$f.log" language "$T/lang-0.sock" --rooms "$rooms" --rank $r --nranks 2
		done
		engine "$T/encode-$f.log" encode "$T/enc-0.sock" --rooms "$rooms" --nranks 2
		engines_wait || { MSG="fanout_ranks $f: $(cat "$T"/rank?-$f.log "$T/encode-$f.log" | tr '\n' ' ')"; return 1; }
		stop_all
		mv "$T/enc.log" "$T/enc-$f.log"
		mv "$T/lang.log" "$T/lang-$f.log"
		MSG="fanout_ranks $f: enc: $(report "$T/enc-$f.log") lang: $(report "$T/lang-$f.log")"
		expect "$T/enc-$f.log" clients ok -eq 4 && expect "$T/enc-$f.log" clients blocks_in_use -eq 0 &&
			expect "$T/lang-$f.log" clients ok -eq 8 && expect "$T/lang-$f.log" clients failed -eq 0 &&
			expect "$T/lang-$f.log" clients blocks_in_use -eq 0 || return 1
	done
	one=$(field "$T/enc-8.log" fanout bytes)
	two=$(field "$T/enc-1.log" fanout bytes)
	MSG="enc bytes: grouped $one, per rank $two; enc-8: $(report "$T/enc-8.log")"
	expect "$T/enc-8.log" fanout group_rooms -eq 4 && expect "$T/lang-8.log" fanout group_rooms -eq 4 &&
		expect "$T/enc-8.log" fanout bytes_saved -eq "$one" &&
		expect "$T/enc-1.log" fanout group_rooms -eq 0 && expect "$T/enc-1.log" fanout lone_rooms -eq 4 &&
		[ -n "$one" ] && [ "$one" -gt 0 ] && [ "$two" -eq $((2 * one)) ] || return 1
	MSG="4 rooms to 2 ranks on one language gateway, bit-identical: $one payload bytes written with fanout_ranks 8 (one copy, the group's), $two with fanout_ranks 1 (a copy per rank)"
}

define engine-killed "SIGKILL of a language rank, then of the encode engine, while their rooms are open: the survivors see Failed with the reason, every block comes back on both gateways"
case_engine_killed() {
	local rooms victim
	engine_gateways || return 1
	LOG=$T/lang.log
	rooms=$(room_ids 3 50000 20000 50000 20000)
	# both ranks open; the encoder opens and holds its data 4 s; rank 1
	# dies in between: the rooms fail for the encoder and for rank 0
	engine "$T/rank0.log" language "$T/lang-0.sock" --rooms "$rooms" --rank 0 --nranks 2
	engine "$T/rank1.log" language "$T/lang-0.sock" --rooms "$rooms" --rank 1 --nranks 2 --hold-s 30
	victim=${ENGINE_PIDS[-1]}
	engine "$T/encode.log" encode "$T/enc-0.sock" --rooms "$rooms" --nranks 2 --hold-s 4
	wait_line "$T/rank1.log" engine-opened 30 && wait_line "$T/encode.log" engine-opened 30 ||
		{ MSG="the engines did not open their rooms"; return 1; }
	engine_kill "$victim"
	engines_wait && { MSG="the survivors did not see their rooms fail"; return 1; }
	grep -q "engine-encode: rooms=4 ok=0 failed=4" "$T/encode.log" &&
		grep -q "engine-language: rank=0 rooms=4 ok=0 bad=0 failed=4" "$T/rank0.log" ||
		{ MSG="$(cat "$T/encode.log" "$T/rank0.log" | tr '\n' ' ')"; return 1; }
	# the encoder dies holding open rooms: the rank fails them
	rooms=$(room_ids 4 50000 20000)
	engine "$T/rank0-2.log" language "$T/lang-0.sock" --rooms "$rooms" --rank 0 --nranks 1
	engine "$T/encode-2.log" encode "$T/enc-0.sock" --rooms "$rooms" --nranks 1 --hold-s 30
	victim=${ENGINE_PIDS[-1]}
	wait_line "$T/encode-2.log" engine-opened 30 && wait_line "$T/rank0-2.log" engine-opened 30 ||
		{ MSG="the engines did not open their rooms"; return 1; }
	engine_kill "$victim"
	engines_wait && { MSG="rank 0 did not see its rooms fail"; return 1; }
	grep -q "engine-language: rank=0 rooms=2 ok=0 bad=0 failed=2" "$T/rank0-2.log" ||
		{ MSG="$(tr '\n' ' ' <"$T/rank0-2.log")"; return 1; }
	stop_all
	MSG="enc: $(report "$T/enc.log") lang: $(report "$T/lang.log")"
	expect "$T/enc.log" clients blocks_in_use -eq 0 &&
		expect "$T/lang.log" clients blocks_in_use -eq 0 &&
		expect "$T/enc.log" clients ok -eq 0 && expect "$T/lang.log" clients ok -eq 0 &&
		expect "$T/enc.log" clients attached -eq 0 &&
		expect "$T/lang.log" clients attached -eq 0 || return 1
	MSG="a killed rank: its peer rank and the encoder saw Failed ($(grep -m1 -oE 'Failed.*' "$T/rank0.log")); a killed encoder: the rank saw Failed ($(grep -m1 -oE 'Failed.*' "$T/rank0-2.log")); zero blocks in use on both gateways"
}

# connectors.py: the engine adapters (python/embgw/vllm.py, sglang.py)
# driven as vLLM's and SGLang's schedulers drive them
CONNECTORS=(env "EMBGW_CLIENT_LIB=$EMBGW_BUILD/lib/client/libegw_client.so"
	timeout -s KILL 300 /usr/bin/python3 tests/integration/connectors.py)

# connector LOG ARGS...: a connectors.py process in the background
connector() {
	local log=$1
	shift
	"${CONNECTORS[@]}" "$@" >"$log" 2>&1 &
	ENGINE_PIDS+=($!)
}

# connector_case ENGINE LANG-ARGS -- ENCODER-ARGS...: the pair, the
# language side and its encoders; all exit 0 and nothing is leaked. The
# encode gateway's bootstrap deadline is short: an abort's unmatched
# retry ends in seconds, and a sender's attempt whose language rooms were
# aborted before it opened fails in seconds. The language gateway's is
# longer: its rooms of the next attempt, opened before the sender's
# attempt failed, must still be there when the sender comes back
connector_case() {
	local engine=$1 n=0
	shift
	ENGINE_TIMERS="$SLACK round_ms = 20000; bootstrap_ms = 8000;" \
		ENGINE_LANG_TIMERS="$SLACK round_ms = 20000; bootstrap_ms = 40000;" \
		engine_gateways || return 1
	LOG=$T/lang.log
	connector "$T/$engine-lang.log" "$engine-lang" "$T/lang-0.sock" --dir "$T"
	for args in "$@"; do
		# shellcheck disable=SC2086 # each is a word list
		connector "$T/$engine-enc$n.log" "$engine-enc" "$T/enc-0.sock" --dir "$T" $args
		n=$((n + 1))
	done
	engines_wait || {
		MSG="$(grep -h "^$engine-\|Error\|error" "$T/$engine"-*.log | tr '\n' ' ')"
		return 1
	}
	stop_all
	MSG="enc: $(report "$T/enc.log") lang: $(report "$T/lang.log")"
	expect "$T/enc.log" clients blocks_in_use -eq 0 &&
		expect "$T/lang.log" clients blocks_in_use -eq 0 || return 1
	MSG="$(grep -h "^$engine-" "$T/$engine"-*.log | tr '\n' ' ')"
}

define vllm-connector "embgw.vllm as vLLM drives an EC connector (a scheduler, 2 TP workers, a producer): 1..50,000 tokens bit-identical in every rank's encoder cache, one room for an image twice in flight, an abort, a one-rank failure retried with attempt 1 by both sides, a re-queue and a repeat (from the gateway's content cache where the client has one, else recomputed), a rank SIGKILLed: the survivor and the producer see Failed with the reason; nothing leaked"
case_vllm_connector() {
	connector_case vllm ""
}

define sglang-connector "embgw.sglang as SGLang's queues drive a KV receiver (2 TP ranks, polls reduced with MIN): 1..50,000 tokens bit-identical in the rows named by send_metadata, a 3-part request from 2 encoders, an abort, a one-rank failure retried with attempt 1 by both sides, a repeat from the content cache where the client has one, a rank SIGKILLed: the survivor and the encoder see Failed with the reason; nothing leaked"
case_sglang_connector() {
	connector_case sglang "--part-of 0" "--part-of 1"
}

define attach-trust "the attach boundary: a refused uid's flood of silent connections while 12 engines attach (all do); a language engine's pool is read-only (r--s, a write faults); an engine that stops past its lease with a landed room finds its own bytes (the gateway held the blocks while other rooms filled the pool), then release(), poll() and views() raise and its views hold zeros; the held blocks come back"
case_attach_trust() {
	local TRUST=(env "EMBGW_CLIENT_LIB=$EMBGW_BUILD/lib/client/libegw_client.so"
		timeout -s KILL 120 /usr/bin/python3 tests/integration/trust.py)
	local held others
	ENGINE_LEASE=1000 engine_gateways || return 1
	LOG=$T/lang.log
	# a socket anyone may reach and connect to: credentials alone decide
	chmod 0711 "$T" && chmod 0666 "$T/lang-0.sock"
	"${TRUST[@]}" flood "$T/lang-0.sock" --seconds 5 --engines 12 >"$T/flood.log" 2>&1 ||
		{ MSG="$(tr '\n' ' ' <"$T/flood.log")"; return 1; }
	"${TRUST[@]}" readonly "$T/lang-0.sock" >"$T/ro.log" 2>&1 ||
		{ MSG="$(tr '\n' ' ' <"$T/ro.log")"; return 1; }
	# the held room, then 5 rooms of 50,000 for another engine: together
	# more than the pool, so freed blocks would be taken at once
	held=$(room_ids 7 50000)
	others=$(room_ids 8 50000 50000 50000 50000 50000)
	"${TRUST[@]}" lost "$T/lang-0.sock" --room "$held" --hold-s 4 >"$T/lost.log" 2>&1 &
	ENGINE_PIDS+=($!)
	engine "$T/encode.log" encode "$T/enc-0.sock" --rooms "$held" --nranks 1
	wait_line "$T/lost.log" trust-lost 60 || { MSG="$(tr '\n' ' ' <"$T/lost.log")"; return 1; }
	engine "$T/rank0.log" language "$T/lang-0.sock" --rooms "$others" --rank 0 --nranks 1
	engine "$T/encode2.log" encode "$T/enc-0.sock" --rooms "$others" --nranks 1
	engines_wait || { MSG="$(cat "$T/lost.log" "$T/rank0.log" "$T/encode2.log" | tr '\n' ' ')"; return 1; }
	stop_all
	MSG="lang: $(report "$T/lang.log")"
	expect "$T/lang.log" clients lost -eq 1 &&
		expect "$T/lang.log" clients blocks_in_use -eq 0 &&
		grep -q "block(s) of its rooms held until it closes its socket" "$T/lang.log" &&
		grep -q "engine-language: rank=0 rooms=5 ok=5 bad=0 failed=0" "$T/rank0.log" || return 1
	MSG="$(grep -h '^trust-' "$T/flood.log" "$T/ro.log" "$T/lost.log" | tr '\n' ' ')$(grep -o 'attach: refused=.*' "$T/lang.log")"
}

define attach-segments "an encode port cut into 4 segments (payload.segments): two engines each map their own segment only, one writes 0x41 over all it maps between the other's scatter and commit and the other's rooms arrive byte-exact; with every segment taken one more engine is refused (EBUSY) until one detaches (SEGMENTS=0: the same writes land in the other's rooms and the case fails)"
case_attach_segments() {
	local TRUST=(env "EMBGW_CLIENT_LIB=$EMBGW_BUILD/lib/client/libegw_client.so"
		timeout -s KILL 120 /usr/bin/python3 tests/integration/trust.py)
	local segs=${SEGMENTS:-4} rooms
	ENGINE_SEGMENTS=$segs engine_gateways || return 1
	LOG=$T/enc.log
	rooms=$(room_ids 9 1000 50000)
	engine "$T/rank0.log" language "$T/lang-0.sock" --rooms "$rooms" --rank 0 --nranks 1
	"${TRUST[@]}" segments "$T/enc-0.sock" --rooms "$rooms" --segments "$segs" >"$T/seg.log" 2>&1 ||
		{ MSG="$(tr '\n' ' ' <"$T/seg.log")"; engines_wait; return 1; }
	engines_wait || { MSG="$(cat "$T/seg.log" "$T/rank0.log" | tr '\n' ' ')"; return 1; }
	stop_all
	MSG="$(tr '\n' ' ' <"$T/rank0.log")"
	grep -q "engine-language: rank=0 rooms=2 ok=2 bad=0 failed=0" "$T/rank0.log" &&
		grep -q "no segment of port p0 is free" "$T/enc.log" &&
		grep -q "has segment 1 of 4 of port p0 (blocks 512..1023)" "$T/enc.log" || return 1
	MSG="$(grep -h '^trust-' "$T/seg.log")"
}

define attach-tenants "a tenant's attach socket of its own for port p0, allowing uid 65534: that uid attaches there and is refused (EACCES) on the attach group's socket, which serves no p0 (ENOENT) to the gateway's own uid"
case_attach_tenants() {
	local TRUST=(env "EMBGW_CLIENT_LIB=$EMBGW_BUILD/lib/client/libegw_client.so"
		timeout -s KILL 60 /usr/bin/python3 tests/integration/trust.py)
	gen_configs --attach "$T" 1024 262144 "$SLACK" >/dev/null
	sed -i "s|^\(  attach = { path = \"[^\"]*\";\) };|\1 tenants = ( { path = \"$T/tenant.sock\"; mode = \"0666\"; allow_uids = [65534]; ports = [\"p0\"]; } ); };|" "$T/language.cfg"
	grep -q "tenant.sock" "$T/language.cfg" || { MSG="no attach group in language.cfg"; return 1; }
	chmod 0711 "$T"
	start_gw lang 0 "$T/language.cfg" "$T/lang.log"
	LOG=$T/lang.log
	wait_socket "$T/tenant.sock" && wait_socket "$T/lang-0.sock" || return 1
	chmod 0666 "$T/lang-0.sock"
	"${TRUST[@]}" tenants "$T/lang-0.sock" "$T/tenant.sock" >"$T/tenants.log" 2>&1 ||
		{ MSG="$(tr '\n' ' ' <"$T/tenants.log")"; return 1; }
	stop_all
	MSG="$(grep -h '^trust-' "$T/tenants.log")"
}

define engines-dtypes "Python engines in fp16 and in fp32 (a gateway pair each): lengths 1, 127, 128, 129, 50000 bit-identical, nothing leaked"
case_engines_dtypes() {
	local base=$T d rooms
	rooms=$(room_ids 5 1 127 128 129 50000)
	for d in fp16 fp32; do
		T=$base/$d
		engine_gateways --dtype "$d" || { T=$base; return 1; }
		LOG=$T/lang.log
		engine "$T/rank0.log" language "$T/lang-0.sock" --rooms "$rooms" --rank 0 --nranks 1
		engine "$T/encode.log" encode "$T/enc-0.sock" --rooms "$rooms" --nranks 1
		engines_wait || { MSG="$d: $(cat "$T/rank0.log" "$T/encode.log" | tr '\n' ' ')"; T=$base; return 1; }
		stop_all
		MSG="$d: enc: $(report "$T/enc.log") lang: $(report "$T/lang.log")"
		expect "$T/enc.log" clients ok -eq 5 && expect "$T/enc.log" clients blocks_in_use -eq 0 &&
			expect "$T/lang.log" clients ok -eq 5 && expect "$T/lang.log" clients failed -eq 0 &&
			expect "$T/lang.log" clients blocks_in_use -eq 0 &&
			grep -q "engine-language: rank=0 rooms=5 ok=5 bad=0 failed=0" "$T/rank0.log" ||
			{ T=$base; return 1; }
	done
	T=$base
	MSG="5 rooms each in fp16 ($(sed -nE 's/.* bytes=([0-9]+).*/\1/p' "$T/fp16/rank0.log") bytes) and fp32 ($(sed -nE 's/.* bytes=([0-9]+).*/\1/p' "$T/fp32/rank0.log") bytes), bit-identical; zero blocks in use on both gateways"
}

define engines-concurrent "100 rooms open at once: 4 language processes opening their 25 each at once, then 4 encode processes x 25 rooms: byte-exact, nothing leaked, the clients counters agree"
case_engines_concurrent() {
	local p rooms side
	# 8 Python processes and 2 busy-polling gateways on this host's cores:
	# a process starting (torch) takes the CPU for seconds, the language
	# rooms wait, open, until the encoders start, and 100 rooms' resume
	# rounds share what CPU is left: the gateways give each other, the
	# rooms' bootstrap and their rounds more time than by default
	ENGINE_TIMERS="peer_dead_ms = 20000; bootstrap_ms = 60000; round_ms = 30000;" engine_gateways || return 1
	LOG=$T/lang.log
	for p in 0 1 2 3; do
		# 25 rooms: 1 to 3000 tokens, 116,600 of the encoder's 262,144 in all
		# shellcheck disable=SC2046 # 25 lengths, one word each
		rooms=$(room_ids $((10 + p)) $(for _ in 1 2 3 4 5; do echo 1 700 2000 3000 129; done))
		engine "$T/rank-$p.log" language "$T/lang-0.sock" --rooms "$rooms" --rank 0 --nranks 1 --go "$T/open"
		engine "$T/encode-$p.log" encode "$T/enc-0.sock" --rooms "$rooms" --nranks 1 --go "$T/write"
		sleep 1 # one pair of processes starting at a time
	done
	# all 8 attached; the ranks open their 25 rooms each at once; once the
	# language gateway holds all 100, the encoders open theirs and write
	if wait_counter enc /embgw/clients p0 attached 4 60 &&
		wait_counter lang /embgw/clients p0 attached 4 60 && touch "$T/open" &&
		wait_counter lang /embgw/clients p0 rooms_held 100 60; then
		touch "$T/write"
	else
		touch "$T/open" "$T/write"
		engines_wait
		MSG="attached or rooms held short: $(tel_value "$TEL" /embgw/clients p0 attached) attached, $(tel_value "$TEL" /embgw/clients p0 rooms_held) rooms held"
		return 1
	fi
	engines_wait || { MSG="$(cat "$T"/rank-*.log "$T"/encode-*.log | tr '\n' ' ')"; return 1; }
	stop_all
	MSG="enc: $(report "$T/enc.log") lang: $(report "$T/lang.log")"
	[ "$(cat "$T"/rank-*.log | grep -c "engine-language: rank=0 rooms=25 ok=25 bad=0 failed=0")" = 4 ] &&
		[ "$(cat "$T"/encode-*.log | grep -c "engine-encode: rooms=25 ok=25 failed=0")" = 4 ] ||
		return 1
	# each room is two commands on each side (open and commit, open and
	# release; each rank ends with a NOP, after which it leaves), none
	# refused, none lost, and every room ended ok
	expect "$T/enc.log" clients commands -eq 200 &&
		expect "$T/lang.log" clients commands -eq 204 || return 1
	for side in enc lang; do
		expect "$T/$side.log" clients rooms -eq 100 && expect "$T/$side.log" clients ok -eq 100 &&
			expect "$T/$side.log" clients failed -eq 0 &&
			expect "$T/$side.log" clients refused -eq 0 &&
			expect "$T/$side.log" clients cq_overflow -eq 0 &&
			expect "$T/$side.log" clients attached -eq 0 &&
			expect "$T/$side.log" clients blocks_in_use -eq 0 || return 1
	done
	MSG="100 rooms held at once by the language gateway, from 8 processes, byte-exact; 200 commands (and 4 NOPs), 100 ok, 0 refused on each; zero blocks in use on both"
}

define engines-room-table "100 engines' rooms opened at once into a language room table of 16: the 84 beyond it wait for a slot (Bootstrapping) instead of failing NO_SLOT, and all 100 complete byte-exact"
case_engines_room_table() {
	local p rooms
	# as engines-concurrent; admit_ms long enough for 100 rooms to pass
	# through 16 slots on two shared cores
	ENGINE_LANG_MAX_ROOMS=16 ENGINE_TIMERS="peer_dead_ms = 20000; bootstrap_ms = 60000; round_ms = 30000; admit_ms = 120000;" \
		engine_gateways || return 1
	LOG=$T/lang.log
	for p in 0 1 2 3; do
		# shellcheck disable=SC2046 # 25 lengths, one word each
		rooms=$(room_ids $((30 + p)) $(for _ in 1 2 3 4 5; do echo 1 700 2000 3000 129; done))
		engine "$T/rank-$p.log" language "$T/lang-0.sock" --rooms "$rooms" --rank 0 --nranks 1 --go "$T/open"
		engine "$T/encode-$p.log" encode "$T/enc-0.sock" --rooms "$rooms" --nranks 1 --go "$T/write"
		sleep 1
	done
	# all 100 opened (16 in the table, 84 waiting) before any data moves
	if wait_counter enc /embgw/clients p0 attached 4 60 &&
		wait_counter lang /embgw/clients p0 attached 4 60 && touch "$T/open" &&
		wait_counter lang /embgw/clients p0 rooms_held 100 60; then
		touch "$T/write"
	else
		touch "$T/open" "$T/write"
		engines_wait
		MSG="attached or rooms held short: $(tel_value "$TEL" /embgw/clients p0 rooms_held) rooms held"
		return 1
	fi
	engines_wait || { MSG="$(cat "$T"/rank-*.log "$T"/encode-*.log | tr '\n' ' ')"; return 1; }
	stop_all
	MSG="enc: $(report "$T/enc.log") lang: $(report "$T/lang.log")"
	[ "$(cat "$T"/rank-*.log | grep -c "engine-language: rank=0 rooms=25 ok=25 bad=0 failed=0")" = 4 ] &&
		[ "$(cat "$T"/encode-*.log | grep -c "engine-encode: rooms=25 ok=25 failed=0")" = 4 ] || return 1
	expect "$T/lang.log" clients ok -eq 100 && expect "$T/lang.log" clients failed -eq 0 &&
		expect "$T/lang.log" clients slot_waits -eq 84 &&
		expect "$T/lang.log" clients blocks_in_use -eq 0 &&
		grep -q "the language room table is full: rooms wait for a slot" "$T/lang.log" || return 1
	MSG="100 engines' rooms into a table of 16: 84 waited for a slot, 100 byte-exact, none failed, zero blocks in use"
}

define engines-telemetry "/embgw/clients through dpdk-telemetry.py: the engines' rooms and the refused commands by reason, as the exit report counts them"
case_engines_telemetry() {
	local rooms tel enc k v
	engine_gateways || return 1
	LOG=$T/lang.log
	rooms=$(room_ids 20 500 2000 10000)
	# the rank also opens a room it already holds: refused by state (a field
	# out of range never leaves lib/client, which checks it first)
	engine "$T/rank0.log" language "$T/lang-0.sock" --rooms "$rooms" --rank 0 --nranks 1 --misuse
	engine "$T/encode.log" encode "$T/enc-0.sock" --rooms "$rooms" --nranks 1
	engines_wait || { MSG="$(cat "$T/rank0.log" "$T/encode.log" | tr '\n' ' ')"; return 1; }
	# the engines have detached: the counters are final
	wait_counter lang /embgw/clients p0 rooms_ok 3 10
	tel=$TEL
	enc=$(telemetry enc /embgw/clients)
	stop_all
	MSG="lang: ${tel:0:400} enc: ${enc:0:300}; lang: $(report "$T/lang.log")"
	grep -q "engine-language: .* refused=1" "$T/rank0.log" &&
		[ "$(tel_value "$tel" /embgw/clients p0 refused)" = 1 ] &&
		[ "$(tel_value "$tel" /embgw/clients p0 refused_invalid)" = 0 ] &&
		[ "$(tel_value "$tel" /embgw/clients p0 refused_state)" = 1 ] &&
		[ "$(tel_value "$tel" /embgw/clients p0 attached)" = 0 ] &&
		[ "$(tel_value "$tel" /embgw/clients p0 rooms_held)" = 0 ] &&
		[ "$(tel_value "$enc" /embgw/clients p0 rooms_ok)" = 3 ] || return 1
	# what telemetry said is what the gateways report at exit
	for k in rooms_ok:ok rooms_failed:failed commands:commands refused:refused \
		cq_overflow:cq_overflow alloc_waits:alloc_waits busy:busy slot_waits:slot_waits \
		rooms_opened:rooms; do
		v=$(tel_value "$tel" /embgw/clients p0 "${k%%:*}")
		expect "$T/lang.log" clients "${k#*:}" -eq "${v:-x}" ||
			{ MSG="lang ${k%%:*}=$v, the exit report differs; $MSG"; return 1; }
		v=$(tel_value "$enc" /embgw/clients p0 "${k%%:*}")
		expect "$T/enc.log" clients "${k#*:}" -eq "${v:-x}" ||
			{ MSG="enc ${k%%:*}=$v, the exit report differs; $MSG"; return 1; }
	done
	MSG="the language gateway answered 3 rooms ok, $(tel_value "$tel" /embgw/clients p0 commands) commands, 1 refused (by state: a room opened twice); the encode gateway 3 rooms ok; both as their exit reports"
}

# ---- the example engines ------------------------------------------------------
# examples/encode_worker.py (a small vision encoder) and two ranks of
# examples/language_worker.py (a tensor-parallel prefill, gloo between the
# rank processes), through embgw.connector.
EXAMPLE=(env "EMBGW_CLIENT_LIB=$EMBGW_BUILD/lib/client/libegw_client.so"
	timeout -s KILL 300 /usr/bin/python3)

# example LOG SCRIPT ARGS...: an example worker in the background (its PID
# joins the engines', for engines_wait)
example() {
	local log=$1
	shift
	"${EXAMPLE[@]}" "$@" >"$log" 2>&1 &
	ENGINE_PIDS+=($!)
}

define examples "the example engines: a vision encoder and 2 TP prefill ranks (own processes) through the attach sockets, lengths 1..50000 in bf16: bit-identical to the recomputed encoder output, prefilled on both ranks, 3 resume rounds in the gateway (one receive serves both ranks), nothing leaked"
case_examples() {
	local lengths=1,129,500,2000,10000,50000 r tokens=62630
	# the ranks ask for every request before the encoder has run it
	local SLACK="$SLACK bootstrap_ms = 60000;" ENGINE_LEASE=60000
	engine_gateways || return 1
	LOG=$T/lang.log
	# a rank asks once the gateways know each other; an engine busy in a
	# forward pass on a loaded host keeps its lease (60 s, not 10 s)
	wait_registered "$T/enc.log" 30 && wait_registered "$T/lang.log" 30 || return 1
	for r in 0 1; do
		example "$T/rank$r.log" examples/language_worker.py "$T/lang-0.sock" \
			--rank $r --nranks 2 --dist "$T/tp" --lengths $lengths \
			--concurrency 6 --recompute
	done
	sleep 1
	example "$T/encode.log" examples/encode_worker.py "$T/enc-0.sock" \
		--nranks 2 --lengths $lengths --concurrency 6
	engines_wait || { MSG="$(cat "$T/encode.log" "$T"/rank*.log | tr '\n' ' ')"; return 1; }
	stop_all
	MSG="$(cat "$T/encode.log" "$T"/rank*.log | grep -E '^(encode|language)-worker' | tr '\n' ' ') enc: $(report "$T/enc.log") lang: $(report "$T/lang.log")"
	grep -q "^encode-worker: rooms=6 ok=6 failed=0 tokens=$tokens " "$T/encode.log" &&
		grep -q "^language-worker: rank=0 rooms=6 ok=6 bad=0 failed=0 bytes=[0-9]* prefill_tokens=$tokens " "$T/rank0.log" &&
		grep -q "^language-worker: rank=1 rooms=6 ok=6 bad=0 failed=0 bytes=[0-9]* prefill_tokens=$tokens " "$T/rank1.log" &&
		[ "$(grep -c "prefilled on 2 ranks" "$T/rank0.log")" -eq 6 ] &&
		expect "$T/enc.log" clients ok -eq 6 && expect "$T/enc.log" clients blocks_in_use -eq 0 &&
		expect "$T/lang.log" clients ok -eq 12 && expect "$T/lang.log" clients failed -eq 0 &&
		expect "$T/lang.log" clients rounds -eq 3 &&
		expect "$T/lang.log" fanout group_rooms -eq 6 &&
		expect "$T/lang.log" clients blocks_in_use -eq 0 || return 1
	MSG="6 requests ($tokens tokens) encoded, sent to 2 TP ranks, bit-identical to the recomputed encoder output, prefilled; $(field "$T/lang.log" clients rounds) resume rounds, all in the gateway; zero blocks in use on both gateways"
}

# ---- the shm pool file: the gateway touches only its own ------------------
define pool-file-stranger "a stranger's file, a FIFO and a device node at payload.path: each start refused with a clear error, each left untouched"
case_pool_file_stranger() {
	local pool=$T/lang-pool-0 rc
	gen_configs "$T" 1024 16384 "$SLACK" >/dev/null
	LOG=$T/lang.log
	printf "somebody else's data\n" >"$pool"
	cp "$pool" "$T/stranger.copy"
	run_gen lang 0 "$T/language.cfg" "$T/lang.log" 20 --drive 1
	rc=$?
	MSG="a file: exit $rc, $(grep -m1 'shm:' "$T/lang.log")"
	[ "$rc" -eq 1 ] && cmp -s "$pool" "$T/stranger.copy" &&
		grep -q "payload.path $pool exists and is not an embgw pool file: refused, left untouched" "$T/lang.log" || return 1
	rm -f "$pool"
	mkfifo "$pool"
	run_gen lang 0 "$T/language.cfg" "$T/lang.log" 20 --drive 1
	rc=$?
	MSG="a FIFO: exit $rc, $(grep -m1 'shm:' "$T/lang.log")"
	[ "$rc" -eq 1 ] && [ -p "$pool" ] &&
		grep -q "payload.path $pool exists and is a FIFO: refused" "$T/lang.log" || return 1
	rm -f "$pool"
	if mknod "$pool" c 1 3 2>/dev/null; then
		run_gen lang 0 "$T/language.cfg" "$T/lang.log" 20 --drive 1
		rc=$?
		MSG="a device node: exit $rc, $(grep -m1 'shm:' "$T/lang.log")"
		[ "$rc" -eq 1 ] && [ -c "$pool" ] &&
			grep -q "payload.path $pool exists and is a character device: refused" "$T/lang.log" || return 1
		rm -f "$pool"
		MSG="a stranger's file, a FIFO and a device node at payload.path: each start refused (exit 1, the path and why in the log), each left as it was"
	else
		MSG="a stranger's file and a FIFO at payload.path: each start refused (exit 1, the path and why in the log), each left as it was (no device node: mknod not permitted)"
	fi
}

define pool-file-second-instance "a second language gateway with the same payload.path: refused at start; the first keeps its pool file and its 30 rooms are byte-exact"
case_pool_file_second_instance() {
	local pool=$T/lang-pool-0 ino ino2 rc
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	encode_server start_gen "$T/enc.log" || return 1
	LOG=$T/lang.log
	start_gen lang 0 "$T/language.cfg" "$T/lang.log" --exit-when-done --drive 30 \
		--concurrency 2 --lengths 10000,50000 --start-delay-ms 2000
	wait_registered "$T/lang.log" 20 || return 1
	ino=$(stat -c %i "$pool")
	LOG=$T/lang2.log
	run_gen lang2 0 "$T/language.cfg" "$T/lang2.log" 20 --drive 1
	rc=$?
	ino2=$(stat -c %i "$pool" 2>/dev/null)
	LOG=$T/lang.log
	wait_line "$T/lang.log" result 60
	stop_all
	MSG="second: exit $rc, inode $ino -> ${ino2:-gone}, $(grep -m1 'shm:' "$T/lang2.log"); lang: $(report "$T/lang.log")"
	[ "$rc" -eq 1 ] && [ "$ino" = "$ino2" ] &&
		grep -q "payload.path $pool is the pool of a running gateway" "$T/lang2.log" &&
		expect "$T/lang.log" language ok -eq 30 && expect "$T/lang.log" language bad -eq 0 &&
		expect "$T/lang.log" result errors -eq 0 && [ ! -e "$pool" ] || return 1
	MSG="the second gateway refused (exit 1, 'pool of a running gateway'); the first kept its pool file (inode $ino), its 30 rooms byte-exact, the file removed at its exit"
}

define port-second-instance "a second language gateway on the same interface and address (its own pool file): refused at start naming the first one's pid and the lock; the first's rooms go on byte-exact"
case_port_second_instance() {
	local rc first
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	sed "s|$T/lang-pool-0|$T/lang-pool-b|" "$T/language.cfg" >"$T/language2.cfg"
	encode_server start_gen "$T/enc.log" || return 1
	LOG=$T/lang.log
	start_gen lang 0 "$T/language.cfg" "$T/lang.log" --exit-when-done --drive 20 \
		--concurrency 2 --lengths 10000 --start-delay-ms 2000
	first=${PIDS[-1]}
	wait_registered "$T/lang.log" 20 || return 1
	first=$(child_of "$first") || return 1
	LOG=$T/lang2.log
	run_gen lang2 0 "$T/language2.cfg" "$T/lang2.log" 20 --drive 1
	rc=$?
	LOG=$T/lang.log
	wait_line "$T/lang.log" result 60
	stop_all
	MSG="second: exit $rc, $(grep -m1 'another gateway' "$T/lang2.log"); lang: $(report "$T/lang.log")"
	[ "$rc" -eq 1 ] &&
		grep -q "port p0: another gateway (pid $first) runs on net_af_packet0,iface=${VETH}l0 with address 192.168.77.2 (it holds .*iface-${VETH}l0@192.168.77.2.lock): refused" "$T/lang2.log" &&
		[ ! -e "$T/lang-pool-b" ] &&
		expect "$T/lang.log" language ok -eq 20 && expect "$T/lang.log" result errors -eq 0 || return 1
	MSG="the second gateway refused (exit 1) naming the first's pid $first and the lock; the first's 20 rooms byte-exact"
}

define restart-language-small-shm "the language gateway SIGKILLed and started again at once with its pool file on a tmpfs that holds one pool, not two: the encode gateway lets go of the killed one's file when it declares it dead, the new start waits for that space (one log line) instead of failing, registers, and its rooms are byte-exact"
case_restart_language_small_shm() {
	local small=$T/small lang ok=1
	[ "$(id -u)" = 0 ] || { MSG="mounting a tmpfs needs root"; return 1; }
	# a 132 MiB pool (262144 tokens x 512 B and the rest): one fits
	mkdir "$small" && mount -t tmpfs -o size=200m embgw-it "$small" || { MSG="cannot mount a tmpfs"; return 1; }
	gen_configs "$small" 1024 262144 "$SLACK" >/dev/null
	start_gen enc 1 "$small/encode.cfg" "$T/enc.log" --produce
	wait_ready enc || { stop_all; umount "$small"; return 1; }
	start_gen lang 0 "$small/language.cfg" "$T/lang.0.log" --drive 1000 \
		--concurrency 2 --lengths 50000,2000
	lang=${PIDS[-1]}
	LOG=$T/lang.0.log
	wait_registered "$T/lang.0.log" 20 || { stop_all; umount "$small"; return 1; }
	sleep 0.5 # rooms under way
	kill_gw "$lang"
	LOG=$T/lang.1.log
	run_gen lang 0 "$small/language.cfg" "$T/lang.1.log" 60 --exit-when-done \
		--drive 20 --concurrency 2 --lengths 50000,2000
	stop_all
	MSG="lang: $(grep -m1 'no room for' "$T/lang.1.log") $(report "$T/lang.1.log") enc: $(report "$T/enc.log")"
	grep -q "pool file $small/lang-pool-0: no room for [0-9]* bytes yet ([0-9]* free): waiting up to 6000 ms" "$T/lang.1.log" &&
		expect "$T/enc.log" node peer_restarts -eq 1 &&
		expect "$T/enc.log" result-encode leaked -eq 0 &&
		expect "$T/lang.1.log" result errors -eq 0 &&
		expect "$T/lang.1.log" language ok -eq 20 || ok=0
	umount "$small"
	[ "$ok" = 1 ] || return 1
	MSG="the restart found the killed gateway's file still mapped, waited for the encode side to declare it dead and let go, then registered: 20 rooms byte-exact, nothing leaked"
}

define pool-wait-no-fill "a language start that waits for room for its pool file on a 200 MiB tmpfs that another file fills to 100 MiB: while it waits, 1 MiB writes by others there never fail (the start does not try to reserve what cannot fit); once the other file goes, the start reserves its 132 MiB and comes up"
case_pool_wait_no_fill() {
	local small=$T/small ok=1 fails=0 tries=0 lang
	[ "$(id -u)" = 0 ] || { MSG="mounting a tmpfs needs root"; return 1; }
	mkdir "$small" && mount -t tmpfs -o size=200m embgw-it "$small" || { MSG="cannot mount a tmpfs"; return 1; }
	# a 132 MiB pool; 100 MiB taken by another file: it fits the
	# filesystem, not its free space, so the start waits peer_dead_ms + 1 s
	gen_configs "$small" 1024 262144 "$SLACK" >/dev/null
	head -c 104857600 /dev/zero >"$small/other" || { umount "$small"; return 1; }
	LOG=$T/lang.log
	start_gw lang 0 "$small/language.cfg" "$T/lang.log"
	lang=${PIDS[-1]}
	for _ in $(seq 1 100); do
		grep -q "no room for [0-9]* bytes yet" "$T/lang.log" && break
		sleep 0.1
	done
	grep -q "no room for [0-9]* bytes yet" "$T/lang.log" || ok=0
	# others write there while the start waits: 40 writes of 1 MiB
	for _ in $(seq 1 40); do
		tries=$((tries + 1))
		head -c 1048576 /dev/zero >"$small/probe" 2>/dev/null || fails=$((fails + 1))
		rm -f "$small/probe"
		sleep 0.05
	done
	rm -f "$small/other"
	for _ in $(seq 1 100); do
		grep -q "worker on lcore" "$T/lang.log" && break
		sleep 0.1
	done
	grep -q "worker on lcore" "$T/lang.log" || ok=0
	end_gw INT "$lang"
	umount "$small"
	MSG="$fails of $tries writes by others failed while the start waited; $(grep -m1 -e 'no room for' "$T/lang.log"); $(grep -m1 -e 'worker on lcore' -e 'cannot reserve' "$T/lang.log")"
	[ "$ok" = 1 ] && [ "$fails" -eq 0 ] || return 1
	MSG="the start waited for room (logged once) without touching the filesystem's free space: 0 of $tries writes by others failed; once room was made it reserved its pool file and came up"
}

define pool-no-room "pools larger than their memory: a language pool file on a 16 MiB tmpfs, an encode pool over the machine's available memory: each start refused with the size and what is free, --check-config refuses both, nothing left behind"
case_pool_no_room() {
	local small=$T/small rc rc2 chk chk2 ok=1 avail cap hidden=8192
	[ "$(id -u)" = 0 ] || { MSG="mounting a tmpfs needs root"; return 1; }
	mkdir "$small" && mount -t tmpfs -o size=16m embgw-it "$small" || { MSG="cannot mount a tmpfs"; return 1; }
	# 131072 tokens x 256 x bf16: a 64 MiB pool on a 16 MiB filesystem
	gen_configs "$small" 1024 131072 "$SLACK" >/dev/null
	LOG=$T/lang.log
	"$EMBGW" --check-config "$small/language.cfg" >"$T/check.log" 2>&1
	chk=$?
	run_gen lang 0 "$small/language.cfg" "$T/lang.log" 20 --drive 1
	rc=$?
	MSG="lang: check $chk, exit $rc, $(grep -m1 'reserve' "$T/lang.log") check: $(tail -1 "$T/check.log")"
	[ "$chk" -eq 1 ] && [ "$rc" -eq 1 ] && [ ! -e "$small/lang-pool-0" ] &&
		grep -q "cannot reserve [0-9]* bytes for the pool file $small/lang-pool-0: No space left on device ([0-9]* bytes free on its filesystem)" "$T/lang.log" || ok=0
	umount "$small"
	[ "$ok" = 1 ] || return 1
	# the sending side's pool (a memfd): twice what the machine has free
	avail=$(($(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo) * 1024))
	# shellcheck disable=SC2017 # rounded down to whole KiB on purpose
	cap=$(((avail / (hidden * 2) / 1024 * 2 + 1) * 1024))
	gen_configs --hidden "$hidden" --enc-capacity "$cap" "$T" 1024 16384 "$SLACK" >/dev/null
	LOG=$T/enc.log
	"$EMBGW" --check-config "$T/encode.cfg" >"$T/check2.log" 2>&1
	chk2=$?
	run_gen enc 1 "$T/encode.cfg" "$T/enc.log" 20 --produce
	rc2=$?
	MSG="enc ($cap tokens): check $chk2, exit $rc2, $(grep -m1 'reserve' "$T/enc.log") check: $(tail -1 "$T/check2.log")"
	[ "$chk2" -eq 1 ] && [ "$rc2" -eq 1 ] &&
		grep -q "cannot reserve [0-9]* bytes of pool memory: only [0-9]* bytes of memory are available" "$T/enc.log" || return 1
	MSG="a 64 MiB language pool on a 16 MiB tmpfs and a $((cap / 1024))Ki-token encode pool over the machine's free memory: --check-config and the start refuse both (exit 1, the size and what is free in the log), no pool file left"
}

define af-packet-fanout "a language gateway whose net_af_packet PACKET_FANOUT group another process's socket on another interface holds (as a veth pair with neighbouring ifindexes gives two gateways with neighbouring PIDs): refused at start with a line that names PACKET_FANOUT, the interface's ifindex, the group and the fix"
case_af_packet_fanout() {
	local rc ifx group
	gen_configs "$T" 1024 16384 "$SLACK" >/dev/null
	LOG=$T/lang.log
	ifx=$(cat "/sys/class/net/${VETH}l0/ifindex")
	# the group the gateway will ask for, made first by a socket on the
	# other pair's end, in the process that then becomes the gateway
	# (exec keeps the PID and the socket)
	# shellcheck disable=SC2046 # eal's words are separate arguments
	timeout -s INT 30 /usr/bin/python3 - "$ifx" "${VETH}e1" "$EMBGW_GEN" $(eal lang 0) \
		-- -f "$T/language.cfg" --drive 1 >"$LOG" 2>&1 <<'PY'
import os, socket, sys
ifx, other, prog = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((other, 0))
SOL_PACKET, PACKET_FANOUT = 263, 18
s.setsockopt(SOL_PACKET, PACKET_FANOUT, (os.getpid() ^ ifx) & 0xffff)
s.set_inheritable(True)
os.execv(prog, [prog] + sys.argv[4:])
PY
	rc=$?
	group=$(sed -n 's/.*(getpid() \([0-9]*\) ^ ifindex) & 0xffff = \([0-9]*\).*/\1 \2/p' "$LOG" | head -1)
	MSG="exit $rc, $(grep -m1 'PACKET_FANOUT group' "$LOG")"
	[ "$rc" -eq 1 ] && [ -n "$group" ] &&
		[ "${group#* }" = $(( (${group% *} ^ ifx) & 0xffff )) ] &&
		grep -q "port p0: net_af_packet on ${VETH}l0 (ifindex $ifx) most likely could not join its PACKET_FANOUT group .* ip link add A index N type veth peer name B index N+65536\*K" "$LOG" || return 1
	MSG="refused (exit 1): the line names PACKET_FANOUT, ifindex $ifx, the group ${group#* } of PID ${group% *} and the fix (ifindexes equal modulo 65536)"
}

# ---- signals, the exit status, a capture on a full disk --------------------
define signals "SIGQUIT, SIGUSR1, SIGUSR2, SIGTERM, SIGALRM mid-transfer: the same teardown as SIGINT (report, exit line, peers told, pool file gone); SIGHUP reloads the unchanged file (logged), the rooms go on"
case_signals() {
	local sig pid gw rc enc_failed=0 seen=""
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	encode_server start_gen "$T/enc.log" || return 1
	for sig in QUIT USR1 USR2 TERM ALRM; do
		LOG=$T/lang-$sig.log
		start_gen lang 0 "$T/language.cfg" "$LOG" --drive 1000000 \
			--concurrency 2 --lengths 20000
		pid=${PIDS[-1]}
		wait_registered "$LOG" 20 || return 1
		gw=$(child_of "$pid") || return 1
		if [ "$sig" = QUIT ]; then
			# SIGHUP first: a reload of the unchanged file, the
			# rooms go on
			kill -HUP "$gw"
			sleep 0.5
			kill -0 "$gw" 2>/dev/null &&
				grep -q "reload of .* (SIGHUP): unchanged" "$LOG" ||
				{ MSG="SIGHUP: the gateway did not stay up, or said nothing"; return 1; }
		fi
		sleep 0.3
		kill -"$sig" "$gw"
		wait_exit "$pid"
		rc=$?
		MSG="SIG$sig: exit $rc, last line: $(tail -1 "$LOG")"
		# driven rooms cut short: status 4 (aborted) or 3 (unfinished)
		[ "$rc" -eq 4 ] || [ "$rc" -eq 3 ] || return 1
		grep -q "stopping on SIG$sig" "$LOG" && grep -q "^result: port=p0 " "$LOG" &&
			tail -1 "$LOG" | grep -q "^exit: status=$rc .* signal=SIG$sig$" &&
			[ ! -e "$T/lang-pool-0" ] || return 1
		seen="$seen SIG$sig"
	done
	LOG=$T/enc.log
	stop_all
	# the encode side heard the aborts of the rooms in flight
	enc_failed=$(field "$T/enc.log" result-encode failed)
	MSG="enc: $(report "$T/enc.log")"
	[ "${enc_failed:-0}" -ge 1 ] && expect "$T/enc.log" result-encode leaked -eq 0 || return 1
	MSG="SIGHUP reloaded the unchanged file (logged);$seen each: report, exit line naming it, status 3/4, pool file gone; the encode side failed $enc_failed aborted rooms and leaked nothing"
}

# ---- reloading the configuration (doc/gateway.md) -------------------------
# reload_ask NAME: /embgw/reload of process NAME; ANSWER holds the
# answer, RESULT its result
RESULT=""
ANSWER=""
reload_ask() {
	ANSWER=$(telemetry "$1" /embgw/reload)
	RESULT=$(/usr/bin/python3 -c '
import json, sys
try:
    print(json.loads(sys.argv[1])["/embgw/reload"]["result"])
except (ValueError, KeyError, TypeError):
    pass' "$ANSWER")
}

# reload_hup GW LOG N: SIGHUP to GW, then its Nth reload line in LOG
# (at most 10 s); LINE holds it
LINE=""
reload_hup() {
	kill -HUP "$1"
	for _ in $(seq 1 100); do
		LINE=$(grep "reload of " "$2" | sed -n "$3p")
		[ -n "$LINE" ] && return 0
		sleep 0.1
	done
	return 1
}

# log_has LOG PATTERN: PATTERN (grep -E) in LOG within 10 s
log_has() {
	for _ in $(seq 1 100); do
		grep -qE "$2" "$1" && return 0
		sleep 0.1
	done
	return 1
}

define reload "a language gateway's file reloaded 5 times while it drives rooms (/embgw/reload and SIGHUP): timers changed, a peer added then removed, a broken file refused with file:line, an mtu change refused by name, each refusal changing nothing; the encode peer's rooms all byte-exact, reloads_ok=3 reloads_refused=2"
case_reload() {
	local cfg=$T/language.cfg pid gw rc ghost
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	cp "$cfg" "$T/language.orig"
	encode_server start_gen "$T/enc.log" || return 1
	LOG=$T/lang.log
	# paced (80 rooms/s: 5 s), so that the five reloads happen while the
	# rooms run however fast the pair moves them
	start_gen lang 0 "$cfg" "$LOG" --exit-when-done --drive 400 \
		--rate 80 --concurrency 2 --lengths 2000,10000
	pid=${PIDS[-1]}
	wait_registered "$LOG" 20 || return 1
	gw=$(child_of "$pid") || return 1
	# 1: timers, asked over telemetry
	sed -i 's/timers = { /timers = { rto_ms = 5; heartbeat_ms = 50; /' "$cfg"
	reload_ask lang
	MSG="timers: $ANSWER"
	[ "$RESULT" = applied ] && [[ $ANSWER == *"gateway.timers.rto_ms (2 -> 5)"* ]] ||
		return 1
	# 2: a peer added (it never answers: its rooms are none), by SIGHUP
	ghost='{ name = "ghost"; address = "192.168.77.9"; }, '
	sed -i "s/peers = ( /peers = ( $ghost/" "$cfg"
	reload_hup "$gw" "$LOG" 2 || { MSG="SIGHUP: no reload line"; return 1; }
	MSG="peer added: $LINE"
	[[ $LINE == *"(SIGHUP): applied: peers +1 -0 (+ghost)"* ]] &&
		log_has "$LOG" "port p0: peer ghost added \(file, 192\.168\.77\.9:9471" ||
		return 1
	# 3: a broken file: refused with file:line, nothing changed
	cp "$cfg" "$T/language.good"
	sed -i 's/roles = \["language"\];/roles = ["language"];\n  bogus = 1;/' "$cfg"
	reload_ask lang
	MSG="broken file: $ANSWER"
	[ "$RESULT" = refused ] && [[ $ANSWER == *"language.cfg:4: gateway.bogus"* ]] ||
		return 1
	# 4: a setting that cannot change live: refused by name
	cp "$T/language.good" "$cfg"
	sed -i 's/lcores = \[0\];/lcores = [0]; mtu = 9000;/' "$cfg"
	reload_ask lang
	MSG="mtu: $ANSWER"
	[ "$RESULT" = refused ] && [[ $ANSWER == *"ports.[0].mtu (1500 -> 9000)"* ]] ||
		return 1
	# 5: the peer removed again (the refusals changed nothing: the
	# running file still has it)
	cp "$T/language.good" "$cfg"
	sed -i "s/$ghost//" "$cfg"
	reload_hup "$gw" "$LOG" 5 || { MSG="SIGHUP: no fifth reload line"; return 1; }
	MSG="peer removed: $LINE"
	[[ $LINE == *"applied: peers +0 -1 (-ghost)"* ]] &&
		log_has "$LOG" "port p0: peer ghost removed" || return 1
	alive "$gw" || { MSG="the drive ended before the reloads did"; return 1; }
	wait_exit "$pid"
	rc=$?
	LOG=$T/lang.log
	stop_all
	MSG="exit $rc; lang: $(report "$T/lang.log") enc: $(report "$T/enc.log")"
	[ "$rc" -eq 0 ] && expect "$T/lang.log" language ok -eq 400 &&
		expect "$T/lang.log" result errors -eq 0 &&
		expect "$T/lang.log" result leaked -eq 0 &&
		expect "$T/enc.log" result-encode leaked -eq 0 &&
		tail -1 "$T/lang.log" | grep -q " reloads_ok=3 reloads_refused=2 " ||
		return 1
	MSG="5 reloads while 400 rooms ran: timers applied, ghost added to and removed from the node, a broken file refused at language.cfg:4, ports.[0].mtu refused; every room of enc-0 byte-exact, nothing leaked, reloads_ok=3 reloads_refused=2"
}

define signal-during-start "SIGTERM and SIGQUIT at 0, 20, 100 and 300 ms into the start of a --drive gateway: a clean stop each time - exit 3 with its rooms unfinished, exit line, no pool file left, no core"
# caught PID SIG: wait (5 s at most) until PID has a handler for SIG
# (SigCgt in /proc/PID/status)
caught() {
	local num mask
	num=$(kill -l "$2") || return 1
	for _ in $(seq 1 500); do
		mask=$(awk '/^SigCgt:/ { print $2 }' "/proc/$1/status" 2>/dev/null) || return 1
		[ -n "$mask" ] && (( (16#$mask >> (num - 1)) & 1 )) && return 0
		sleep 0.01
	done
	return 1
}

case_signal_during_start() {
	local sig at pid gw rc n=0
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	encode_server start_gen "$T/enc.log" || return 1
	for sig in TERM QUIT; do
		for at in 0 0.02 0.1 0.3; do
			LOG=$T/lang-$sig-$at.log
			# no room opens before the signal: all 10 are left
			start_gen lang 0 "$T/language.cfg" "$LOG" --drive 10 --lengths 2000 \
				--start-delay-ms 5000
			pid=${PIDS[-1]}
			gw=$(child_of "$pid") || return 1
			# "0 s" counts from the program's first instruction:
			# until then (exec, the dynamic loader) the kernel's
			# default action applies to any process
			caught "$gw" "$sig" || { MSG="SIG$sig never caught by $gw"; return 1; }
			sleep "$at"
			kill -"$sig" "$gw"
			wait_exit "$pid"
			rc=$?
			MSG="SIG$sig at $at s: exit $rc, last line: $(tail -1 "$LOG")"
			[ "$rc" -eq 3 ] && [ ! -e "$T/lang-pool-0" ] &&
				tail -1 "$LOG" | grep -q "^exit: status=3 reason=rooms_unfinished failed=0 bad=0 unfinished=10 .* signal=SIG$sig$" || return 1
			n=$((n + 1))
		done
	done
	MSG="$n starts stopped by SIGTERM/SIGQUIT at 0..300 ms: each exit 3 with its 10 rooms unfinished and its exit line (never a kill), no pool file left"
}

define exit-status "the exit status and the report's last line: 0 and 'reason=ok' when every driven room is byte-exact (and no EAL runtime directory left), 4 and 'reason=rooms_failed' when some failed (rooms larger than the pool)"
case_exit_status() {
	local rc
	gen_configs "$T" 1024 16384 "$SLACK alloc_ms = 1000;" >/dev/null
	encode_server start_gen "$T/enc.log" || return 1
	LOG=$T/ok.log
	run_gen lang 0 "$T/language.cfg" "$T/ok.log" 60 --exit-when-done --drive 4 --lengths 2000
	rc=$?
	# shellcheck disable=SC2012 # ls names what is left, or says nothing is
	MSG="all ok: exit $rc, $(tail -1 "$T/ok.log"); EAL runtime files: $(ls /var/run/dpdk/egw-lang-$$ 2>&1 | tr '\n' ' ')"
	# a clean exit leaves no EAL runtime directory behind
	[ "$rc" -eq 0 ] && tail -1 "$T/ok.log" | grep -q "^exit: status=0 reason=ok failed=0 bad=0 unfinished=0 " &&
		[ ! -e "/var/run/dpdk/egw-lang-$$" ] || return 1
	# every other room is larger than the whole language pool (16384
	# tokens): it fails as too large, the others are byte-exact
	LOG=$T/fail.log
	run_gen lang 0 "$T/language.cfg" "$T/fail.log" 90 --exit-when-done --drive 6 \
		--concurrency 2 --lengths 2000,20000
	rc=$?
	stop_all
	MSG="some failed: exit $rc, $(tail -1 "$T/fail.log"); $(report "$T/fail.log")"
	expect "$T/fail.log" language failed -gt 0 && [ "$rc" -eq 4 ] &&
		tail -1 "$T/fail.log" | grep -q "^exit: status=4 reason=rooms_failed failed=[1-9]" || return 1
	MSG="4 byte-exact rooms: exit 0, 'reason=ok'; $(field "$T/fail.log" language failed) of 6 failed ($(failures "$T/fail.log" p0 | tr '\n' ' ')): exit 4, 'reason=rooms_failed'"
}

define capture-full-disk "--capture onto a 16 KiB tmpfs that fills up: the write error is logged, the pcap is cut back to whole frames, the rooms go on byte-exact, exit 5 with 'reason=capture_incomplete'"
case_capture_full_disk() {
	local small=$T/small rc ok=1 check
	[ "$(id -u)" = 0 ] || { MSG="mounting a tmpfs needs root"; return 1; }
	mkdir "$small" && mount -t tmpfs -o size=16k embgw-it "$small" || { MSG="cannot mount a tmpfs"; return 1; }
	gen_configs "$T" 1024 262144 "$SLACK" >/dev/null
	encode_server start_gen "$T/enc.log" || { umount "$small"; return 1; }
	LOG=$T/lang.log
	run_gen lang 0 "$T/language.cfg" "$T/lang.log" 60 --exit-when-done --drive 40 \
		--concurrency 2 --lengths 2000,10000 --capture "$small/cap.pcap"
	rc=$?
	stop_all
	# every record whole: the file ends where the last one does
	check=$(/usr/bin/python3 - "$small/cap.pcap" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
off, n = 24, 0
while off + 16 <= len(data):
    incl = struct.unpack_from("<I", data, off + 8)[0]
    off += 16 + incl
    n += 1
print("frames=%d whole=%s bytes=%d" % (n, off == len(data), len(data)))
PY
)
	umount "$small"
	MSG="exit $rc, $check, $(grep -m1 'capture .*write failed' "$T/lang.log"), last: $(tail -1 "$T/lang.log")"
	[ "$rc" -eq 5 ] && grep -q "whole=True" <<<"$check" &&
		grep -q "capture $small/cap.pcap: write failed after [0-9]* frames ([0-9]* bytes): No space left on device" "$T/lang.log" &&
		expect "$T/lang.log" language ok -eq 40 &&
		tail -1 "$T/lang.log" | grep -q "^exit: status=5 reason=capture_incomplete .*captures_failed=1 " || return 1
	MSG="the capture stopped at a whole frame ($check) with the error logged; 40 rooms byte-exact; exit 5, 'reason=capture_incomplete'"
}

# ---- the systemd unit (dist/systemd/embgw@.service, doc/install.md) --------
define systemd-unit "the unit's ExecStart run as systemd would (its environment files, capability bounding set, NOTIFY_SOCKET, watchdog): READY=1 once the attach socket exists, WATCHDOG=1 while running, STOPPING=1 after SIGTERM, exit 0; systemd-analyze verify is silent"
case_systemd_unit() {
	local unit=dist/systemd/embgw@.service out
	command -v systemd-analyze >/dev/null || { MSG="no systemd-analyze (scripts/deps.sh installs systemd)"; return 1; }
	# the unit as installed, but for the path of the program
	sed "s#/usr/bin/embgw#$(realpath "$EMBGW")#" "$unit" >"$T/embgw@.service"
	out=$(systemd-analyze verify --man=no "$T/embgw@.service" 2>&1) ||
		{ MSG="systemd-analyze verify: $out"; return 1; }
	[ -z "$out" ] || { MSG="systemd-analyze verify says: $out"; return 1; }
	gen_configs --attach "$T" 1024 16384 "$SLACK" >/dev/null
	mkdir -p "$T/default" "$T/run"
	# the instance's own file overrides the shared one, and a later
	# --file-prefix the unit's
	echo 'EMBGW_EAL_ARGS="-l 1 --no-huge -m 64"' >"$T/default/embgw"
	echo "EMBGW_EAL_ARGS=\"-l 0 --no-huge -m 400 --file-prefix egw-unit-$$\"" >"$T/default/embgw-language"
	LOG=$T/lang.log
	out=$(/usr/bin/python3 tests/integration/unit_exec.py "$unit" language \
		--map "/usr/bin/embgw=$(realpath "$EMBGW")" --map "/etc/embgw/=$T/" \
		--map "/etc/default/=$T/default/" --map "/run/=$T/run/" \
		--expect-socket "$T/lang-0.sock" --watchdog-usec 1000000 \
		--log "$T/lang.log" --deadline-s 60 2>&1)
	local rc=$?
	MSG=$(grep -E "^unit: (ok|FAIL)" <<<"$out" | tr '\n' ' ')
	# shellcheck disable=SC2001 # every line of it indented
	[ $rc -eq 0 ] || { echo "$out" | sed 's/^/     /'; return 1; }
	tail -1 "$T/lang.log" | grep -q "^exit: status=0 reason=ok .*signal=SIGTERM$" ||
		{ MSG="$MSG; last line: $(tail -1 "$T/lang.log")"; return 1; }
	[ ! -e "$T/lang-0.sock" ] || { MSG="$MSG; the attach socket is still there"; return 1; }
	[ -d "$T/run/embgw" ] || { MSG="$MSG; RuntimeDirectory not made"; return 1; }
	MSG="READY=1 with the attach socket up, WATCHDOG=1, STOPPING=1 after SIGTERM, exit 0 (status=0 signal=SIGTERM), verify silent"
}

# ---- the Debian packages (debian/, scripts/package.sh, doc/install.md) ------
PKGS=(python3-embgw libegw-client-dev embgw libegw-client2)
define packages "the Debian packages (scripts/package.sh of HEAD, or the .debs in \$EMBGW_PACKAGES) installed with dpkg -i; with the build tree and the checkout's python/ out of reach, the installed unit's ExecStart runs an encode and a language instance of /usr/bin/embgw, the example engines use the installed embgw package and libegw_client (no PYTHONPATH, no EMBGW_CLIENT_LIB): 3 requests bit-identical on 2 ranks, 0 errors, 0 leaked blocks; then purged"
# hidden CMD...: CMD in a mount namespace of its own where the build tree
# and the checkout's python/ are empty directories
HIDE=()
hidden() {
	# shellcheck disable=SC2016 # expanded by the inner sh, from its arguments
	unshare --mount -- sh -c 'mount -t tmpfs embgw-hide "$1" && mount -t tmpfs embgw-hide "$2" && shift 2 && exec "$@"' \
		hidden "${HIDE[@]}" "$@"
}
# dpkg_retry ARGS...: dpkg, waiting up to 120 s for another dpkg or apt to
# let go of its lock
dpkg_retry() {
	local out i
	for i in $(seq 1 60); do
		out=$(dpkg "$@" 2>&1) && return 0
		grep -q "lock" <<<"$out" || { echo "$out"; return 1; }
		[ "$i" = 1 ] && echo "     dpkg $1: waiting for the dpkg lock (120 s at most)" >&2
		sleep 2
	done
	echo "$out"
	return 1
}
# shellcheck disable=SC2012 # ls: the package files' names are plain
case_packages() {
	local p debs=${EMBGW_PACKAGES:-} rc
	[ "$(id -u)" = 0 ] || { MSG="installing packages needs root"; return 1; }
	HIDE=("$(realpath "$EMBGW_BUILD")" "$PWD/python")
	# never replace or purge packages this case did not install
	for p in "${PKGS[@]}"; do
		if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed"; then
			MSG="$p is already installed: not this case's to replace or purge"
			return 1
		fi
	done
	if [ -z "$debs" ]; then
		debs=$T/debs
		local t0=$SECONDS
		scripts/package.sh "$debs" >"$T/package.log" 2>&1 ||
			{ LOG=$T/package.log; MSG="scripts/package.sh failed"; return 1; }
		echo "     packages built in $((SECONDS - t0)) s ($(tail -1 "$T/package.log"))"
	fi
	local files=()
	for p in embgw libegw-client2 libegw-client-dev python3-embgw; do
		files+=("$(ls "$debs/${p}_"*.deb 2>/dev/null | head -1)")
		[ -f "${files[-1]}" ] || { MSG="no ${p}_*.deb in $debs"; return 1; }
	done
	dpkg_retry -i "${files[@]}" >"$T/dpkg.log" 2>&1 ||
		{ LOG=$T/dpkg.log; MSG="dpkg -i failed"; dpkg_retry --purge "${PKGS[@]}" >/dev/null 2>&1; return 1; }
	packages_installed
	rc=$?
	dpkg_retry --purge "${PKGS[@]}" >>"$T/dpkg.log" 2>&1 || { MSG="$MSG; dpkg --purge failed"; rc=1; }
	for p in "${PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed" &&
			{ MSG="$MSG; $p still installed after the purge"; rc=1; }
	done
	[ ! -e /usr/bin/embgw ] && [ ! -e /etc/embgw ] && [ ! -e /lib/systemd/system/embgw@.service ] ||
		{ MSG="$MSG; files left after the purge"; rc=1; }
	return $rc
}
packages_installed() {
	local out unit=/lib/systemd/system/embgw@.service i r lengths=500,2000,10000
	# the installed unit, as systemd would read it: programs and man pages there
	out=$(systemd-analyze verify "$unit" 2>&1) && [ -z "$out" ] ||
		{ MSG="systemd-analyze verify $unit: $out"; return 1; }
	out=$(hidden /usr/bin/embgw --version 2>&1) && [ "$(head -1 <<<"$out")" = "embgw $(sed -n "s/^  version: '\(.*\)',$/\1/p" meson.build)" ] ||
		{ MSG="/usr/bin/embgw --version: $out"; return 1; }
	man -w embgw.cfg >/dev/null 2>&1 && man -w 8 embgw-gen >/dev/null 2>&1 || { MSG="man pages not found by man"; return 1; }
	pkg-config --exists egw_client || { MSG="pkg-config finds no egw_client"; return 1; }
	mkdir -p "$T/examples" "$T/cfg" "$T/run"
	cp examples/*.py "$T/examples/"
	# the engines' view: the installed package and library, found with no
	# environment variable
	out=$(cd "$T/examples" && hidden env -u PYTHONPATH -u EMBGW_CLIENT_LIB /usr/bin/python3 -c \
		'import engine_io, embgw, embgw._lib as l; print(embgw.__file__, l.lib._name)' 2>&1)
	grep -qx "/usr/lib/python3/dist-packages/embgw/__init__.py libegw_client.so.2" <<<"$out" ||
		{ MSG="the engines' embgw is not the installed one: $out"; return 1; }
	hidden test ! -e "${HIDE[0]}/app/embgw/embgw" -a ! -e "${HIDE[1]}/embgw" ||
		{ MSG="the build tree is in reach inside hidden"; return 1; }
	veth_up 1 || { MSG="no veth pair"; return 1; }
	# two instances, encode and language, of the installed unit with its
	# installed /etc/default/embgw: only the configuration directory and
	# the runtime directory are the case's own
	gen_configs --attach "$T/cfg" 1024 262144 "$SLACK bootstrap_ms = 60000;" >/dev/null
	attach_lease 60000 "$T/cfg/encode.cfg" "$T/cfg/language.cfg"
	local -A sock=([encode]=enc-0 [language]=lang-0)
	for i in encode language; do
		# the encode instance first, as an operator would; its link's
		# ifindexes far apart (the two start close together)
		[ $i = language ] && for _ in $(seq 1 600); do
			[ -e "$T/ready-encode" ] && break
			sleep 0.1
		done
		hidden timeout -s KILL 240 /usr/bin/python3 tests/integration/unit_exec.py "$unit" "$i" \
			--map "/etc/embgw/=$T/cfg/" --map "/run/=$T/run/" \
			--expect-socket "$T/cfg/${sock[$i]}.sock" \
			--until-file "$T/stop" --ready-file "$T/ready-$i" --log "$T/$i.log" \
			--deadline-s 180 >"$T/unit-$i.out" 2>&1 &
		ENGINE_PIDS+=($!)
	done
	for i in $(seq 1 600); do
		[ -e "$T/ready-encode" ] && [ -e "$T/ready-language" ] && break
		sleep 0.1
	done
	LOG=$T/language.log
	[ -e "$T/ready-encode" ] && [ -e "$T/ready-language" ] ||
		{ touch "$T/stop"; engines_wait; MSG="no READY=1 from both instances in 60 s: $(cat "$T"/unit-*.out | tr '\n' ' ')"; return 1; }
	wait_registered "$T/encode.log" 30 && wait_registered "$T/language.log" 30 ||
		{ touch "$T/stop"; engines_wait; MSG="the instances did not register with each other"; return 1; }
	local W=()
	for r in 0 1; do
		(cd "$T/examples" && hidden env -u PYTHONPATH -u EMBGW_CLIENT_LIB timeout -s KILL 180 \
			/usr/bin/python3 language_worker.py "$T/cfg/lang-0.sock" --rank $r --nranks 2 \
			--dist "$T/tp" --lengths $lengths --concurrency 3) >"$T/rank$r.log" 2>&1 &
		W+=($!)
	done
	sleep 1
	(cd "$T/examples" && hidden env -u PYTHONPATH -u EMBGW_CLIENT_LIB timeout -s KILL 180 \
		/usr/bin/python3 encode_worker.py "$T/cfg/enc-0.sock" --nranks 2 --lengths $lengths \
		--concurrency 3) >"$T/encode-worker.log" 2>&1 &
	W+=($!)
	for p in "${W[@]}"; do wait "$p"; done
	touch "$T/stop"
	engines_wait
	local errors=0 leaked=0 v
	for i in encode language; do
		v=$(field "$T/$i.log" clients failed)
		[ -n "$v" ] || { MSG="$i: no clients line in its report"; return 1; }
		errors=$((errors + v))
		leaked=$((leaked + $(field "$T/$i.log" clients blocks_in_use)))
	done
	MSG="$(grep -hE '^(encode|language)-worker' "$T/encode-worker.log" "$T"/rank*.log | tr '\n' ' ')errors=$errors leaked=$leaked; units: $(grep -hE '^unit: FAIL' "$T"/unit-*.out | tr '\n' ' ')"
	grep -q "^unit: FAIL" "$T"/unit-*.out && return 1
	[ "$(grep -c '^unit: ok' "$T/unit-encode.out")" -ge 5 ] && [ "$(grep -c '^unit: ok' "$T/unit-language.out")" -ge 5 ] ||
		{ MSG="$MSG; unit_exec did not finish"; return 1; }
	grep -q "^encode-worker: rooms=3 ok=3 failed=0 " "$T/encode-worker.log" &&
		grep -q "^language-worker: rank=0 rooms=3 ok=3 bad=0 failed=0 " "$T/rank0.log" &&
		grep -q "^language-worker: rank=1 rooms=3 ok=3 bad=0 failed=0 " "$T/rank1.log" &&
		[ "$errors" -eq 0 ] && [ "$leaked" -eq 0 ] &&
		grep -q "^exit: status=0 reason=ok .*signal=SIGTERM$" "$T/encode.log" &&
		grep -q "^exit: status=0 reason=ok .*signal=SIGTERM$" "$T/language.log" || return 1
	MSG="installed from .debs; 2 unit instances (READY=1, WATCHDOG=1, STOPPING=1, exit 0); 3 requests from the installed python3-embgw bit-identical on 2 ranks; $errors errors, $leaked leaked blocks; purged"
}

# ---- the cluster: gateways in namespaces on a bridge, membership in etcd ---
# tests/integration/cluster.sh builds the topology: 3 encode gateways
# (e0..e2) and 3 language gateways (l0..l2), more where a case adds them,
# each in a network namespace of its own, Debian's etcd in the root
# namespace, Python engines attached to every gateway naming each room's
# peer by name (cl_load). Rooms are small (500 and 3000 tokens): six
# gateways and their engines share two cores.
CL_TIMERS="$SLACK round_ms = 20000; bootstrap_ms = 30000;"
CL_ENCS="e0 e1 e2"
CL_LANGS="l0 l1 l2"
CL_LENGTHS=500,3000

# cl_topology CLUSTER NAMES...: the namespaces of NAMES (and e0..e2,
# l0..l2 first), etcd up, a configuration for each gateway of NAMES that
# joins CLUSTER (no static peers); nothing started
cl_topology() {
	local cluster=$1 n
	shift
	cl_up || { MSG="no bridge for the case"; return 1; }
	for n in $CL_ENCS $CL_LANGS "$@"; do
		cl_node "$n" || { MSG="no namespace for $n"; return 1; }
	done
	etcd_start "$T/etcd.log" || { MSG="etcd did not start"; LOG=$T/etcd.log; return 1; }
	for n in $CL_ENCS $CL_LANGS "$@"; do
		cl_cfg "$n" "$cluster" "$CL_TIMERS"
	done
	# a configuration the gateway refuses fails here, not 20 s later
	"$EMBGW" --check-config "$T/e0.cfg" >"$T/check.log" 2>&1 ||
		{ MSG="a cluster configuration is refused: $(head -3 "$T/check.log" | tr '\n' ' ')"; return 1; }
}

# cl_joined CLUSTER SECONDS NAMES...: each of NAMES up, its record in etcd,
# and registered with every other gateway of NAMES of the other role
# (its log names each of them registered)
cl_joined() {
	local cluster=$1 secs=$2 n p
	shift 2
	cl_wait_up "$@" || { MSG="$(tail -3 "$LOG" | tr '\n' ' ')"; return 1; }
	for n in "$@"; do
		wait_key "$cluster" "$n" 1 "$secs" || { MSG="no record of $n in etcd (members: $(cl_members "$cluster"))"; LOG=$T/$n.log; return 1; }
	done
	for n in "$@"; do
		for p in "$@"; do
			[ "${n:0:1}" != "${p:0:1}" ] || continue
			wait_log "$T/$n.log" "peer $p registered" "$secs" ||
				{ MSG="$n did not register $p within $secs s"; LOG=$T/$n.log; return 1; }
		done
	done
}

# wait_log LOG TEXT SECONDS: LOG has a line with TEXT (a grep pattern)
wait_log() {
	for _ in $(seq 1 $(($3 * 10))); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# cl_clean NAMES...: the exit reports of gateways NAMES (stopped) say no
# engine's room failed there, and no block is left in use
cl_clean() {
	local n
	for n in "$@"; do
		expect "$T/$n.log" clients blocks_in_use -eq 0 &&
			expect "$T/$n.log" clients failed -eq 0 ||
			{ MSG="$n: $(report "$T/$n.log")"; LOG=$T/$n.log; return 1; }
	done
}

# room_lang ID: the language gateway's number in a cluster room id
room_lang() {
	echo $((($1 >> 36) & 15))
}

# cl_failed_rooms LOG: the ids of the rooms an engine saw Failed, one a line
cl_failed_rooms() {
	sed -nE 's/^room (0x[0-9a-f]+)( rank [0-9]+)?: [A-Za-z]+ .*/\1/p' "$1" | sort -u
}

# cl_only_failed LANG LOGS...: every room the engines of LOGS saw fail
# belongs to language gateway number LANG, and each such failure names a
# reason; the count lands in CL_FAILED
CL_FAILED=0
cl_only_failed() {
	local want=$1 id f line
	shift
	CL_FAILED=0
	for f in "$@"; do
		for id in $(cl_failed_rooms "$f"); do
			[ "$(room_lang "$id")" = "$want" ] || { MSG="$(basename "$f"): room $id of l$(room_lang "$id") failed: $(grep "$id" "$f" | head -1)"; return 1; }
			line=$(grep -m1 "^room $id" "$f")
			[ -n "$(sed -nE 's/^room [^:]+: [A-Za-z]+ (.+)$/\1/p' <<<"$line")" ] || { MSG="room $id failed without a reason: $line"; return 1; }
			CL_FAILED=$((CL_FAILED + 1))
		done
	done
}

define cluster-topology "the cluster topology with static peers: 3 encode and 3 language gateways in namespaces of their own joined by a bridge, each namespace reaching the case's etcd; Python engines move 2 rooms between every pair byte-exact, nothing leaked"
case_cluster_topology() {
	local n
	cl_up || { MSG="no bridge for the case"; return 1; }
	for n in $CL_ENCS $CL_LANGS; do
		cl_node "$n" || { MSG="no namespace for $n"; return 1; }
	done
	etcd_start "$T/etcd.log" || { MSG="etcd did not start"; LOG=$T/etcd.log; return 1; }
	# every namespace reaches etcd through its kernel address
	for n in $CL_ENCS $CL_LANGS; do
		ip netns exec "$CL-$n" curl -sf --max-time 5 "http://$CL_NET.1:$ETCD_PORT/health" |
			grep -q '"health":"true"' || { MSG="$n's namespace does not reach etcd at $CL_NET.1:$ETCD_PORT"; return 1; }
	done
	ectl put /embgw-topology/probe ok >/dev/null && [ "$(ectl get --print-value-only /embgw-topology/probe)" = ok ] ||
		{ MSG="etcdctl cannot write and read the case's etcd"; return 1; }
	# shellcheck disable=SC2086 # the names are words
	for n in $CL_ENCS; do cl_cfg "$n" "" "$CL_TIMERS" $CL_LANGS; done
	# shellcheck disable=SC2086
	for n in $CL_LANGS; do cl_cfg "$n" "" "$CL_TIMERS" $CL_ENCS; done
	for n in $CL_ENCS $CL_LANGS; do cl_start "$n"; done
	# shellcheck disable=SC2086
	cl_wait_up $CL_ENCS $CL_LANGS || { MSG="not up: $(tail -3 "$LOG" | tr '\n' ' ')"; return 1; }
	for n in $CL_LANGS; do
		wait_log "$T/$n.log" "peer e2 registered" 60 || { MSG="$n did not register e2"; LOG=$T/$n.log; return 1; }
	done
	cl_load 1 "$CL_ENCS" "$CL_LANGS" "$CL_LENGTHS"
	cl_engines_ok 1 "$CL_ENCS $CL_LANGS" || return 1
	cl_stop_all
	# shellcheck disable=SC2086
	cl_clean $CL_ENCS $CL_LANGS || return 1
	MSG="6 gateways in 6 namespaces on bridge ${CL}bd, etcd at $CL_NET.1:$ETCD_PORT reached from each; 18 rooms (2 per pair) byte-exact, nothing leaked"
}

define cluster-join "a language gateway joins a running cluster (etcd, no static peers) under load: its record appears, the 3 encode gateways register it and its rooms from each land byte-exact; no room of the others fails"
case_cluster_join() {
	local n t_key t_reg
	cl_topology cj l3 || return 1
	# shellcheck disable=SC2086
	for n in $CL_ENCS $CL_LANGS; do cl_start "$n"; done
	# shellcheck disable=SC2086
	cl_joined cj 60 $CL_ENCS $CL_LANGS || return 1
	# load among the six; the encoders hold their rooms open 3 s, so the
	# join lands while rooms are in flight
	CL_HOLD=3 cl_load 1 "$CL_ENCS" "$CL_LANGS" "$CL_LENGTHS"
	cl_start l3
	wait_key cj l3 1 30 || { MSG="no record of l3"; LOG=$T/l3.log; return 1; }
	t_key=$(date +%s%N)
	for n in $CL_ENCS; do
		wait_log "$T/$n.log" "peer l3 registered" 30 || { MSG="$n did not register l3 within 30 s of its record"; LOG=$T/$n.log; return 1; }
	done
	t_reg=$(date +%s%N)
	cl_wait_up l3 || return 1
	cl_load 2 "$CL_ENCS" l3 "$CL_LENGTHS"
	cl_engines_ok 1 "$CL_ENCS $CL_LANGS" || return 1
	cl_engines_ok 2 "$CL_ENCS l3" || return 1
	[ "$(cl_members cj)" = "e0 e1 e2 l0 l1 l2 l3" ] || { MSG="members: $(cl_members cj)"; return 1; }
	cl_stop_all
	# shellcheck disable=SC2086
	cl_clean $CL_ENCS $CL_LANGS l3 || return 1
	MSG="l3 joined under load: registered by e0..e2 $(((t_reg - t_key) / 1000000)) ms after its record appeared (by this shell's polling), its 6 rooms byte-exact, the 18 of the others byte-exact, none failed"
}

# cl_leave_case SIG TTL: l2 ended with SIG while rooms to it are in flight
cl_leave_case() {
	local sig=$1 n t0 gone f encs=()
	CL_TTL=$2 cl_topology cl || return 1
	# shellcheck disable=SC2086
	for n in $CL_ENCS $CL_LANGS; do cl_start "$n"; done
	# shellcheck disable=SC2086
	cl_joined cl 60 $CL_ENCS $CL_LANGS || return 1
	# every encode engine opens its rooms at once and holds them 4 s: all
	# of them are in flight when l2 goes
	CL_GO=1 CL_HOLD=4 cl_load 1 "$CL_ENCS" "$CL_LANGS" "$CL_LENGTHS"
	cl_go 1 "$CL_ENCS" || return 1
	t0=$(date +%s%N)
	cl_end "$sig" l2
	if [ "$sig" = KILL ]; then
		# nobody deleted it: the record stays until its lease expires
		sleep 1
		cl_has_key cl l2 || { MSG="l2's record went within 1 s of SIGKILL, before its lease of $2 s"; return 1; }
		wait_key cl l2 0 $(($2 * 3)) || { MSG="l2's record outlived 3 x its TTL"; return 1; }
	else
		wait_key cl l2 0 2 || { MSG="l2's record still there 2 s after its clean stop (TTL $2 s)"; return 1; }
		grep -q "^exit: status=[0-9]* reason=ok" "$T/l2.log" || { MSG="l2's exit: $(grep '^exit:' "$T/l2.log")"; LOG=$T/l2.log; return 1; }
	fi
	gone=$((($(date +%s%N) - t0) / 1000000))
	engines_wait
	for n in $CL_ENCS; do encs+=("$T/eng-1-$n.log"); done
	cl_only_failed 2 "${encs[@]}" || return 1
	# a room that landed on l2 before the signal is a success; every
	# other one of its 6 fails with a reason (cl_only_failed: only its)
	[ "$CL_FAILED" -ge 1 ] && [ "$CL_FAILED" -le 6 ] || { MSG="$CL_FAILED rooms to l2 failed at the encode engines, not 1..6: $(cat "${encs[@]}" | tr '\n' ' ' | cut -c1-600)"; return 1; }
	for n in l0 l1; do
		grep -qE '^engine-language: .* ok=6 bad=0 failed=0 ' "$T/eng-1-$n.log" || { MSG="$n's engine: $(tr '\n' ' ' <"$T/eng-1-$n.log")"; return 1; }
	done
	# l2's engine saw its rooms end with a reason too (a clean stop says
	# so; a SIGKILL closes its attach socket)
	f=$T/eng-1-l2.log
	[ "$sig" = KILL ] || grep -qE '^engine-language: .* ok=0 bad=0 failed=6 ' "$f" || { MSG="l2's engine: $(tr '\n' ' ' <"$f")"; return 1; }
	# the survivors let go of l2 and of everything it held
	for n in $CL_ENCS; do
		wait_log "$T/$n.log" "peer l2 left" 30 || { MSG="$n never let l2 go (no 'peer l2 left')"; LOG=$T/$n.log; return 1; }
	done
	[ "$(cl_members cl)" = "e0 e1 e2 l0 l1" ] || { MSG="members after: $(cl_members cl)"; return 1; }
	cl_stop_all
	# the survivors, and a cleanly stopped l2 in its exit report
	for n in $CL_ENCS l0 l1 $([ "$sig" = KILL ] || echo l2); do
		expect "$T/$n.log" clients blocks_in_use -eq 0 || { MSG="$n: $(report "$T/$n.log")"; LOG=$T/$n.log; return 1; }
	done
	CL_GONE=$gone
}

define cluster-leave "a language gateway stopped cleanly (SIGTERM) while rooms to it are in flight: its record is deleted at once (well before its 30 s lease), its 6 rooms end Failed with a reason on both sides, the other 12 byte-exact, no block left in use anywhere"
case_cluster_leave() {
	cl_leave_case TERM 30 || return 1
	MSG="record gone $CL_GONE ms after SIGTERM (lease 30 s); its rooms in flight ($CL_FAILED of 6) Failed with a reason at the encode engines, all 6 at its own, the other 12 byte-exact, 0 blocks in use on the survivors"
}

define cluster-kill "a language gateway SIGKILLed while rooms to it are in flight: its record stays until its 4 s lease expires, then goes; the encode gateways fail its rooms still in flight with a reason and serve the other 12 byte-exact, no block left in use"
case_cluster_kill() {
	cl_leave_case KILL 4 || return 1
	MSG="record gone $CL_GONE ms after SIGKILL (lease 4 s); its rooms in flight ($CL_FAILED of 6) Failed with a reason at the encode engines, the other 12 byte-exact, 0 blocks in use on the survivors"
}

define cluster-etcd-restart "etcd SIGKILLed while rooms are in flight and started again 5 s later on its data: 0 rooms lost, no peer removed, every record back; a gateway that started during the outage is seen after it and its rooms land byte-exact"
case_cluster_etcd_restart() {
	local n before
	cl_topology cr l3 || return 1
	# shellcheck disable=SC2086
	for n in $CL_ENCS $CL_LANGS; do cl_start "$n"; done
	# shellcheck disable=SC2086
	cl_joined cr 60 $CL_ENCS $CL_LANGS || return 1
	before=$(cl_members cr)
	CL_HOLD=3 cl_load 1 "$CL_ENCS" "$CL_LANGS" "$CL_LENGTHS"
	etcd_kill
	# a gateway that starts while etcd is away starts all the same
	cl_start l3
	cl_wait_up l3 || { MSG="l3 did not start without etcd: $(tail -3 "$T/l3.log" | tr '\n' ' ')"; return 1; }
	sleep 5
	etcd_start "$T/etcd.log" || { MSG="etcd did not start again"; LOG=$T/etcd.log; return 1; }
	cl_engines_ok 1 "$CL_ENCS $CL_LANGS" || return 1
	wait_key cr l3 1 30 || { MSG="l3's record not written after the outage"; LOG=$T/l3.log; return 1; }
	for n in $CL_ENCS; do
		wait_log "$T/$n.log" "peer l3 registered" 30 || { MSG="$n did not see l3 join during the outage"; LOG=$T/$n.log; return 1; }
	done
	# shellcheck disable=SC2086
	for n in $CL_ENCS $CL_LANGS; do
		! grep -q "peer [el][0-9] left" "$T/$n.log" || { MSG="$n let a peer go: $(grep "peer [el][0-9] left" "$T/$n.log" | head -2 | tr '\n' ' ')"; return 1; }
	done
	[ "$(cl_members cr)" = "$before l3" ] || { MSG="members $(cl_members cr), before the outage $before"; return 1; }
	cl_load 2 "$CL_ENCS" l3 "$CL_LENGTHS"
	cl_engines_ok 2 "$CL_ENCS l3" || return 1
	cl_stop_all
	# shellcheck disable=SC2086
	cl_clean $CL_ENCS $CL_LANGS l3 || return 1
	MSG="etcd killed under load and back 5 s later: 18 rooms byte-exact, 0 lost, no peer removed, all 6 records back; l3, started during the outage, registered by e0..e2 after it and served 6 rooms byte-exact"
}

define cluster-isolation "two clusters on one etcd and one bridge (e0, e1, l0, l1 in one; e2, l2 in the other): each lists only its own records, no gateway registers or names a peer of the other, rooms within each byte-exact"
case_cluster_isolation() {
	local n p
	CL_ENCS="e0 e1" CL_LANGS="l0 l1" cl_topology ia e2 l2 || return 1
	cl_cfg e2 ib "$CL_TIMERS"
	cl_cfg l2 ib "$CL_TIMERS"
	for n in e0 e1 e2 l0 l1 l2; do cl_start "$n"; done
	cl_joined ia 60 e0 e1 l0 l1 || return 1
	cl_joined ib 60 e2 l2 || return 1
	[ "$(cl_members ia)" = "e0 e1 l0 l1" ] && [ "$(cl_members ib)" = "e2 l2" ] ||
		{ MSG="members: ia '$(cl_members ia)', ib '$(cl_members ib)'"; return 1; }
	cl_load 1 "e0 e1" "l0 l1" "$CL_LENGTHS"
	cl_load 2 e2 l2 "$CL_LENGTHS"
	cl_engines_ok 1 "e0 e1 l0 l1" && cl_engines_ok 2 "e2 l2" || return 1
	# the engines of l0 see the peers of its own cluster only
	"${CLIENT[@]}" - "$T/l0.sock" <<-'PY' >"$T/peers-l0.log" 2>&1 || { MSG="l0's peers: $(tr '\n' ' ' <"$T/peers-l0.log")"; return 1; }
	import sys
	sys.path.insert(0, "python")
	import embgw
	with embgw.Client(sys.argv[1], "p0", name="probe") as c:
	    names = sorted(p.name for p in c.peers())
	    print("peers", names)
	    sys.exit(0 if names == ["e0", "e1"] else 1)
	PY
	cl_stop_all
	for n in e0 e1 l0 l1; do
		for p in e2 l2; do
			! grep -q "peer $p" "$T/$n.log" || { MSG="$n of cluster ia names $p: $(grep -m1 "peer $p" "$T/$n.log")"; return 1; }
		done
	done
	for n in e2 l2; do
		for p in e0 e1 l0 l1; do
			! grep -q "peer $p" "$T/$n.log" || { MSG="$n of cluster ib names $p: $(grep -m1 "peer $p" "$T/$n.log")"; return 1; }
		done
	done
	cl_clean e0 e1 e2 l0 l1 l2 || return 1
	MSG="ia lists e0 e1 l0 l1, ib lists e2 l2 on one etcd; no gateway names a peer of the other cluster, l0's engine sees $(sed -n 's/^peers //p' "$T/peers-l0.log"); 8 + 2 rooms byte-exact"
}

define cluster-reload "three reloads (SIGHUP) of a language gateway's file under load - an encode peer added, one removed, timers changed - then a broken file refused with its file:line and nothing changed; the rooms of untouched peers byte-exact throughout"
case_cluster_reload() {
	local n peers
	cl_up || { MSG="no bridge for the case"; return 1; }
	for n in $CL_ENCS $CL_LANGS; do
		cl_node "$n" || { MSG="no namespace for $n"; return 1; }
	done
	# static peers: l0 starts with e0 and e1; e2 knows l0 from the start
	# shellcheck disable=SC2086
	for n in $CL_ENCS; do cl_cfg "$n" "" "$CL_TIMERS" $CL_LANGS; done
	cl_cfg l0 "" "$CL_TIMERS" e0 e1
	# shellcheck disable=SC2086
	cl_cfg l1 "" "$CL_TIMERS" $CL_ENCS
	# shellcheck disable=SC2086
	cl_cfg l2 "" "$CL_TIMERS" $CL_ENCS
	for n in $CL_ENCS $CL_LANGS; do cl_start "$n"; done
	# shellcheck disable=SC2086
	cl_wait_up $CL_ENCS $CL_LANGS || { MSG="not up: $(tail -3 "$LOG" | tr '\n' ' ')"; return 1; }
	for n in l1 l2; do wait_log "$T/$n.log" "peer e2 registered" 60 || { MSG="$n did not register e2"; return 1; }; done
	wait_log "$T/l0.log" "peer e1 registered" 60 || { MSG="l0 did not register e1"; return 1; }
	# 1: e2 added to l0 under load (l1, l2 with every encoder)
	CL_HOLD=3 cl_load 1 "$CL_ENCS" "l1 l2" "$CL_LENGTHS"
	peers="$(cl_peer e0), $(cl_peer e1), $(cl_peer e2)"
	sed -i "s|^  peers = ( .* );$|  peers = ( $peers );|" "$T/l0.cfg"
	cl_hup l0 || return 1
	wait_log "$T/l0.log" "peer e2 registered" 30 || { MSG="l0 did not register e2 after its reload"; LOG=$T/l0.log; return 1; }
	cl_load 2 e2 l0 "$CL_LENGTHS"
	cl_engines_ok 1 "$CL_ENCS l1 l2" && cl_engines_ok 2 "e2 l0" || return 1
	# 2: e1 removed from l0 while a room of l0 from e1 is in flight
	CL_HOLD=3 cl_load 3 "$CL_ENCS" "l1 l2" "$CL_LENGTHS"
	CL_HOLD=6 cl_load 4 e1 l0 500
	wait_log "$T/eng-4-e1.log" "^engine-opened:" 60 || { MSG="the engine of e1 opened no room"; return 1; }
	peers="$(cl_peer e0), $(cl_peer e2)"
	sed -i "s|^  peers = ( .* );$|  peers = ( $peers );|" "$T/l0.cfg"
	cl_hup l0 || return 1
	wait_log "$T/l0.log" "peer e1 \(left\|removed\)" 30 || { MSG="l0 did not let e1 go after its reload"; LOG=$T/l0.log; return 1; }
	engines_wait
	grep -qE '^engine-language: .* ok=0 bad=0 failed=1 ' "$T/eng-4-l0.log" || { MSG="l0's room from the removed e1: $(tr '\n' ' ' <"$T/eng-4-l0.log")"; return 1; }
	cl_only_failed 0 "$T/eng-4-e1.log" "$T/eng-3-e0.log" "$T/eng-3-e1.log" "$T/eng-3-e2.log" || return 1
	for n in l1 l2; do grep -qE '^engine-language: .* ok=6 bad=0 failed=0 ' "$T/eng-3-$n.log" || { MSG="run 3, $n: $(tr '\n' ' ' <"$T/eng-3-$n.log")"; return 1; }; done
	# 3: timers changed
	sed -i 's|^  timers = { \(.*\) };$|  timers = { \1 alloc_ms = 1500; };|' "$T/l0.cfg"
	cl_hup l0 || return 1
	# 4: a broken file: refused with file:line, nothing changes
	cp "$T/l0.cfg" "$T/l0.good"
	sed -i 's|^  peers = ( \(.*\) );$|  peers = ( \1, { name = "e9"; address = "not-an-address"; } );|' "$T/l0.cfg"
	kill -HUP "$(pgrep -P "${CL_PID[l0]}")"
	wait_log "$T/l0.log" "$T/l0.cfg:[0-9][0-9]*" 30 || { MSG="no file:line error for the broken file"; LOG=$T/l0.log; return 1; }
	cp "$T/l0.good" "$T/l0.cfg"
	CL_HOLD=0 cl_load 5 "e0 e2" "l0 l1 l2" "$CL_LENGTHS"
	cl_engines_ok 5 "e0 e2 l0 l1 l2" || return 1
	cl_stop_all
	grep -q "peer e9" "$T/l0.log" && { MSG="the broken file's peer e9 came into l0"; return 1; }
	cl_clean e0 e2 l1 l2 || return 1
	expect "$T/l0.log" clients blocks_in_use -eq 0 && expect "$T/e1.log" clients blocks_in_use -eq 0 ||
		{ MSG="blocks left: l0 $(report "$T/l0.log") e1 $(report "$T/e1.log")"; return 1; }
	MSG="e2 added to l0 and served byte-exact, e1 removed with its room in flight Failed with a reason on both sides, timers changed, a broken file refused with file:line and nothing changed; every room of untouched peers byte-exact"
}

# cl_hup NAME: SIGHUP to gateway NAME; its log says the reload was taken
# (a new "reload" line) within 10 s
cl_hup() {
	local before
	before=$(grep -c "reload" "$T/$1.log")
	kill -HUP "$(pgrep -P "${CL_PID[$1]}")" || { MSG="no process of $1"; return 1; }
	for _ in $(seq 1 100); do
		[ "$(grep -c "reload" "$T/$1.log")" -gt "$before" ] && return 0
		sleep 0.1
	done
	MSG="$1 logged no reload within 10 s of SIGHUP"
	LOG=$T/$1.log
	return 1
}

# ---- a routed fabric -------------------------------------------------------
define cluster-routed "the language gateway two subnets away: encode side, router (a plain Linux namespace, ip_forward=1) and language side in three network namespaces; the gateways ARP for the next hop only, every control datagram crosses the router, 4 rooms byte-exact"
case_cluster_routed() {
	local ns=${VETH}n enc_if=${VETH}e0 r1=${VETH}l0 r2=${VETH}e1 lang_if=${VETH}l1
	local fwd0 fwd1
	# encode side (enc) - rtr - language side (lang): two subnets, the
	# router's kernel forwards between them; each gateway's end has no
	# kernel address, so only the gateway answers there
	netns_add "${ns}enc" && netns_add "${ns}rtr" && netns_add "${ns}lang" &&
		netns_link "${ns}enc" "$enc_if" &&
		netns_link "${ns}rtr" "$r1" 10.71.1.254/24 &&
		netns_link "${ns}rtr" "$r2" 10.71.2.254/24 &&
		netns_link "${ns}lang" "$lang_if" &&
		ip netns exec "${ns}rtr" sysctl -qw net.ipv4.ip_forward=1 ||
		{ MSG="cannot build the namespaces"; return 1; }
	head -c 48 /dev/urandom >"$T/psk.key"
	chmod 600 "$T/psk.key"
	cat >"$T/encode.cfg" <<CFG
gateway = {
  name = "enc-0";
  roles = ["encode"];
  key_file = "psk.key";
  pool = { capacity_tokens = 262144; hidden_size = 256; dtype = "bf16"; };
  timers = { $SLACK };
};
ports = ( {
  name = "p0";
  device = "net_af_packet0,iface=$enc_if";
  address = "10.71.1.1/24";
  lcores = [1];
  payload = { driver = "shm"; path = "$T/lang-pool-0"; };
  routes = ( { prefix = "10.71.2.0/24"; via = "10.71.1.254"; } );
  peers = ( { name = "lang-0"; address = "10.71.2.1"; } );
} );
CFG
	cat >"$T/language.cfg" <<CFG
gateway = {
  name = "lang-0";
  roles = ["language"];
  key_file = "psk.key";
  pool = {
    capacity_tokens = 262144; hidden_size = 256; dtype = "bf16";
    policy = { kind = "fixed"; tokens = 1024; };
  };
  timers = { $SLACK };
};
ports = ( {
  name = "p0";
  device = "net_af_packet1,iface=$lang_if";
  address = "10.71.2.1/24";
  lcores = [0];
  payload = { driver = "shm"; path = "$T/lang-pool-0"; };
  routes = ( { prefix = "0.0.0.0/0"; via = "10.71.2.254"; } );
  peers = ( { name = "enc-0"; address = "10.71.1.1"; } );
} );
CFG
	netns_wrap "${ns}enc" "$EMBGW_GEN" "$T/gen-enc" &&
		netns_wrap "${ns}lang" "$EMBGW_GEN" "$T/gen-lang" || return 1
	LOG=$T/enc.log
	start "$T/gen-enc" enc 1 "$T/encode.cfg" "$T/enc.log" 120 --produce
	wait_ready enc || { MSG="the encode side did not come up"; return 1; }
	EMBGW_GEN=$T/gen-lang language_client run_gen "$T/lang.log" 60 \
		--exit-when-done --drive 4 --lengths 500,2000,10000,50000
	fwd0=$(ip netns exec "${ns}rtr" cat "/sys/class/net/$r1/statistics/tx_packets")
	fwd1=$(ip netns exec "${ns}rtr" cat "/sys/class/net/$r2/statistics/tx_packets")
	MSG="lang: $(report "$T/lang.log") enc: $(report "$T/enc.log") router tx: $fwd0/$fwd1"
	expect "$T/lang.log" result errors -eq 0 && expect "$T/lang.log" result leaked -eq 0 &&
		expect "$T/lang.log" result rounds -eq 3 &&
		expect "$T/lang.log" result bytes -eq 33000256 &&
		expect "$T/enc.log" result-encode leaked -eq 0 &&
		expect "$T/enc.log" result-encode ok -eq 4 || return 1
	# the router is the only way between them (it answers ARP for its
	# own addresses only: a gateway that asked for its peer would never
	# send), so what each side received came through it
	expect "$T/lang.log" node rx_datagrams -gt 0 && expect "$T/enc.log" node rx_datagrams -gt 0 &&
		[ "${fwd0:-0}" -ge "$(field "$T/enc.log" node rx_datagrams)" ] &&
		[ "${fwd1:-0}" -ge "$(field "$T/lang.log" node rx_datagrams)" ] ||
		{ MSG="$MSG; fewer frames through the router than the gateways received"; return 1; }
	MSG="4 rooms byte-exact through the router ($fwd1 frames forwarded to the language side, $fwd0 to the encode side), nothing leaked"
}

# ---- the runner -------------------------------------------------------------
passed=0
failed=0
trap 'stop_all; cl_down; veth_down; netns_down; hugepages_down; [ -n "$T" ] && rm -rf "$T"' EXIT
trap 'exit 130' INT TERM

run_case() {
	local name=$1 rc
	T=$(mktemp -d "${TMPDIR:-/tmp}/embgw-it-$name.XXXXXX")
	MSG=""
	LOG=""
	# two links: enough for every case (peer-killed has two encode peers)
	if veth_up 2; then
		"case_${name//-/_}"
		rc=$?
	else
		MSG="no veth pair for the case"
		rc=1
	fi
	stop_all
	cl_down
	veth_down
	netns_down
	hugepages_down
	if [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
		echo "ok   $name: $MSG"
		rm -rf "$T"
	else
		failed=$((failed + 1))
		echo "FAIL $name: $MSG"
		[ -n "$LOG" ] && [ -f "$LOG" ] && tail -25 "$LOG" | sed 's/^/     /'
		echo "     logs kept in $T"
	fi
	T=""
}

case "${1:-}" in
--list)
	for c in "${CASES[@]}"; do
		printf '%-22s %s\n' "$c" "${ABOUT[$c]}"
	done
	exit 0 ;;
-h|--help)
	sed -n '2,13s/^# \{0,1\}//p' "$0"
	exit 0 ;;
esac
# the cases pass test options (--ctl-drop, --inject-junk, --test-session):
# a production build refuses them, so the suite wants a test build
if ! "$EMBGW" --help 2>&1 | grep -q "^test-build options"; then
	echo "run.sh: $EMBGW is not a test build: configure its build with" \
		"meson -Dtest_hooks=true (scripts/test.sh does)" >&2
	exit 2
fi
selected=("$@")
[ $# -gt 0 ] || selected=("${CASES[@]}")
for c in "${selected[@]}"; do
	if [ -z "${ABOUT[$c]+x}" ]; then
		echo "run.sh: no case '$c' (tests/integration/run.sh --list names them)" >&2
		exit 2
	fi
done
for c in "${selected[@]}"; do
	run_case "$c"
done
echo "integration: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
