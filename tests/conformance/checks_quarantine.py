"""(b) The quarantine's deadline (doc/xfer.md, "Quarantine"; doc/protocol.md,
"Sessions and incarnations", rule 4): this peer plays the encode side
against a language gateway running --drive, fails the first room, and then
never answers the gateway's ABORT while it stays alive. Past
timers.quarantine_ms the gateway must fence it: the quarantined blocks come
back, its session is retired (what it sends under it is refused) and a new
incarnation of this peer is adopted and served as any other."""
import os
import re
import time

import gateway
import peer as peermod
import pool as poolmod
import wire
from encode import EncodeSide
from harness import GEO, check, expect

# short, so that the check is quick; above rto_max_ms (200 ms by default)
QUARANTINE_MS = 700
# room 0 fails; rooms opened to the fenced incarnation fail as peer_dead;
# the later ones go to its successor (--rate 1: one room a second)
ROOMS = 4
FAIL_CODE = wire.ERR["TIMEOUT_INPUT"]
FENCE_WAIT_S = 8.0    # past quarantine_ms: the most this check waits for the fence


def start(ctx, quarantine_ms):
    ctx.release_shared()
    d = os.path.join(ctx.tmp, "fence%d" % len(ctx.gateways))
    os.makedirs(d)
    psk = gateway.gen_configs(d, timers=gateway.SLACK + " quarantine_ms = %d;" % quarantine_ms)
    # the rooms a second apart (open loop), the first after this peer
    # has registered: a room due while the peer is fenced fails at once
    gw = gateway.Gateway(ctx.build, d, "language",
                         ["--exit-when-done", "--start-delay-ms", "2500",
                          "--drive", str(ROOMS), "--rate", "1", "--concurrency", "1",
                          "--lengths", "3000"], secs=60)
    ctx.gateways.append(gw)
    gw.wait_tap(gateway.PEER_ADDR["language"])
    return d, wire.derive_key(psk), gw


def new_peer(key, session=None):
    regions, _ = poolmod.layout(GEO)
    return peermod.Peer(key, (gateway.PEER_ADDR["language"], gateway.PORT),
                        (gateway.GW_ADDR["language"], gateway.PORT), "enc-0",
                        peermod.ROLE_ENCODE, GEO, regions, session=session)


def counters(gw):
    """The node's, the language engine's and the pool's counters now."""
    c = {}
    for cmd in ("/embgw/stats", "/embgw/rooms", "/embgw/pool"):
        t = gw.telemetry(cmd) or {}
        c.update(t.get("p0", {}))
    return c


def fail_first_room(p):
    """The first INIT answered with STATUS(Failed): the room fails on the
    language side after a window was sent, so its blocks are quarantined.
    Returns (the INIT, when the failure was sent)."""
    m = p.recv(timeout=30, pred=lambda m: m.type == wire.INIT)
    expect(m is not None, "no INIT from the gateway within 30 s")
    sent = time.monotonic()
    p.send(wire.STATUS, wire.status_body(wire.FAILED, FAIL_CODE),
           rank=m.rank, nranks=m.nranks, room=m.room)
    return m, sent


def wait_fence(gw, p, init, failed_at, quarantine_ms):
    """Heartbeats go on, no ABORT ACK is sent, every other request is left
    unanswered. Returns the ABORTs heard and the counters once the gateway
    counts the peer fenced."""
    aborts = []
    end = failed_at + quarantine_ms / 1000.0 + FENCE_WAIT_S
    c = {}
    while time.monotonic() < end and gw.proc.poll() is None:
        while True:
            m = p.recv(timeout=0.05)
            if m is None:
                break
            if m.type == wire.ABORT and m.room == init.room and m.rank == init.rank:
                aborts.append(m)
        c = counters(gw)
        if c.get("peers_fenced"):
            return aborts, c
    raise_unfenced(gw, aborts, c, time.monotonic() - failed_at, quarantine_ms)


def configured(gw):
    """The quarantine_ms of the gateway's configuration file, as written."""
    with open(os.path.join(os.path.dirname(gw.log_path), "language.cfg")) as f:
        found = re.findall(r"quarantine_ms = [0-9]+", f.read())
    return found[0] if found else "no quarantine_ms"


