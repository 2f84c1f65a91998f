# SPDX-License-Identifier: BSD-3-Clause
"""embgw.connector against the attach shim: the scheduler-loop shape
(init, poll until a terminal state, send / recv, release), data written
before and after the blocks arrive, byte-exact for bf16, fp16 and fp32,
two ranks and an aux-only rank, failures surfacing as Failed with the
reason, abort, misuse refused with a clear error."""
import errno
import signal
import time

import numpy as np
import pytest
import torch

import embgw
from embgw import (EmbeddingReceiver, EmbeddingSender,
                   EmbeddingTransferError, KVPoll)
from conftest import (PAT_FAIL, PAT_STALL, pat_cookie, pat_delta,
                      pat_embedding, pat_fill, pat_mrope)

HIDDEN = 64
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
TERMINAL = (KVPoll.Success, KVPoll.Failed)


def as_bytes(t):
    same = {torch.bfloat16: torch.int16, torch.float16: torch.int16,
            torch.float32: torch.int32}
    return t.view(same.get(t.dtype, t.dtype)).numpy().view(np.uint8)


def pattern(client, room, n):
    raw = pat_embedding(room, n, HIDDEN * client.geometry["dtype_bytes"])
    if client.dtype_name == "bf16":
        return torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(raw.view(client.numpy_dtype))


def loop(client, conns, timeout_s=10.0):
    """A scheduler loop: poll every connector until each is terminal.
    @return their states."""
    client.wait_until(lambda: all(c.poll() in TERMINAL for c in conns),
                      timeout_s)
    return [c.poll() for c in conns]


@pytest.fixture
def encode_gateway(fake_gateway):
    def start(dtype="bf16", *extra):
        fake = fake_gateway("--mode", "encode", "--port", "enc0",
                            "--dtype", dtype, "--hidden", HIDDEN,
                            "--run-blocks", 4, "--max-runs", 128, *extra)
        return fake, embgw.Client(fake.path, "enc0")
    return start


@pytest.mark.parametrize("dtype", DTYPE_BYTES)
def test_sender_round_trip(encode_gateway, dtype):
    fake, c = encode_gateway(dtype)
    with c:
        for rid, n in ((11, 1), (12, 129), (13, 50000)):
            s = EmbeddingSender(c, rid, nranks=2)
            assert s.poll() == KVPoll.Bootstrapping  # nothing opened yet
            # handed over before the gateway has answered the open: written
            # by the poll that finds the blocks
            fake.proc.send_signal(signal.SIGSTOP)
            try:
                s.init(n, mrope_delta=pat_delta(rid), cookie=pat_cookie(rid))
                s.send(pattern(c, rid, n),
                       torch.from_numpy(pat_fill(rid, n)), pat_mrope(rid, n))
                assert not s.committed
                assert s.poll() == KVPoll.Bootstrapping
            finally:
                fake.proc.send_signal(signal.SIGCONT)
            assert loop(c, [s]) == [KVPoll.Success]
            assert s.committed and s.failure_exception() is None
            s.abort()   # over already: stays Success
            assert s.poll() == KVPoll.Success
            fake.expect("room %d: success, %d tokens checked" % (rid, n))


def test_sender_waits_for_input_then_sends(encode_gateway):
    fake, c = encode_gateway()
    with c:
        s = EmbeddingSender(c, 21)
        s.init(300)
        c.wait_until(lambda: s.poll() == KVPoll.WaitingForInput)
        # the scheduler polls a while before the encoder's output is ready
        for _ in range(3):
            assert s.poll() == KVPoll.WaitingForInput
        s.send(pattern(c, 21, 300), pat_fill(21, 300), pat_mrope(21, 300))
        assert s.committed
        assert s.poll() in (KVPoll.Transferring, KVPoll.Success)
        assert loop(c, [s]) == [KVPoll.Success]
        fake.expect("room 21: success, 300 tokens checked")


