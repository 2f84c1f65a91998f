# shellcheck shell=bash disable=SC2154 # bench.sh sets W, B, rounds, quick
# The room-time phase of scripts/bench.sh (sourced by it: it uses its W, B,
# rounds, quick, bstart, note, stop and emit). One room's time from the
# encoder's output being ready to its data being readable on every
# language rank, through the embgw package on the shm driver
# (tests/bench/room_time.py), for 1,000, 10,000 and 50,000 tokens of
# hidden 4,096 bf16, with 1 and 2 language ranks, against one torch copy
# of the room's bytes in the encode engine's process, same run: the
# encoder writes its output into the room's pool memory (zero-copy send);
# once more for 50,000 tokens and 2 ranks with send() copying the output
# in (room-time-50k-r2-copy).
# EMBGW_ROOM_TIME_ARGS: more arguments for room_time.py;
# EMBGW_ROOM_TIME_RANKS: the rank counts to run (default "1 2").

# a fresh pool file for each language gateway (bench.sh's cleanup removes
# it too)
rt_pool=/dev/shm/embgw-bench-$$-lang-pool

# room_time_line TOKENS RANKS SUFFIX LINE: the bench line of one report
room_time_line() {
	local t=$1 nr=$2 l=$4 ms mc rt mb how
	rk() { sed -nE "s/.* $1=([0-9.]+).*/\1/p" <<<"$l"; }
	ms=$(rk ms)
	mc=$(rk memcpy_ms)
	rt=$(rk ratio)
	mb=$(awk -v t="$t" 'BEGIN { printf "%.0f", t * 4096 * 2 / 1e6 }')
	how="zero-copy send"
	[ "$(rk zero_copy)" = 1 ] || how="send() copying the output in"
	emit "room-time-$((t / 1000))k-r$nr$3" "$ms" \
		"ms from the encoder's output ready to views on each of $nr rank(s), $t tokens ($mb MB), $how (send $(rk send_ms) ms, then every rank's Success $(rk deliver_ms) ms, views $(rk views_ms) ms; language runs $(rk runs); a rank's first read of the room $(rk read_ms) ms)" \
		"$rt" "one torch copy of the room's $mb MB into touched memory, $mc ms" \
		"$([ "$t" = 50000 ] && [ "$nr" = 2 ] && [ -z "$3" ] && echo "<= 1.5" || echo "-")"
}

# room_time_run RANKS TOKENS SUFFIX [driver args]: one gateway pair, the
# driver's rooms, their bench lines named with SUFFIX
room_time_run() {
	local nr=$1 toks=$2 sfx=$3 rc l t out="$W/rt-$1$3.out"
	shift 3
	rm -f "$rt_pool"
	bstart enc start "$EMBGW" enc 1 "$W/rt/encode.cfg" "$W/rt-enc.log" 600
	{ wait_socket "$W/rt/memif0.sock" && wait_ready enc; } >/dev/null || true
	bstart lang start "$EMBGW" lang 0 "$W/rt/language.cfg" "$W/rt-lang.log" 600
	{ wait_socket "$W/rt/lang-0.sock" && wait_socket "$W/rt/enc-0.sock"; } || true
	rc=0
	# shellcheck disable=SC2086 # the extra arguments are words
	env "EMBGW_CLIENT_LIB=$B/lib/client/libegw_client.so" timeout -s KILL 500 \
		/usr/bin/python3 tests/bench/room_time.py "$W/rt/enc-0.sock" \
		"$W/rt/lang-0.sock" --tokens "$toks" --ranks "$nr" --rounds "$rounds" \
		"$@" ${EMBGW_ROOM_TIME_ARGS:-} >"$out" 2>&1 || rc=$?
	note room-time "python room-time driver ($nr rank(s)$sfx)" "$rc"
	stop room-time
	rm -f "$rt_pool"
	[ "$rc" = 0 ] || tail -5 "$out" >&2
	grep '^  round:' "$out" || true
	while read -r l; do
		t=$(sed -nE 's/.* tokens=([0-9]+).*/\1/p' <<<"$l")
		[ -n "$t" ] && room_time_line "$t" "$nr" "$sfx" "$l"
	done < <(grep '^room-time:' "$out" || true)
}

room_time_phase() {
	local toks="1000,10000,50000" nr
	[ "$quick" = 1 ] && toks="1000,10000"
	# pools: 50,000 tokens of one room on the encode side, one copy per
	# rank on the language side (512 MiB and 1 GiB)
	scripts/gen-configs.sh --memif --attach --hidden 4096 --enc-capacity 65536 \
		"$W/rt" 8192 131072 "peer_dead_ms = 5000;" >/dev/null
	# the language pool's file on tmpfs, as in production (configuration.md,
	# payload): a file on a disk makes every write a dirty page to write back
	sed -i "s|\"$W/rt/lang-pool-0\"|\"$rt_pool\"|" "$W/rt/encode.cfg" "$W/rt/language.cfg"
	grep -q "$rt_pool" "$W/rt/language.cfg"
	for nr in ${EMBGW_ROOM_TIME_RANKS:-1 2}; do
		room_time_run "$nr" "$toks" ""
	done
	[ "$quick" = 1 ] || room_time_run 2 50000 -copy --copy
}
