# SPDX-License-Identifier: BSD-3-Clause
"""Zero-copy send against the attach shim: EmbeddingSender.buffer() is the
room's own pool memory when its blocks are one run, and send() of it
copies nothing (the copy is made to fail, and the shim still checks every
byte of the room); when the blocks are in several runs, or not there yet,
buffer() is a tensor of the process and send() copies it."""
import signal

import numpy as np
import pytest
import torch

import embgw
from embgw import EmbeddingSender, KVPoll
from conftest import pat_fill, pat_mrope
from test_connector import HIDDEN, loop, pattern


def no_copy(*args, **kwargs):
    raise AssertionError("copy_in called: the zero-copy path copied")


def encode(fake_gateway, *extra):
    fake = fake_gateway("--mode", "encode", "--port", "enc0", "--hidden",
                        HIDDEN, "--max-runs", 128, *extra)
    return fake, embgw.Client(fake.path, "enc0")


def blocks_there(c, s):
    c.wait_until(lambda: s.poll() == KVPoll.WaitingForInput)


def fill_buffers(s, rid, n):
    emb, fill, mrope = s.buffer(), s.buffer("fill_ids"), s.buffer("mrope")
    emb.copy_(pattern(s.client, rid, n))      # the encoder writes its output
    fill.copy_(torch.from_numpy(pat_fill(rid, n)))
    mrope.copy_(torch.from_numpy(pat_mrope(rid, n)))
    return emb, fill, mrope


def test_buffer_is_the_pool_and_send_copies_nothing(fake_gateway,
                                                    monkeypatch):
    fake, c = encode(fake_gateway)
    with c:
        for rid, n in ((31, 1), (32, 1000), (33, 20000)):
            s = EmbeddingSender(c, rid)
            s.init(n)
            blocks_there(c, s)
            emb, fill, mrope = fill_buffers(s, rid, n)
            assert emb.shape == (n, HIDDEN) and emb.dtype == torch.bfloat16
            assert fill.shape == (n,) and mrope.shape == (n, 3)
            assert all(s.in_pool(t, k) for t, k in
                       ((emb, "embedding"), (fill, "fill_ids"),
                        (mrope, "mrope")))
            # the very memory of the room's run in the pool
            start, _ = s._room.runs()[0]
            first = start * c.block_tokens
            assert emb.data_ptr() == \
                c.pool["embedding"][first:].__array_interface__["data"][0]
            with monkeypatch.context() as m:
                m.setattr(embgw.cuda, "copy_in", no_copy)
                s.send(emb, fill, mrope)
            assert s.committed and s.copied_bytes == 0
            assert loop(c, [s]) == [KVPoll.Success]
            fake.expect("room %d: success, %d tokens checked" % (rid, n))


def test_several_runs_take_the_copy_path(fake_gateway):
    fake, c = encode(fake_gateway, "--run-blocks", 4)
    with c:
        n = 4 * c.block_tokens + 5        # two runs at least
        s = EmbeddingSender(c, 41)
        s.init(n)
        blocks_there(c, s)
        assert len(s._room.runs()) > 1
        emb, fill, mrope = fill_buffers(s, 41, n)
        assert not s.in_pool(emb) and emb.shape == (n, HIDDEN)
        s.send(emb, fill, mrope)
        assert s.copied_bytes == n * HIDDEN * 2 + n * 4 + n * 12
        assert loop(c, [s]) == [KVPoll.Success]
        fake.expect("room 41: success, %d tokens checked" % n)


def test_buffer_before_the_blocks_is_copied(fake_gateway):
    fake, c = encode(fake_gateway)
    with c:
        s = EmbeddingSender(c, 51)
        with pytest.raises(RuntimeError, match="before init"):
            s.buffer()
        fake.proc.send_signal(signal.SIGSTOP)
        try:
            s.init(300)
            assert s.poll() == KVPoll.Bootstrapping
            emb, fill, mrope = fill_buffers(s, 51, 300)
            assert not s.in_pool(emb)
            s.send(emb, fill, mrope)
        finally:
            fake.proc.send_signal(signal.SIGCONT)
        assert loop(c, [s]) == [KVPoll.Success]
        assert s.copied_bytes == 300 * (HIDDEN * 2 + 16)
        fake.expect("room 51: success, 300 tokens checked")
        with pytest.raises(ValueError, match="kind must be"):
            s.buffer("aux")


def test_room_scatter_of_its_own_memory(fake_gateway, monkeypatch):
    """The room API: scatter() of room.buffer() or of its one NumPy view
    copies nothing."""
    fake, c = encode(fake_gateway)
    with c:
        r = c.send_room(61, 700)
        r.wait(KVPoll.WaitingForInput)
        buf = r.buffer()
        assert r.in_place(buf) and r.in_place(r.views()[0])
        assert not r.in_place(buf.clone())
        assert not r.in_place(buf[:-1])
        buf.copy_(pattern(c, 61, 700))
        r.views("fill_ids")[0][...] = pat_fill(61, 700)
        with monkeypatch.context() as m:
            m.setattr(embgw.cuda, "copy_in", no_copy)
            assert r.scatter(buf).query()
        assert r.scatter(r.views("fill_ids")[0], kind="fill_ids").query()
        mrope = np.ascontiguousarray(pat_mrope(61, 700))
        r.scatter(mrope, kind="mrope")
        assert r.copied_bytes == mrope.nbytes
        r.commit()
        r.wait(KVPoll.Success)
        fake.expect("room 61: success, 700 tokens checked")


def mapped_kib(addr):
    """Rss (KiB) of this process's mapping that starts at `addr`."""
    with open("/proc/self/smaps") as f:
        inside = False
        for line in f:
            first = line.split()[0]
            if "-" in first and ":" not in first:
                inside = int(first.split("-")[0], 16) == addr
            elif inside and first == "Rss:":
                return int(line.split()[1])
    raise AssertionError("no mapping at %#x" % addr)


@pytest.mark.parametrize("mode", ["encode", "language"])
def test_prefault_maps_the_whole_pool(fake_gateway, mode):
    """Client(prefault=True), the default, maps every page of the pool
    from a thread started at attach (no room's first write or read faults
    page by page); prefault=False leaves them to fault in on first use."""
    fake = fake_gateway("--mode", mode, "--port", "p", "--hidden", 256,
                        "--capacity", 32768)
    for prefault in (False, True):
        with embgw.Client(fake.path, "p", prefault=prefault) as c:
            base = c._pool_mapping(
                embgw._lib.lib.egw_client_geometry(c._c).contents)
            addr = base.__array_interface__["data"][0]
            if prefault:
                c._prefaulter.join()    # attach does not wait for it
            kib = mapped_kib(addr)
            if not prefault:
                assert kib < base.nbytes // 1024 // 2
            elif not c.prefaulted:
                pytest.skip("this kernel has no MADV_POPULATE_*")
            else:
                assert kib >= base.nbytes // 1024 - 4
