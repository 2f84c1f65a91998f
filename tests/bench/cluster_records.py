# SPDX-License-Identifier: BSD-3-Clause
"""Records of many gateways in etcd, for the cluster-converge benchmark,
through etcd's JSON gateway (/v3/...), as any third party would write them.

    cluster_records.py ENDPOINT write CLUSTER TEMPLATE N SUBNET TTL [TEL]
    cluster_records.py ENDPOINT revoke LEASE

write: the record of gateway TEMPLATE (read from /embgw/CLUSTER/TEMPLATE)
copied N times as gateways peer-0000 .. peer-<N-1> of the other role, at
the addresses SUBNET.<i / 250>.<2 + i % 250> (SUBNET: the first two
octets), all under one lease of TTL seconds, in transactions of 100
puts sent one after the other (a burst). Prints
`records: n=N lease=ID t0=... t1=...` (the wall clock, seconds since the
epoch, before the first put and after the last). With TEL, the template
gateway's telemetry socket (dpdk_telemetry.v2): its /embgw/cluster is read
in a loop meanwhile, and `ms=` is the time from the first put to its
peers_held reaching N (at most 120 s; `ms=-1` if it never does).

A record is a JSON object (doc/cluster.md); only its name, address and
roles are changed here (and a receiver's shm_path dropped: the copies
send), so everything else (geometry, protocol, key id) stays what the
template's gateway accepts.
"""
import base64
import json
import socket
import sys
import threading
import time
import urllib.request

BATCH = 100


def call(endpoint, path, body):
    req = urllib.request.Request(endpoint + path,
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def b64(s):
    return base64.b64encode(s.encode()).decode()


def other_roles(roles):
    """The complement of a gateway's roles: peers of an encode gateway
    are language gateways and the other way round."""
    flip = {"encode": "language", "language": "encode"}
    if isinstance(roles, str):
        return flip.get(roles, roles)
    return [flip.get(r, r) for r in roles]


def held(tel):
    """peers_held of /embgw/cluster, asked on the telemetry socket tel."""
    tel.send(b"/embgw/cluster")
    reply = json.loads(tel.recv(1 << 20))
    return reply.get("/embgw/cluster", {}).get("peers_held", 0)


def converge(path, n, started):
    """Seconds from the first put (started: an Event holding its time) to
    the gateway holding n peers, or None after 120 s."""
    tel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    tel.connect(path)
    tel.recv(16384)  # the greeting
    started.wait()
    while time.time() < started.t0 + 120:
        if held(tel) >= n:
            return time.time() - started.t0
        time.sleep(0.005)
    return None


def write(endpoint, cluster, template, n, subnet, ttl, tel=None):
    key = "/embgw/%s/%s" % (cluster, template)
    kvs = call(endpoint, "/v3/kv/range", {"key": b64(key)}).get("kvs")
    if not kvs:
        sys.exit("no record at %s: the gateway has not published it" % key)
    try:
        rec = json.loads(base64.b64decode(kvs[0]["value"]))
    except ValueError as e:
        sys.exit("the record at %s is not JSON (%s): doc/cluster.md" %
                 (key, e))
    for field in ("name", "addr", "roles"):
        if field not in rec:
            sys.exit("the record at %s has no %r: %s" % (key, field, rec))
    rec["roles"] = other_roles(rec["roles"])
    rec.pop("shm_path", None)
    lease = call(endpoint, "/v3/lease/grant", {"TTL": ttl})["ID"]
    started = threading.Event()
    result = {}
    poller = None
    if tel:
        poller = threading.Thread(
            target=lambda: result.update(s=converge(tel, n, started)))
        poller.start()
    puts = []
    for i in range(n):
        rec["name"] = "peer-%04d" % i
        rec["addr"] = "%s.%d.%d" % (subnet, i // 250, 2 + i % 250)
        puts.append({"requestPut": {
            "key": b64("/embgw/%s/%s" % (cluster, rec["name"])),
            "value": b64(json.dumps(rec)), "lease": lease}})
    started.t0 = t0 = time.time()
    started.set()
    # a burst: BATCH puts per transaction (etcd takes at most 128)
    for i in range(0, n, BATCH):
        call(endpoint, "/v3/kv/txn", {"success": puts[i:i + BATCH]})
    t1 = time.time()
    ms = ""
    if poller:
        poller.join()
        ms = " ms=%d" % (result["s"] * 1000 if result.get("s") else -1)
    print("records: n=%d lease=%s t0=%.6f t1=%.6f%s" % (n, lease, t0, t1, ms),
          flush=True)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    endpoint, op = sys.argv[1], sys.argv[2]
    if op == "write" and len(sys.argv) in (8, 9):
        write(endpoint, sys.argv[3], sys.argv[4], int(sys.argv[5]),
              sys.argv[6], int(sys.argv[7]),
              sys.argv[8] if len(sys.argv) == 9 else None)
    elif op == "revoke" and len(sys.argv) == 4:
        call(endpoint, "/v3/lease/revoke", {"ID": sys.argv[3]})
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
