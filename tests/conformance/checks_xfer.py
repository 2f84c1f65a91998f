"""(c) The state machine's refusals (doc/xfer.md, "Validation";
protocol.md's NO_SLOT, TOO_LARGE, BUSY, BEYOND_TOTAL): each answered with
an ERROR that echoes the request, and a refused message changes nothing
in the room."""
import time

import gateway
import wire
from harness import (ANSWER_S, GEO, LanguagePeerEnv, check, expect, lang_env,
                     room_id)


def ask(env, mtype, room, rank, nranks, offset, body, flags=0, want=None):
    """Send one request; the answer about (room, rank) - the first of type
    `want` when given (what comes before it goes to our side's rooms) - or
    None."""
    p, side = env.peer, env.side
    p.drain()
    p.send(mtype, body, flags=flags, rank=rank, nranks=nranks, room=room, offset=offset)
    end = time.monotonic() + ANSWER_S
    first = None
    while time.monotonic() < end:
        m = p.recv(end - time.monotonic(), lambda m: m.room == room and m.rank == rank)
        if m is None:
            break
        if want is None or m.type == want:
            return m
        first = first or m
        side.handle(m)
    return first


def refused_with(env, code, mtype, room, rank, nranks, offset, body, flags=0):
    m = ask(env, mtype, room, rank, nranks, offset, body, flags, want=wire.ERROR)
    if m is None or m.type != wire.ERROR:
        return "%s: answered %r" % (code, m)
    e = wire.parse_error(m.body)
    got = (e["type"], e["code"], m.rank, m.nranks, m.offset)
    want = (mtype, wire.ERR[code], rank, nranks, offset)
    if got != want:
        return "%s: ERROR (type, code, rank, nranks, offset) %r, want %r" % (
            code, got, want)
    return ""


def win(runs, bt=128, alloc=None):
    if alloc is None:
        alloc = sum(c for _, c in runs) * bt
    return wire.window_body(bt, alloc, runs)


@check("c-window-errors", "INIT/RESUME refused by the state machine: BAD_RANK, BLOCK_TOKENS, ZERO_BLOCKS, BAD_BLOCKS, ALLOC_MISMATCH, STATE, BEYOND_TOTAL (ERROR echoes type, rank, nranks, offset); a RESUME ahead of accepted gets STATUS; the room then completes byte-exact")
def c_window_errors(ctx):
    env = lang_env(ctx)
    side = env.side
    rs = side.open(room_id(3000), 3, 1024, dummy_last=True, send=False)
    room = rs[0].room
    side.send_window(rs[0], rs[0].windows[0])
    m = env.peer.recv(ANSWER_S, lambda m: m.room == room)
    expect(m is not None and m.type == wire.STATUS, "INIT of rank 0 answered %r" % m)
    side.handle(m)
    free = [b for b in range(GEO["pool_blocks"] - 1, 0, -1) if side.alloc.free[b]]
    a, b = free[-1], free[-2]   # two free blocks of ours, unused by any window
    pb = GEO["pool_blocks"]
    problems = [
        refused_with(env, "BAD_RANK", wire.INIT, room, 1, 4, 0, win([(a, 1)])),
        refused_with(env, "BLOCK_TOKENS", wire.INIT, room, 1, 3, 0, win([(a, 1)], bt=64)),
        refused_with(env, "ZERO_BLOCKS", wire.INIT, room, 1, 3, 0, win([], alloc=0)),
        refused_with(env, "ZERO_BLOCKS", wire.INIT, room, 1, 3, 0, win([(a, 0)], alloc=0)),
        refused_with(env, "BAD_BLOCKS", wire.INIT, room, 1, 3, 0, win([(pb - 1, 2)])),
        refused_with(env, "BAD_BLOCKS", wire.INIT, room, 1, 3, 0, win([(a, 1), (a, 1)])),
        refused_with(env, "ALLOC_MISMATCH", wire.INIT, room, 1, 3, 0, win([(a, 1)], alloc=256)),
        refused_with(env, "STATE", wire.RESUME, room, 0, 3, 1024, win([(b, 1)])),
    ]
    # the refused ones changed nothing: the room goes on
    for r in rs[1:]:
        side.send_window(r, r.windows[0])
    end = time.monotonic() + ANSWER_S
    while time.monotonic() < end and rs[0].state < wire.TRANSFERRING:
        m = env.peer.recv(0.02)
        if m is not None and m.room == room:
            if m.type == wire.ERROR:
                problems.append("a good INIT refused: %r" % wire.parse_error(m.body))
            side.handle(m)
    expect(rs[0].state == wire.TRANSFERRING, "the room did not start: %r" % rs[0].statuses)
    acc = rs[0].accepted
    if rs[0].windows[-1][0] + rs[0].windows[-1][1] > acc:
        acc = None    # our own RESUME may be in flight; skip the ahead probe
    problems.append(refused_with(env, "BEYOND_TOTAL", wire.RESUME, room, 0, 3, 3072, win([(b, 1)])))
    problems.append(refused_with(env, "STATE", wire.RESUME, room, 2, 3, 128, win([(b, 1)])))
    if acc is not None:
        m = ask(env, wire.RESUME, room, 0, 3, acc + 128, win([(b, 1)]))
        if m is None or m.type != wire.STATUS or wire.parse_status(m.body)["accepted"] != acc:
            problems.append("a RESUME ahead of accepted answered %r" % m)
        elif m is not None:
            side.handle(m)
    ok = side.run(rs, 15)
    for r in rs:
        if r.state != wire.SUCCESS:
            problems.append("rank %d ended %d %r" % (r.rank, r.state, r.errors))
        else:
            problems += side.verify(r, env.geo)
        problems += r.problems
    side.release(rs)
    problems = [x for x in problems if x]
    expect(ok and not problems, " | ".join(problems))
    return "9 refusals echoed; the room then completed byte-exact on 3 ranks"