def test_sender_failures(encode_gateway):
    fake, c = encode_gateway("bf16", "--capacity", 1024)
    with c:
        # more than the pool holds: Failed through poll(), reason given
        big = EmbeddingSender(c, 31)
        big.init(600)
        other = EmbeddingSender(c, 32)
        other.init(600)
        assert loop(c, [other]) == [KVPoll.Failed]
        assert big.poll() == KVPoll.WaitingForInput
        e = other.failure_exception()
        assert isinstance(e, EmbeddingTransferError)
        assert e.code == -1018 and e.room == 32
        assert "pool" in e.reason
        with pytest.raises(EmbeddingTransferError, match="room 32 failed"):
            raise e
        # data that differs from what the ranks expect: the transfer fails
        big.send(pattern(c, 31, 600), pat_fill(31, 600),
                 pat_mrope(31, 600) + 1)
        assert loop(c, [big]) == [KVPoll.Failed]
        assert big.failure_exception().code == -1021
        fake.expect("room 31: 600 units differ from the pattern")
        # a length above the gateway's limit: Failed, not raised
        huge = EmbeddingSender(c, 33)
        huge.init(1 << 30)
        assert loop(c, [huge]) == [KVPoll.Failed]
        assert huge.failure_exception().code < 0


def test_sender_misuse(encode_gateway):
    _, c = encode_gateway()
    with c:
        with pytest.raises(ValueError, match="non-zero"):
            EmbeddingSender(c, 0)
        with pytest.raises(ValueError, match="nranks"):
            EmbeddingSender(c, 5, nranks=9)
        s = EmbeddingSender(c, 41)
        with pytest.raises(RuntimeError, match="before init"):
            s.send(pattern(c, 41, 10))
        s.init(10)
        with pytest.raises(RuntimeError, match="init\\(\\) twice"):
            s.init(10)
        with pytest.raises(ValueError, match="shape"):
            s.send(pattern(c, 41, 11))
        with pytest.raises(TypeError, match="expected torch.bfloat16"):
            s.send(torch.zeros(10, HIDDEN))
        with pytest.raises(TypeError, match="fill_ids"):
            s.send(pattern(c, 41, 10), torch.zeros(10, dtype=torch.int64))
        s.send(pattern(c, 41, 10), pat_fill(41, 10), pat_mrope(41, 10))
        with pytest.raises(RuntimeError, match="send\\(\\) twice"):
            s.send(pattern(c, 41, 10))
        assert loop(c, [s]) == [KVPoll.Success]


def test_sender_abort(encode_gateway):
    fake, c = encode_gateway()
    with c:
        # its ranks never take it: the engine gives up
        s = EmbeddingSender(c, PAT_STALL | 51)
        s.init(200)
        s.send(pattern(c, PAT_STALL | 51, 200), pat_fill(PAT_STALL | 51, 200),
               pat_mrope(PAT_STALL | 51, 200))
        c.wait_until(lambda: s.poll() == KVPoll.Transferring)
        s.abort()
        assert loop(c, [s]) == [KVPoll.Failed]
        assert s.failure_exception().code == -1020
        fake.expect("room %d: aborted" % (PAT_STALL | 51))


@pytest.mark.parametrize("dtype", DTYPE_BYTES)
def test_receiver_round_trip(fake_gateway, dtype):
    fake = fake_gateway("--dtype", dtype, "--hidden", HIDDEN,
                        "--run-blocks", 2, "--max-runs", 256)
    with embgw.Client(fake.path, "lang0") as c:
        for rid in (1 << 24 | 1, 2 << 24 | 128, 3 << 24 | 50000):
            n = rid & 0xffffff
            r = EmbeddingReceiver(c, rid, peer="enc0")
            r.init()
            assert r.poll() == KVPoll.Bootstrapping
            with pytest.raises(RuntimeError, match="holds no data"):
                r.recv()
            with pytest.raises(RuntimeError, match="before Success"):
                r.release()
            assert loop(c, [r]) == [KVPoll.Success]
            assert r.num_tokens == n
            out = torch.empty(n, HIDDEN, dtype=c.torch_dtype)
            fill = torch.empty(n, dtype=torch.int32)
            got = r.recv(out, fill)
            assert got.embeddings is out and got.fill_ids is fill
            assert np.array_equal(as_bytes(out), as_bytes(pattern(c, rid, n)))
            assert np.array_equal(fill.numpy(), pat_fill(rid, n))
            assert np.array_equal(got.mrope.numpy(), pat_mrope(rid, n))
            assert got.aux["total_tokens"] == n
            assert got.aux["cookie"] == pat_cookie(rid)
            assert got.aux["mrope_delta"] == pat_delta(rid)
            # read in place: the same bytes, no copy
            views = r.tensors()
            assert np.array_equal(
                as_bytes(torch.cat(views)), as_bytes(out))
            r.release()
            assert r.poll() == KVPoll.Success
            with pytest.raises(RuntimeError, match="released"):
                r.recv()
            r.release()  # twice: nothing more to free
            c.wait_until(lambda: r.ended)
    fake.expect("ended 0 rooms, freed 0 blocks")


