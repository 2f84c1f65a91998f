"""(c) Byte-level refusals ("What is refused, in order"), replay, sessions
and REGISTER refusals, against an encode gateway started with --produce.

Each crafted datagram is sent alone; the gateway's drop counters
(telemetry /embgw/stats, whose counters are the report's `node:` keys by
another name) must count it once, under the expected reason, and nothing
may answer it (never answer what is not authenticated)."""
import hashlib
import os
import socket
import struct
import time

import gateway
import peer as peermod
import pool as poolmod
import wire
from harness import (ANSWER_S, GEO, LanguagePeerEnv, check, expect, lang_env, room_id,
                     transfer)

# the documented drop reasons: the node: line's keys, which /embgw/stats
# carries as well (doc/gateway.md)
PROTO = "drop_proto"
REPLAY = "drop_replay"
NOTREG = "drop_not_registered"
ROLE = "drop_role"
GEOM = "drop_geometry"
PAYLOAD = "drop_payload"
UNKNOWN = "drop_unknown_peer"
SESSION = "drop_session"
ANY = "any single drop counter"


def stats(env):
    t = env.gw.telemetry("/embgw/stats")
    expect(t and "p0" in t, "no /embgw/stats answer")
    return t["p0"]


def observe(env, send, wait=0.25, allow_register=False):
    """Send, wait, and return (drop counters that moved, finer counters
    that moved, the gateway's answers)."""
    p = env.peer
    before = stats(env)
    mark = len(p.log)
    send()
    # the counters settle: the datagram has reached the node (rx_datagrams
    # counts it whatever becomes of it), then our wait for any answer
    end = time.monotonic() + ANSWER_S
    while time.monotonic() < end and stats(env)["rx_datagrams"] == before["rx_datagrams"]:
        time.sleep(0.02)
    time.sleep(wait)
    after = stats(env)
    moved = {k: after[k] - before.get(k, 0) for k in after
             if isinstance(after[k], int) and after[k] != before.get(k, 0)}
    drops = {k: v for k, v in moved.items() if k.startswith("drop_")}
    finer = {k: v for k, v in moved.items() if k.startswith("proto_")}
    answers = [m for _, m in p.log[mark:] if m.type != wire.HEARTBEAT and
               (allow_register or m.type != wire.REGISTER)]
    return drops, finer, answers


def refused(env, label, send, counter, allow_register=False):
    """One datagram refused as `counter`, unanswered; '' or what differed."""
    drops, finer, answers = observe(env, send, allow_register=allow_register)
    problems = []
    if counter == ANY:
        if sum(drops.values()) != 1:
            problems.append("drop counters moved %r" % drops)
    elif drops != {counter: 1}:
        problems.append("drop counters moved %r, want %s +1" % (drops, counter))
    if allow_register:   # REGISTERs are due to a peer that is not registered
        answers = [m for m in answers if m.type != wire.REGISTER]
    if answers:
        problems.append("answered with %r" % answers[:2])
    env.finer[label] = (drops, finer)
    return "%s: %s" % (label, "; ".join(problems)) if problems else ""


class Craft:
    """Datagrams of our session with a valid tag unless changed after."""

    def __init__(self, env):
        self.env = env
        self.key = env.key
        self.p = env.peer

    def msg(self, mtype, body=b"", session=None, seq=None, **hdr):
        p = self.p
        return wire.encode(self.key, mtype, body,
                           session=p.session if session is None else session,
                           seq=p.next_seq() if seq is None else seq, **hdr)

    def room_msg(self, mtype=wire.INIT, body=None, **hdr):
        hdr.setdefault("rank", 0)
        hdr.setdefault("nranks", 1)
        hdr.setdefault("room", room_id(100))
        if body is None:
            body = wire.window_body(128, 128, [(0, 1)])
        return self.msg(mtype, body, **hdr)

    def retag(self, data):
        return data[:-16] + wire.tag(self.key, data[:-16])

    def send(self, data):
        return lambda: self.p.send_raw(data)