def raise_unfenced(gw, aborts, c, waited, quarantine_ms):
    expect(False, "the peer was not fenced %.1f s after its room failed, its ABORT never "
           "acknowledged (want the fence at quarantine_ms, %d ms; the gateway's "
           "configuration: %s): peers_fenced %r, "
           "language_quarantine_expired %r, language_quarantine_blocks %r, %d ABORTs heard; "
           "the gateway %s" % (
               waited, quarantine_ms, configured(gw), c.get("peers_fenced"),
               c.get("language_quarantine_expired"), c.get("language_quarantine_blocks"),
               len(aborts), "runs" if gw.proc.poll() is None else
               "exited (%d): %s" % (gw.proc.returncode, gw.tail(3).replace("\n", " | "))))


def check_aborts(aborts, problems):
    """The room's ABORT, resent on its timer under one abort_id, names the
    failure it reports."""
    if len(aborts) < 2:
        problems.append("%d ABORT(s) heard before the fence, want it resent until its ACK"
                        % len(aborts))
        return
    ids = {wire.parse_abort(m.body)["abort_id"] for m in aborts}
    codes = {wire.parse_abort(m.body)["code"] for m in aborts}
    if len(ids) != 1 or 0 in ids:
        problems.append("ABORT resent with abort_ids %r, want one, not 0" % sorted(ids))
    if codes != {FAIL_CODE}:
        problems.append("ABORT codes %r, want the failure's %d" % (sorted(codes), FAIL_CODE))
    if any(m.flags & wire.F_ACK for m in aborts):
        problems.append("an ABORT ACK from the language side")


def check_fenced(c, problems):
    """At the fence: the quarantine ended by it, the blocks back."""
    want = dict(peers_fenced=1, language_quarantined=1, language_quarantine_expired=1,
                language_quarantine_dead=1, language_quarantine_acked=0,
                language_quarantine_rooms=0, language_quarantine_blocks=0,
                blocks_in_use=0)
    bad = ["%s %r (want %d)" % (k, c.get(k), v) for k, v in want.items() if c.get(k) != v]
    if bad:
        problems.append("at the fence: " + ", ".join(bad))


def probe_retired(gw, p, c0, problems):
    """The fenced session keeps talking (heartbeats, REGISTERs): every
    datagram is refused (drop_session), nothing of it is answered or
    adopted."""
    sent = []
    for _ in range(3):
        data = p.send_register()
        sent.append(wire.HDR.unpack_from(data)[-1])    # its seq
        time.sleep(0.2)
    c1 = counters(gw)
    if not c1.get("drop_session", 0) > c0.get("drop_session", 0):
        problems.append("the retired session's datagrams not refused: drop_session %r -> %r"
                        % (c0.get("drop_session"), c1.get("drop_session")))
    if c1.get("adoptions") != c0.get("adoptions"):
        problems.append("the retired session adopted again: adoptions %r -> %r"
                        % (c0.get("adoptions"), c1.get("adoptions")))
    answered = [m for m in p.registers if m.type == wire.REGISTER and m.flags & wire.F_ACK
                and wire.parse_register(m.body)["peer_seq"] in sent]
    if answered:
        problems.append("a REGISTER of the retired session answered: %r" % answered[0])
    return c1


def check_report(rep, es, problems):
    node, lang = rep.get("node", {}), rep.get("language", {})
    adm, res = rep.get("admission", {}), rep.get("result", {})
    failed = rep.get("failed", {})
    if node.get("peers_fenced") != 1 or node.get("adoptions") != 2 or node.get("peer_restarts") != 0:
        problems.append("report node: peers_fenced %r adoptions %r peer_restarts %r "
                        "(want 1, 2 - the first incarnation and its successor -, 0)" % (
                            node.get("peers_fenced"), node.get("adoptions"),
                            node.get("peer_restarts")))
    if adm.get("quarantine_expired") != 1 or adm.get("quarantine_blocks") != 0:
        problems.append("report admission: %r (want quarantine_expired 1, quarantine_blocks 0)" % adm)
    others = {k: v for k, v in failed.items() if k not in ("timeout_input", "peer_dead")}
    if failed.get("timeout_input") != 1 or others:
        problems.append("report failed: %r (want timeout_input 1, else peer_dead only)" % failed)
    if not (lang.get("ok", 0) >= 1 and lang.get("bad") == 0 and lang.get("unfinished") == 0
            and lang.get("ok", 0) + lang.get("failed", 0) == ROOMS and res.get("leaked") == 0):
        problems.append("report: language %r result %r (want a room verified after the fence, "
                        "none bad or leaked)" % (lang, res))
    if es.ok != lang.get("ok"):
        problems.append("the new incarnation completed %d rooms, the gateway verified %r"
                        % (es.ok, lang.get("ok")))


