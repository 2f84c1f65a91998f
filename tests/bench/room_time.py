# SPDX-License-Identifier: BSD-3-Clause
"""room-time: one room's time from "the encoder's output is ready" to "the
data is readable on every language rank", through embgw.connector, against
one memcpy of the room's bytes in the same process.

    room_time.py ENC_SOCKET LANG_SOCKET --tokens 1000,10000 --ranks R
                 [--rounds N] [--copy] [-v]

This process is the encode engine; it starts R language ranks (this
script again, `rank` mode, each a process of its own attached to the
language gateway) and tells them over pipes which room to open. Per room:

1. the ranks open their EmbeddingReceiver (rank r of R) and say so;
2. the encoder opens its EmbeddingSender (init) and polls until the blocks
   are there - allocation overlaps the encoder's forward pass in an
   engine, so it is left out of the span;
3. the encoder's output is made: straight into sender.buffer() (the
   pool: zero-copy send), or with --copy in a tensor of its own (a torch
   tensor made once, already touched) that send() copies; the clock
   starts (`ready`);
4. send() (`sent`: the pool holds the bytes and the commit is on the
   ring), then poll() until Success (`success`);
5. each rank polls until Success, takes tensors() of the whole room
   (`views`: the data is readable there) and reports its stamps; then,
   outside the clock, it reads the whole room once (a copy into a tensor
   of its own, already touched: read_ms, what first use of the pool's
   pages costs), checks the room's first and last rows and releases.

The room's time is the latest rank's `views` minus `ready`. The stamps are
CLOCK_MONOTONIC, one clock for every process of the host. Printed, per
length, one line of medians over the rounds:

    room-time: tokens=T ranks=R ms=... memcpy_ms=... ratio=... send_ms=...
               deliver_ms=... views_ms=... enc_success_ms=... alloc_ms=...

send_ms: ready -> sent (the copy into the pool and the commit);
deliver_ms: sent -> the last rank's Success (the gateways' transfer and
the completion's way to the rank); views_ms: Success -> views on the
slowest rank; enc_success_ms: ready -> the encoder's Success;
alloc_ms: init -> blocks there (not in ms); write_ms: the encoder's
output copied into buffer() (the stand-in for its forward pass writing
there; not in ms); read_ms: the slowest rank's read. memcpy_ms: one
torch copy of the room's embeddings into a tensor already written once
(touched), the median of five, in this process.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "python"))
import embgw  # noqa: E402
from embgw import EmbeddingReceiver, EmbeddingSender, KVPoll  # noqa: E402

DEADLINE_S = 60.0
TERMINAL = (KVPoll.Success, KVPoll.Failed)


def now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def mark(room):
    """The value of a room's first and last rows (bf16 holds small ints
    exactly)."""
    return float(room % 200)


def wait_peer(c):
    """Until the port's peer is registered (rooms move)."""
    c.wait_until(lambda: any(p.ready and not p.leaving for p in c.peers()),
                 DEADLINE_S)


# ---- a language rank --------------------------------------------------
def rank_main(sock, rank, nranks, prefault):
    """Reads "open ROOM" lines on stdin, answers "opened ROOM" once the
    receiver is open and "done ROOM ..." with its stamps once the room is
    readable; then, at the next line, reads the room, releases it and
    answers "read ROOM OK SECONDS"; "quit" ends it."""
    out = sys.stdout
    dst = {}        # tokens -> a touched tensor the rank reads a room into
    with embgw.Client(sock, "p0", name="room-time-%d" % rank,
                      lease_thread=True, prefault=prefault) as c:
        wait_peer(c)
        print("ready", file=out, flush=True)
        for line in sys.stdin:
            words = line.split()
            if not words or words[0] == "quit":
                break
            room = int(words[1])
            rx = EmbeddingReceiver(c, room, peer=None, rank=rank,
                                   nranks=nranks)
            rx.init()
            print("opened %d" % room, file=out, flush=True)
            c.wait_until(lambda: rx.poll() in TERMINAL, DEADLINE_S)
            t_success = now()
            if rx.poll() != KVPoll.Success:
                print("failed %d %s" % (room, rx.failure_exception()),
                      file=out, flush=True)
                continue
            views = rx.tensors()
            t_views = now()
            print("done %d %.9f %.9f %d"
                  % (room, t_success, t_views, len(views)), file=out,
                  flush=True)
            # the read waits for every rank's stamps: it must not take the
            # cores from a rank still receiving
            sys.stdin.readline()
            n = rx.num_tokens
            if dst.get(n) is None:
                dst[n] = torch.zeros(n, c.hidden_size, dtype=c.torch_dtype)
            t = now()
            first = 0
            for v in views:
                dst[n][first:first + v.shape[0]].copy_(v)
                first += v.shape[0]
            read_s = now() - t
            ok = (first == n and float(views[0][0, 0]) == mark(room) and
                  float(views[-1][-1, -1]) == mark(room))
            del views
            rx.release()
            c.nop()     # the release is taken before the next room
            print("read %d %d %.9f" % (room, ok, read_s), file=out,
                  flush=True)