def crafted_cases(c):
    """(label, datagram, reason counter) per refusal of the list, each
    with exactly one thing wrong."""
    K = c
    init = K.room_msg()
    cases = []
    add = lambda label, data, ctr: cases.append((label, data, ctr))  # noqa: E731
    add("1 SHORT (63 bytes)", init[:63], PROTO)
    big = wire.encode(c.key, wire.INIT, wire.window_body(128, 128, [(0, 1)]) + b"\0" * 433,
                      rank=0, nranks=1, room=room_id(100), session=c.p.session,
                      seq=c.p.next_seq())
    add("1 LONG (513 bytes)", big, PROTO)
    add("2 MAGIC", K.room_msg(magic=0x45475732), PROTO)
    add("3 VERSION 1", K.room_msg(version=1), PROTO)
    add("3 VERSION 2", K.room_msg(version=2), PROTO)
    add("3 VERSION 4", K.room_msg(version=4), PROTO)
    add("4 TYPE 0", K.msg(0, rank=0, nranks=0), PROTO)
    add("4 TYPE 8", K.msg(8, rank=0, nranks=0), PROTO)
    add("5 FLAGS HEARTBEAT 0x0001", K.msg(wire.HEARTBEAT, flags=0x0001), PROTO)
    add("5 FLAGS INIT POLL", K.room_msg(flags=wire.F_POLL), PROTO)
    add("5 FLAGS INIT 0x8000", K.room_msg(flags=0x8000), PROTO)
    add("5 FLAGS STATUS DUMMY", K.room_msg(wire.STATUS, wire.status_body(),
                                           flags=wire.F_POLL | wire.F_DUMMY), PROTO)
    add("6 LENGTH body_len+1", K.room_msg(body_len=wire.WINDOW.size + 8 + 1), PROTO)
    add("7 RESERVED HEARTBEAT ranks", K.msg(wire.HEARTBEAT, res14=1), PROTO)
    add("7 RESERVED header 36", K.room_msg(res36=1), PROTO)
    add("8 BODY HEARTBEAT with 4 bytes", K.msg(wire.HEARTBEAT, b"\0" * 4), PROTO)
    add("8 BODY INIT 28+8n+4", K.room_msg(body=wire.window_body(128, 128, [(0, 1)]) + b"\0" * 4), PROTO)
    add("8 BODY INIT nruns=2, one run", K.room_msg(body=wire.window_body(128, 128, [(0, 1)], nruns=2)), PROTO)
    add("8 BODY STATUS 12 bytes", K.room_msg(wire.STATUS, b"\0" * 12, flags=wire.F_POLL), PROTO)
    add("8 BODY REGISTER 156 bytes", K.msg(wire.REGISTER, c.p.register_body()[:156]), PROTO)
    add("8 FIELD INIT nruns=33", K.room_msg(body=wire.window_body(128, 33 * 128, [(2 * i, 1) for i in range(33)])), PROTO)
    bad = bytearray(K.room_msg())
    bad[-1] ^= 1
    add("9 MAC (tag bit flipped)", bytes(bad), PROTO)
    other_key = wire.encode(wire.derive_key(b"x" * 32), wire.HEARTBEAT, session=c.p.session,
                            seq=c.p.next_seq())
    add("9 MAC (another key)", other_key, PROTO)
    v2 = K.room_msg()[:-wire.TAG_LEN]
    v2 += hashlib.blake2b(v2, key=c.key, digest_size=wire.TAG_LEN).digest()
    add("9 MAC (version 2's tag: keyed BLAKE2b under K)", v2, PROTO)
    add("10 FIELD session 0", K.room_msg(session=0), PROTO)
    add("10 FIELD seq 0", K.room_msg(seq=0), PROTO)
    add("10 FIELD nranks 0", K.room_msg(nranks=0), PROTO)
    add("10 FIELD nranks 9", K.room_msg(nranks=9, rank=0), PROTO)
    add("10 FIELD rank = nranks", K.room_msg(nranks=2, rank=2), PROTO)
    add("10 FIELD ranks without rank", K.room_msg(res14=2, nranks=2), PROTO)
    add("10 FIELD ranks past nranks", K.room_msg(res14=3, nranks=1), PROTO)
    add("10 FIELD HEARTBEAT room", K.msg(wire.HEARTBEAT, room=5), PROTO)
    add("10 FIELD HEARTBEAT nranks", K.msg(wire.HEARTBEAT, nranks=1), PROTO)
    add("10 FIELD INIT offset 128", K.room_msg(offset=128), PROTO)
    add("10 FIELD RESUME offset 0", K.room_msg(wire.RESUME), PROTO)
    add("10 FIELD STATUS state 5", K.room_msg(wire.STATUS, wire.status_body(state=5), flags=wire.F_POLL), PROTO)
    add("10 FIELD ABORT code 26", K.room_msg(wire.ABORT, wire.abort_body(26)), PROTO)
    add("10 FIELD STATUS total 2^30+1", K.room_msg(wire.STATUS, wire.status_body(state=2, total=(1 << 30) + 1), flags=wire.F_POLL), PROTO)
    add("10 FIELD REGISTER mtu 100", K.msg(wire.REGISTER, c.p.register_body(mtu=100)), PROTO)
    add("10 FIELD REGISTER roles 0", K.msg(wire.REGISTER, c.p.register_body(roles=0)), PROTO)
    add("10 FIELD REGISTER qpn 2^24", K.msg(wire.REGISTER, c.p.register_body(qpn=1 << 24)), PROTO)
    add("10 FIELD REGISTER dtype 3", K.msg(wire.REGISTER, c.p.register_body(geo=dict(GEO, dtype_bytes=3))), PROTO)
    add("10 FIELD REGISTER aux_bytes 16", K.msg(wire.REGISTER, c.p.register_body(geo=dict(GEO, aux_bytes=16))), PROTO)
    add("10 FIELD REGISTER name with a space", K.msg(wire.REGISTER, c.p.register_body(name="lang 0")), PROTO)
    add("10 FIELD REGISTER ADOPTED without peer_session",
        K.msg(wire.REGISTER, c.p.register_body(peer_session=0), flags=wire.F_ADOPTED), PROTO)
    add("10 FIELD REGISTER peer_seq without peer_session",
        K.msg(wire.REGISTER, c.p.register_body(peer_session=0, peer_seq=5)), PROTO)
    add("10 FIELD REGISTER peer_session without peer_seq",
        K.msg(wire.REGISTER, c.p.register_body(peer_session=c.p.adopted, peer_seq=0)), PROTO)
    add("10 FIELD REGISTER with room", K.msg(wire.REGISTER, c.p.register_body(), room=1), PROTO)
    add("10 RESERVED INIT body", K.room_msg(body=wire.window_body(128, 128, [(0, 1)], reserved=1)), PROTO)
    add("10 RESERVED STATUS body", K.room_msg(wire.STATUS, wire.status_body(res=1), flags=wire.F_POLL), PROTO)
    add("10 FIELD ABORT code 0", K.room_msg(wire.ABORT, wire.abort_body(0, abort_id=1)), PROTO)
    return cases


