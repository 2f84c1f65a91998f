#!/usr/bin/env bash
# The demo: inference engines moving real PyTorch tensors through two embgw
# gateways on this host - an encode gateway and a language gateway joined
# by net_af_packet on a veth pair of the demo's own (DPDK, --no-pci, no
# hugepages needed; the pair has no address and is removed at exit, see
# doc/gateway.md, "Same-host devices"), payload over the shm driver, each
# with an attach socket (doc/client.md). A Python encode
# engine (examples/encode_worker.py: a small vision encoder over synthetic
# images) sends each request's embeddings; two language rank processes
# (examples/language_worker.py: tensor parallelism over 2 ranks) receive
# them, check them bit for bit against the encoder's and run a small
# transformer prefill over them.
#
# Phases: the reference design's scenarios (500, 2000, 10000 and 50000
# tokens) against language defaults of 1024 and 8192 tokens (the
# configuration's policy.tokens), then a mixed load of concurrent requests;
# last, as an extra phase, the gateways alone with their built-in producer
# and verifier. The last line counts the engine-path rooms:
#   demo: <rooms> rooms, <bytes> bytes verified, <rounds> resume rounds,
#         <errors> errors, <leaked> leaked blocks
# (on one line; errors and leaked blocks include the extra phase's), exit
# status non-zero on any error or leak.
set -euo pipefail
cd "$(dirname "$0")/.."
EMBGW_SKIP_VM=1 scripts/deps.sh  # the demo needs no VM
[ -f build/build.ninja ] || meson setup build -Ddpdk=enabled >/dev/null
ninja -C build >/dev/null
. tests/integration/lib.sh
export EMBGW_CLIENT_LIB=$PWD/build/lib/client/libegw_client.so
PY=/usr/bin/python3
# every process of a phase ends within this many seconds, come what may
PHASE_S=600
# the language ranks ask for each request before the encoder has run it:
# the encode side may take its time to open a room (bootstrap_ms). The
# engines share this host's cores with both gateways' workers (which
# sleep when idle, the ports' default: doc/configuration.md, "idle"),
# and on a loaded host a live process can go without CPU for
# seconds: a peer is dead after 30 s of silence (not 1 s), a transfer
# after 30 s without progress (not 5 s), an engine after a 60 s lease
# (not 10 s)
TIMERS="bootstrap_ms = 60000; peer_dead_ms = 30000; round_ms = 30000;"

rooms=0 bytes=0 rounds=0 errors=0 leaked=0
dir=$(mktemp -d /tmp/embgw-demo.XXXXXX)
# the link between the two gateways: one veth pair, removed on every exit
trap 'veth_down; rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM HUP
veth_up 1 || { echo "demo: cannot create a veth pair (the demo needs root, for ip link)"; exit 1; }
WORKERS=()
stop_workers() {
	for p in "${WORKERS[@]}"; do
		kill -TERM "$p" 2>/dev/null || :  # timeout passes it on
	done
	WORKERS=()
}
# the logs stay when something failed
trap 'rc=$?; stop_workers; stop_all; veth_down
	if [ $rc -eq 0 ]; then rm -rf "$dir"; else echo "demo: logs kept in $dir"; fi' EXIT

# worker_sum SECTION KEY LOG...: KEY summed over the lines of the LOGs that
# start with SECTION (the workers' lines have no port=)
worker_sum() {
	local section=$1 key=$2
	shift 2
	awk -v s="$section:" -v k="$key=" '$1 == s {
		for (i = 2; i <= NF; i++)
			if (index($i, k) == 1) t += substr($i, length(k) + 1)
	} END { print t + 0 }' "$@"
}

