# SPDX-License-Identifier: BSD-3-Clause
"""An inference engine's side of embgw, for the integration tests: one
process per role and rank, attached to its gateway through the embgw
package (python/embgw), moving real PyTorch tensors.

    engine.py encode   SOCKET --rooms IDS --nranks R [--go FILE]
    engine.py language SOCKET --rooms IDS --rank r --nranks R [--aux-only]
                                [--misuse] [--go FILE]
    engine.py encode|language SOCKET --bench N --length T --window W
                                [--go FILE]

A room's length is the low 32 bits of its id. Both sides compute what a
room holds from its id alone (expected()), so the language ranks check
every byte without talking to the encoder. Each process prints one line,
`engine-encode: ...` or `engine-language: ...`, of key=value figures, and
exits 0 only when every room succeeded byte-exact.

--go FILE: attached (and the encoder's data made), the process opens no
room until FILE exists, then all of its rooms at once (so that the rooms
of several processes are open at the same time); with --bench, W at a
time as always.

--misuse: once its rooms are open, the language rank opens the first one
again, which the gateway must refuse, and counts the refusal (refused=).

--bench: throughput, N rooms of T tokens (ids 1..N), W in flight on each
side; the rooms' contents come from one tensor made before the clock
starts (each room's first row, fill ids and mrope positions its own), so
the figures are the client's work: the encoder scatters and commits (the
copy stands in for its forward pass writing the output), the language
rank takes the room's zero-copy views, checks every byte in them (the CPU
that takes is left out of cpu_ms) and releases. Each says
`engine-ready: bench` once its tensors are made and, with --go, opens
its rooms once FILE exists (looked for every 2 ms). Both print the wall clock
at their start and end (t0=, t1=, seconds since the epoch) and the
process's CPU per room (cpu_ms=); the language rank also the CPU time one
copy of a room's embeddings takes in this process (copy_ms=), what a
gather would add.
"""
import argparse
import errno
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "python"))
import embgw  # noqa: E402

DEADLINE_S = 60.0


def expected(room, n, hidden, dtype):
    """What room `room` of n tokens holds: embeddings from a generator
    seeded by the id, fill ids and mrope positions derived from it."""
    g = torch.Generator().manual_seed(room)
    emb = torch.randn(n, hidden, generator=g).to(dtype)
    base = room % 1000003
    fill = (torch.arange(n, dtype=torch.int64) + base).to(torch.int32)
    mrope = (torch.arange(3 * n, dtype=torch.int64).view(n, 3) +
             base).to(torch.int32)
    return emb, fill, mrope


