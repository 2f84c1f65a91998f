"""(a) This peer as the language side against an encode gateway started
with --produce."""
import time

import peer as peermod
import wire
from harness import ANSWER_S, check, expect, lang_env, room_id, transfer


# ---- (a) this peer as the language side -----------------------------------

@check("a-handshake", "REGISTER handshake: ACK names our session and echoes our qpn/psn, ADOPTED only after we adopt; the gateway's REGISTER describes its identity")
def a_handshake(ctx):
    env = lang_env(ctx)
    # a second incarnation of ours, registering step by step
    env.start_peer(handshake=False, psn=0x123456)
    p = env.peer
    p.auto_answer = False
    first = p.send_register(peer_session=0)
    end = time.monotonic() + ANSWER_S
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
    my_seq = int.from_bytes(first[40:48], "big")
    expect(r["peer_seq"] == my_seq, "peer_seq %d, not our REGISTER's seq %d" % (r["peer_seq"], my_seq))
    expect(r["name"] == "enc-0" and r["roles"] == peermod.ROLE_ENCODE,
           "name %r roles %d" % (r["name"], r["roles"]))
    for k in ("block_tokens", "hidden_size", "dtype_bytes", "aux_bytes"):
        expect(r[k] == env.geo[k], "%s %d, configured %d" % (k, r[k], env.geo[k]))
    expect(256 <= r["mtu"] <= 4096 and r["mtu"] & (r["mtu"] - 1) == 0, "mtu %d" % r["mtu"])
    expect(ack.flags & ~(wire.F_ACK | wire.F_ADOPTED) == 0, "flags %#x" % ack.flags)
    # we adopt the gateway's session (rule 1) and say so
    expect(p.adopted == ack.session, "our side did not adopt")
    p.send_register()
    end = time.monotonic() + ANSWER_S
    while time.monotonic() < end and not p.confirmed:
        time.sleep(0.02)
    expect(p.confirmed, "no ACK with ADOPTED after our REGISTER with ADOPTED")
    p.auto_answer = True
    p.heartbeat_on = True
    h0 = p.heartbeats
    end = time.monotonic() + ANSWER_S
    while time.monotonic() < end and p.heartbeats - h0 < 3:
        time.sleep(0.05)
    expect(p.heartbeats - h0 >= 3, "%d heartbeats within 3 s (heartbeat_ms 100)" % (p.heartbeats - h0))
    # registered: a REGISTER from us is answered ACK + ADOPTED, an ACK from
    # us is never answered, and we stay registered
    mark = len(p.registers)
    p.send_register()
    end = time.monotonic() + ANSWER_S
    while time.monotonic() < end and len(p.registers) == mark:
        time.sleep(0.02)
    again = p.registers[mark:]
    expect(again and again[0].type == wire.REGISTER and
           again[0].flags == wire.F_ACK | wire.F_ADOPTED,
           "a registered peer's REGISTER answered %r" % again)
    time.sleep(0.3)
    mark = len(p.registers)
    p.send_register(ack_of=dict(wire.parse_register(again[0].body), seq=again[0].seq))
    time.sleep(0.5)
    expect(len(p.registers) == mark, "our REGISTER ACK was answered: %r" % p.registers[mark:])
    transfer(env, [300], 1024)
    return "ACK(peer_session=ours, ack_psn echoed, not ADOPTED) -> we adopt -> ACK ADOPTED; heartbeats; a registered peer's REGISTER answered ACK+ADOPTED, its ACK unanswered; a room served"


def rounds_check(default):
    def fn(ctx):
        env = lang_env(ctx)
        rs = transfer(env, [500, 2000, 10000, 50000], default)
        got = {r.total: len(r.released) - 1 for r in rs}
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
    runs = max(len(w[2]) for r in rs for w in r.released)
    wins = sum(len(r.released) for r in rs)
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
    expect(len(d.released) == 1, "the dummy rank got %d windows" % len(d.released))
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
    m = p.recv(ANSWER_S, lambda m: m.room == r.room)
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
    m = p.recv(ANSWER_S, lambda m: m.room == room)
    expect(m is not None and m.type == wire.ERROR, "poll of an unknown room: %r" % m)
    e = wire.parse_error(m.body)
    expect(e == dict(type=wire.STATUS, reserved=0, code=wire.ERR["UNKNOWN_ROOM"]),
           "ERROR body %r" % e)
    (r,) = side.open(room, 1, 1024)
    side.run([r], 10)
    expect(r.state == wire.SUCCESS, "room ended %d %r" % (r.state, r.errors))
    p.drain()
    side.poll(r)
    m = p.recv(ANSWER_S, lambda m: m.room == room)
    expect(m is not None and m.type == wire.STATUS, "poll after Success: %r" % m)
    st = wire.parse_status(m.body)
    expect(st["state"] == wire.SUCCESS and st["landed"] == 700 and st["total"] == 700,
           "poll after Success: %r" % st)
    time.sleep(2.3)
    p.drain()
    side.poll(r)
    m = p.recv(ANSWER_S, lambda m: m.room == room)
    expect(m is not None and m.type == wire.ERROR and
           wire.parse_error(m.body)["code"] == wire.ERR["UNKNOWN_ROOM"],
           "poll after linger_ms: %r" % m)
    side.release([r])
    return "UNKNOWN_ROOM, Success(700/700), UNKNOWN_ROOM after linger"


