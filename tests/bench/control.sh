# shellcheck shell=bash disable=SC2154 # bench.sh sets W, B, rounds, quick
# The control phase of scripts/bench.sh (sourced by it: it uses its W, B,
# rounds, quick, bstart, fgrun, stop, field, keep, median, ratio and emit;
# EMBGW_BENCH_ONLY=control runs it alone): tiny rooms through one worker
# lcore over memif against testpmd on the same kind of link and ZeroMQ,
# the same workload's protocol alone (bench_node), and the
# retransmissions of that lossless run.
control_phase() {
	# ---- control plane: tiny rooms through one worker lcore over memif ------
	# The gateway under test is the encode gateway (lcore 1); embgw-gen plays
	# the language peer (lcore 0). Wall rate, and the worker's busy CPU per
	# datagram (iterations that did work only), which busy polling on two
	# shared cores does not distort.
	drive=200000
	[ "$quick" = 1 ] && drive=5000
	scripts/gen-configs.sh --memif "$W/ctl" 128 262144 >/dev/null
	gw_tx=() gw_dg=() gw_ns=() gw_rt=() gw_po=() gw_ry=()
	for _ in $(seq 1 "$rounds"); do
		bstart enc start_gen enc 1 "$W/ctl/encode.cfg" "$W/enc.log" --produce
		wait_socket "$W/ctl/memif0.sock" || true
		fgrun control lang run_gen gen 0 "$W/ctl/language.cfg" "$W/lang.log" 120 \
			--drive "$drive" --concurrency 64 --lengths 1
		stop control
		secs=$(field "$W/lang.log" latency secs)
		rx=$(field "$W/lang.log" node rx_datagrams)
		tx=$(field "$W/lang.log" node tx_datagrams)
		ok=$(field "$W/lang.log" language ok)
		if [ -n "$secs" ] && [ -n "$rx" ] && [ -n "$tx" ] && [ -n "$ok" ]; then
			keep gw_tx "$(awk -v n="$ok" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')"
			keep gw_dg "$(awk -v n="$((rx + tx))" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')"
		fi
		keep gw_ns "$(field "$W/enc.log" worker busy_ns_per_datagram)"
		# lossless: a request resent without an answer is a timeout that
		# fired before its answer came; polls (nothing to resend) and retries
		# (the sender refused the window for now) are counted apart
		rt=$(field "$W/lang.log" language retransmits)
		po=$(field "$W/lang.log" language polls)
		ry=$(field "$W/lang.log" language retries)
		if [ -n "$rt" ] && [ -n "$po" ] && [ -n "$ry" ] && [ -n "$tx" ] && [ "$tx" -gt 0 ]; then
			share() { awk -v a="$1" -v b="$tx" 'BEGIN { printf "%.5f", a / b }'; }
			keep gw_rt "$(share $((rt - po - ry)))"
			keep gw_po "$(share "$po")"
			keep gw_ry "$(share "$ry")"
		fi
	done
	tx=$(printf '%s\n' "${gw_tx[@]}" | median)
	dg=$(printf '%s\n' "${gw_dg[@]}" | median)
	gns=$(printf '%s\n' "${gw_ns[@]}" | median)
	# The path's ceiling: testpmd txonly (160-byte frames, about our datagram
	# size) into testpmd rxonly over the same kind of memif pair, one
	# forwarding lcore per core like the gateways. --stats-period keeps
	# testpmd running without a terminal (in the background its "Press enter"
	# reads end-of-file and it quits at once). The receiver is stopped first,
	# so its end-of-run cycles/packet is taken while the link is still up.
	pps=() tp_ns=()
	for _ in $(seq 1 "$rounds"); do
		rm -f "$W/tp.sock"
		timeout -s INT 6 dpdk-testpmd --lcores 0@0,1@1 --no-huge -m 512 --no-pci \
			--file-prefix egw-tpa-$$ \
			--vdev "net_memif0,role=server,socket=$W/tp.sock,socket-abstract=no" -- \
			--forward-mode=rxonly --total-num-mbufs=8192 --record-core-cycles \
			--stats-period 1 -a >"$W/tpa.log" 2>&1 &
		tpa=$!
		wait_socket "$W/tp.sock" || true
		# (the sender sometimes crashes when its peer leaves: a subshell keeps
		# the shell's crash report out of the output; the receiver has counted)
		( timeout -s INT 8 dpdk-testpmd --lcores 0@1,1@0 --no-huge -m 512 --no-pci \
			--file-prefix egw-tpb-$$ \
			--vdev "net_memif0,role=client,socket=$W/tp.sock,socket-abstract=no" -- \
			--forward-mode=txonly --txpkts=160 --total-num-mbufs=8192 \
			--stats-period 1 -a >"$W/tpb.log" 2>&1 || true ) 2>/dev/null
		wait $tpa 2>/dev/null || true
		pps+=("$(sed -nE 's/.*Rx-pps: +([0-9]+).*/\1/p' "$W/tpa.log" | sort -n | tail -1)")
		tp_ns+=("$(sed -nE 's/.*CPU cycles\/packet=([0-9.]+) .* at ([0-9]+) MHz.*/\1 \2/p' "$W/tpa.log" |
			tail -1 | awk '{ if ($2 > 0) printf "%.1f", $1 * 1000 / $2 }')")
	done
	tp=$(printf '%s\n' "${pps[@]}" | median)
	tn=$(printf '%s\n' "${tp_ns[@]}" | grep . | median)
	zm=()
	zn=500000
	[ "$quick" = 1 ] && zn=50000
	for _ in $(seq 1 "$rounds"); do
		zm+=("$("$B"/tests/bench/bench_zmq "$zn" | awk '{print $2}')")
	done
	zq=$(printf '%s\n' "${zm[@]}" | median)
	emit control-transactions "$tx" "rooms/s (1-token rooms, 64 in flight, one worker)" "-" "-" "-"
	if [ "${tp:-0}" -gt 0 ]; then
		emit control-datagrams "$dg" "datagrams/s" "$(ratio "$dg" "$tp")" \
			"dpdk-testpmd txonly->rxonly on a memif pair, ${tp} pps of 160 B" ">= 0.5"
	else
		echo "bench control-datagrams: $dg datagrams/s (ratio n/a: the testpmd memif reference forwarded nothing this run)"
		rows+=("| control-datagrams | $dg datagrams/s | n/a | dpdk-testpmd memif reference did not forward in this run | >= 0.5 |")
	fi
	if [ -n "$tn" ] && [ "${gns:-0}" -gt 0 ]; then
		emit control-cpu "$gns" "ns of busy worker CPU per datagram in+out" \
			"$(ratio "$tn" "$gns")" "dpdk-testpmd rxonly ${tn} ns/packet" "<= 200 ns (ratio >= 0.2)"
	fi
	# The same workload's protocol alone: both nodes in one thread, datagrams
	# handed over in memory, writes as memcpy (tests/bench/bench_node.c) - the
	# part of control-cpu that is lib/node, lib/xfer, lib/proto and the pool.
	nrooms=200000
	[ "$quick" = 1 ] && nrooms=5000
	line=$("$B"/tests/bench/bench_node "$rounds" "$nrooms" | grep ^node_ns) ||
		note control bench_node "$?"
	nns=$(kv per_datagram "$line")
	npr=$(kv protocol "$line")
	if [ -n "$nns" ] && [ "${gns:-0}" -gt 0 ]; then
		emit control-node-cpu "$nns" "ns of CPU per datagram in+out in the two nodes alone (no frames, device or loop; $npr ns without the pattern's fill and check)" \
			"$(ratio "$nns" "$gns")" "control-cpu ${gns} ns" "-"
	fi
	control_instr "$gns"
	emit control-vs-zmq "$dg" "datagrams/s" "$(ratio "$dg" "$zq")" \
		"ZeroMQ PUSH/PULL, the reference design's multipart ASCII, ${zq} msgs/s" ">= 10"
	if [ "${#gw_rt[@]}" -gt 0 ]; then
		rs=$(printf '%s\n' "${gw_rt[@]}" | median)
		rp=$(printf '%s\n' "${gw_po[@]}" | median)
		ry=$(printf '%s\n' "${gw_ry[@]}" | median)
		pct() { awk -v s="$1" 'BEGIN { printf "%.3f", s * 100 }'; }
		emit retransmit-share "$(pct "$rs")" \
			"% of the language side's datagrams that were requests sent again unanswered (the control phase: no loss configured; besides, windows retried after a refusal for now $(pct "$ry") %, STATUS polls $(pct "$rp") %)" \
			"$rs" "every datagram the language side sent" "< 0.01"
	fi
}

