"""(c) This peer as a member of an etcd cluster (doc/cluster.md): it takes a
lease, publishes its record under /embgw/<cluster>/ and keeps the lease
alive; an encode gateway with a `gateway.cluster` group and no static peer
must find it there, register with it and move rooms with it; a clean leave
(the record deleted) must remove it from the gateway."""
import base64
import hashlib
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import gateway
import wire
from harness import ANSWER_S, GEO, LanguagePeerEnv, check, expect, room_id, transfer

CLUSTER = "conf"
LEASE_TTL_S = 10


def b64(s):
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def key_id(k):
    """cluster.md, "The key id": BLAKE2b, 16 bytes out, keyed by K (the
    hash of the key file, not the tag's key), over the fixed string, in
    lowercase hex."""
    return hashlib.blake2b(b"embgw cluster key id v1", key=k,
                           digest_size=16).hexdigest()


class Etcd:
    """Debian's etcd on this namespace's loopback, a free port, a data
    directory of its own; ended by its PID."""

    def __init__(self, logdir):
        gateway.ip("link", "set", "lo", "up")
        self.dir = tempfile.mkdtemp(prefix="egw-conf-etcd-")
        self.port, peer = free_port(), free_port()
        url = "http://127.0.0.1:%d" % self.port
        purl = "http://127.0.0.1:%d" % peer
        self.log = open(os.path.join(logdir, "etcd.log"), "w")
        # close_fds: an etcd left behind must not hold the run's lock
        self.proc = subprocess.Popen(
            ["timeout", "-s", "TERM", "300", "etcd", "--name", "egwconf",
             "--data-dir", os.path.join(self.dir, "data"),
             "--listen-client-urls", url, "--advertise-client-urls", url,
             "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
             "--initial-cluster", "egwconf=" + purl, "--log-level", "warn"],
            stdout=self.log, stderr=subprocess.STDOUT, close_fds=True)
        self.url = url
        end = time.monotonic() + 15
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("etcd exited (%d): see etcd.log" % self.proc.returncode)
            try:
                self.post("/v3/kv/range", {"key": b64("/")}, timeout=1)
                return
            except (OSError, ValueError, http.client.HTTPException):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("etcd did not answer on %s within 15 s" % url)

    def post(self, path, body, timeout=3):
        """One request to etcd's v3 JSON gateway: the first JSON line of
        the answer (a keep-alive's stream has one per request)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("POST", path, json.dumps(body),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            line = r.readline() if path.endswith("keepalive") else r.read()
            if r.status != 200:
                raise OSError("%s: HTTP %d %r" % (path, r.status, line[:200]))
            return json.loads(line)
        finally:
            c.close()

    def get(self, key):
        r = self.post("/v3/kv/range", {"key": b64(key)})
        kvs = r.get("kvs") or []
        return json.loads(base64.b64decode(kvs[0]["value"])) if kvs else None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Member:
    """Our membership: a lease, our record under it, its keep-alive every
    third of the TTL (cluster.md, "Leases and the sequence")."""

    def __init__(self, etcd, name, record):
        self.etcd, self.key = etcd, "/embgw/%s/%s" % (CLUSTER, name)
        g = etcd.post("/v3/lease/grant", {"TTL": LEASE_TTL_S})
        self.lease = g["ID"]
        r = etcd.post("/v3/kv/txn", {
            "compare": [{"key": b64(self.key), "target": "CREATE",
                         "result": "EQUAL", "create_revision": "0"}],
            "success": [{"request_put": {"key": b64(self.key),
                                         "value": b64(json.dumps(record)),
                                         "lease": self.lease}}],
            "failure": [{"request_range": {"key": b64(self.key)}}]})
        expect(r.get("succeeded"), "our record's txn did not succeed: %r" % r)
        self.errors = []
        self.stopped = False
        self.thread = threading.Thread(target=self._keepalive, daemon=True)
        self.thread.start()

    def _keepalive(self):
        while not self.stopped:
            time.sleep(LEASE_TTL_S / 3)
            if self.stopped:
                return
            try:
                r = self.etcd.post("/v3/lease/keepalive", {"ID": self.lease})
                if "TTL" not in r.get("result", {}):
                    self.errors.append("keep-alive answered without a TTL: %r" % r)
            except (OSError, ValueError, http.client.HTTPException) as e:
                self.errors.append("keep-alive: %s" % e)

    def leave(self):
        """A clean leave: the record deleted, the lease revoked."""
        self.stopped = True
        self.etcd.post("/v3/kv/deleterange", {"key": b64(self.key)})
        self.etcd.post("/v3/lease/revoke", {"ID": self.lease})


def our_record(env, key):
    """Our record, every field from cluster.md's table."""
    return {
        "v": 1,
        "name": "lang-0",
        "roles": ["language"],
        "addr": gateway.PEER_ADDR["encode"],
        "udp_port": gateway.PORT,
        "geometry": {"block_tokens": GEO["block_tokens"], "hidden": GEO["hidden_size"],
                     "dtype": "bf16", "dtype_bytes": GEO["dtype_bytes"],
                     "kinds": ["emb", "fill_ids", "mrope", "aux"],
                     "aux_bytes": GEO["aux_bytes"]},
        "protocol": wire.VERSION,
        "payload": "shm",
        "shm_path": os.path.join(env.dir, "lang-pool-0"),
        "key_id": key_id(key),
    }