@check("a-abort-unknown", "ABORT of a room the encode side does not know: an ACK at once, echoing the code")
def a_abort_unknown(ctx):
    env = lang_env(ctx)
    p = env.peer
    room = room_id(100)
    p.drain()
    p.send(wire.ABORT, wire.abort_body(wire.ERR["ABORTED"], abort_id=0x1234), rank=0,
           nranks=1, room=room)
    m = p.recv(ANSWER_S, lambda m: m.room == room)
    expect(m is not None and m.type == wire.ABORT and m.flags == wire.F_ACK and
           wire.parse_abort(m.body)["code"] == wire.ERR["ABORTED"] and
           wire.parse_abort(m.body)["abort_id"] == 0x1234 and
           (m.rank, m.nranks) == (0, 1),
           "ABORT of an unknown room answered %r" % m)
    return "ACK(ABORTED) at once"


def abort_in_transfer(env):
    """A 2-rank room of 50000 tokens in transfer; rank 0 sends ABORT.
    Returns (ranks, the ACK or None, the ABORT's code)."""
    side, p = env.side, env.peer
    side.depth = 0      # no RESUME: the room cannot complete before the ABORT
    try:
        rs = side.open(room_id(50000), 2, 1024)
        end = time.monotonic() + ANSWER_S
        while time.monotonic() < end and min(r.state for r in rs) < wire.TRANSFERRING:
            m = p.recv(0.01)
            if m is not None:
                side.handle(m)
    finally:
        side.depth = 2
    expect(min(r.state for r in rs) == wire.TRANSFERRING,
           "the room did not start: %r" % [r.state for r in rs])
    code = wire.ERR["POOL_EXHAUSTED"]
    p.send(wire.ABORT, wire.abort_body(code), rank=0, nranks=2, room=rs[0].room)
    ack = None
    end = time.monotonic() + ANSWER_S
    while time.monotonic() < end and (ack is None or rs[1].state != wire.FAILED):
        m = p.recv(0.05, lambda m: m.room == rs[0].room)
        if m is None:
            continue
        if m.type == wire.ABORT and m.rank == 0:
            ack = m
        else:
            side.handle(m)
    return rs, ack, code


@check("a-abort", "ABORT of a rank in transfer: answered with an ACK echoing the code; nothing lands after the ACK")
def a_abort(ctx):
    env = lang_env(ctx)
    rs, ack, code = abort_in_transfer(env)
    try:
        expect(ack is not None, "no ABORT ACK within %d s (STATUS heard by rank 0: %r)" % (
            ANSWER_S, rs[0].statuses[-2:]))
        expect(ack.flags == wire.F_ACK and wire.parse_abort(ack.body)["code"] == code
               and (ack.rank, ack.nranks) == (0, 2),
               "ACK %r body %r" % (ack, wire.parse_abort(ack.body)))
        # after the ACK nothing lands in our pool any more
        emb = env.pool.regions[0]
        size = env.geo["pool_blocks"] * 128 * emb[2]
        snap = bytes(env.pool.map[emb[0]:emb[0] + size])
        time.sleep(0.2)
        expect(snap == bytes(env.pool.map[emb[0]:emb[0] + size]),
               "our pool changed after the ABORT ACK")
    finally:
        env.side.release(rs)
    return "ACK(%s) echoed; nothing landed after it" % wire.ERR_NAME[code]


@check("a-failed-report", "the Failed STATUS after a rank's ABORT: state 4, a non-zero error, and total/landed/accepted never below what the rank was told before (STATUS fields only grow)")
def a_failed_report(ctx):
    env = lang_env(ctx)
    rs, ack, code = abort_in_transfer(env)
    env.side.release(rs)
    problems = []
    for r in rs:
        failed = [st for st in r.statuses if st["state"] == wire.FAILED]
        if not failed:
            problems.append("rank %d heard no Failed STATUS" % r.rank)
            continue
        st = failed[0]
        if not st["error"]:
            problems.append("rank %d: Failed with error 0" % r.rank)
        problems += ["rank %d: %s" % (r.rank, p) for p in r.problems]
    expect(not problems, "; ".join(problems))
    return "Failed %s on both ranks, every field kept" % ", ".join(
        wire.ERR_NAME.get(r.error, str(r.error)) for r in rs)


@check("a-peer-dead", "silence for longer than peer_dead_ms (5 s here): the gateway declares us dead and our rooms fail; registering again, a room is served")
def a_peer_dead(ctx):
    env = lang_env(ctx)
    side, p = env.side, env.peer
    d0, f0 = env.rooms("encode_peers_dead"), env.rooms("encode_rooms_failed")
    rs = side.open(room_id(3000), 2, 1024, send=False)
    side.ranks.pop((rs[1].room, 1))    # rank 1 never INITs: the room waits
    side.send_window(rs[0], rs[0].windows[0])
    expect(p.recv(ANSWER_S, lambda m: m.room == rs[0].room) is not None, "INIT unanswered")
    p.heartbeat_on = False
    end = time.monotonic() + 5 + 2 * ANSWER_S
    while time.monotonic() < end and env.rooms("encode_peers_dead") == d0:
        time.sleep(0.2)
    d1, f1 = env.rooms("encode_peers_dead"), env.rooms("encode_rooms_failed")
    side.release(rs[:1])
    expect(d1 == d0 + 1 and f1 == f0 + 1, "after our silence: dead peers %d -> %d, rooms failed %d -> %d"
           % (d0, d1, f0, f1))
    expect(p.handshake(), "no registration after the silence")
    transfer(env, [2000], 1024)
    return "declared dead once, its waiting room failed; registered again, a room byte-exact"
