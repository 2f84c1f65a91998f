# SPDX-License-Identifier: BSD-3-Clause
"""embgw.cuda alone: the code path the Client and its rooms use to move
tokens between the pool and tensors, over a memory mapping standing in for
the pool (no gateway, no libegw_client.so). The CPU parts (the fallback
without CUDA, bitwise bf16, the deferral of a command until a copy's
handle is done) run everywhere; the CUDA parts skip unless
torch.cuda.is_available(): byte-exact round trips from and to device
tensors through the pinned mapping, stream ordering both ways, and the
copy rate against a pinned torch buffer of the same bytes (printed, one
line per figure)."""
import mmap
import time

import numpy as np
import pytest
import torch

import embgw.cuda as ec
from embgw.client import Client

HIDDEN = 512
BLOCK = 128
CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="torch.cuda is not "
                                "available")


class Pool:
    """An anonymous shared mapping laid out like a pool's embedding
    region: `blocks` blocks of BLOCK tokens of HIDDEN elements of `dtype`
    (uint16 for bf16, as the Client's views)."""

    def __init__(self, blocks, dtype=np.uint16):
        self.dtype = dtype
        self.bytes = blocks * BLOCK * HIDDEN * np.dtype(dtype).itemsize
        self.map = mmap.mmap(-1, self.bytes)
        self.mapping = np.frombuffer(self.map, dtype=np.uint8)
        self.tokens = self.mapping.view(dtype).reshape(-1, HIDDEN)

    def runs(self, spans):
        """Views of runs (first block, blocks) and their (n, first room
        token) ranges, as a room's _token_ranges gives them."""
        views, ranges, done = [], [], 0
        for start, count in spans:
            n = count * BLOCK
            views.append(self.tokens[start * BLOCK:start * BLOCK + n])
            ranges.append((n, done))
            done += n
        return views, ranges

    def close(self):
        del self.tokens, self.mapping
        try:
            self.map.close()
        except BufferError:
            pass    # views still alive: unmapped once they are collected


SPANS = [(7, 3), (0, 2), (20, 5)]      # 10 blocks, out of order
TOTAL = 10 * BLOCK


def pattern(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, HIDDEN, generator=g).to(torch.bfloat16)


def warm_up(t, tv, ranges, s):
    """The kernels and copies below once, so that loading them (which
    waits for the whole device) is not what a later call waits for."""
    with torch.cuda.stream(s):
        torch.cuda._sleep(1000)
        t.fill_(1.0)
        (t.float() * 2).sum()
    ec.copy_in(tv, ranges, t, s).synchronize()
    ec.copy_out(tv, ranges, t, s).synchronize()


def bits(t):
    return t.cpu().view(torch.int16).numpy().view(np.uint16)


# ---- everywhere ---------------------------------------------------------------

def test_register_where_available():
    pool = Pool(32)
    try:
        reg = ec.register(pool.mapping)
        assert (reg is not None) == CUDA
        if reg is None:
            with pytest.raises(RuntimeError, match="not available"):
                ec.register(pool.mapping, required=True)
        else:
            # the mapping is pinned: torch sees page-locked memory
            assert torch.from_numpy(pool.mapping).is_pinned()
            reg.close()
            reg.close()     # twice is harmless
    finally:
        pool.close()


def test_cpu_round_trip_bitwise():
    pool = Pool(32)
    try:
        views, ranges = pool.runs(SPANS)
        tv = ec.torch_views(views, bf16=True)
        src = pattern(TOTAL, 1)
        h = ec.copy_in(tv, ranges, src)
        assert isinstance(h, ec.Done) and h.query()
        # the runs hold the rows in room order, the rest is untouched
        assert np.array_equal(pool.tokens[7 * BLOCK:10 * BLOCK],
                              bits(src[:3 * BLOCK]))
        assert np.array_equal(pool.tokens[20 * BLOCK:25 * BLOCK],
                              bits(src[5 * BLOCK:]))
        assert not pool.tokens[2 * BLOCK:7 * BLOCK].any()
        out = torch.empty(TOTAL, HIDDEN, dtype=torch.bfloat16)
        assert ec.copy_out(tv, ranges, out).query()
        assert np.array_equal(bits(out), bits(src))
        # a bf16 pool's NumPy views are uint16: as_tensor takes them back
        # bitwise as bfloat16
        again = ec.as_tensor(np.concatenate(views), bf16=True)
        assert again.dtype == torch.bfloat16
        assert np.array_equal(bits(again), np.concatenate(views))
        with pytest.raises(ValueError, match="views hold 1280 tokens"):
            ec.copy_in(tv, ranges, src[:-1])
        with pytest.raises(TypeError, match="uint16"):
            ec.torch_views([v.view(np.int16) for v in views], bf16=True)
        with pytest.raises(ValueError, match="contiguous"):
            ec.copy_out(tv, ranges, torch.empty(HIDDEN, TOTAL,
                                                dtype=torch.bfloat16).t())
    finally:
        pool.close()


class Flag:
    """A handle that is done when told."""

    def __init__(self):
        self.done = False
        self.synced = 0

    def query(self):
        return self.done

    def synchronize(self):
        self.synced += 1
        self.done = True


def bare_client():
    """The Client's deferral and close path without an attachment."""
    c = Client.__new__(Client)
    c._deferred, c._pinned, c._c, c._rooms = [], None, None, {}
    return c