def cluster_config(etcd, metrics_port):
    """encode.cfg: the static peer out, a gateway.cluster group and a
    metrics endpoint on loopback in."""
    group = ('  cluster = { name = "%s"; endpoints = ["%s"]; lease_ttl_s = %d; '
             'request_timeout_ms = 1000; dial_timeout_ms = 500; };\n'
             '  metrics = { port = %d; };\n'
             % (CLUSTER, etcd.url, LEASE_TTL_S, metrics_port))

    def prepare(path):
        gateway.edit_config(path, '  peers = ( { name = "lang-0"; address = "192.168.77.2"; } );\n', "")
        gateway.edit_config(path, "};\nports", group + "};\nports")
    return prepare


def metric(port, pattern):
    """The value of the first series matching pattern (a regular
    expression over the series' name and labels) at /metrics, else None."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode(errors="replace")
    except (OSError, http.client.HTTPException):
        return None
    finally:
        c.close()
    m = re.search(r"^(?:%s) (\S+)$" % pattern, text, re.M)
    return float(m.group(1)) if m else None


def wait_for(cond, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    return cond()


def open_room(env):
    """A 2-rank room of 50000 tokens in transfer that cannot complete (no
    further window)."""
    side, p = env.side, env.peer
    side.depth = 0
    rs = side.open(room_id(50000), 2, 1024)
    end = time.monotonic() + ANSWER_S
    while time.monotonic() < end and min(r.state for r in rs) < wire.TRANSFERRING:
        m = p.recv(0.01)
        if m is not None:
            side.handle(m)
    expect(min(r.state for r in rs) == wire.TRANSFERRING,
           "the room did not start: %r" % [r.state for r in rs])
    return rs


def ended_by_abort(env, rs):
    """Every rank of the room told with ABORT carrying ABORTED (gateway.md,
    "Removing")."""
    side, p = env.side, env.peer
    end = time.monotonic() + ANSWER_S
    while time.monotonic() < end and not all(r.aborts for r in rs):
        m = p.recv(0.05)
        if m is not None:
            side.handle(m)
    codes = [[wire.parse_abort(a.body)["code"] for a in r.aborts] for r in rs]
    expect(all(r.state == wire.FAILED and r.error == wire.ERR["ABORTED"] for r in rs),
           "the open room after the leave: states %r, ABORT codes %r (want ABORT with ABORTED)"
           % ([r.state for r in rs], codes))
    return wire.ERR_NAME.get(wire.ERR["ABORTED"], "ABORTED")


@check("c-cluster-member", "this peer joins an etcd cluster as cluster.md says (lease, record, key id, keep-alive): an encode gateway with no static peer finds it, registers, moves rooms byte-exact; deleting the record removes it (peers_held 0, 'peer lang-0 left', its open room ABORTed, counted peer_removed)")
def c_cluster_member(ctx):
    ctx.release_shared()
    etcd = Etcd(ctx.tmp)
    env = member = None
    mport = free_port()
    try:
        env = LanguagePeerEnv(ctx, sub="cluster", handshake=False,
                              prepare=cluster_config(etcd, mport))
        cl = wait_for(lambda: (env.gw.telemetry("/embgw/cluster") or {}).get("state") == "watch"
                      and env.gw.telemetry("/embgw/cluster"), 20)
        expect(cl, "the gateway is not in step with etcd within 20 s: %r; %s" % (
            env.gw.telemetry("/embgw/cluster"), env.gw.tail(5)))
        theirs = etcd.get("/embgw/%s/enc-0" % CLUSTER)
        rec = our_record(env, env.key)
        expect(theirs is not None, "the gateway's own record is not under /embgw/%s/" % CLUSTER)
        # the gateway's own record: the fields of cluster.md's table, no other
        fields = set(rec) - {"shm_path"}
        expect(fields <= set(theirs) <= set(rec) and set(theirs["geometry"]) == set(rec["geometry"])
               and theirs["v"] == 1 and theirs["name"] == "enc-0" and theirs["roles"] == ["encode"]
               and theirs["addr"] == gateway.GW_ADDR["encode"] and theirs["udp_port"] == gateway.PORT
               and theirs["protocol"] == wire.VERSION and theirs["payload"] == "shm",
               "the gateway's record against cluster.md's table: %r" % theirs)
        # its key id must be ours: both hold the same key file
        expect(theirs.get("key_id") == rec["key_id"],
               "key_id: the gateway's %r, ours (cluster.md's formula) %r"
               % (theirs.get("key_id"), rec["key_id"]))
        member = Member(etcd, "lang-0", rec)
        # discovery: the gateway takes our record and REGISTERs with us
        held = wait_for(lambda: (env.gw.telemetry("/embgw/cluster") or {}).get("peers_held") == 1, 10)
        expect(held, "our record was not held as a peer within 10 s: /embgw/cluster %r; "
               "our record %r; the gateway's %r; log %s" % (
                   env.gw.telemetry("/embgw/cluster"), rec, theirs,
                   "".join(env.gw.grep("cluster|skipped"))[-600:]))
        expect(wait_for(lambda: any(m.type == wire.REGISTER for m in env.peer.registers), 10),
               "the gateway holds us but sent no REGISTER within 10 s")
        expect(env.peer.handshake(), "no registration with the gateway within 10 s: %s"
               % env.gw.tail(5))
        transfer(env, [300, 1000, 5000], 1024)
        expect(not member.errors, "; ".join(member.errors[:3]))
        expect(env.gw.grep(r"peer lang-0 joined"), "no 'peer lang-0 joined' in the log")
        # a clean leave with a room open: gateway.md, "Removing"
        rs = open_room(env)
        member.leave()
        member = None
        gone = wait_for(lambda: (env.gw.telemetry("/embgw/cluster") or {}).get("peers_held") == 0, ANSWER_S)
        expect(gone, "peers_held not 0 within %g s of our record's delete: %r"
               % (ANSWER_S, env.gw.telemetry("/embgw/cluster")))
        left = wait_for(lambda: env.gw.grep(r"peer lang-0 left"), ANSWER_S)
        expect(left, "no 'peer lang-0 left' in the log")
        aborted = ended_by_abort(env, rs)
        # gateway.md, "Metrics": the room failed, by its reason
        removed = r'embgw_rooms_failed_total\{[^}]*reason="peer_removed"[^}]*\}'
        n = wait_for(lambda: metric(mport, removed), ANSWER_S)
        expect(n and n >= 1, "embgw_rooms_failed_total{reason=\"peer_removed\"} is %r "
               "after the leave (gateway.md, Metrics)" % n)
        expect(metric(mport, "embgw_cluster_peers") == 0, "embgw_cluster_peers %r after the leave"
               % metric(mport, "embgw_cluster_peers"))
        rep = env.close()
        env = None
        # the report's encode: line counts every room that ended failed
        expect(rep.get("encode", {}).get("failed", 0) >= 1,
               "the exit report's encode: line counts no failed room: %r" % rep.get("encode"))
        return ("found through etcd (revision %s), registered, 3 rooms byte-exact; left (%s), "
                "the open room ended by ABORT(%s), counted peer_removed in the metrics" % (
                    cl.get("revision"), left[0].split("conf: ", 1)[-1].strip(), aborted))
    finally:
        if member:
            member.stopped = True
        if env:
            env.close()
        etcd.stop()
