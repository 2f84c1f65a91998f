#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""One tensor-parallel rank of a language engine: receives each request's
embeddings through the local embgw gateway with embgw.connector's
EmbeddingReceiver, checks that they are bit-identical to the encoder's,
and runs its share of a small transformer prefill over them
(examples/toy_models.py), the ranks' partial sums joined with
torch.distributed (gloo, CPU). Run one process per rank:

    language_worker.py SOCKET --rank 0 --nranks 2 --dist FILE --lengths ...
    language_worker.py SOCKET --rank 1 --nranks 2 --dist FILE --lengths ...

(FILE: a path both ranks can create, where they meet; the same
--lengths/--repeat/--base as the encode worker's.) A room is good when the
digest of the received embeddings, fill ids and mrope positions equals the
aux record's cookie (the encoder's digest of what it sent) and the aux
record's total and mrope delta are the request's; --recompute also runs
the encoder here, from the same generator state, and compares bit for bit. The ranks
prefill a request only when every rank holds it good. Last line:
`language-worker: rank= rooms= ok= bad= failed= bytes= prefill_tokens=
secs=`; exit status 0 only when every room was good on this rank.
"""
import argparse
import datetime
import sys
import time

import torch
import torch.distributed as dist

from engine_io import attach, idle, log  # first: puts embgw on the path
from embgw import EmbeddingReceiver, KVPoll
from toy_models import (TinyLM, VisionEncoder, digest,
                        placement, requests, synthetic_image)

TERMINAL = (KVPoll.Success, KVPoll.Failed)
AUX_BYTES = 32




def bits(t):
    """A tensor's bits as integers (bfloat16 and friends compared
    exactly)."""
    if t.dtype.is_floating_point:
        return t.view({1: torch.int8, 2: torch.int16,
                       4: torch.int32}[t.element_size()])
    return t


class Rank:
    def __init__(self, client, a):
        self.c = client
        self.a = a
        self.encoder = VisionEncoder(client.hidden_size) \
            if a.recompute else None
        self.lm = TinyLM(client.hidden_size, rank=a.rank, nranks=a.nranks)
        self.ok = self.bad = self.failed = self.nbytes = self.prefilled = 0

    def wait(self, rid, rcv):
        """Poll until the room ends or its deadline passes (then abort)."""
        deadline = time.monotonic() + self.a.deadline_s
        while rcv.poll() not in TERMINAL:
            if time.monotonic() > deadline:
                log("room %#x rank %d: no end within %.0f s, aborted"
                    % (rid, self.a.rank, self.a.deadline_s))
                rcv.abort()
            else:
                idle(self.c)
        return rcv.poll()

    def check(self, rid, n, rcv):
        """Take the room out and check it. @return (good, data)."""
        if self.wait(rid, rcv) == KVPoll.Failed:
            self.failed += 1
            log("room %#x rank %d: %s" % (rid, self.a.rank,
                                          rcv.failure_exception()))
            return False, None
        emb = torch.empty(n, self.c.hidden_size, dtype=self.c.torch_dtype)
        got = rcv.recv(emb)
        rcv.release()                  # copied out: the blocks go back now
        fill, mrope, delta = placement(n)
        why = []
        if got.aux["total_tokens"] != n or rcv.num_tokens != n:
            why.append("total %d, not %d" % (got.aux["total_tokens"], n))
        if got.aux["mrope_delta"] != delta:
            why.append("mrope delta %d, not %d" % (got.aux["mrope_delta"],
                                                   delta))
        if digest(got.embeddings, got.fill_ids, got.mrope) != \
                got.aux["cookie"]:
            why.append("digest differs from the encoder's")
        if not (torch.equal(got.fill_ids, fill) and
                torch.equal(got.mrope, mrope)):
            why.append("fill ids or mrope positions differ")
        if self.encoder is not None:
            want = self.encoder(synthetic_image(rid, n)).to(emb.dtype)
            if not torch.equal(bits(want), bits(emb)):
                why.append("embeddings differ from the recomputed ones")
        if why:
            self.bad += 1
            log("room %#x rank %d: BAD: %s" % (rid, self.a.rank,
                                               "; ".join(why)))
            return False, None
        self.ok += 1
        self.nbytes += emb.numel() * emb.element_size() + \
            got.fill_ids.numel() * 4 + got.mrope.numel() * 4 + AUX_BYTES
        return True, got

    def run(self, reqs):
        a = self.a
        conns = {}
        opened = 0
        for i, (rid, n) in enumerate(reqs):
            # keep `concurrency` requests asked for ahead of the one taken
            while opened < len(reqs) and opened < i + a.concurrency:
                orid = reqs[opened][0]
                conns[orid] = EmbeddingReceiver(self.c, orid, peer=a.peer,
                                                rank=a.rank,
                                                nranks=a.nranks)
                conns[orid].init()
                opened += 1
            good, got = self.check(rid, n, conns.pop(rid))
            # every rank must hold the request before any prefills it
            everyone = torch.tensor([1 if good else 0])
            if a.nranks > 1:
                dist.all_reduce(everyone, op=dist.ReduceOp.MIN)
            if not everyone.item():
                continue
            logits = self.lm(got.embeddings, got.mrope,
                             dist.all_reduce if a.nranks > 1 else None)
            self.prefilled += n
            if a.rank == 0:
                log("room %#x: %d tokens prefilled on %d ranks, next token "
                    "%d" % (rid, n, a.nranks, int(logits.argmax())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("socket", help="the gateway's attach socket")
    ap.add_argument("--port", default="p0", help="the gateway's port name")
    ap.add_argument("--peer", default=None,
                    help="the encode peer: its name, or its id on the "
                    "gateway (default: the port's only peer)")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--nranks", type=int, default=1)
    ap.add_argument("--dist", help="rendezvous file of the ranks (nranks>1)")
    ap.add_argument("--lengths", required=True)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--base", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=4,
                    help="requests asked for ahead")
    ap.add_argument("--recompute", action="store_true",
                    help="recompute the encoder's output and compare")
    ap.add_argument("--deadline-s", type=float, default=120)
    a = ap.parse_args()
    if a.peer is not None and a.peer.isdigit():
        a.peer = int(a.peer)
    a.concurrency = max(1, a.concurrency)
    if a.nranks > 1 and not a.dist:
        ap.error("--dist FILE is needed with --nranks > 1")
    torch.set_num_threads(1)
    reqs = requests(a.base, [int(x) for x in a.lengths.split(",")], a.repeat)
    if a.nranks > 1:
        dist.init_process_group("gloo", init_method="file://" + a.dist,
                                rank=a.rank, world_size=a.nranks,
                                timeout=datetime.timedelta(
                                    seconds=a.deadline_s + 60))
    t0 = time.monotonic()
    with attach(a.socket, a.port, "language-%d" % a.rank) as client:
        if not client.language:
            sys.exit("%s: port %s is not a language port"
                     % (a.socket, a.port))
        r = Rank(client, a)
        r.run(reqs)
    log("language-worker: rank=%d rooms=%d ok=%d bad=%d failed=%d bytes=%d "
        "prefill_tokens=%d secs=%.2f" % (a.rank, len(reqs), r.ok, r.bad,
                                         r.failed, r.nbytes, r.prefilled,
                                         time.monotonic() - t0))
    if a.nranks > 1:
        dist.destroy_process_group()
    sys.exit(0 if r.ok == len(reqs) else 1)


if __name__ == "__main__":
    main()
