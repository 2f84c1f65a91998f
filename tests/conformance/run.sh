#!/usr/bin/env bash
# Conformance checks: an independent peer written from doc/ alone
# (tests/conformance/conformance.py) against real embgw processes on a DPDK
# net_tap port inside a network namespace of their own. Builds nothing:
# EMBGW_BUILD (or the first argument) names the build directory.
#   tests/conformance/run.sh [BUILD] [--list | CHECK...]
# Last line: "conformance: N passed, N failed, N expected failures".
set -u
cd "$(dirname "$0")/../.." || exit 2
build=${EMBGW_BUILD:-build}
if [ $# -gt 0 ] && [ -d "$1" ]; then build=$1; shift; fi
if [ "${1:-}" = --list ]; then exec /usr/bin/python3 tests/conformance/conformance.py "$build" --list; fi
[ -x "$build/app/embgw/embgw" ] || { echo "conformance: no $build/app/embgw/embgw (build first)"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "conformance: needs root (a network namespace and a tap device)"; exit 2; }
# the peer against itself first (loopback, no gateway): a check that fails
# against the gateway is then not the peer's own mistake
/usr/bin/python3 tests/conformance/selftest.py || { echo "conformance: 0 passed, 1 failed, 0 expected failures (the peer's self-test)"; exit 1; }
ns=egwconf-$$
ip netns add "$ns" || { echo "conformance: cannot create network namespace $ns (iproute2 needed: scripts/deps.sh installs it)"; exit 2; }
child=""
cleanup() {
	# the checks end their gateways on SIGINT; the namespace goes last
	if [ -n "$child" ]; then
		kill -INT "$child" 2>/dev/null
		wait "$child" 2>/dev/null
	fi
	ip netns del "$ns" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# bounded: every gateway runs under its own timeout too; in the background
# so that a signal to this script reaches the checks at once
timeout -s INT -k 30 600 ip netns exec "$ns" /usr/bin/python3 tests/conformance/conformance.py "$build" "$@" &
child=$!
wait "$child"
rc=$?
child=""
exit "$rc"