@check("c-refusals", "every numbered refusal of 'What is refused, in order', one crafted datagram each: counted once as malformed, never answered")
def c_refusals(ctx):
    env = lang_env(ctx)
    env.finer = {}
    c = Craft(env)
    problems = [refused(env, label, c.send(data), ctr)
                for label, data, ctr in crafted_cases(c)]
    problems = [p for p in problems if p]
    n = len(env.finer)
    transfer(env, [700], 1024)
    expect(not problems, " | ".join(problems))
    return "%d datagrams refused, counted and unanswered; a room afterwards byte-exact" % n


@check("c-refusal-order", "where two reasons apply the first in the list wins: unknown peer > malformed; MAC > replay; MAC > session (and no REGISTER); FIELD > session; FIELD > replay; FIELD > role; replay > not registered; not registered > role")
def c_refusal_order(ctx):
    env = lang_env(ctx)
    env.finer = {}
    c, p = Craft(env), env.peer
    problems = []
    # a stranger's datagrams, well-formed or not
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((gateway.STRANGER, gateway.PORT))
    dst = (gateway.GW_ADDR["encode"], gateway.PORT)
    good = c.room_msg()
    problems.append(refused(env, "stranger, authenticated INIT", lambda: s.sendto(good, dst), UNKNOWN))
    problems.append(refused(env, "stranger, 10 bytes", lambda: s.sendto(b"\0" * 10, dst), UNKNOWN))
    s.close()
    # an accepted heartbeat, then the same bytes with a bad tag and as is
    hb = c.msg(wire.HEARTBEAT)
    drops, _, _ = observe(env, c.send(hb))
    if drops:
        problems.append("a fresh HEARTBEAT was dropped: %r" % drops)
    bad = bytearray(hb)
    bad[-3] ^= 0x40
    problems.append(refused(env, "replayed with a bad tag (MAC > REPLAY)", c.send(bytes(bad)), PROTO))
    problems.append(refused(env, "replayed as is (REPLAY)", c.send(hb), REPLAY))
    # a seq within the window never used is accepted once; too old is REPLAY
    top = p.next_seq()
    for _ in range(70):
        p.next_seq()
    top = p.next_seq()
    drops, _, _ = observe(env, c.send(c.msg(wire.HEARTBEAT, seq=top)))
    if drops:
        problems.append("HEARTBEAT at a new top dropped %r" % drops)
    drops, _, _ = observe(env, c.send(c.msg(wire.HEARTBEAT, seq=top - 5)))
    if drops:
        problems.append("HEARTBEAT at top-5 (never seen) dropped %r" % drops)
    problems.append(refused(env, "top-5 again (REPLAY)", c.send(c.msg(wire.HEARTBEAT, seq=top - 5)), REPLAY))
    problems.append(refused(env, "top-64 (too old: REPLAY)", c.send(c.msg(wire.HEARTBEAT, seq=top - 64)), REPLAY))
    problems.append(refused(env, "FIELD nranks 0 at an old seq (FIELD > REPLAY)",
                            c.send(c.room_msg(nranks=0, seq=top - 64)), PROTO))
    # another session
    stranger_session = p.session ^ 0x5555
    problems.append(refused(env, "another session, bad tag (MAC > SESSION, no REGISTER)",
                            c.send(c.room_msg(session=stranger_session)[:-1] + b"\0"), PROTO,
                            allow_register=False))
    problems.append(refused(env, "session 0 (FIELD > SESSION)", c.send(c.room_msg(session=0)), PROTO))
    drops, finer, answers = observe(env, c.send(c.room_msg(session=stranger_session)), allow_register=True)
    env.finer["another session"] = (drops, finer)
    regs = [m for m in answers if m.type == wire.REGISTER]
    if drops != {SESSION: 1} or any(m.type != wire.REGISTER for m in answers):
        problems.append("INIT from another session: drops %r answers %r" % (drops, answers))
    if not regs:
        problems.append("INIT from another session: the gateway sent no REGISTER (rule 6)")
    # a STATUS report (language role) to the encode-only gateway
    rep = wire.status_body(state=wire.TRANSFERRING, total=100, accepted=128)
    problems.append(refused(env, "STATUS report (ROLE)", c.send(c.room_msg(wire.STATUS, rep)), ROLE))
    problems.append(refused(env, "STATUS report state 5 (FIELD > ROLE)",
                            c.send(c.room_msg(wire.STATUS, wire.status_body(state=5, total=100))), PROTO))
    transfer(env, [700], 1024)
    problems = [x for x in problems if x]
    expect(not problems, " | ".join(problems))
    return "each pair counted under the first reason; another session: %r with %d REGISTER" % (
        env.finer["another session"][0], len(regs))