@check("c-busy", "10 one-block RESUMEs at once: each accepted once or refused BUSY (retried), never anything else; the room completes byte-exact")
def c_busy(ctx):
    env = lang_env(ctx)
    side, p = env.side, env.peer
    side.depth = 0          # no window of our side's own choosing
    try:
        (r,) = side.open(room_id(20000), 1, 128)
        end = time.monotonic() + ANSWER_S
        while time.monotonic() < end and r.state < wire.TRANSFERRING:
            m = p.recv(0.02)
            if m is not None and m.room == r.room:
                side.handle(m)
        expect(r.state == wire.TRANSFERRING, "no Transferring")
        # 10 single-block windows at once
        for _ in range(10):
            w = side._new_window(r, 128, False)
            side.send_window(r, w)
    finally:
        side.depth = 2
    ok = side.run([r], 20)
    codes = {wire.ERR_NAME.get(e["code"], e["code"]) for _, e in r.errors}
    expect(ok and r.state == wire.SUCCESS, "room ended %d %r" % (r.state, r.errors))
    expect(codes <= {"BUSY"}, "refusals other than BUSY: %r" % codes)
    bad = side.verify(r, env.geo) + r.problems
    side.release([r])
    expect(not bad, "; ".join(bad[:5]))
    return "%d windows, refusals %r, byte-exact" % (len(r.released), sorted(codes) or "none (no BUSY provoked)")


@check("c-too-large", "an INIT for a room longer than the encode pool (300000 tokens, a pool of 262144) is refused TOO_LARGE")
def c_too_large(ctx):
    env = lang_env(ctx)
    why = refused_with(env, "TOO_LARGE", wire.INIT, room_id(300000), 0, 1, 0, win([(0, 8)]))
    expect(not why, why)
    return "TOO_LARGE, type INIT, offset 0"


@check("c-no-slot", "max_rooms = 2, two rooms waiting for a rank: a third room's INIT is refused NO_SLOT")
def c_no_slot(ctx):
    env = LanguagePeerEnv(ctx, sub="slots", prepare=lambda cfg: gateway.edit_config(
        cfg, "  timers = {", "  limits = { max_rooms = 2; };\n  timers = {"))
    try:
        side = env.side
        for _ in range(2):     # two rooms waiting for their rank 1
            rs = side.open(room_id(1000), 2, 1024, send=False)
            side.ranks.pop((rs[1].room, 1))
            side.send_window(rs[0], rs[0].windows[0])
        time.sleep(0.2)
        env.peer.drain()
        free = [b for b in range(GEO["pool_blocks"]) if side.alloc.free[b]][:1]
        why = refused_with(env, "NO_SLOT", wire.INIT, room_id(1000), 0, 1, 0, win([(free[0], 1)]))
        expect(not why, why)
        return "NO_SLOT for a third room"
    finally:
        env.close()
