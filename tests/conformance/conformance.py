#!/usr/bin/python3
"""embgw conformance checks: an independent peer, written from doc/ alone,
plays each side of the wire protocol (version 2) against real gateway
processes on a DPDK net_tap port in this network namespace.

usage: conformance.py BUILD_DIR [--list] [CHECK...]
One line per check: "PASS name: what was seen", "FAIL name: why" or
"XFAIL name: the finding"; the last line "conformance: N passed, N failed,
N expected failures". Runs inside the namespace run.sh makes."""
import os
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gateway  # noqa: E402
import peer as peermod  # noqa: E402
import pool as poolmod  # noqa: E402
import wire  # noqa: E402
from language import Allocator, LanguageSide  # noqa: E402

CHECKS = []
XFAIL = {}   # check name -> the finding that makes it fail


def check(name, about):
    def deco(fn):
        CHECKS.append((name, about, fn))
        return fn
    return deco


class Fail(Exception):
    pass


def expect(cond, why):
    if not cond:
        raise Fail(why)


# geometry of every configuration written by gateway.gen_configs
GEO = dict(block_tokens=128, pool_blocks=2048, hidden_size=32, dtype_bytes=2,
           aux_bytes=64)


class Ctx:
    """What the checks share: the build, a temporary directory and the
    gateways started so far (ended at exit)."""

    def __init__(self, build):
        self.build = build
        self.tmp = tempfile.mkdtemp(prefix="egw-conformance-")
        self.gateways = []
        self.env = None

    def cleanup(self, keep):
        if self.env:
            self.env.close()
            self.env = None
        for g in self.gateways:
            g.kill()
        if not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)


class LanguagePeerEnv:
    """An encode gateway with --produce, and this peer as its language
    peer lang-0 with its own pool file."""

    def __init__(self, ctx, sub="enc", args=("--produce",), timers=gateway.SLACK,
                 handshake=True, geo=GEO, **gen):
        self.ctx = ctx
        self.dir = os.path.join(ctx.tmp, sub + str(len(ctx.gateways)))
        os.makedirs(self.dir)
        self.psk = gateway.gen_configs(self.dir, timers=timers, **gen)
        self.key = wire.derive_key(self.psk)
        self.geo = dict(geo)
        self.gw = gateway.Gateway(ctx.build, self.dir, "encode", args)
        ctx.gateways.append(self.gw)
        self.gw.wait_tap(gateway.PEER_ADDR["encode"], extra=[gateway.STRANGER])
        self.pool = None
        self.peer = None
        self.start_peer(handshake=handshake)

    def start_peer(self, session=None, handshake=True, psn=None):
        if self.peer:
            self.peer.close()
        if self.pool:
            self.pool.close()
        sess = session or int.from_bytes(os.urandom(8), "big") or 1
        self.pool = poolmod.PoolFile(os.path.join(self.dir, "lang-pool-0"),
                                     self.geo, sess)
        self.peer = peermod.Peer(self.key, (gateway.PEER_ADDR["encode"], gateway.PORT),
                                 (gateway.GW_ADDR["encode"], gateway.PORT),
                                 "lang-0", peermod.ROLE_LANGUAGE, self.geo,
                                 self.pool.regions, session=sess, psn=psn)
        self.alloc = Allocator(self.geo["pool_blocks"])
        self.side = LanguageSide(self.peer, self.pool, self.alloc,
                                 self.geo["block_tokens"])
        if handshake:
            expect(self.peer.handshake(), "no registration with the gateway within 10 s: %s"
                   % self.gw.tail(5))
            # the gateway is registered once it has applied our REGISTER
            time.sleep(0.05)

    def node(self, key):
        return self.gw.stat(key)

    def rooms(self, key):
        return self.gw.stat(key, "/embgw/rooms")

    def close(self):
        if self.peer:
            self.peer.close()
            self.peer = None
        self.report = self.gw.stop()
        if self.pool:
            self.pool.close()
            self.pool = None
        return self.report


def room_id(total, salt=None):
    hi = int.from_bytes(os.urandom(4), "big") if salt is None else salt
    return (hi << 32) | total


def lang_env(ctx):
    """The shared encode gateway (started on first use)."""
    if ctx.env is None:
        ctx.env = LanguagePeerEnv(ctx)
    return ctx.env