def same(a, b):
    """Bit-identical: the same shape and type, and the same bytes, compared
    as the widest integers that tile them and their offsets (torch.equal
    compares element by element: 8-byte words check a bf16 room 3-5 times
    as fast as 2-byte ones)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not (a.is_contiguous() and b.is_contiguous()):
        a, b = a.contiguous(), b.contiguous()
    nbytes = a.numel() * a.element_size()
    offsets = [t.storage_offset() * t.element_size() for t in (a, b)]
    a, b = a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)
    for size, t in ((8, torch.int64), (4, torch.int32), (2, torch.int16)):
        if nbytes % size == 0 and all(o % size == 0 for o in offsets):
            return torch.equal(a.view(t), b.view(t))
    return torch.equal(a, b)


def wait_go(path, secs=DEADLINE_S, step=0.05):
    """Until the file `path` exists (the test's starting signal), looked
    for every `step` seconds."""
    deadline = time.monotonic() + secs
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            print("no %s within %.0f s" % (path, secs), flush=True)
            return
        time.sleep(step)


def encode(c, rooms, nranks, hold_s, go=None, attempt=0):
    hidden = c.geometry["hidden_size"]
    data = {}
    if go:
        # the embeddings exist before the rooms open, as in an engine that
        # opens a room once its encoder ran: open-to-commit is the writes
        data = {rid: expected(rid, rid & 0xffffffff, hidden, c.torch_dtype)
                for rid in rooms}
        print("engine-ready: rooms=%d" % len(rooms), flush=True)
        wait_go(go)
    opened = []
    for rid in rooms:
        n = rid & 0xffffffff
        r = c.send_room(rid, n, nranks=nranks, cookie=rid, attempt=attempt)
        opened.append((rid, n, r))
    print("engine-opened: rooms=%d" % len(opened), flush=True)
    time.sleep(hold_s)
    ok = failed = 0
    for rid, n, r in opened:
        if r.wait(embgw.KVPoll.WaitingForInput, DEADLINE_S) == \
                embgw.KVPoll.Failed:
            continue  # counted below
        emb, fill, mrope = (data.pop(rid) if data else
                            expected(rid, n, hidden, c.torch_dtype))
        try:
            r.scatter(emb)
            r.scatter(fill, kind="fill_ids")
            r.scatter(mrope, kind="mrope")
            r.commit()
        except OSError as e:  # the room ended meanwhile (its peer left)
            print("room %#x: %s" % (rid, e), flush=True)
    for rid, n, r in opened:
        if r.ended and r.state == embgw.KVPoll.Failed:
            failed += 1
            print("room %#x: Failed %s" % (rid, r.reason), flush=True)
            continue
        st = r.wait(embgw.KVPoll.Success, DEADLINE_S)
        if st == embgw.KVPoll.Success and r.ended:
            ok += 1
        else:
            failed += 1
            print("room %#x: %s %s" % (rid, st.name, r.reason), flush=True)
    print("engine-encode: rooms=%d ok=%d failed=%d" %
          (len(rooms), ok, failed), flush=True)
    return failed == 0 and ok == len(rooms)


def misuse(c, room, rank, nranks, aux_only):
    """A command the gateway refuses: `room` opened again by the same rank
    (-EEXIST; a field out of range never leaves lib/client, which checks
    every command with the gateway's own rules). @return how many
    commands were refused as doc/client.md says."""
    twice = c.recv_room(room, peer=1, rank=rank, nranks=nranks,
                        aux_only=aux_only)
    twice.wait(embgw.KVPoll.Success, DEADLINE_S)
    got = [res for _, res in twice.refusals]
    if twice.ended and got == [-errno.EEXIST]:
        return 1
    print("room %#x opened twice: refusals %s, wanted [%d]"
          % (room, got, -errno.EEXIST), flush=True)
    return 0


def content_of(origin):
    """The content key the tests give the data of room `origin`."""
    return "content-%#x" % origin


def language(c, rooms, rank, nranks, aux_only, hold_s, check_misuse=False,
             go=None, origins=None, attempt=0, expect_cached=None,
             lookup=False, peers=None):
    """origins: per room, the room whose data it holds (keyed rooms:
    content keys name the data); None: unkeyed rooms. peers: per room,
    the encode peer it comes from (a name); None: the port's first (id 1)."""
    hidden = c.geometry["hidden_size"]
    keys = ([content_of(o) for o in origins] if origins is not None
            else [None] * len(rooms))
    origins = origins or rooms
    if go:
        wait_go(go)
    lookups_bad = 0
    if lookup:
        # rooms of landed data: the port says so before the open
        for rid, o, k in zip(rooms, origins, keys):
            if o != rid and c.lookup(k) != embgw.LOOKUP_LANDED:
                lookups_bad += 1
    peers = peers or [1] * len(rooms)
    opened = [(rid, c.recv_room(rid, peer=p, rank=rank, nranks=nranks,
                                aux_only=aux_only, attempt=attempt,
                                content=k))
              for rid, k, p in zip(rooms, keys, peers)]
    print("engine-opened: rooms=%d" % len(opened), flush=True)
    refused = (misuse(c, rooms[0], rank, nranks, aux_only)
               if check_misuse else None)
    time.sleep(hold_s)
    ok = bad = failed = cached = 0
    nbytes = 0
    for (rid, r), origin in zip(opened, origins):
        n = origin & 0xffffffff
        try:
            st = r.wait(embgw.KVPoll.Success, DEADLINE_S)
            why = r.reason
        except OSError as e:  # the gateway gave this client up (it stops)
            st, why = embgw.KVPoll.Failed, r.reason if r.ended else str(e)
        if st != embgw.KVPoll.Success:
            failed += 1
            print("room %#x rank %d: %s %s" % (rid, rank, st.name, why),
                  flush=True)
            continue
        aux = r.aux()
        cached += r.cached
        good = aux["total_tokens"] == n and aux["cookie"] == origin
        if not aux_only:
            emb, fill, mrope = expected(origin, n, hidden, c.torch_dtype)
            out = torch.empty(n, hidden, dtype=c.torch_dtype)
            good = (good and same(r.gather(out), emb) and
                    same(r.gather(kind="fill_ids"), fill) and
                    same(r.gather(kind="mrope"), mrope))
            nbytes += emb.numel() * emb.element_size()
        ok += good
        bad += not good
        r.release()
    try:  # the gateway has taken every release before this process leaves
        c.nop()
    except (OSError, TimeoutError) as e:
        print("nop: %s" % e, flush=True)
    print("engine-language: rank=%d rooms=%d ok=%d bad=%d failed=%d bytes=%d "
          "cached=%d lookups_bad=%d%s"
          % (rank, len(rooms), ok, bad, failed, nbytes, cached, lookups_bad,
             "" if refused is None else " refused=%d" % refused), flush=True)
    return ok == len(rooms) and refused in (None, 1) and lookups_bad == 0 \
        and expect_cached in (None, cached)


# ---- --bench ------------------------------------------------------------
def bench_content(n, hidden, dtype):
    """The tensor every room's embeddings start from (made once)."""
    g = torch.Generator().manual_seed(4096)
    return torch.randn(n, hidden, generator=g).to(dtype)


def bench_room(base, rid):
    """Room rid's own parts: its first row, fill ids, mrope positions."""
    n = base.shape[0]
    g = torch.Generator().manual_seed(rid)
    row = torch.randn(base.shape[1], generator=g).to(base.dtype)
    fill = (torch.arange(n, dtype=torch.int32) + rid)
    mrope = torch.arange(3 * n, dtype=torch.int32).view(n, 3) + rid
    return row, fill, mrope


def same_runs(views, base, first):
    """The room's views, in room order, hold `base` with its row 0
    replaced by `first`, bit for bit."""
    at = 0
    for v in views:
        n = v.shape[0]
        if at + n > base.shape[0]:
            return False
        if at == 0:
            good = same(v[0], first) and same(v[1:], base[1:n])
        else:
            good = same(v, base[at:at + n])
        if not good:
            return False
        at += n
    return at == base.shape[0]


def bench_ready(go):
    """Attached and the reference tensor made: said, then (--go) waited
    for the start, so that neither engine's start-up (importing torch,
    making its tensors: a second or more of CPU) runs inside the other's
    measured stretch, and no room is open before both are up."""
    print("engine-ready: bench", flush=True)
    if go:
        # the script waits up to 120 s for both lines; both engines see
        # the file within 2 ms of each other
        wait_go(go, 240.0, 0.002)


def bench_loop(c, nrooms, window, open_room, step):
    """Keep `window` rooms open (open_room(id)) until nrooms have ended;
    step(room) acts on a room and returns True once it is done with it."""
    waiting = list(range(1, nrooms + 1))
    active = []
    ok = failed = 0
    deadline = time.monotonic() + DEADLINE_S
    while waiting or active:
        while waiting and len(active) < window:
            active.append(open_room(waiting.pop(0)))
        c.progress()
        moved = False
        for r in list(active):
            if r.state == embgw.KVPoll.Failed:
                failed += 1
                print("room %d: Failed %s" % (r.room, r.reason), flush=True)
            elif not step(r):
                continue
            else:
                ok += 1
            active.remove(r)
            moved = True
        if not moved:
            if time.monotonic() > deadline:
                print("rooms still open at the deadline: %s" % active,
                      flush=True)
                return ok, failed + len(active) + len(waiting)
            c.wait(100)
    return ok, failed


def bench_encode(c, nrooms, length, window, go=None):
    base = bench_content(length, c.geometry["hidden_size"], c.torch_dtype)
    emb = base.clone()
    bench_ready(go)
    committed = set()

    def step(r):
        if r.room not in committed and \
                r.state >= embgw.KVPoll.WaitingForInput:
            row, fill, mrope = bench_room(base, r.room)
            emb[0] = row
            r.scatter(emb)
            r.scatter(fill, kind="fill_ids")
            r.scatter(mrope, kind="mrope")
            r.commit()
            committed.add(r.room)
        return r.state == embgw.KVPoll.Success and r.ended

    t0, cpu0 = time.time(), time.process_time()
    ok, failed = bench_loop(
        c, nrooms, window,
        lambda rid: c.send_room(rid, length, cookie=rid), step)
    t1, cpu = time.time(), time.process_time() - cpu0
    print("engine-encode: rooms=%d ok=%d failed=%d t0=%.6f t1=%.6f "
          "cpu_ms=%.3f" % (nrooms, ok, failed, t0, t1,
                           cpu * 1000 / max(nrooms, 1)), flush=True)
    return ok == nrooms


def bench_language(c, nrooms, length, window, go=None):
    base = bench_content(length, c.geometry["hidden_size"], c.torch_dtype)
    out = torch.empty_like(base)
    copies = []
    for _ in range(5):  # CPU time, as cpu_ms
        t = time.process_time()
        out.copy_(base)
        copies.append(time.process_time() - t)
    bench_ready(go)
    bad = []
    verify_cpu = [0.0]

    def step(r):
        if r.state != embgw.KVPoll.Success:
            return False
        views = r.tensors()
        fill = r.tensors(kind="fill_ids")
        mrope = r.tensors(kind="mrope")
        aux = r.aux()
        v0 = time.process_time()
        row, want_fill, want_mrope = bench_room(base, r.room)
        if not (same_runs(views, base, row) and
                torch.equal(torch.cat(fill), want_fill) and
                torch.equal(torch.cat(mrope), want_mrope) and
                aux["total_tokens"] == length and aux["cookie"] == r.room):
            bad.append(r.room)
        verify_cpu[0] += time.process_time() - v0
        r.release()  # the views are the pool's: checked before this
        return True

    t0, cpu0 = time.time(), time.process_time()
    ok, failed = bench_loop(c, nrooms, window,
                            lambda rid: c.recv_room(rid, peer=1), step)
    t1, cpu = time.time(), time.process_time() - cpu0 - verify_cpu[0]
    print("engine-language: rank=0 rooms=%d ok=%d bad=%d failed=%d t0=%.6f "
          "t1=%.6f cpu_ms=%.3f copy_ms=%.3f"
          % (nrooms, ok - len(bad), len(bad), failed, t0, t1,
             cpu * 1000 / max(nrooms, 1), sorted(copies)[2] * 1000),
          flush=True)
    return ok == nrooms and not bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["encode", "language"])
    ap.add_argument("socket")
    ap.add_argument("--port", default="p0")
    ap.add_argument("--rooms",
                    help="comma-separated room ids (length: low 32 bits)")
    ap.add_argument("--go", metavar="FILE",
                    help="attached (and, encode, the data made), open no "
                    "room until FILE exists")
    ap.add_argument("--misuse", action="store_true",
                    help="language: a command the gateway must refuse")
    ap.add_argument("--bench", type=int, metavar="N",
                    help="throughput: N rooms of --length tokens")
    ap.add_argument("--length", type=int, default=10000)
    ap.add_argument("--window", type=int, default=4,
                    help="--bench: rooms in flight")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--nranks", type=int, default=1)
    ap.add_argument("--aux-only", action="store_true")
    ap.add_argument("--peer", metavar="NAMES",
                    help="language: the encode peer of every room (one "
                    "name), or of each room (comma-separated, as --rooms)")
    ap.add_argument("--keyed", action="store_true",
                    help="name each room's content by a key")
    ap.add_argument("--same-as", metavar="IDS",
                    help="per room, the room whose data it holds (keyed)")
    ap.add_argument("--attempt", type=int, default=0)
    ap.add_argument("--expect-cached", type=int, metavar="N",
                    help="exactly N rooms served without a transfer")
    ap.add_argument("--lookup", action="store_true",
                    help="every room of another's data looked up as landed "
                    "before it opens")
    ap.add_argument("--hold-s", type=float, default=0,
                    help="sleep this long once the rooms are open (a kill "
                    "lands then)")
    a = ap.parse_args()
    if (a.rooms is None) == (a.bench is None):
        ap.error("one of --rooms and --bench")
    rooms = [int(x, 0) for x in a.rooms.split(",")] if a.rooms else []
    peers = a.peer.split(",") if a.peer else None
    if peers and len(peers) == 1:
        peers = peers * len(rooms)
    if peers and len(peers) != len(rooms):
        ap.error("--peer: %d names for %d rooms" % (len(peers), len(rooms)))
    with embgw.Client(a.socket, a.port, name="%s-%d" % (a.role, a.rank),
                      lease_thread=True) as c:
        if a.bench is not None:
            run = bench_encode if a.role == "encode" else bench_language
            good = run(c, a.bench, a.length, a.window, a.go)
        elif a.role == "encode":
            good = encode(c, rooms, a.nranks, a.hold_s, a.go, a.attempt)
        else:
            origins = None
            if a.same_as:
                origins = [int(x, 0) for x in a.same_as.split(",")]
            elif a.keyed:
                origins = list(rooms)
            good = language(c, rooms, a.rank, a.nranks, a.aux_only,
                            a.hold_s, a.misuse, a.go, origins, a.attempt,
                            a.expect_cached, a.lookup, peers)
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
