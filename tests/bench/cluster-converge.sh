#!/usr/bin/env bash
# cluster-converge: how fast one gateway learns a large cluster from etcd,
# and what the peers cost it while nothing changes.
#
#   tests/bench/cluster-converge.sh [PEERS]      (default 1000; root)
#
# Debian's etcd on loopback (a free port, a temporary data directory);
# one language gateway of cluster "bench" on a veth end of its own (no
# gateway answers on the other end: the peers are records only), its
# telemetry read by the script. Once its own record is in etcd, a script
# (cluster_records.py) copies that record PEERS times as encode gateways
# peer-0000.. under one lease, as fast as etcd takes the puts. Measured:
#   ms       from the first put to the gateway holding every peer
#            (peers_held of its /embgw/cluster)
#   bytes    its resident memory's growth per peer
#   cpu      its worker's CPU (the port's lcore thread) in a 5 s window
#            with no change, per second: with the peers and without them
# Last line:
#   cluster-converge: peers=N ms=M bytes_per_peer=B cpu_quiet_ms_per_s=C
#                     cpu_quiet_base_ms_per_s=C0
# EMBGW_BUILD names the build (default build/).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
. tests/integration/cluster.sh
N=${1:-1000}
T=$(mktemp -d "${TMPDIR:-/tmp}/embgw-converge.XXXXXX")
# the cleanup runs to its end whatever a wait in it returns
trap 'set +e; stop_all; etcd_stop; veth_down; rm -rf "$T"' EXIT

die() {
	echo "cluster-converge: $*" >&2
	[ -f "$T/gw.log" ] && tail -5 "$T/gw.log" | sed 's/^/     /' >&2
	exit 1
}

# cpu_ms PID: CPU time (user + system, ms) of the process's main thread,
# where the port's lcore (the main lcore) runs its worker
cpu_ms() {
	awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' \
		"/proc/$1/task/$1/stat"
}

# rss_kb PID: resident memory
rss_kb() {
	awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status"
}

# held: the peers the gateway holds from etcd now (/embgw/cluster)
held() {
	telemetry bench /embgw/cluster | /usr/bin/python3 -c '
import json, sys
try:
    print(json.load(sys.stdin)["/embgw/cluster"]["peers_held"])
except (ValueError, KeyError, TypeError):
    print(0)'
}

# quiet PID: the worker's CPU in ms per second over 5 s of no change
quiet() {
	local a b
	a=$(cpu_ms "$1")
	sleep 5
	b=$(cpu_ms "$1")
	echo $(((b - a) / 5))
}

veth_up 1 || die "no veth pair (root and iproute2 needed)"
etcd_start "$T/etcd.log" || die "etcd did not start: $(tail -3 "$T/etcd.log")"
EP=http://127.0.0.1:$ETCD_PORT
head -c 48 /dev/urandom >"$T/psk.key"
chmod 600 "$T/psk.key"
cat >"$T/gw.cfg" <<CFG
gateway = {
  name = "bench-gw";
  roles = ["language"];
  key_file = "$T/psk.key";
  pool = { capacity_tokens = 65536; hidden_size = 256; dtype = "bf16";
           policy = { kind = "fixed"; tokens = 1024; }; };
  cluster = { name = "bench"; endpoints = ["$EP"]; lease_ttl_s = 10; };
};
ports = ( {
  name = "p0";
  device = "net_af_packet0,iface=${VETH}l0";
  address = "10.77.255.1/16";
  lcores = [0];
  max_peers = $((N + 64));
  payload = { driver = "shm"; path = "$T/pool"; };
  peers = ( );
} );
CFG
"$EMBGW" --check-config "$T/gw.cfg" >"$T/check.log" 2>&1 ||
	die "the configuration is refused: $(head -3 "$T/check.log" | tr '\n' ' ')"
start_gw bench 0 "$T/gw.cfg" "$T/gw.log"
wait_ready bench || die "the gateway did not come up"
GW=$(child_of "${PIDS[-1]}") || die "no gateway process"
for _ in $(seq 1 100); do
	[ -n "$(ectl get --print-value-only /embgw/bench/bench-gw)" ] && break
	sleep 0.1
done
[ -n "$(ectl get --print-value-only /embgw/bench/bench-gw)" ] || die "no record of bench-gw in etcd within 10 s"
base_cpu=$(quiet "$GW")
rss0=$(rss_kb "$GW")
/usr/bin/python3 tests/bench/cluster_records.py "$EP" write bench bench-gw \
	"$N" 10.77 120 "/var/run/dpdk/egw-bench-$$/dpdk_telemetry.v2" >"$T/records.log" 2>&1 ||
	die "the records were not written: $(cat "$T/records.log")"
ms=$(sed -nE 's/.* ms=(-?[0-9]+).*/\1/p' "$T/records.log")
[ "${ms:--1}" -ge 0 ] || die "the gateway did not hold $N peers within 120 s: $(telemetry bench /embgw/cluster)"
rss1=$(rss_kb "$GW")
peer_cpu=$(quiet "$GW")
[ "$(held)" -ge "$N" ] || die "the gateway let peers go while nothing changed: $(telemetry bench /embgw/cluster)"
/usr/bin/python3 tests/bench/cluster_records.py "$EP" revoke \
	"$(sed -nE 's/.* lease=([0-9]+).*/\1/p' "$T/records.log")" >/dev/null
echo "cluster-converge: peers=$N ms=$ms bytes_per_peer=$(((rss1 - rss0) * 1024 / N))" \
	"cpu_quiet_ms_per_s=$peer_cpu cpu_quiet_base_ms_per_s=$base_cpu" \
	"writes=$(sed -nE 's/.* t0=([0-9.]+) t1=([0-9.]+).*/\1 \2/p' "$T/records.log" |
		awk '{ printf "%dms", ($2 - $1) * 1000 }')"
