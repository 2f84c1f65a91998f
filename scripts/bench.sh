#!/usr/bin/env bash
# Benchmarks (not tests): every figure is measured side by side with its
# reference in the same run, medians of ROUNDS rounds, and printed as
#   bench <name>: <value> <unit> (ratio <r> vs <reference>)
# The table goes to doc/benchmarks.md (or $EMBGW_BENCH_OUT) with the machine.
# EMBGW_BENCH_QUICK=1: one small round of each (the test command's smoke run).
# EMBGW_BENCH_ONLY=room-time, =control or =engines: that phase alone, its
# lines printed, the table left as it is.
# EMBGW_BENCH_VM=0: the soft-RoCE guests' phase left out (it takes up to
# 40 minutes of emulation; tests/vm/run.sh runs it alone).
# The gateways here are joined by net_memif, unlike the demo's and the
# tests' (doc/gateway.md, "Same-host devices"): the reference the gateway
# is compared against is testpmd over memif. A memif peer that leaves can
# crash the survivor still polling (a client whose server left, seen here;
# a server outlives its client), so every process leaves only once the
# traffic is done, one at a time, the last started (the memif client)
# first, and no figure waits on a process that outlived its peer: a
# process that ends otherwise than with status 0 is named with its status
# (bench PHASE: NAME ended with ...), the figures its report would have
# given are left out of that round, and the run goes on to the other
# figures. The run's last lines list those processes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh # libzmq3-dev for the reference figures, among the rest
# EMBGW_BUILD: a build to use as it is (scripts/test.sh passes its own);
# else build/, configured and built here
B=${EMBGW_BUILD:-build}
if [ -z "${EMBGW_BUILD:-}" ]; then
	[ -f build/build.ninja ] || meson setup build >/dev/null
	meson setup --reconfigure build >/dev/null 2>&1 || true
	ninja -C build >/dev/null
fi
. tests/integration/lib.sh

quick=${EMBGW_BENCH_QUICK:-0}
rounds=5
[ "$quick" = 1 ] && rounds=1
table=${EMBGW_BENCH_OUT:-doc/benchmarks.md}
W=$(mktemp -d /tmp/embgw-bench.XXXXXX)
# once, at whatever point the run ends: a failing stop must not keep the
# folder (the trap runs without set -e, and only once)
cleaned=0
cleanup() {
	[ "$cleaned" = 1 ] && return 0
	cleaned=1
	set +e
	stop_all
	# the Python engines of a round in progress (engines.sh)
	# shellcheck disable=SC2086 # two PIDs, split on purpose
	[ -z "${eng_pids:-}" ] || kill -KILL $eng_pids 2>/dev/null
	rm -rf "$W" "${rt_pool:-}" "${eng_pool:-}"
}
trap cleanup EXIT
rows=()
ended=() # "PHASE: NAME STATUS" of every process that ended badly

# A process of ours and its name, for the lines that name it.
declare -A pname=()
bstart() { # NAME start_gw|start_gen args...: started, named NAME
	local n=$1
	shift
	"$@" >/dev/null
	pname[${PIDS[-1]}]=$n
}
# note PHASE NAME STATUS: a process that did not end with 0 is named with
# its status (a signal's name for 129..159: the process died)
note() {
	[ "$3" = 0 ] && return 0
	local why="exit status $3"
	if [ "$3" -gt 128 ] && [ "$3" -lt 160 ]; then
		why+=" (SIG$(kill -l $(($3 - 128)) 2>/dev/null || echo $(($3 - 128))))"
	elif [ "$3" = 124 ]; then
		why+=" (its time limit)"
	fi
	echo "bench $1: $2 ended with $why; its report's figures are left out of this round" >&2
	ended+=("$1: $2 $why")
}
# stop PHASE: every process of ours, the last started first (a memif
# client before its server), each sent SIGINT and reaped before the next
# is; each one's status noted
stop() {
	local i p rc
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		p=${PIDS[i]}
		kill -INT "$p" 2>/dev/null || true
		rc=0
		wait "$p" 2>/dev/null || rc=$?
		note "$1" "${pname[$p]:-pid $p}" "$rc"
	done
	PIDS=()
}
# fgrun PHASE NAME run_gw|run_gen args...: in the foreground, its status noted
fgrun() {
	local ph=$1 n=$2 rc=0
	shift 2
	"$@" || rc=$?
	note "$ph" "$n" "$rc"
	return 0
}
# poll_cfg CFG OUT: CFG with every port busy polling (idle mode "poll")
# instead of backing off when idle, the default
poll_cfg() {
	sed -E 's/^( *)lcores = \[([0-9, ]*)\];/&\n\1idle = { mode = "poll"; };/' "$1" >"$2"
	grep -q 'mode = "poll"' "$2"
}
# keep ARRAY VALUE: VALUE appended when it is a number (a missing report
# line gives none)
keep() {
	local -n a=$1
	[[ $2 =~ ^[0-9]+([.][0-9]+)?$ ]] && a+=("$2")
	return 0
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]; else print 0}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }
# kv KEY LINE: the value of KEY=... in a benchmark's report line
kv() { sed -nE "s/.* $1=([0-9.,]+).*/\1/p" <<<"$2"; }
emit() { # name value unit ratio reference aim
	echo "bench $1: $2 $3 (ratio $4 vs $5)"
	rows+=("| $1 | $2 $3 | $4 | $5 | $6 |")
}
. tests/bench/room-time.sh
. tests/bench/control.sh
. tests/bench/engines.sh
case "${EMBGW_BENCH_ONLY:-}" in
room-time | control | engines)
	"${EMBGW_BENCH_ONLY//-/_}_phase"
	[ "${#ended[@]}" = 0 ] || printf 'bench: ended badly: %s\n' "${ended[@]}"
	exit 0
	;;