def test_receiver_ranks_and_aux_only(fake_gateway):
    fake = fake_gateway("--run-blocks", 2)
    rid = 7 << 24 | 1000
    clients = [embgw.Client(fake.path, "lang0") for _ in range(3)]
    conns = [EmbeddingReceiver(c, rid, rank=i, nranks=3,
                               aux_only=i == 2)
             for i, c in enumerate(clients)]
    for r in conns:
        r.init()
    for r, c in zip(conns, clients):
        assert loop(c, [r]) == [KVPoll.Success]
    a, b = conns[0].recv(), conns[1].recv()
    assert np.array_equal(as_bytes(a.embeddings), as_bytes(b.embeddings))
    assert np.array_equal(as_bytes(a.embeddings),
                          pat_embedding(rid, 1000, HIDDEN * 2))
    only = conns[2].recv()
    assert only.embeddings is None and only.fill_ids is None
    assert only.aux["total_tokens"] == 1000
    assert only.aux["cookie"] == pat_cookie(rid)
    for r, c in zip(conns, clients):
        r.release()
        c.wait_until(lambda: r.ended)
        c.close()
    # a third of the pool is cut out (--run-blocks 2)
    fake.expect("ended 0 rooms, freed 0 blocks; pool free 683 of 683")


def test_receiver_failures(fake_gateway):
    fake = fake_gateway()
    with embgw.Client(fake.path, "lang0") as c:
        dead = EmbeddingReceiver(c, PAT_FAIL | 60)
        stalled = EmbeddingReceiver(c, PAT_STALL | 61)
        for r in (dead, stalled):
            r.init()
        c.wait_until(lambda: dead.poll() == KVPoll.Failed)
        e = dead.failure_exception()
        assert e.code == -1019 and e.reason == "peer dead"
        dead.release()  # a failed room's blocks are already free
        c.wait_until(lambda: stalled.poll() == KVPoll.WaitingForInput)
        assert stalled.failure_exception() is None
        stalled.abort()
        assert loop(c, [stalled]) == [KVPoll.Failed]
        assert stalled.failure_exception().code == -1020
        fake.expect("room %d: aborted" % (PAT_STALL | 61))
        # bad arguments are the engine's own mistakes: raised at once
        with pytest.raises(ValueError, match="rank"):
            EmbeddingReceiver(c, 5, rank=2, nranks=2)
        # an id the port does not list is the engine's mistake too: init()
        # names the port's peers
        lost = EmbeddingReceiver(c, 62, peer=5)
        with pytest.raises(ValueError, match=r"no peer 5.*enc0 \(id 1\)"):
            lost.init()


def test_gateway_gone(fake_gateway):
    fake = fake_gateway()
    c = embgw.Client(fake.path, "lang0")
    r = EmbeddingReceiver(c, PAT_STALL | 70)
    r.init()
    c.wait_until(lambda: r.poll() == KVPoll.WaitingForInput)
    done = EmbeddingReceiver(c, 71)
    done.init()
    c.wait_until(lambda: done.poll() == KVPoll.Success)
    fake.stop()
    # the loop's poll() says Failed; it does not raise
    deadline = time.monotonic() + 5
    while r.poll() != KVPoll.Failed:
        assert time.monotonic() < deadline, "poll() never said Failed"
        time.sleep(0.01)
    assert r.failure_exception().code == -errno.ECONNRESET
    with pytest.raises(ConnectionResetError):
        c.wait(5000)
    done.release()  # nothing left to free
    c.close()