def transfer(env, lengths, default, nranks=1, dummy=False, fragment=False,
             timeout=30):
    """Rooms of the given lengths at once; every rank byte-checked.
    Returns the ranks."""
    side = env.side
    rs = []
    for n in lengths:
        rs += side.open(room_id(n), nranks, default, dummy_last=dummy,
                        fragment=fragment)
    ok = side.run(rs, timeout)
    problems = []
    for r in rs:
        problems += ["room %#x rank %d: %s" % (r.room, r.rank, p) for p in r.problems]
        if r.state != wire.SUCCESS:
            problems.append("room %#x rank %d ended %s error %s (errors %r)" % (
                r.room, r.rank, r.state, wire.ERR_NAME.get(r.error, r.error), r.errors))
            continue
        problems += ["room %#x rank %d: %s" % (r.room, r.rank, p)
                     for p in side.verify(r, env.geo)]
    expect(ok, "not every rank finished within %d s: %s" % (
        timeout, [(hex(r.room), r.rank, r.state, r.landed, r.total) for r in rs if not r.done]))
    expect(not problems, "; ".join(problems[:6]))
    expect(not env.peer.violations, "; ".join(env.peer.violations[:4]))
    side.release(rs)
    return rs


# ---- (a) this peer as the language side -----------------------------------

@check("a-handshake", "REGISTER handshake: ACK names our session and echoes our qpn/psn, ADOPTED only after we adopt; the gateway's REGISTER describes its identity")
def a_handshake(ctx):
    env = lang_env(ctx)
    # a second incarnation of ours, registering step by step
    env.start_peer(handshake=False, psn=0x123456)
    p = env.peer
    p.auto_answer = False
    p.send_register(peer_session=0)
    end = time.monotonic() + 3
    ack = None
    while time.monotonic() < end and ack is None:
        for m in list(p.registers):
            if m.type == wire.REGISTER and m.flags & wire.F_ACK and \
                    wire.parse_register(m.body)["peer_session"] == p.session:
                ack = m
        time.sleep(0.02)
    expect(ack is not None, "no REGISTER ACK naming our session: %r" % p.registers)
    r = wire.parse_register(ack.body)
    expect(not ack.flags & wire.F_ADOPTED,
           "the first ACK says ADOPTED although our REGISTER named no session of the gateway")
    expect((r["ack_qpn"], r["ack_psn"]) == (0, 0x123456),
           "ack_qpn/ack_psn %d/%#x, not our 0/0x123456" % (r["ack_qpn"], r["ack_psn"]))
    expect(r["name"] == "enc-0" and r["roles"] == peermod.ROLE_ENCODE,
           "name %r roles %d" % (r["name"], r["roles"]))
    for k in ("block_tokens", "hidden_size", "dtype_bytes", "aux_bytes"):
        expect(r[k] == env.geo[k], "%s %d, configured %d" % (k, r[k], env.geo[k]))
    expect(256 <= r["mtu"] <= 4096 and r["mtu"] & (r["mtu"] - 1) == 0, "mtu %d" % r["mtu"])
    expect(ack.flags & ~(wire.F_ACK | wire.F_ADOPTED) == 0, "flags %#x" % ack.flags)
    # we adopt the gateway's session (rule 1) and say so
    expect(p.adopted == ack.session, "our side did not adopt")
    p.send_register()
    end = time.monotonic() + 3
    while time.monotonic() < end and not p.confirmed:
        time.sleep(0.02)
    expect(p.confirmed, "no ACK with ADOPTED after our REGISTER with ADOPTED")
    p.auto_answer = True
    p.heartbeat_on = True
    h0 = p.heartbeats
    time.sleep(0.6)
    expect(p.heartbeats - h0 >= 3, "%d heartbeats in 0.6 s (heartbeat_ms 100)" % (p.heartbeats - h0))
    transfer(env, [300], 1024)
    return "ACK(peer_session=ours, ack_psn echoed, not ADOPTED) -> we adopt -> ACK ADOPTED; %d heartbeats in 0.6 s; a room served" % (p.heartbeats - h0)


def rounds_check(default):
    def fn(ctx):
        env = lang_env(ctx)
        rs = transfer(env, [500, 2000, 10000, 50000], default)
        got = {r.total: len(r.windows) - 1 for r in rs}
        want = {n: (1 if n > default else 0) for n in (500, 2000, 10000, 50000)}
        expect(got == want, "resume rounds %r, want %r" % (got, want))
        return "4 rooms byte-exact (embedding, fill ids, mrope, aux), rounds %r" % got
    return fn


check("a-rounds-1024", "500, 2000, 10000, 50000 tokens with a default window of 1024: every byte by the formula")(rounds_check(1024))
check("a-rounds-8192", "the same with a default window of 8192")(rounds_check(8192))