esac

# ---- pool: alloc+free at 50% fragmentation vs rte_mempool get/put -------
ops=2000000
[ "$quick" = 1 ] && ops=100000
line=$("$B"/tests/bench/bench_pool -l 0 --no-huge --no-pci -m 256 \
	--file-prefix egw-bench-$$ --log-level=4 -- "$rounds" "$ops" 2>/dev/null | grep ^pool_ns) ||
	note pool bench_pool "$?"

pns=$(awk '{print $2}' <<<"$line")
mns=$(awk '{print $4}' <<<"$line")
tns=$(awk '{print $6}' <<<"$line")
emit pool-alloc-free "$pns" "ns/op (CPU time, single-block cache on, as deployed)" \
	"$(ratio "$pns" "$mns")" "rte_mempool get+put ${mns} ns/op" "<= 2"
emit pool-tree-alloc-free "$tns" "ns/op (CPU time, free-run tree alone: cache off)" \
	"$(ratio "$tns" "$mns")" "rte_mempool get+put ${mns} ns/op" "-"

# ---- the attach path: an engine's command off its submission ring -------
# The worker's CPU for taking a command off a client's ring, checking it,
# acting on it (room operations that do nothing: lib/engines alone) and
# posting its completion, against one bare put+get of a 64-byte entry.
cmds=2000000
[ "$quick" = 1 ] && cmds=100000
line=$("$B"/tests/bench/bench_clients "$rounds" "$cmds" | grep ^clients_ns) ||
	note attach bench_clients "$?"
cop=$(kv open_abort "$line")
cnop=$(kv nop "$line")
cring=$(kv ring "$line")
emit attach-command "$cop" "ns of worker CPU per engine command (RECV_OPEN or ABORT: checked, applied, answered; NOP $cnop ns)" \
	"$(ratio "$cop" "$cring")" "a bare 64-byte ring put+get ${cring} ns" "< 100 ns"

# ---- mac: a datagram's tag, the protocol's against version 2's ----------
# SipHash-2-4-128 (doc/protocol.md) against keyed BLAKE2b-128 over the same
# real datagrams (HEARTBEAT, STATUS, INIT of one run, REGISTER: 48, 64, 84
# and 216 bytes tagged), in one process, interleaved; the mean of the four.
tags=500000
[ "$quick" = 1 ] && tags=20000
line=$("$B"/tests/bench/bench_mac "$rounds" "$tags" | grep ^mac_ns) ||
	note mac bench_mac "$?"
msz=$(kv sizes "$line")
msip=$(kv siphash "$line")
mb2=$(kv blake2b "$line")
msm=$(kv siphash_mean "$line")
mbm=$(kv blake2b_mean "$line")
if [ -n "$msm" ] && [ -n "$mbm" ]; then
	emit mac "$msm" "ns per datagram's tag (SipHash-2-4-128; $msip ns for $msz bytes tagged)" \
		"$(ratio "$msm" "$mbm")" "keyed BLAKE2b-128 (version 2's tag) $mbm ns ($mb2 ns)" "<= 0.25"
fi

control_phase