@check("c-not-registered", "a peer adopted but not confirmed: its INIT is NOT_REGISTERED (and draws a REGISTER); a replay of it is REPLAY first; a STATUS report NOT_REGISTERED before ROLE")
def c_not_registered(ctx):
    env = LanguagePeerEnv(ctx, handshake=False, auto_answer=False)
    try:
        env.finer = {}
        p, c = env.peer, Craft(env)
        p.auto_answer = False
        # hear the gateway's session from its own REGISTERs
        end = time.monotonic() + ANSWER_S
        while time.monotonic() < end and not p.heard:
            p.send_register(peer_session=0)
            time.sleep(0.25)
        expect(p.heard, "no REGISTER from the gateway")
        gw_session = p.heard
        # name its session without ADOPTED: it adopts us, we do not confirm
        p.send_register(peer_session=gw_session, flags=0)
        end = time.monotonic() + ANSWER_S
        acks = []
        while time.monotonic() < end and not acks:
            time.sleep(0.05)
            acks = [m for m in p.registers if m.type == wire.REGISTER and m.flags & wire.F_ACK
                    and wire.parse_register(m.body)["peer_session"] == p.session
                    and m.flags & wire.F_ADOPTED]
        expect(acks, "no ACK with ADOPTED after a REGISTER naming the gateway's session; REGISTERs received (flags, session, peer_session): %r; our session %#x" % (
            [(m.flags, hex(m.session), hex(wire.parse_register(m.body)["peer_session"]))
             for m in p.registers if m.type == wire.REGISTER][-6:], p.session))
        p.adopted = gw_session  # so that its datagrams reach our inbox
        problems = []
        init = c.room_msg()
        drops, finer, answers = observe(env, c.send(init), allow_register=True)
        if drops != {NOTREG: 1} or any(m.type != wire.REGISTER for m in answers):
            problems.append("INIT unconfirmed: drops %r answers %r" % (drops, answers))
        if not any(m.type == wire.REGISTER for m in answers):
            problems.append("no REGISTER drawn by a NOT_REGISTERED INIT")
        time.sleep(0.25)
        problems.append(refused(env, "the same INIT again (REPLAY > NOT_REGISTERED)", c.send(init),
                                REPLAY, allow_register=True))
        time.sleep(0.25)
        rep = wire.status_body(state=wire.TRANSFERRING, total=100, accepted=128)
        problems.append(refused(env, "STATUS report (NOT_REGISTERED > ROLE)",
                                c.send(c.room_msg(wire.STATUS, rep)), NOTREG, allow_register=True))
        problems = [x for x in problems if x]
        expect(not problems, " | ".join(problems))
        # confirming registers us: the room works
        p.auto_answer = True
        expect(p.handshake(), "no registration after confirming")
        transfer(env, [700], 1024)
        return "NOT_REGISTERED with a REGISTER drawn; REPLAY and NOT_REGISTERED win their pairs; confirmed, a room works"
    finally:
        env.close()