# engine_phase TITLE DEFAULT BASE CONCURRENCY LENGTHS [REPEAT]
engine_phase() {
	local title=$1 def=$2 base=$3 conc=$4 lengths=$5 repeat=${6:-1}
	local d=$dir/engines-$base bad=0 r
	echo "== $title (language default $def tokens)"
	scripts/gen-configs.sh --veth "$VETH" --attach "$d" "$def" 262144 "$TIMERS" >/dev/null
	attach_lease 60000 "$d/encode.cfg" "$d/language.cfg"
	start "$EMBGW" enc 1 "$d/encode.cfg" "$d/enc.log" "$PHASE_S"
	wait_ready enc
	start "$EMBGW" lang 0 "$d/language.cfg" "$d/lang.log" "$PHASE_S"
	# the engines start once the gateways have registered with each other
	wait_socket "$d/lang-0.sock" && wait_socket "$d/enc-0.sock" &&
		wait_registered "$d/enc.log" 30 && wait_registered "$d/lang.log" 30 ||
		{ echo "demo: the gateways did not come up:"; tail "$d"/*.log; exit 1; }
	# the language ranks ask first; the encoder's output follows
	for r in 0 1; do
		timeout -s KILL "$PHASE_S" $PY examples/language_worker.py \
			"$d/lang-0.sock" --rank $r --nranks 2 --dist "$d/tp" \
			--lengths "$lengths" --repeat "$repeat" --base "$base" \
			--concurrency "$conc" >"$d/rank$r.log" 2>&1 &
		WORKERS+=($!)
	done
	# a worker's exit status says whether all its rooms succeeded: the
	# rooms are counted from the lines below
	# (every process in the background, waited for: an interrupt ends the
	# wait at once, and the EXIT trap stops them all)
	timeout -s KILL "$PHASE_S" $PY examples/encode_worker.py "$d/enc-0.sock" \
		--nranks 2 --lengths "$lengths" --repeat "$repeat" \
		--base "$base" --concurrency "$conc" >"$d/encode.log" 2>&1 &
	WORKERS+=($!)
	for p in "${WORKERS[@]}"; do
		wait "$p" || :
	done
	WORKERS=()
	# a worker that died before its last line is an error of its own
	for r in encode rank0 rank1; do
		grep -qE "^(encode|language)-worker: " "$d/$r.log" || bad=$((bad + 1))
	done
	stop_all
	{ grep -hE "^room .*prefilled" "$d/rank0.log" | tail -8
	  grep -hE "^(encode-worker|language-worker):" "$d/encode.log" \
		"$d/rank0.log" "$d/rank1.log"; } | sed 's/^/   /' || :
	grep -hvE "^(room .*prefilled|encode-worker:|language-worker:)" \
		"$d/encode.log" "$d/rank0.log" "$d/rank1.log" | sed 's/^/   ! /' || :
	sed -n 's/^clients: /   encode gateway:   /p' "$d/enc.log"
	sed -n 's/^clients: /   language gateway: /p' "$d/lang.log"
	for r in "$d/enc.log" "$d/lang.log"; do
		grep -q "^clients: " "$r" ||
			{ echo "   ! $r: no clients line"; tail -5 "$r"; errors=$((errors + 1)); }
	done
	rooms=$((rooms + $(worker_sum encode-worker ok "$d/encode.log")))
	bytes=$((bytes + $(worker_sum language-worker bytes "$d/rank0.log" "$d/rank1.log")))
	rounds=$((rounds + $(field "$d/lang.log" clients rounds) + 0))
	# a room is an error once: failed (the encoder hears every rank's
	# failure) or received different by a rank
	errors=$((errors + bad + $(worker_sum encode-worker failed "$d/encode.log") +
		$(worker_sum language-worker bad "$d/rank0.log" "$d/rank1.log")))
	leaked=$((leaked + $(field "$d/enc.log" clients blocks_in_use) + 0 +
		$(field "$d/lang.log" clients blocks_in_use) + 0))
}

# builtin_phase TITLE DEFAULT LANGUAGE-ARGS...: the gateways alone
builtin_phase() {
	local title=$1 def=$2 d=$dir/builtin
	shift 2
	echo "== $title (language default $def tokens)"
	scripts/gen-configs.sh --veth "$VETH" "$d" "$def" 262144 "$TIMERS" >/dev/null
	start_gen enc 1 "$d/encode.cfg" "$d/enc.log" --produce
	wait_ready enc
	local rc=0 failed
	run_gen lang 0 "$d/language.cfg" "$d/lang.log" 90 --exit-when-done "$@" || rc=$?
	stop_all
	grep -hE "^(language|latency|failed):" "$d/lang.log" | sed 's/^/   /' || :
	grep -hE "^encode:" "$d/enc.log" | sed 's/^/   /' || :
	failed=$(field "$d/lang.log" result errors)
	# a non-zero exit for failed rooms is counted by the report's errors;
	# any other (no report, a crash, a timeout) is an error of its own
	if [ "$rc" -ne 0 ] && [ "${failed:-0}" -eq 0 ]; then
		echo "language gateway failed (exit $rc):"; tail -20 "$d/lang.log"
		errors=$((errors + 1))
	fi
	errors=$((errors + ${failed:-0} + $(field "$d/enc.log" result-encode failed)))
	leaked=$((leaked + $(field "$d/lang.log" result leaked) +
		$(field "$d/enc.log" result-encode leaked)))
}

engine_phase "engines: the reference design's scenarios" 1024 1 4 500,2000,10000,50000
engine_phase "engines: the reference design's scenarios" 8192 2 4 500,2000,10000,50000
engine_phase "engines: mixed load, 32 requests, 8 at a time" 1024 3 8 \
	300,700,1200,2000,4000,10000,129,8192 4
builtin_phase "extra: the gateways alone, built-in producer and verifier, 200 rooms, 16 at a time, 2 TP ranks" 1024 \
	--drive 200 --concurrency 16 --ranks 2 --lengths 300,700,1200,2000,4000,10000,129,8192
echo "demo: $rooms rooms, $bytes bytes verified, $rounds resume rounds, $errors errors, $leaked leaked blocks"
[ "$errors" -eq 0 ] && [ "$leaked" -eq 0 ]
