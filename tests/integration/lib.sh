#!/usr/bin/env bash
# Helpers to run embgw processes on this host: DPDK with --no-pci (added by
# embgw itself), --no-huge and a --file-prefix of their own, joined by
# net_memif; nothing leaves the machine. Every process runs under timeout.
EMBGW=${EMBGW:-build/app/embgw/embgw}
EAL_COMMON="--no-huge -m 400"
PIDS=()

# start_gw NAME LCORES CFG LOG [app args...]: in the background
start_gw() {
	local name=$1 lcores=$2 cfg=$3 log=$4
	shift 4
	timeout -s INT 120 "$EMBGW" -l "$lcores" $EAL_COMMON --file-prefix "egw-$name-$$" \
		-- -f "$cfg" "$@" >"$log" 2>&1 &
	PIDS+=($!)
	echo $!
}

# run_gw NAME LCORES CFG LOG SECONDS [app args...]: in the foreground
run_gw() {
	local name=$1 lcores=$2 cfg=$3 log=$4 secs=$5
	shift 5
	timeout -s INT "$secs" "$EMBGW" -l "$lcores" $EAL_COMMON --file-prefix "egw-$name-$$" \
		-- -f "$cfg" "$@" >"$log" 2>&1
}

# wait for a memif server's socket before starting its client
wait_socket() {
	for _ in $(seq 1 100); do
		[ -S "$1" ] && return 0
		sleep 0.05
	done
	return 1
}

stop_all() {
	for p in "${PIDS[@]}"; do
		kill -INT "$p" 2>/dev/null
	done
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	PIDS=()
}

# field LOG LINE-PREFIX KEY [PORT]: value of key=value on the result line
field() {
	local port=${4:-p0}
	grep -E "^$2: port=$port " "$1" | tail -1 | tr ' ' '\n' | sed -n "s/^$3=//p"
}