@check("c-register-refusals", "REGISTER with another geometry, another name, unreachable memory: ERROR(type 7, GEOMETRY/NAME/UNREACHABLE) with room/rank/offset 0, at most one per 200 ms; a good REGISTER afterwards repairs the peer")
def c_register_refusals(ctx):
    env = LanguagePeerEnv(ctx, handshake=False, auto_answer=False)
    try:
        p = env.peer
        p.auto_answer = False
        problems = []

        def errors_after(mark):
            return [m for m in p.registers[mark:] if m.type == wire.ERROR]

        cases = [("GEOMETRY", dict(geo=dict(GEO, hidden_size=64)), GEOM),
                 ("GEOMETRY", dict(geo=dict(GEO, block_tokens=64)), GEOM),
                 ("GEOMETRY", dict(regions=env.pool.regions[:2] + [(0, 0, 0)] + env.pool.regions[3:]), GEOM),
                 ("NAME", dict(name="lang-9"), ANY),
                 ("UNREACHABLE", dict(regions=[(1 << 40, 0, u) for _, _, u in env.pool.regions]), PAYLOAD)]
        seen = {}
        for code, over, ctr in cases:
            time.sleep(0.3)   # past the 200 ms between two ERRORs
            mark = len(p.registers)
            body = p.register_body(peer_session=p.heard, **over)
            drops, _, answers = observe(env, lambda: p.send(wire.REGISTER, body), wait=0.3,
                                        allow_register=True)
            end = time.monotonic() + ANSWER_S
            while time.monotonic() < end and not errors_after(mark):
                time.sleep(0.02)
            errs = errors_after(mark)
            if len(errs) != 1:
                problems.append("%s: %d ERRORs %r (answers %r)" % (code, len(errs), errs, answers))
                continue
            e = errs[0]
            eb = wire.parse_error(e.body)
            if (eb["type"], eb["code"]) != (wire.REGISTER, wire.ERR[code]) or \
                    (e.rank, e.nranks, e.room, e.offset, e.flags) != (0, 0, 0, 0, 0):
                problems.append("%s: ERROR %r body %r" % (code, e, eb))
            if code != "UNREACHABLE" and (ctr == ANY and sum(drops.values()) != 1 or
                                          ctr != ANY and drops.get(ctr) != 1):
                problems.append("%s: drop counters %r, want %s +1" % (code, drops, ctr))
            seen[code] = drops
        # the pool file belongs to another session: UNREACHABLE once adopted
        time.sleep(0.3)
        # at most one ERROR per 200 ms: three bad REGISTERs at once
        mark = len(p.registers)
        body = p.register_body(geo=dict(GEO, hidden_size=64))
        for _ in range(3):
            p.send(wire.REGISTER, body)
        end = time.monotonic() + ANSWER_S
        while time.monotonic() < end and not errors_after(mark):
            time.sleep(0.02)
        time.sleep(0.1)   # less than the 200 ms after which a second may come
        n = len(errors_after(mark))
        if n != 1:
            problems.append("3 bad REGISTERs within 100 ms drew %d ERRORs" % n)
        time.sleep(0.3)
        # the pool file names another session: adopted, then UNREACHABLE
        env.pool.map[8:16] = struct.pack(">Q", p.session ^ 1)
        mark = len(p.registers)
        p.auto_answer = True
        reg = p.handshake(deadline=ANSWER_S)
        errs = [wire.parse_error(m.body)["code"] for m in errors_after(mark)]
        if wire.ERR["UNREACHABLE"] not in errs:
            problems.append("a pool file whose header names another session: ERRORs %r, no UNREACHABLE (%s)" % (
                errs, "the peer registered" if reg else "not registered"))
        # repaired: the right session in the file, a good REGISTER
        env.pool.map[8:16] = struct.pack(">Q", p.session)
        time.sleep(0.25)
        if not p.handshake():
            problems.append("no registration after the good REGISTER")
        else:
            time.sleep(0.3)
            transfer(env, [2000], 1024)
        # the exit report's documented keys count what we provoked
        errs = [wire.parse_error(m.body)["code"] for m in p.registers if m.type == wire.ERROR]
        node = env.close().get("node", {})
        # (drop_payload counts every REGISTER refused for its memory, also
        # those whose ERROR the 200 ms limit held back)
        want = dict(drop_geometry=6, drop_name=1, register_refusals=len(errs))
        got = {k: node.get(k) for k in want}
        unreach = errs.count(wire.ERR["UNREACHABLE"])
        if got != want or (node.get("drop_payload") or 0) < unreach:
            problems.append("exit report node: %r and drop_payload %r, want %r and drop_payload >= %d"
                            % (got, node.get("drop_payload"), want, unreach))
        expect(not problems, " | ".join(problems))
        return "GEOMETRY, NAME, UNREACHABLE answered once each (%r); repaired by a good REGISTER, a room byte-exact" % seen
    finally:
        env.close()