# ---- resume cost: 50,000 tokens from an 8,192 default vs pre-allocated ---
n=10
[ "$quick" = 1 ] && n=2
scripts/gen-configs.sh --memif "$W/r8k" 8192 262144 >/dev/null
scripts/gen-configs.sh --memif "$W/rfull" 50048 262144 >/dev/null
lat_r=() lat_f=()
for r in $(seq 1 "$rounds"); do
	for cfg in r8k rfull; do
		bstart enc start_gen enc 1 "$W/$cfg/encode.cfg" "$W/enc.log" --produce
		wait_socket "$W/$cfg/memif0.sock" || true
		fgrun resume lang run_gen lang 0 "$W/$cfg/language.cfg" "$W/lang.log" 120 --exit-when-done \
			--drive "$n" --lengths 50000
		stop resume
		v=$(field "$W/lang.log" latency p50_ms)
		if [ "$cfg" = r8k ]; then keep lat_r "$v"; else keep lat_f "$v"; fi
	done
done
lr=$(printf '%s\n' "${lat_r[@]}" | median)
lf=$(printf '%s\n' "${lat_f[@]}" | median)
emit resume-cost "$lr" "ms per 50,000-token room (default 8,192)" "$(ratio "$lr" "$lf")" \
	"fully pre-allocated ${lf} ms" "<= 1.1"

# ---- under flood: valid rooms/s with junk at the port vs without --------
# embgw-gen is the language peer: it drives the rooms and, in the flooded
# rounds, sends --flood-pps junk datagrams/s (random bytes, bad MACs, wrong
# keys, truncations, other ports) at the same port of the gateway under test.
drive=300
[ "$quick" = 1 ] && drive=40
flood=200000
scripts/gen-configs.sh --memif "$W/fl" 1024 262144 >/dev/null
rate() { # [extra embgw-gen args...]: rate_v its rooms/s ("" if not known)
	rate_v=""
	bstart enc start_gen enc 1 "$W/fl/encode.cfg" "$W/enc.log" --produce
	wait_socket "$W/fl/memif0.sock" || true
	fgrun flood lang run_gen gen 0 "$W/fl/language.cfg" "$W/lang.log" 120 \
		--drive "$drive" --concurrency 16 --lengths 2000 "$@"
	stop flood
	local ok secs
	ok=$(field "$W/lang.log" language ok)
	secs=$(field "$W/lang.log" latency secs)
	[ -n "$ok" ] && [ -n "$secs" ] &&
		rate_v="$(awk -v n="$ok" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')"
	return 0
}
f1=() f0=() fj=()
for r in $(seq 1 "$rounds"); do
	rate && keep f0 "$rate_v"
	rate --flood-pps "$flood" --seed "$r" && keep f1 "$rate_v"
	# what reached the gateway: its own drop counters
	keep fj "$(field "$W/enc.log" node dropped)"
done
q0=$(printf '%s\n' "${f0[@]}" | median)
q1=$(printf '%s\n' "${f1[@]}" | median)
qj=$(printf '%s\n' "${fj[@]}" | median)
emit under-flood "$q1" "rooms/s while embgw-gen floods ${flood} junk datagrams/s (${qj} rejected before the state machines per round)" \
	"$(ratio "$q1" "$q0")" "no flood ${q0} rooms/s" ">= 0.8"

# ---- idle: what a gateway with nothing to do costs, and what it adds ---
# A registered gateway pair (embgw over memif, no rooms) left alone: each
# gateway's CPU over a few seconds from /proc (utime + stime), its workers
# backing off when idle (the default, idle.max_sleep_us 1000) vs busy
# polling. Then rooms after idle stretches: 1-token rooms at 20 per
# second (each after 50 ms of nothing), INIT to Success - a few control
# round trips with both workers asleep when a room starts - both modes.
idle_rounds=$((rounds < 3 ? rounds : 3))
scripts/gen-configs.sh --memif "$W/idle" 128 262144 >/dev/null
for c in encode language; do
	poll_cfg "$W/idle/$c.cfg" "$W/idle/$c-poll.cfg"
