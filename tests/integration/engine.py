# SPDX-License-Identifier: BSD-3-Clause
"""An inference engine's side of embgw, for the integration tests: one
process per role and rank, attached to its gateway through the embgw
package (python/embgw), moving real PyTorch tensors.

    engine.py encode   SOCKET --rooms IDS --nranks R
    engine.py language SOCKET --rooms IDS --rank r --nranks R [--aux-only]

A room's length is the low 32 bits of its id. Both sides compute what a
room holds from its id alone (expected()), so the language ranks check
every byte without talking to the encoder. Each process prints one line,
`engine-encode: ...` or `engine-language: ...`, of key=value figures, and
exits 0 only when every room succeeded byte-exact.
"""
import argparse
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
    """Bit-identical (bfloat16 and friends compared as integers)."""
    if a.dtype.is_floating_point:
        ints = {1: torch.int8, 2: torch.int16, 4: torch.int32}
        a = a.view(ints[a.element_size()])
        b = b.view(ints[b.element_size()])
    return torch.equal(a, b)


def encode(c, rooms, nranks, hold_s):
    hidden = c.geometry["hidden_size"]
    opened = []
    for rid in rooms:
        n = rid & 0xffffffff
        r = c.send_room(rid, n, nranks=nranks, cookie=rid)
        opened.append((rid, n, r))
    print("engine-opened: rooms=%d" % len(opened), flush=True)
    time.sleep(hold_s)
    ok = failed = 0
    for rid, n, r in opened:
        if r.wait(embgw.KVPoll.WaitingForInput, DEADLINE_S) == \
                embgw.KVPoll.Failed:
            continue  # counted below
        emb, fill, mrope = expected(rid, n, hidden, c.torch_dtype)
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


def language(c, rooms, rank, nranks, aux_only, hold_s):
    hidden = c.geometry["hidden_size"]
    opened = [(rid, c.recv_room(rid, peer=0, rank=rank, nranks=nranks,
                                aux_only=aux_only)) for rid in rooms]
    print("engine-opened: rooms=%d" % len(opened), flush=True)
    time.sleep(hold_s)
    ok = bad = failed = 0
    nbytes = 0
    for rid, r in opened:
        n = rid & 0xffffffff
        st = r.wait(embgw.KVPoll.Success, DEADLINE_S)
        if st != embgw.KVPoll.Success:
            failed += 1
            print("room %#x rank %d: %s %s" % (rid, rank, st.name, r.reason),
                  flush=True)
            continue
        aux = r.aux()
        good = aux["total_tokens"] == n and aux["cookie"] == rid
        if not aux_only:
            emb, fill, mrope = expected(rid, n, hidden, c.torch_dtype)
            out = torch.empty(n, hidden, dtype=c.torch_dtype)
            good = (good and same(r.gather(out), emb) and
                    same(r.gather(kind="fill_ids"), fill) and
                    same(r.gather(kind="mrope"), mrope))
            nbytes += emb.numel() * emb.element_size()
        ok += good
        bad += not good
        r.release()
    print("engine-language: rank=%d rooms=%d ok=%d bad=%d failed=%d bytes=%d"
          % (rank, len(rooms), ok, bad, failed, nbytes), flush=True)
    return ok == len(rooms)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["encode", "language"])
    ap.add_argument("socket")
    ap.add_argument("--port", default="p0")
    ap.add_argument("--rooms", required=True,
                    help="comma-separated room ids (length: low 32 bits)")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--nranks", type=int, default=1)
    ap.add_argument("--aux-only", action="store_true")
    ap.add_argument("--hold-s", type=float, default=0,
                    help="sleep this long once the rooms are open (a kill "
                    "lands then)")
    a = ap.parse_args()
    rooms = [int(x, 0) for x in a.rooms.split(",")]
    with embgw.Client(a.socket, a.port, name="%s-%d" % (a.role, a.rank),
                      lease_thread=True) as c:
        if a.role == "encode":
            good = encode(c, rooms, a.nranks, a.hold_s)
        else:
            good = language(c, rooms, a.rank, a.nranks, a.aux_only,
                            a.hold_s)
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
