#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""An encode engine: runs a small vision encoder (examples/toy_models.py,
random weights from a fixed generator state) over one synthetic image per request and
sends each request's embeddings, fill ids and mrope positions through the
local embgw gateway to the language ranks, with embgw.connector's
EmbeddingSender, from a scheduler-style loop.

    encode_worker.py SOCKET --lengths 500,2000 --nranks 2 [--base B]
                     [--repeat K] [--concurrency C] [--port p0]

The aux record's cookie carries a 64-bit digest of what was sent, so the
language ranks can tell that they hold exactly the encoder's bytes. The
last line is `encode-worker: rooms= ok= failed= tokens= encode_s= secs=`;
the exit status is 0 only when every request's room succeeded (every rank
received every token).
"""
import argparse
import collections
import sys
import time

import torch

from engine_io import attach, idle, log  # first: puts embgw on the path
from embgw import EmbeddingSender, KVPoll
from toy_models import (VisionEncoder, digest, placement,
                        requests, synthetic_image)

TERMINAL = (KVPoll.Success, KVPoll.Failed)




def run(client, reqs, nranks, concurrency, deadline_s):
    encoder = VisionEncoder(client.hidden_size)
    waiting = collections.deque(reqs)
    inflight = []                      # (id, tokens, sender, deadline)
    ok = failed = tokens = 0
    encode_s = 0.0
    while waiting or inflight:
        # admit a request: encode, then hand the output over (one per
        # iteration, so that the requests in flight are polled in between)
        if waiting and len(inflight) < concurrency:
            rid, n = waiting.popleft()
            t0 = time.monotonic()
            emb = encoder(synthetic_image(rid, n)).to(client.torch_dtype)
            fill, mrope, delta = placement(n)
            encode_s += time.monotonic() - t0
            sender = EmbeddingSender(client, rid, nranks=nranks)
            # the cookie is a digest of the output, so the room is opened
            # once the output exists; an engine without such a cookie opens
            # it before running the encoder (allocation overlaps compute)
            sender.init(n, mrope_delta=delta, cookie=digest(emb, fill, mrope))
            sender.send(emb, fill, mrope)
            inflight.append((rid, n, sender, time.monotonic() + deadline_s))
        # the scheduler's poll over every request in flight
        still = []
        for rid, n, sender, deadline in inflight:
            state = sender.poll()
            if state not in TERMINAL and time.monotonic() > deadline:
                log("room %#x: no end within %.0f s, aborted" %
                    (rid, deadline_s))
                sender.abort()
                state = sender.poll()
            if state == KVPoll.Success:
                ok += 1
                tokens += n
            elif state == KVPoll.Failed:
                failed += 1
                log("room %#x: %s" % (rid, sender.failure_exception()))
            else:
                still.append((rid, n, sender, deadline))
        full = not waiting or len(still) >= concurrency
        if len(still) == len(inflight) and still and full:
            idle(client)               # nothing moved: sleep on the eventfd
        inflight = still
    return ok, failed, tokens, encode_s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("socket", help="the gateway's attach socket")
    ap.add_argument("--port", default="p0", help="the gateway's port name")
    ap.add_argument("--lengths", required=True,
                    help="tokens per request, comma-separated")
    ap.add_argument("--repeat", type=int, default=1,
                    help="the lengths this many times over")
    ap.add_argument("--base", type=int, default=1,
                    help="request ids' run number (1..2^24-1)")
    ap.add_argument("--nranks", type=int, default=1,
                    help="the language side's TP ranks")
    ap.add_argument("--concurrency", type=int, default=4,
                    help="requests in flight at once")
    ap.add_argument("--deadline-s", type=float, default=120,
                    help="abort a request not ended after this long")
    a = ap.parse_args()
    torch.set_num_threads(1)
    reqs = requests(a.base, [int(x) for x in a.lengths.split(",")], a.repeat)
    t0 = time.monotonic()
    with attach(a.socket, a.port, "encode-worker") as client:
        if not client.encode:
            sys.exit("%s: port %s is not an encode port" % (a.socket, a.port))
        ok, failed, tokens, encode_s = run(client, reqs, a.nranks,
                                           max(1, a.concurrency),
                                           a.deadline_s)
    log("encode-worker: rooms=%d ok=%d failed=%d tokens=%d encode_s=%.2f "
        "secs=%.2f" % (len(reqs), ok, failed, tokens, encode_s,
                       time.monotonic() - t0))
    sys.exit(0 if ok == len(reqs) else 1)


if __name__ == "__main__":
    main()