def test_commands_wait_for_copies():
    c = bare_client()
    sent = []
    h = Flag()
    c._defer(h, lambda: sent.append("commit"))
    c._run_deferred()
    assert sent == []
    h.done = True
    c._run_deferred()
    assert sent == ["commit"] and c._deferred == []
    # close waits for copies still running into or out of the pool
    h2 = Flag()
    c._defer(h2, lambda: sent.append("release"))
    c.close()
    assert h2.synced == 1


# ---- CUDA ---------------------------------------------------------------------

@needs_cuda
@pytest.mark.parametrize("kind", ["bf16", "fp32"])
def test_device_round_trip(kind):
    dtype = np.uint16 if kind == "bf16" else np.float32
    tdtype = torch.bfloat16 if kind == "bf16" else torch.float32
    pool = Pool(64, dtype)
    reg = ec.register(pool.mapping, required=True)
    try:
        views, ranges = pool.runs(SPANS)
        tv = ec.torch_views(views, bf16=kind == "bf16")
        src = torch.randn(TOTAL, HIDDEN, device="cuda").to(tdtype)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        h = ec.copy_in(tv, ranges, src, stream=s)
        assert isinstance(h, ec.Pending)
        h.synchronize()
        assert h.query()
        want = src.cpu()
        assert torch.equal(torch.cat([v.clone() for v in tv]), want)
        out = torch.empty_like(src)
        h = ec.copy_out(tv, ranges, out, stream=s)
        h.synchronize()
        assert torch.equal(out.cpu(), want)
    finally:
        reg.close()
        pool.close()


@needs_cuda
def test_stream_ordering_send():
    """A kernel writes the tensor on stream s, then copy_in on s: the pool
    holds the kernel's bytes, not what was there before."""
    pool = Pool(64)
    reg = ec.register(pool.mapping, required=True)
    try:
        views, ranges = pool.runs(SPANS)
        tv = ec.torch_views(views, bf16=True)
        s = torch.cuda.Stream()
        t = torch.zeros(TOTAL, HIDDEN, dtype=torch.bfloat16, device="cuda")
        warm_up(t, tv, ranges, s)
        with torch.cuda.stream(s):
            torch.cuda._sleep(1_000_000_000)    # the kernel runs late
            t.fill_(3.0)
        h = ec.copy_in(tv, ranges, t, stream=s)
        # queued behind the kernel, not waited for by this thread
        assert not h.query()
        h.synchronize()
        assert torch.equal(torch.cat([v.clone() for v in tv]),
                           torch.full((TOTAL, HIDDEN), 3.0,
                                      dtype=torch.bfloat16))
    finally:
        reg.close()
        pool.close()


@needs_cuda
def test_stream_ordering_recv_and_release():
    """copy_out on s, then a kernel on s reads the data; the release waits
    for the copy's handle (Client's deferral), never the thread."""
    pool = Pool(64)
    reg = ec.register(pool.mapping, required=True)
    try:
        views, ranges = pool.runs(SPANS)
        tv = ec.torch_views(views, bf16=True)
        src = pattern(TOTAL, 2)
        s = torch.cuda.Stream()
        out = torch.empty(TOTAL, HIDDEN, dtype=torch.bfloat16, device="cuda")
        warm_up(out, tv, ranges, s)
        ec.copy_in(tv, ranges, src)
        with torch.cuda.stream(s):
            torch.cuda._sleep(1_000_000_000)
        h = ec.copy_out(tv, ranges, out, stream=s)
        with torch.cuda.stream(s):
            doubled = out.float() * 2
        c = bare_client()
        released = []
        c._defer(h, lambda: released.append(True))
        c._run_deferred()
        assert not h.query() and released == []   # the blocks stay ours
        h.synchronize()
        c._run_deferred()
        assert released == [True]
        s.synchronize()
        assert torch.equal(doubled.cpu(), src.float() * 2)
        assert np.array_equal(bits(out), bits(src))
    finally:
        reg.close()
        pool.close()


def _rate(fn, nbytes, reps=10):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return nbytes * reps / (time.perf_counter() - t0) / 1e9


@needs_cuda
def test_copy_rate():
    """The pool's copies against torch's own pinned buffer, same bytes,
    same stream: printed, not asserted (machines differ)."""
    blocks = 2048                                 # 256 MiB of bf16
    pool = Pool(blocks)
    reg = ec.register(pool.mapping, required=True)
    try:
        views, ranges = pool.runs([(0, blocks)])
        tv = ec.torch_views(views, bf16=True)
        n = blocks * BLOCK
        nbytes = n * HIDDEN * 2
        dev = torch.empty(n, HIDDEN, dtype=torch.bfloat16, device="cuda")
        pinned = torch.empty(n, HIDDEN, dtype=torch.bfloat16,
                             pin_memory=True)
        s = torch.cuda.current_stream()
        h2d_pool = _rate(lambda: ec.copy_out(tv, ranges, dev, s), nbytes)
        h2d_torch = _rate(lambda: dev.copy_(pinned, non_blocking=True),
                          nbytes)
        d2h_pool = _rate(lambda: ec.copy_in(tv, ranges, dev, s), nbytes)
        d2h_torch = _rate(lambda: pinned.copy_(dev, non_blocking=True),
                          nbytes)
        for what, a, b in (("h2d", h2d_pool, h2d_torch),
                           ("d2h", d2h_pool, d2h_torch)):
            print("cuda: %s pool %.1f GB/s vs pinned torch %.1f GB/s "
                  "(ratio %.2f)" % (what, a, b, a / b))
    finally:
        reg.close()
        pool.close()
