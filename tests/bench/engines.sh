# shellcheck shell=bash disable=SC2154 # bench.sh sets W, B, rounds, quick
# The engines phase of scripts/bench.sh (sourced by it: it uses its W, B,
# rounds, quick, bstart, fgrun, note, stop, field, keep, median, ratio,
# poll_cfg and emit; EMBGW_BENCH_ONLY=engines runs it alone): Python
# engines through the attach sockets against the built-in producer and
# verifier on the same gateway pair.
engines_phase() {
	# ---- engines: Python clients through the attach sockets vs built-in ----
	# The same gateway pair (attach sockets, bf16, hidden 4096, pools of
	# 65,536 tokens = 512 MiB each) moves 10,000-token rooms, 4 in flight:
	# once between the built-in producer and verifier (--produce, --drive),
	# once between two Python engine processes (tests/integration/engine.py
	# --bench over the embgw package: scatter + commit, zero-copy views +
	# release, every byte checked in the views), and once more between the
	# Python engines with both gateways busy polling (idle mode "poll")
	# instead of backing off when idle, the default. Wall rate from the
	# first room opened on either side, once both engines are up, to the
	# last room released; the clients' CPU per room from their own
	# process times.
	n=16
	[ "$quick" = 1 ] && n=3
	scripts/gen-configs.sh --memif --attach --hidden 4096 --enc-capacity 65536 "$W/eng" 1024 65536 \
		"peer_dead_ms = 5000;" >/dev/null
	# the language pool's file on tmpfs, as in production (configuration.md,
	# payload), not under $W: on a disk every write is a dirty page to write back
	eng_pool=/dev/shm/embgw-bench-$$-eng-pool
	sed -i "s|\"$W/eng/lang-pool-0\"|\"$eng_pool\"|" "$W/eng/encode.cfg" "$W/eng/language.cfg"
	poll_cfg "$W/eng/encode.cfg" "$W/eng/encode-poll.cfg"
	poll_cfg "$W/eng/language.cfg" "$W/eng/language-poll.cfg"
	ENGINE=(env "EMBGW_CLIENT_LIB=$B/lib/client/libegw_client.so"
		timeout -s KILL 300 /usr/bin/python3 tests/integration/engine.py)
	eng_pair() { # START ENCODE_CFG [args]: the encode gateway (start_gw) or
		# embgw-gen, up; each run maps a fresh language pool file: neither
		# run finds the other's pages already in memory
		rm -f "$eng_pool"
		bstart enc "$1" enc 1 "$2" "$W/enc.log" "${@:3}"
		{ wait_socket "$W/eng/memif0.sock" && wait_ready enc; } >/dev/null || true
	}
	eng_ready() { # PID PID: both engines said engine-ready, both alive
		local _
		for _ in $(seq 1 1200); do
			if ! kill -0 "$1" 2>/dev/null || ! kill -0 "$2" 2>/dev/null; then
				echo "bench engines: an engine ended before both were ready" >&2
				return 1
			fi
			grep -q '^engine-ready:' "$W/eng-lang.out" &&
				grep -q '^engine-ready:' "$W/eng-enc.out" && return 0
			sleep 0.1
		done
		echo "bench engines: the engines were not both ready within 120 s" >&2
		return 1
	}
	eng_python() { # SUFFIX: the Python engines over a gateway pair of the
		# configurations encode$SUFFIX.cfg and language$SUFFIX.cfg: eng_rate
		# their rooms/s ("" if the round failed), le and ee their lines
		local el epid rc
		eng_rate=""
		eng_pair start_gw "$W/eng/encode$1.cfg"
		bstart lang start_gw lang 0 "$W/eng/language$1.cfg" "$W/lang.log"
		{ wait_socket "$W/eng/lang-0.sock" && wait_socket "$W/eng/enc-0.sock"; } || true
		rm -f "$W/eng-go"
		"${ENGINE[@]}" language "$W/eng/lang-0.sock" --bench "$n" --length 10000 \
			--window 4 --go "$W/eng-go" >"$W/eng-lang.out" 2>&1 &
		el=$!
		"${ENGINE[@]}" encode "$W/eng/enc-0.sock" --bench "$n" --length 10000 \
			--window 4 --go "$W/eng-go" >"$W/eng-enc.out" 2>&1 &
		epid=$!
		# shellcheck disable=SC2034 # read by bench.sh's cleanup
		eng_pids="$el $epid"
		# both start once both are up: importing torch and making their
		# tensors (a second or more of CPU each) would otherwise run
		# inside the other's measured stretch on the same two cores, or
		# leave one's rooms waiting past the bootstrap deadline. An
		# engine that dies or is not up in 120 s ends the round.
		if eng_ready "$el" "$epid"; then
			: >"$W/eng-go"
		else
			kill -KILL "$el" "$epid" 2>/dev/null || true
		fi
		rc=0
		wait "$epid" || rc=$?
		note engines "python encode engine" "$rc"
		rc=0
		wait "$el" || rc=$?
		note engines "python language engine" "$rc"
		# shellcheck disable=SC2034 # read by bench.sh's cleanup
		eng_pids=""
		stop engines
		le=$(grep '^engine-language:' "$W/eng-lang.out" || true)
		ee=$(grep '^engine-encode:' "$W/eng-enc.out" || true)
		if [ "$(kv ok "$le")" = "$n" ] && [ "$(kv bad "$le")" = 0 ] &&
			[ "$(kv ok "$ee")" = "$n" ]; then
			# from the first room opened, on either side (the built-in
			# driver's span starts at its first open) to the last
			eng_rate=$(awk -v n="$n" -v a="$(kv t0 "$ee")" -v b="$(kv t1 "$le")" \
				-v c="$(kv t1 "$ee")" -v d="$(kv t0 "$le")" \
				'BEGIN { s = (d < a ? d : a); e = (b > c ? b : c); printf "%.2f", (e > s ? n / (e - s) : 0) }')
		else
			echo "bench engines: round $r${1:+ ($1)} failed: ${le:-$(tail -3 "$W/eng-lang.out")} / ${ee:-$(tail -3 "$W/eng-enc.out")}" >&2
		fi
	}
	en_r=() en_p=() bi_r=() en_ce=() en_cl=() en_cp=()
	for r in $(seq 1 "$rounds"); do
		eng_pair start_gen "$W/eng/encode.cfg" --produce
		fgrun engines lang run_gen lang 0 "$W/eng/language.cfg" "$W/lang.log" 300 --exit-when-done \
			--drive "$n" --concurrency 4 --lengths 10000
		stop engines
		[ "$(field "$W/lang.log" result errors)" = 0 ] &&
			[ "$(field "$W/lang.log" language ok)" = "$n" ] &&
			keep bi_r "$(awk -v n="$n" -v s="$(field "$W/lang.log" latency secs)" \
				'BEGIN { printf "%.2f", (s > 0 ? n / s : 0) }')"
		eng_python ""
		if [ -n "$eng_rate" ]; then
			keep en_r "$eng_rate"
			keep en_ce "$(kv cpu_ms "$ee")"
			keep en_cl "$(kv cpu_ms "$le")"
			keep en_cp "$(kv copy_ms "$le")"
		fi
		eng_python -poll
		keep en_p "$eng_rate"
	done
	if [ "${#en_r[@]}" -gt 0 ] && [ "${#bi_r[@]}" -gt 0 ]; then
		er=$(printf '%s\n' "${en_r[@]}" | median)
		br=$(printf '%s\n' "${bi_r[@]}" | median)
		ce=$(printf '%s\n' "${en_ce[@]}" | median)
		cl=$(printf '%s\n' "${en_cl[@]}" | median)
		cp=$(printf '%s\n' "${en_cp[@]}" | median)
		gbs() { awk -v r="$1" 'BEGIN { printf "%.2f", r * 10000 * 4096 * 2 / 1e9 }'; }
		emit engine-throughput "$er" "rooms/s of 10,000 tokens, bf16, hidden 4096 ($(gbs "$er") GB/s), Python encode and language clients" \
			"$(ratio "$er" "$br")" "built-in --produce/--drive on the same pair, $br rooms/s ($(gbs "$br") GB/s)" ">= 0.9"
		emit engine-cpu-encode "$ce" "ms of the Python encode client's CPU per room (scatter, commit, polling)" \
			"$(ratio "$ce" "$cp")" "one torch copy of a room's 80 MB in the client, $cp ms" "-"
		emit engine-cpu-language "$cl" "ms of the Python language client's CPU per room (zero-copy views, release, polling; the check left out)" \
			"$(ratio "$cl" "$cp")" "one torch copy of a room's 80 MB in the client, $cp ms" "-"
		if [ "${#en_p[@]}" -gt 0 ]; then
			ep=$(printf '%s\n' "${en_p[@]}" | median)
			emit idle-engines "$er" "rooms/s of the Python engines, gateways backing off when idle (the default)" \
				"$(ratio "$er" "$ep")" "the same with both gateways busy polling, $ep rooms/s" ">= 1"
		fi
	else
		echo "bench engine-throughput: not measured (no round completed; the reasons are above)"
	fi
}