@check("a-fragmented", "windows of single-block runs (32 runs each), pipelined RESUMEs: 10000 and 50000 tokens byte-exact")
def a_fragmented(ctx):
    env = lang_env(ctx)
    rs = transfer(env, [10000, 50000], 1024, fragment=True)
    runs = max(len(w[2]) for r in rs for w in r.windows)
    wins = sum(len(r.windows) for r in rs)
    expect(runs == 32, "largest window %d runs" % runs)
    return "%d windows of up to %d runs byte-exact" % (wins, runs)


@check("a-ranks-2", "2 ranks x (2000, 50000) tokens: each rank byte-exact")
def a_ranks2(ctx):
    rs = transfer(lang_env(ctx), [2000, 50000], 1024, nranks=2)
    return "%d ranks byte-exact" % len(rs)


@check("a-ranks-8", "8 ranks x 10000 tokens, the last a dummy rank (aux record only)")
def a_ranks8(ctx):
    rs = transfer(lang_env(ctx), [10000], 1024, nranks=8, dummy=True)
    d = rs[-1]
    expect(len(d.windows) == 1, "the dummy rank got %d windows" % len(d.windows))
    return "7 ranks byte-exact, the dummy rank got only its aux record"


@check("a-duplicates", "a duplicated INIT and RESUME (new seq, same content) are answered with STATUS and accepted once")
def a_duplicates(ctx):
    env = lang_env(ctx)
    side, p = env.side, env.peer
    w0, d0 = env.rooms("encode_windows"), env.rooms("encode_duplicates")
    (r,) = side.open(room_id(5000), 1, 1024)
    side.send_window(r, r.windows[0])
    side.send_window(r, r.windows[0])
    side.run([r], 10)
    expect(r.state == wire.SUCCESS, "room ended %d %r" % (r.state, r.errors))
    # the RESUME again after Success: the same final answer, no work
    n = len(r.statuses)
    side.send_window(r, r.windows[1])
    m = p.recv(1.0, lambda m: m.room == r.room)
    expect(m is not None and m.type == wire.STATUS, "no STATUS for a late RESUME: %r" % m)
    side.handle(m)
    st = r.statuses[-1]
    expect(st["state"] == wire.SUCCESS and st["landed"] == 5000, "late RESUME answered %r" % st)
    bad = side.verify(r, env.geo)
    expect(not bad, "; ".join(bad))
    dw = env.rooms("encode_windows") - w0
    dd = env.rooms("encode_duplicates") - d0
    expect(dw == 2, "the gateway counted %d windows for 2 distinct ones" % dw)
    side.release([r])
    return "2 windows accepted for %d requests, %d counted as duplicates, %d STATUS" % (
        r.sends + 1, dd, n)


@check("a-polls", "STATUS polls: before the room (ERROR UNKNOWN_ROOM), after Success (the final STATUS), after linger_ms (ERROR UNKNOWN_ROOM)")
def a_polls(ctx):
    env = lang_env(ctx)
    side, p = env.side, env.peer
    room = room_id(700)
    p.send(wire.STATUS, wire.status_body(), flags=wire.F_POLL, rank=0, nranks=1, room=room)
    m = p.recv(1.0, lambda m: m.room == room)
    expect(m is not None and m.type == wire.ERROR, "poll of an unknown room: %r" % m)
    e = wire.parse_error(m.body)
    expect(e == dict(type=wire.STATUS, reserved=0, code=wire.ERR["UNKNOWN_ROOM"]),
           "ERROR body %r" % e)
    (r,) = side.open(room, 1, 1024)
    side.run([r], 10)
    expect(r.state == wire.SUCCESS, "room ended %d %r" % (r.state, r.errors))
    side.poll(r)
    m = p.recv(1.0, lambda m: m.room == room)
    expect(m is not None and m.type == wire.STATUS, "poll after Success: %r" % m)
    st = wire.parse_status(m.body)
    expect(st["state"] == wire.SUCCESS and st["landed"] == 700 and st["total"] == 700,
           "poll after Success: %r" % st)
    time.sleep(2.3)
    side.poll(r)
    m = p.recv(1.0, lambda m: m.room == room)
    expect(m is not None and m.type == wire.ERROR and
           wire.parse_error(m.body)["code"] == wire.ERR["UNKNOWN_ROOM"],
           "poll after linger_ms: %r" % m)
    side.release([r])
    return "UNKNOWN_ROOM, Success(700/700), UNKNOWN_ROOM after linger"


