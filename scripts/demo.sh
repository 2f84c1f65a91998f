#!/usr/bin/env bash
# The demo: two embgw gateways on this host - an encode gateway with the
# built-in producer and a language gateway with the built-in verifier -
# joined by net_memif (DPDK, --no-pci, no hugepages needed), payload over
# the shm driver. Runs the reference design's scenarios (500, 2000, 10000 and 50000
# tokens against defaults of 1024 and 8192 tokens), then a mixed load of
# concurrent rooms on two TP ranks, and reports.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
. tests/integration/lib.sh

dir=$(mktemp -d /tmp/embgw-demo.XXXXXX)
trap 'stop_all; rm -rf "$dir"' EXIT
rooms=0 bytes=0 rounds=0 errors=0 leaked=0

run_phase() { # title default lang-args...
	local title=$1 def=$2
	shift 2
	echo "== $title (language default $def tokens)"
	scripts/gen-configs.sh "$dir/$def" "$def" 262144 >/dev/null
	start_gw enc 1 "$dir/$def/encode.cfg" "$dir/enc-$def.log" --produce >/dev/null
	wait_socket "$dir/$def/memif0.sock"
	if ! run_gw lang 0 "$dir/$def/language.cfg" "$dir/lang-$def.log" 90 \
		--exit-when-done "$@"; then
		echo "language gateway failed:"; tail -20 "$dir/lang-$def.log"
		errors=$((errors + 1))
	fi
	stop_all
	grep -E "^(language|latency|failed):" "$dir/lang-$def.log" | sed 's/^/   /'
	grep -E "^encode:" "$dir/enc-$def.log" | sed 's/^/   /'
	local l=$dir/lang-$def.log e=$dir/enc-$def.log
	rooms=$((rooms + $(field "$l" result rooms)))
	bytes=$((bytes + $(field "$l" result bytes)))
	rounds=$((rounds + $(field "$l" result rounds)))
	errors=$((errors + $(field "$l" result errors)))
	leaked=$((leaked + $(field "$l" result leaked) + $(field "$e" result-encode leaked)))
	errors=$((errors + $(field "$e" result-encode failed)))
}

run_phase "reference scenarios" 1024 --drive 4 --lengths 500,2000,10000,50000
run_phase "reference scenarios" 8192 --drive 4 --lengths 500,2000,10000,50000
run_phase "mixed load: 200 rooms, 16 at a time, 2 TP ranks" 1024 \
	--drive 200 --concurrency 16 --ranks 2 --lengths 300,700,1200,2000,4000,10000,129,8192
echo "demo: $rooms rooms, $bytes bytes verified, $rounds resume rounds, $errors errors, $leaked leaked blocks"
[ "$errors" -eq 0 ] && [ "$leaked" -eq 0 ]