@check("c-new-incarnation", "our restart with a new random session (a smaller one): adopted, the old incarnation's room fails; a REGISTER replayed from before the gateway's start adopts nothing")
def c_new_incarnation(ctx):
    env = LanguagePeerEnv(ctx)
    try:
        p, side = env.peer, env.side
        old_reg = p.send_register()      # a REGISTER naming this gateway's session
        f0 = env.rooms("encode_rooms_failed")
        rs = side.open(room_id(3000), 2, 1024, send=False)[:1]   # rank 1 never INITs
        side.ranks.pop((rs[0].room, 1))
        side.send_window(rs[0], rs[0].windows[0])
        side.run(rs, 0.5)
        expect(rs[0].state == wire.BOOTSTRAPPING, "room state %d" % rs[0].state)
        old_session = p.session
        p.close()
        env.pool.close()
        env.pool = None
        env.peer = None
        env.start_peer(session=max(1, old_session >> 8), handshake=True)
        time.sleep(0.5)
        f1 = env.rooms("encode_rooms_failed")
        expect(f1 - f0 == 1, "rooms failed %d -> %d after our new incarnation" % (f0, f1))
        transfer(env, [2000], 1024)
        # the old incarnation is retired: its REGISTER and its INIT are
        # dropped (SESSION), unanswered but for a REGISTER of the gateway
        env.finer = {}
        retired = []
        old_body = env.peer.register_body(peer_session=env.peer.adopted)
        old = wire.encode(env.key, wire.REGISTER, old_body, flags=wire.F_ADOPTED,
                          session=old_session, seq=1 << 40)
        drops, _, answers = observe(env, lambda: env.peer.send_raw(old), allow_register=True)
        acks = [m for m in answers if m.type == wire.REGISTER and
                wire.parse_register(m.body)["peer_session"] == old_session]
        if drops != {SESSION: 1} or acks or [m for m in answers if m.type != wire.REGISTER]:
            retired.append("REGISTER of the retired session: drops %r answers %r" % (drops, answers))
        old_init = wire.encode(env.key, wire.INIT, wire.window_body(128, 128, [(0, 1)]), rank=0,
                               nranks=1, room=room_id(100), session=old_session, seq=(1 << 40) + 1)
        drops, _, answers = observe(env, lambda: env.peer.send_raw(old_init), allow_register=True)
        if drops != {SESSION: 1} or [m for m in answers if m.type != wire.REGISTER]:
            retired.append("INIT of the retired session: drops %r answers %r" % (drops, answers))
        expect(not retired, " | ".join(retired))
        report = env.close()
    finally:
        if env.peer:
            env.close()
    # a new gateway with the same configuration: the old REGISTER (it names
    # the previous gateway's session) adopts nothing
    gw2 = gateway.Gateway(ctx.build, env.dir, "encode", ["--produce"])
    ctx.gateways.append(gw2)
    pf = q = None
    try:
        gw2.wait_tap(gateway.PEER_ADDR["encode"])
        pf = poolmod.PoolFile(os.path.join(env.dir, "lang-pool-0"), GEO,
                              struct.unpack(">Q", old_reg[16:24])[0])
        q = peermod.Peer(env.key, (gateway.PEER_ADDR["encode"], gateway.PORT),
                         (gateway.GW_ADDR["encode"], gateway.PORT), "lang-0",
                         peermod.ROLE_LANGUAGE, GEO, pf.regions)
        q.auto_answer = False
        q.send_raw(old_reg)
        time.sleep(0.4)
        acks = [m for m in q.registers if m.type == wire.REGISTER and m.flags & wire.F_ACK]
        adopted = [m for m in acks if m.flags & wire.F_ADOPTED]
        expect(not adopted, "a replayed REGISTER was adopted: %r" % adopted)
        init = wire.encode(env.key, wire.INIT, wire.window_body(128, 128, [(0, 1)]), rank=0,
                           nranks=1, room=room_id(100), session=struct.unpack(">Q", old_reg[16:24])[0],
                           seq=struct.unpack(">Q", old_reg[40:48])[0] + 1)
        before = gw2.stat("rx_datagrams") if gw2.stat("rx_datagrams") is not None else 0
        q.send_raw(init)
        time.sleep(0.3)
        answers = [m for _, m in q.log if m.type not in (wire.REGISTER, wire.HEARTBEAT)]
        expect(not answers, "an INIT of the replayed session was answered: %r" % answers)
    finally:
        if q:
            q.close()
        if pf:
            pf.close()
        gw2.stop()
    return "old room failed (encode_rooms_failed +1, report %r); replayed REGISTER: %d ACK(s), none ADOPTED; rx %r" % (
        report.get("encode"), len(acks), before)


