#!/usr/bin/env bash
# Back-to-back starts of a gateway pair on a fresh veth pair each time,
# with the project's own helpers (lib.sh veth_up, scripts/gen-configs.sh):
# counts the starts where a port did not come up. Each start is short:
# both gateways up (their worker lines), then both stopped.
#
#   tests/integration/pair-starts.sh [N] [--kernel-indexes]
#
# N: starts (default 200). --kernel-indexes: the pairs get the kernel's
# neighbouring ifindexes (plain `ip link add`), to compare. Last line:
# "pair-starts: N starts, F failed"; exit status 0 when none failed.
# Starts real gateways: run it under the shared lock.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/integration/lib.sh

n=${1:-200}
[ "${2:-}" = --kernel-indexes ] &&
	veth_add() { ip link add "$1" type veth peer name "$2"; }
T=$(mktemp -d "${TMPDIR:-/tmp}/embgw-pair-starts.XXXXXX")
trap 'stop_all; veth_down; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
failed=0

# up LOG: the gateway writing LOG has its worker running (its port
# started) or has exited; 0 for the worker
up() {
	for _ in $(seq 1 200); do
		grep -q "worker on lcore" "$1" && return 0
		grep -q "^exit: " "$1" && return 1
		sleep 0.05
	done
	return 1
}

for i in $(seq 1 "$n"); do
	veth_up 1 || { echo "pair-starts: no veth pair"; exit 1; }
	scripts/gen-configs.sh --veth "$VETH" "$T" 1024 16384 >/dev/null
	start_gen enc 1 "$T/encode.cfg" "$T/enc.log" --produce
	start_gw lang 0 "$T/language.cfg" "$T/lang.log"
	ok=1
	up "$T/enc.log" || ok=0
	up "$T/lang.log" || ok=0
	stop_all
	if [ "$ok" = 0 ]; then
		failed=$((failed + 1))
		echo "start $i failed: $(grep -h -m1 -e PACKET_FANOUT -e 'no DPDK port' "$T/enc.log" "$T/lang.log" | head -1)"
	fi
	veth_down
done
echo "pair-starts: $n starts, $failed failed"
[ "$failed" -eq 0 ]