done
ticks() { # PID of a timeout wrapper of ours: its program's CPU ticks so far
	local c
	c=$(pgrep -P "$1" | head -1) || true
	[ -n "$c" ] && awk '{ print $14 + $15 }' "/proc/$c/stat" 2>/dev/null
	return 0
}
idle_cpu() { # SUFFIX: idle_pct, the CPU % of one core of each gateway of
	# the idle pair (configurations *$SUFFIX.cfg), their mean
	local e l e0 l0 e1 l1 secs=3 hz
	[ "$quick" = 1 ] && secs=1
	hz=$(getconf CLK_TCK)
	bstart enc start_gw enc 1 "$W/idle/encode$1.cfg" "$W/enc.log"
	e=${PIDS[-1]}
	wait_socket "$W/idle/memif0.sock" || true
	bstart lang start_gw lang 0 "$W/idle/language$1.cfg" "$W/lang.log"
	l=${PIDS[-1]}
	if wait_registered "$W/lang.log" 30 && sleep 1; then
		e0=$(ticks "$e") l0=$(ticks "$l")
		sleep "$secs"
		e1=$(ticks "$e") l1=$(ticks "$l")
		if [ -n "$e0" ] && [ -n "$l0" ] && [ -n "$e1" ] && [ -n "$l1" ]; then
			idle_pct=$(awk -v a=$((e1 - e0 + l1 - l0)) -v hz="$hz" -v s="$secs" \
				'BEGIN { printf "%.1f", a * 100 / hz / s / 2 }')
		fi
	fi
	stop idle
}
idle_rtt() { # SUFFIX: p50 ms of 1-token rooms at 20/s (idle_p50)
	bstart enc start_gen enc 1 "$W/idle/encode$1.cfg" "$W/enc.log" --produce
	wait_socket "$W/idle/memif0.sock" || true
	fgrun idle lang run_gen lang 0 "$W/idle/language$1.cfg" "$W/lang.log" 60 \
		--exit-when-done --drive 40 --rate 20 --lengths 1
	idle_p50=$(field "$W/lang.log" latency p50_ms)
	idle_late=$(field "$W/lang.log" idle late_max_us)
	stop idle
}
ic_b=() ic_p=() il_b=() il_p=() il_late=()
for r in $(seq 1 "$idle_rounds"); do
	idle_pct="" && idle_cpu "" && keep ic_b "$idle_pct"
	idle_pct="" && idle_cpu -poll && keep ic_p "$idle_pct"
	idle_rtt "" && keep il_b "$idle_p50" && keep il_late "$idle_late"
	idle_rtt -poll && keep il_p "$idle_p50"
done
if [ "${#ic_b[@]}" -gt 0 ] && [ "${#ic_p[@]}" -gt 0 ]; then
	cb=$(printf '%s\n' "${ic_b[@]}" | median)
	cq=$(printf '%s\n' "${ic_p[@]}" | median)
	emit idle-cpu "$cb" "% of a core per idle gateway (a registered pair, nothing to do; workers backing off, the default)" \
		"$(ratio "$cb" "$cq")" "the same pair busy polling, $cq %" "<= 0.1"
else
	echo "bench idle-cpu: not measured (no round completed; the reasons are above)"
fi
if [ "${#il_b[@]}" -gt 0 ] && [ "${#il_p[@]}" -gt 0 ]; then
	lb=$(printf '%s\n' "${il_b[@]}" | median)
	lq=$(printf '%s\n' "${il_p[@]}" | median)
	lk=$(printf '%s\n' "${il_late[@]}" | median)
	emit idle-latency "$lb" "ms INIT to Success of a 1-token room after 50 ms idle, workers backing off ($(awk -v a="$lb" -v b="$lq" 'BEGIN { printf "%+.0f", (a - b) * 1000 }') us; a sleep overran its time by ${lk} us at most)" \
		"$(ratio "$lb" "$lq")" "the same pair busy polling, $lq ms" "-"
else
	echo "bench idle-latency: not measured (no round completed; the reasons are above)"
fi

engines_phase

# ---- room-time: one room from the encoder's output to every rank --------
room_time_phase

# ---- payload over RoCEv2: soft-RoCE guests (tests/vm/run.sh) ------------
# its benchmark phase alone, guests of its own (build-vm-bench/): a
# deployment's geometry, several rooms in flight, against ib_write_bw at
# the gateway's own write size in the same guests; skipped in a QUICK run
# (the test command's VM run proves the behaviour)
if [ "$quick" = 1 ]; then
	echo "bench payload-rocev2: not measured (QUICK run: the guests take minutes)"
elif [ "${EMBGW_BENCH_VM:-1}" = 0 ]; then
	echo "bench payload-rocev2: not measured (EMBGW_BENCH_VM=0)"