@check("c-pool-header", "our pool file's header against the doc's checks (magic, format, session, geometry, file_bytes too small for the regions): the encode gateway answers ERROR(UNREACHABLE) and does not register us; the same incarnation with the header mended registers")
def c_pool_header(ctx):
    env = LanguagePeerEnv(ctx, sub="hdr", handshake=False, auto_answer=False)
    problems = []
    corruptions = [("magic", 0, struct.pack(">I", 0x45475751)),
                   ("format 2", 4, struct.pack(">H", 2)),
                   ("session", 8, None),
                   ("hidden_size 64", 40, struct.pack(">I", 64)),
                   ("file_bytes 8192", 16, struct.pack(">Q", 8192))]
    try:
        for label, off, raw in corruptions:
            env.start_peer(handshake=False, auto_answer=False)
            p = env.peer
            if raw is None:
                raw = struct.pack(">Q", p.session ^ 0x10)
            good = bytes(env.pool.map[off:off + len(raw)])
            env.pool.map[off:off + len(raw)] = raw
            p.auto_answer = True
            reg = p.handshake(deadline=2)
            errs = [wire.parse_error(m.body)["code"] for m in p.registers if m.type == wire.ERROR]
            if reg or wire.ERR["UNREACHABLE"] not in errs:
                problems.append("%s: %s, ERRORs %r" % (
                    label, "registered" if reg else "not registered", errs))
                continue
            env.pool.map[off:off + len(raw)] = good
            if not p.handshake(deadline=ANSWER_S):
                problems.append("%s mended: not registered" % label)
        expect(not problems, " | ".join(problems))
        transfer(env, [700], 1024)
        return "%d corrupted headers refused with UNREACHABLE, each mended and registered" % len(corruptions)
    finally:
        env.close()