# control_instr GNS: the same exchange once more with the encode gateway
# under callgrind, counting the instructions its worker loop runs (the
# toggle: nothing of start-up or shutdown), per datagram in and out, and
# which code ran them. Instruction counts do not move with the host's
# load, so this line says where control-cpu's nanoseconds go in every run,
# and a change to the path can be judged below control-cpu's run-to-run
# spread. The groups are by where the code lives (callgrind_annotate's
# self cost, by source file, or by library where DPDK's and libsodium's
# have no line information): the tag (libsodium), frames and the device
# (DPDK's memif, mbuf, mempool and ethdev, gw_dev.c, the capture hook,
# DPDK's inline headers), the protocol (lib/node, lib/xfer, lib/proto,
# lib/pool, lib/err), the payload driver's writes, the built-in producer
# standing in for an engine (embgw-gen's pattern source, lib/pattern),
# the rest (the worker's loop, the node's callbacks, room sources,
# libc's copies, counters).
control_instr() {
	local n=20000 cg="$W/cg.out" rx tx ok groups
	local all tag dev proto prod pay rest
	[ "$quick" = 1 ] && n=2000
	if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
		echo "bench control-instr: n/a (no valgrind: scripts/deps.sh installs it)"
		return 0
	fi
	printf '#!/bin/sh\nexec valgrind -q --tool=callgrind --callgrind-out-file="%s" --toggle-collect=gw_loop_worker "%s" "$@"\n' \
		"$cg" "$EMBGW_GEN" >"$W/cg-gen"
	chmod +x "$W/cg-gen"
	rm -f "$cg" "$W/ctl/memif0.sock" "$W/enc.log"
	# 300 s: valgrind's start-up (DPDK's libraries) takes seconds of CPU
	bstart enc-callgrind start "$W/cg-gen" enc 1 "$W/ctl/encode.cfg" "$W/enc.log" 300 --produce
	# its worker running, not only its socket made: under valgrind the
	# rest of its start-up can outlast the driver's bootstrap deadline
	for _ in $(seq 1 1200); do
		grep -q "worker on lcore" "$W/enc.log" 2>/dev/null && break
		kill -0 "${PIDS[-1]}" 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q "worker on lcore" "$W/enc.log" 2>/dev/null; then
		stop control-instr
		echo "bench control-instr: n/a (the gateway under callgrind started no worker in 120 s)"
		return 0
	fi
	fgrun control-instr lang run_gen gen 0 "$W/ctl/language.cfg" "$W/lang.log" 240 \
		--drive "$n" --concurrency 64 --lengths 1
	stop control-instr
	rx=$(field "$W/enc.log" node rx_datagrams)
	tx=$(field "$W/enc.log" node tx_datagrams)
	ok=$(field "$W/lang.log" language ok)
	# a count over every room of the exchange, or none: a run cut short
	# leaves the loop's idle turns to be divided by a few datagrams
	if [ "${ok:-0}" != "$n" ] || [ ! -s "$cg" ] || [ -z "$rx" ] || [ -z "$tx" ] ||
		[ $((rx + tx)) = 0 ]; then
		echo "bench control-instr: n/a (${ok:-no} of $n rooms done under callgrind, or no profile)"
		return 0
	fi
	# "  N (p%)  file:function [object]": the file decides, the object
	# where there is no file (DPDK's and libsodium's "???")
	groups=$(callgrind_annotate --auto=no --threshold=100 "$cg" 2>/dev/null | awk -v dg=$((rx + tx)) '
		/^ *[0-9,]+ .*:/ && !/PROGRAM TOTALS/ {
			v = $1; gsub(",", "", v)
			obj = ""; src = $0
			if (match(src, / \[[^]]*\]$/)) {
				obj = substr(src, RSTART); src = substr(src, 1, RSTART - 1)
			}
			if (obj ~ /libsodium/) g = "tag"
			else if (obj ~ /librte_/ || src ~ /\/gw_dev\.c:|\/gw_capture\.c:|\/include\/dpdk\//) g = "dev"
			else if (src ~ /\/lib\/(node|xfer|proto|pool|err)\//) g = "proto"
			else if (src ~ /\/drivers\/payload\//) g = "pay"
			else if (src ~ /\/app\/embgw-gen\/|\/lib\/pattern\//) g = "prod"
			else g = "rest"
			s[g] += v; all += v
		}
		END {
			if (all > 0)
				printf "%.0f %.0f %.0f %.0f %.0f %.0f %.0f\n", all / dg, s["tag"] / dg,
					s["dev"] / dg, s["proto"] / dg, s["prod"] / dg, s["pay"] / dg,
					s["rest"] / dg
		}') || true
	if [ -z "$groups" ]; then
		echo "bench control-instr: n/a (callgrind_annotate read nothing from the profile)"
		return 0
	fi
	read -r all tag dev proto prod pay rest <<<"$groups"
	emit control-instr "$all" "instructions per datagram in+out in the encode gateway's worker (callgrind, $n of the same 1-token rooms: the tag $tag, frames and the device $dev, the protocol $proto, the built-in producer $prod, the payload writes $pay, the rest $rest)" \
		"-" "control-cpu ${1:-n/a} ns" "-"
}