else
	vmout=$(EMBGW_VM_OUT="$PWD/build-vm-bench" EMBGW_VM_BENCH_ONLY=1 \
		timeout 2400 tests/vm/run.sh "$B/app/embgw/embgw" 2>&1) ||
		echo "bench payload-rocev2: the VM run ended with status $? (build-vm-bench/)"
	# each round's line too: the figure's spread lies in them
	grep "^bench vm-payload-round: " <<<"$vmout" || true
	vm=$(grep "^bench vm-payload-rocev2: " <<<"$vmout" || true)
	v=$(sed -nE 's/^bench vm-payload-rocev2: ([0-9.]+) MB\/s \(ratio ([0-9.a-z\/]+) vs ib_write_bw ([0-9.]+) Gb\/s .* write size, ([0-9]+) bytes; ([0-9]+) rooms in flight, ([0-9]+) rooms of ([0-9,]+) tokens, hidden ([0-9]+) bf16.*/\1 \2 \3 \4 \5 \6 \7 \8/p' <<<"$vm")
	if [ -n "$v" ]; then
		read -r vg vr vi vw vc vn vl vh <<<"$v"
		emit payload-rocev2 "$vg" "MB/s (soft-RoCE, two TCG guests; $vn rooms of $vl tokens, hidden $vh bf16, $vc rooms in flight, writes of $vw bytes on average)" "$vr" \
			"ib_write_bw $vi Gb/s at $vw-byte writes, same rxe pair, same run" ">= 0.9"
	else
		echo "bench payload-rocev2: not measured ($(grep -E '^vm: ' <<<"$vmout" | tail -1))"
	fi
fi
# the window keys' cost: from the test command's VM run (build-vm/)
if [ -f build-vm/lang-gw.log ]; then
	wk=$(EMBGW_VM_JUDGE_ONLY=1 EMBGW_VM_BENCH_ROUNDS=0 tests/vm/run.sh 2>/dev/null | grep "^bench vm-window-keys" || true)
	v=$(sed -nE 's/^bench vm-window-keys: ([0-9.]+) us per window .* \(ratio ([0-9.]+) vs the mean window of the same run, ([0-9.]+) ms\)/\1 \2 \3/p' <<<"$wk")
	if [ -n "$v" ]; then
		read -r wu wr wm <<<"$v"
		emit window-keys "$wu" "us to open and close a window (soft-RoCE, TCG guest: bind + invalidation, posted and completed)" \
			"$wr" "the mean window (round) of the same run, $wm ms" "-"
	fi
fi

# ---- cluster: one gateway learning a cluster of 1,000 from etcd ---------
cn=1000
[ "$quick" = 1 ] && cn=100
if cv=$(EMBGW_BUILD=$B tests/bench/cluster-converge.sh "$cn" 2>&1 | tail -1) &&
	[[ $cv == cluster-converge:* ]]; then
	cf() { sed -nE "s/.* $1=([0-9]+).*/\1/p" <<<"$cv"; }
	emit cluster-converge "$(cf ms)" "ms for one gateway to list $cn peers written to etcd ($(cf bytes_per_peer) bytes of memory per peer; worker CPU with nothing changing $(cf cpu_quiet_ms_per_s) ms/s)" \
		"-" "the same gateway without the peers: $(cf cpu_quiet_base_ms_per_s) ms/s of worker CPU" "< 1000 ms, < 4096 bytes, no worker CPU"
else
	echo "bench cluster-converge: not measured: $cv"
fi

# ---- processes that ended badly --------------------------------------------
if [ "${#ended[@]}" -gt 0 ]; then
	echo "bench: ${#ended[@]} process(es) ended otherwise than with status 0 (their rounds' figures left out):"
	printf '  %s\n' "${ended[@]}"
fi

# ---- the table ------------------------------------------------------------
cpu=$(lscpu 2>/dev/null | sed -nE 's/^Model name: +//p' | head -1)
{
	echo "<!-- written by scripts/bench.sh; the prose below the table is kept -->"
	echo "## Latest run"
	echo
	echo "$(date -u +%Y-%m-%d), $(nproc) cores ${cpu:+($cpu)}, $(free -g | awk '/Mem:/ {print $2}') GiB;"
	echo "medians of $rounds round(s)$([ "$quick" = 1 ] && echo ' (QUICK smoke run: not representative)')."
	echo
	echo "| figure | value | ratio | reference (same run) | aim |"
	echo "|---|---|---|---|---|"
	printf '%s\n' "${rows[@]}"
	echo
	if [ "${#ended[@]}" -gt 0 ]; then
		echo "Processes that ended otherwise than with status 0 in this run (their rounds' figures left out):"
		echo
		printf -- '- %s\n' "${ended[@]}"
		echo
	fi
	# the prose: everything from the first section after the table
	[ -f "$table" ] && sed -n '/^## How the figures/,$p' "$table"
} > "$W/table.md"
if [ "$quick" = 1 ]; then
	echo "bench: quick run, $table left as it is"
else
	cp "$W/table.md" "$table"
	echo "bench: table written to $table"
fi