def fence_first(gw, p, problems):
    """The first incarnation: its room failed, its ABORT left unanswered
    until the fence, its retired session probed. Returns the INIT, the
    seconds from the failure to the fence seen, the ABORTs and the
    counters at the fence and after the probe."""
    init, failed_at = fail_first_room(p)
    aborts, c0 = wait_fence(gw, p, init, failed_at, QUARANTINE_MS)
    fenced_after = time.monotonic() - failed_at
    # never before quarantine_ms: the quarantine began after our failure
    # was sent, the counter was read after the fence
    if fenced_after < QUARANTINE_MS / 1000.0:
        problems.append("fenced %.2f s after the failure, before quarantine_ms (%d ms)"
                        % (fenced_after, QUARANTINE_MS))
    check_aborts(aborts, problems)
    check_fenced(c0, problems)
    c1 = probe_retired(gw, p, c0, problems)
    problems += ["the fenced incarnation: " + v for v in p.violations[:2]]
    return init, fenced_after, aborts, c0, c1


@check("b-quarantine-fence", "a language gateway --drive with timers.quarantine_ms %d: this peer fails a room and never acknowledges its ABORT; the gateway fences it (blocks back, session retired, its datagrams refused) and serves its new incarnation" % QUARANTINE_MS)
def b_quarantine_fence(ctx):
    d, key, gw = start(ctx, QUARANTINE_MS)
    p = new_peer(key)
    p2 = mapped = None
    problems = []
    try:
        expect(p.handshake(deadline=20), "no registration with the language gateway: %s"
               % gw.tail(5))
        reg = next(m for m in reversed(p.registers)
                   if m.type == wire.REGISTER and m.session == p.adopted)
        r = wire.parse_register(reg.body)
        path = os.path.join(d, "lang-pool-0")
        mapped = poolmod.MappedPeerPool(path, os.stat(path).st_size)
        init, fenced_after, aborts, c0, c1 = fence_first(gw, p, problems)
        p.close()
        # the same process starting anew: a new session, a new handshake
        p2 = new_peer(key)
        expect(p2.handshake(deadline=20), "the new incarnation %#x not adopted after the "
               "fence: heard %#x adopted %#x; counters %r" % (
                   p2.session, p2.heard, p2.adopted, counters(gw)))
        es = EncodeSide(p2, GEO, mapped.map, r["regions"], r["pool_blocks"])
        es.serve(time.monotonic() + 40, stop=lambda: gw.proc.poll() is not None)
        rep = gw.wait(10)
        problems += (es.problems + p2.violations)[:4]
        check_report(rep, es, problems)
        warned = gw.grep(r"peer enc-0 \(session 0x%x\) did not answer the ABORT of room 0x%x "
                         r"rank %d within quarantine_ms \(%d ms\): fenced" % (
                             p.session, init.room, init.rank, QUARANTINE_MS))
        if len(warned) != 1 or len(gw.grep("did not answer the ABORT")) != 1:
            problems.append("%d warning lines naming the peer, its session, the room and "
                            "quarantine_ms in the log, want 1" % len(warned))
        expect(not problems, "; ".join(problems))
        return ("fenced %.1f s after the failure (%d ABORTs, none acknowledged): quarantine "
                "expired 1, its blocks back, the old session's datagrams refused (drop_session "
                "+%d); the new incarnation adopted, %d of %d rooms verified after it (%r failed)" % (
                    fenced_after, len(aborts),
                    c1.get("drop_session", 0) - c0.get("drop_session", 0),
                    es.ok, ROOMS, rep.get("failed")))
    finally:
        p.close()
        if p2:
            p2.close()
        if mapped:
            mapped.close()
        gw.kill()