@check("c-never-answered", "an ERROR about a REGISTER is taken (counted, unanswered); an ERROR about a room, sent to an encode-only gateway, is a room message for a role it does not have (ROLE, unanswered); an ABORT ACK is never answered")
def c_never_answered(ctx):
    env = lang_env(ctx)
    env.finer = {}
    c = Craft(env)
    problems = []
    err = c.msg(wire.ERROR, wire.error_body(wire.REGISTER, wire.ERR["GEOMETRY"]))
    env.peer.heartbeat_on = False     # the counters then see this datagram alone
    mark = len(env.peer.sent)
    try:
        drops, _, answers = observe(env, c.send(err))
    finally:
        env.peer.heartbeat_on = True
    if drops or answers:
        also = [wire.TYPE_NAMES[t] for ts, t in env.peer.sent[mark:]]
        problems.append("ERROR about a REGISTER: drops %r answers %r (also sent meanwhile: %r)"
                        % (drops, answers, also))
    problems.append(refused(env, "ERROR about a room (ROLE)", c.send(
        c.room_msg(wire.ERROR, wire.error_body(wire.INIT, wire.ERR["BUSY"]))), ROLE))
    problems.append(refused(env, "ABORT ACK from the language side (ROLE)", c.send(
        c.room_msg(wire.ABORT, wire.abort_body(wire.ERR["ABORTED"]), flags=wire.F_ACK)), ANY))
    problems = [x for x in problems if x]
    expect(not problems, " | ".join(problems))
    return "unanswered: ERROR(REGISTER) taken, ERROR about a room %r, ABORT ACK %r" % (
        env.finer["ERROR about a room (ROLE)"][0], env.finer["ABORT ACK from the language side (ROLE)"][0])


@check("c-registered-at-ack", "the handshake's last datagram (the gateway's ACK with ADOPTED to our REGISTER with ADOPTED) leaves the gateway registered: a poll sent at once is answered, never dropped as NOT_REGISTERED (three fresh gateways)")
def c_registered_at_ack(ctx):
    problems = []
    for i in range(3):
        env = LanguagePeerEnv(ctx, sub="reg")     # a fresh gateway, handshake done
        try:
            p = env.peer
            p.heartbeat_on = False     # only the poll goes out
            room = room_id(100)
            drops, _, answers = observe(env, lambda: p.send(
                wire.STATUS, wire.status_body(), flags=wire.F_POLL, rank=0, nranks=1, room=room),
                wait=0.5, allow_register=True)
            got = [m for m in answers if m.type == wire.ERROR and m.room == room]
            if drops or not got:
                problems.append("gateway %d: drops %r, answers %r" % (
                    i + 1, drops, [m for m in answers if m.type != wire.REGISTER]))
        finally:
            env.close()
    expect(not problems, " | ".join(problems))
    return "3 fresh gateways: a poll right after the handshake answered UNKNOWN_ROOM each time"


@check("c-stale-proof", "a REGISTER naming the gateway's session with a peer_seq of a REGISTER the gateway sent more than 2 s ago adopts nothing (ACK without ADOPTED); one naming a fresh one adopts")
def c_stale_proof(ctx):
    env = LanguagePeerEnv(ctx, sub="proof", handshake=False, auto_answer=False)
    try:
        p = env.peer
        end = time.monotonic() + ANSWER_S
        while time.monotonic() < end and not p.heard:
            p.send_register(peer_session=0)
            time.sleep(0.25)
        expect(p.heard, "no REGISTER from the gateway")
        gw, old_seq = p.heard, p.heard_seq
        time.sleep(2.5)

        def answer(peer_seq):
            mark = len(p.registers)
            p.send_register(peer_session=gw, peer_seq=peer_seq, flags=0)
            end = time.monotonic() + ANSWER_S
            while time.monotonic() < end:
                acks = [m for m in p.registers[mark:] if m.type == wire.REGISTER
                        and m.flags & wire.F_ACK]
                if acks:
                    return acks[0]
                time.sleep(0.02)
            return None
        stale = answer(old_seq)
        expect(stale is not None, "no ACK to a REGISTER with a stale proof")
        expect(not stale.flags & wire.F_ADOPTED, "a stale proof (peer_seq %d, 2.5 s old) was adopted" % old_seq)
        fresh = answer(p.heard_seq)
        expect(fresh is not None and fresh.flags & wire.F_ADOPTED,
               "a fresh proof (peer_seq %d) was not adopted: %r" % (p.heard_seq, fresh))
        return "stale proof: ACK without ADOPTED; fresh proof: ACK with ADOPTED"
    finally:
        env.close()