# ---- the encoder --------------------------------------------------------
class Ranks:
    def __init__(self, sock, nranks, prefault):
        me = os.path.abspath(__file__)
        self.procs = [subprocess.Popen(
            [sys.executable, me, "rank", sock, str(r), str(nranks),
             str(int(prefault))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            bufsize=1) for r in range(nranks)]

    def say(self, line):
        for p in self.procs:
            p.stdin.write(line + "\n")
            p.stdin.flush()

    def expect(self, word):
        out = []
        for p in self.procs:
            line = p.stdout.readline().split()
            if not line or line[0] != word:
                raise RuntimeError("rank said %r, expected %s" %
                                   (" ".join(line), word))
            out.append(line)
        return out

    def close(self):
        for p in self.procs:
            try:
                p.stdin.write("quit\n")
                p.stdin.close()
            except OSError:
                pass
        return [p.wait(30) for p in self.procs]


def memcpy_ms(src):
    dst = torch.empty_like(src)
    dst.copy_(src)      # touched: the reference copies into resident memory
    ts = []
    for _ in range(5):
        t = now()
        dst.copy_(src)
        ts.append(now() - t)
    return statistics.median(ts) * 1000


def one_room(c, ranks, room, src, nranks, copy):
    n = src.shape[0]
    ranks.say("open %d" % room)
    ranks.expect("opened")
    tx = EmbeddingSender(c, room, nranks=nranks)
    t_init = now()
    tx.init(n)
    c.wait_until(lambda: tx.poll() != KVPoll.Bootstrapping, DEADLINE_S)
    t_alloc = now()
    t = now()
    if copy:
        emb = src
    else:
        emb = tx.buffer()
        emb.copy_(src)      # the encoder's forward pass writes its output
    t_wrote = now()
    emb[0, 0] = emb[-1, -1] = mark(room)
    t_ready = now()
    tx.send(emb)
    t_sent = now()
    c.wait_until(lambda: tx.poll() in TERMINAL, DEADLINE_S)
    t_success = now()
    if tx.poll() != KVPoll.Success:
        raise RuntimeError("room %d: %s" % (room, tx.failure_exception()))
    done = ranks.expect("done")
    ranks.say("read")
    read = ranks.expect("read")
    bad = [d for d in read if d[2] != "1"]
    if bad:
        raise RuntimeError("room %d: a rank read wrong data: %s" % (room, bad))
    rs = [float(d[2]) for d in done]
    rv = [float(d[3]) for d in done]
    ms = 1000.0
    return {"ms": (max(rv) - t_ready) * ms,
            "send_ms": (t_sent - t_ready) * ms,
            "deliver_ms": (max(rs) - t_sent) * ms,
            "views_ms": max(v - s for v, s in zip(rv, rs)) * ms,
            "enc_success_ms": (t_success - t_ready) * ms,
            "alloc_ms": (t_alloc - t_init) * ms,
            "write_ms": (t_wrote - t) * ms,
            "read_ms": max(float(d[3]) for d in read) * ms,
            "runs": max(int(d[4]) for d in done)}


def encode_main(a):
    lengths = [int(x) for x in a.tokens.split(",")]
    ranks = Ranks(a.lang_socket, a.ranks, not a.no_prefault)
    room = a.first_room
    try:
        with embgw.Client(a.enc_socket, "p0", name="room-time-enc",
                          lease_thread=True,
                          prefault=not a.no_prefault) as c:
            wait_peer(c)
            ranks.expect("ready")
            for n in lengths:
                g = torch.Generator().manual_seed(n)
                src = torch.randn(n, c.hidden_size, generator=g) \
                    .to(c.torch_dtype)
                ref = memcpy_ms(src)
                rounds = []
                for _ in range(a.rounds):
                    rounds.append(one_room(c, ranks, room, src, a.ranks,
                                           a.copy))
                    room += 1
                med = {k: statistics.median(r[k] for r in rounds)
                       for k in rounds[0]}
                print("room-time: tokens=%d ranks=%d ms=%.3f memcpy_ms=%.3f "
                      "ratio=%.3f send_ms=%.3f deliver_ms=%.3f "
                      "views_ms=%.3f enc_success_ms=%.3f alloc_ms=%.3f "
                      "write_ms=%.3f read_ms=%.3f runs=%d zero_copy=%d"
                      % (n, a.ranks, med["ms"], ref, med["ms"] / ref,
                         med["send_ms"], med["deliver_ms"], med["views_ms"],
                         med["enc_success_ms"], med["alloc_ms"],
                         med["write_ms"], med["read_ms"], med["runs"],
                         not a.copy), flush=True)
                if a.verbose:
                    for r in rounds:
                        print("  round: " + " ".join(
                            "%s=%.3f" % kv for kv in sorted(r.items())),
                            flush=True)
    finally:
        rcs = ranks.close()
    if any(rcs):
        print("room-time: a rank ended with %s" % rcs, flush=True)
        return 1
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "rank":
        rank_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                  sys.argv[5] == "1")
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("enc_socket")
    ap.add_argument("lang_socket")
    ap.add_argument("--tokens", default="1000,10000,50000")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--first-room", type=int, default=1)
    ap.add_argument("--copy", action="store_true",
                    help="the encoder's output in a tensor of its own, "
                    "copied by send(), instead of written into "
                    "sender.buffer()")
    ap.add_argument("--no-prefault", action="store_true",
                    help="every client with prefault=False")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="every round's figures too")
    return encode_main(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