@check("a-abort", "ABORT: answered with an ACK echoing the code (at once for an unknown room); the other ranks hear STATUS Failed")
def a_abort(ctx):
    env = lang_env(ctx)
    side, p = env.side, env.peer
    # unknown room: ACK at once
    room = room_id(100)
    p.send(wire.ABORT, wire.abort_body(wire.ERR["ABORTED"]), rank=0, nranks=1, room=room)
    m = p.recv(1.0, lambda m: m.room == room)
    expect(m is not None and m.type == wire.ABORT and m.flags == wire.F_ACK and
           wire.parse_abort(m.body)["code"] == wire.ERR["ABORTED"],
           "ABORT of an unknown room answered %r" % m)
    # a 2-rank room in transfer: rank 0 aborts
    rs = side.open(room_id(50000), 2, 1024)
    end = time.monotonic() + 5
    while time.monotonic() < end and rs[0].state < wire.TRANSFERRING:
        m = p.recv(0.01)
        if m is not None:
            side.handle(m)
    expect(rs[0].state == wire.TRANSFERRING, "the room did not start: %d" % rs[0].state)
    code = wire.ERR["POOL_EXHAUSTED"]
    p.send(wire.ABORT, wire.abort_body(code), rank=0, nranks=2, room=rs[0].room)
    rs[0].state = wire.FAILED
    ack, failed1 = None, None
    end = time.monotonic() + 5
    while time.monotonic() < end and (ack is None or rs[1].state != wire.FAILED):
        m = p.recv(0.05, lambda m: m.room == rs[0].room)
        if m is None:
            continue
        if m.type == wire.ABORT and m.rank == 0:
            ack = m
        else:
            side.handle(m)
    expect(ack is not None, "no ABORT ACK")
    expect(ack.flags == wire.F_ACK and wire.parse_abort(ack.body)["code"] == code,
           "ACK flags %#x body %r" % (ack.flags, wire.parse_abort(ack.body)))
    expect(rs[1].state == wire.FAILED, "rank 1 did not hear Failed (state %d)" % rs[1].state)
    # after the ACK nothing lands in rank 0's blocks any more
    emb = env.pool.regions[0]
    snap = bytes(env.pool.map[emb[0]:emb[0] + env.geo["pool_blocks"] * 128 * emb[2]])
    time.sleep(0.2)
    snap2 = bytes(env.pool.map[emb[0]:emb[0] + env.geo["pool_blocks"] * 128 * emb[2]])
    expect(snap == snap2, "our pool changed after the ABORT ACK")
    side.release(rs)
    return "ACK(code echoed) for an unknown room and a live one; rank 1 heard Failed %s" % (
        wire.ERR_NAME.get(rs[1].error, rs[1].error))


# ---- the runner -----------------------------------------------------------

def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    build, names = argv[1], argv[2:]
    if names == ["--list"]:
        for name, about, _ in CHECKS:
            print("%-28s %s" % (name, about))
        return 0
    todo = [c for c in CHECKS if not names or c[0] in names]
    unknown = set(names) - {c[0] for c in CHECKS}
    if unknown:
        print("unknown check(s): %s" % " ".join(sorted(unknown)))
        return 2
    ctx = Ctx(os.path.abspath(build))
    passed = failed = xfailed = 0
    try:
        for name, about, fn in todo:
            t0 = time.monotonic()
            try:
                msg = fn(ctx)
                ok = True
            except Fail as e:
                ok, msg = False, str(e)
            except Exception:  # a check that broke is a failure, with its trace
                ok, msg = False, traceback.format_exc().strip().replace("\n", " | ")
            dt = time.monotonic() - t0
            if ok:
                passed += 1
                print("PASS %s (%.1fs): %s" % (name, dt, msg), flush=True)
            elif name in XFAIL:
                xfailed += 1
                print("XFAIL %s (%.1fs): %s [finding: %s]" % (name, dt, msg, XFAIL[name]), flush=True)
            else:
                failed += 1
                print("FAIL %s (%.1fs): %s" % (name, dt, msg), flush=True)
                if ctx.env is not None:
                    # a failed check may leave the shared gateway in any state
                    ctx.env.close()
                    ctx.env = None
    finally:
        ctx.cleanup(keep=failed > 0)
    if failed:
        print("logs kept in %s" % ctx.tmp)
    print("conformance: %d passed, %d failed, %d expected failures" % (passed, failed, xfailed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
