# SPDX-License-Identifier: BSD-3-Clause
"""embgw.Client and its rooms against the attach shim: attach and
refusals, byte-exact rooms in both directions for bf16, fp16 and fp32,
ranks and an aux-only rank, overflow recovery, wake-up, lease, a client
killed with SIGKILL, a gateway that goes away."""
import errno
import os
import select
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import embgw
from embgw import KVPoll
from conftest import (PAT_STALL, pat_cookie, pat_delta, pat_embedding,
                      pat_fill, pat_mrope)

HIDDEN = 64
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
LENGTHS = [1, 127, 128, 129, 50000]


def as_bytes(t):
    """A tensor's bytes, whatever its element type."""
    same = {torch.bfloat16: torch.int16, torch.float16: torch.int16,
            torch.float32: torch.int32}
    return t.view(same.get(t.dtype, t.dtype)).numpy().view(np.uint8)


def pattern_tensor(client, room, n):
    raw = pat_embedding(room, n, HIDDEN * DTYPE_BYTES[client.dtype_name])
    if client.dtype_name == "bf16":
        return torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(raw.view(client.numpy_dtype))


def test_attach_geometry(fake_gateway):
    fake = fake_gateway("--dtype", "fp16", "--hidden", 96,
                        "--peers", "encA,encB")
    with embgw.Client(fake.path, "lang0", name="pytest") as c:
        assert c.dtype_name == "fp16" and c.torch_dtype == torch.float16
        assert c.hidden_size == 96 and c.block_tokens == 128
        assert c.language and not c.encode and c.wakeup
        assert [(p.id, p.name, p.ready, p.leaving) for p in c.peers()] \
            == [(1, "encA", True, False), (2, "encB", True, False)]
        assert c.peer_id("encB") == 2
        assert c.pool["embedding"].shape == (128 * 1024, 96)
        assert c.nop() == 0
        fake.expect("name pytest")
        with pytest.raises(ValueError, match="no peer 'encC'"):
            c.peer_id("encC")
        with pytest.raises(ValueError, match="name the peer.*encA \\(id 1\\)"):
            c.recv_room(5)
        with pytest.raises(OSError) as e:
            c.send_room(5, 10)
        assert e.value.errno == errno.EOPNOTSUPP
    fake.expect("detached (socket closed)")


def test_refusals(fake_gateway):
    fake = fake_gateway()
    with pytest.raises(FileNotFoundError, match="no port 'nope'"):
        embgw.Client(fake.path, "nope")
    # a gateway of the release before: the client's version and its own
    v2 = fake_gateway("--speak-version", 2)
    with pytest.raises(OSError) as e:
        embgw.Client(v2.path, "lang0")
    assert e.value.errno == errno.EPROTONOSUPPORT
    assert "version 3" in str(e.value) and "version 2" in str(e.value)
    other = fake_gateway("--allow-uid", os.getuid() + 1)
    with pytest.raises(PermissionError, match="uid %d may not attach"
                       % os.getuid()):
        embgw.Client(other.path, "lang0")


def test_peers_come_and_go(fake_gateway):
    fake = fake_gateway("--peers", "encA", "--peer-wait-ms", 5000)
    with embgw.Client(fake.path, "lang0") as c:
        gen = c.peers_generation
        # a room for a peer not listed yet waits for it (Bootstrapping),
        # and is served once it joins
        rid = 1 << 24 | 300
        room = c.recv_room(rid, peer="enc-3")
        assert room.poll() == KVPoll.Bootstrapping
        fake.say("peer-add enc-3")
        fake.expect("peer enc-3 joined as id 2")
        peers = c.wait_peers(gen, timeout_s=5)
        assert [(p.id, p.name) for p in peers] == [(1, "encA"), (2, "enc-3")]
        assert c.peers_generation > gen
        assert room.wait(KVPoll.Success) == KVPoll.Success
        assert room.total_tokens == 300
        room.release()
        # a peer removed: its id fails a room at once, naming it; its name
        # is waited for again
        gen = c.peers_generation
        fake.say("peer-remove enc-3")
        assert [p.name for p in c.wait_peers(gen, timeout_s=5)] == ["encA"]
        gone = c.recv_room(2 << 24 | 10, peer=2)
        assert gone.wait(KVPoll.Success) == KVPoll.Failed
        assert gone.result == -1026
        assert gone.reason == "peer removed: peer id 2"
        with pytest.raises(ValueError, match="no peer 2"):
            c.peer_id(2)


def test_unknown_peer_fails_at_the_deadline(fake_gateway):
    fake = fake_gateway("--peers", "encA", "--peer-wait-ms", 100)
    with embgw.Client(fake.path, "lang0") as c:
        room = c.recv_room(3 << 24 | 10, peer="ghost")
        assert room.wait(KVPoll.Success) == KVPoll.Failed
        assert room.result == -1022
        assert room.reason == "unknown peer: peer 'ghost'"
        # the port's only peer needs no name
        ok = c.recv_room(4 << 24 | 10)
        assert ok.wait(KVPoll.Success) == KVPoll.Success


@pytest.mark.parametrize("dtype", DTYPE_BYTES)
def test_language_round_trip(fake_gateway, dtype):
    fake = fake_gateway("--dtype", dtype, "--hidden", HIDDEN,
                        "--run-blocks", 3, "--max-runs", 256)
    with embgw.Client(fake.path, "lang0") as c:
        for i, n in enumerate(LENGTHS):
            rid = (i + 1) << 24 | n
            room = c.recv_room(rid, peer="enc0")
            assert room.wait(KVPoll.Success) == KVPoll.Success
            assert room.total_tokens == n
            assert len(room.runs()) == -(-n // (3 * 128))
            emb = room.gather()
            assert emb.dtype == c.torch_dtype and emb.shape == (n, HIDDEN)
            assert np.array_equal(as_bytes(emb), pat_embedding(
                rid, n, HIDDEN * DTYPE_BYTES[dtype]))
            assert np.array_equal(room.gather(kind="fill_ids").numpy(),
                                  pat_fill(rid, n))
            assert np.array_equal(room.gather(kind="mrope").numpy(),
                                  pat_mrope(rid, n))
            # the views are the pool itself, not copies
            view = room.views()[0]
            assert room.tensors()[0].data_ptr() == view.ctypes.data
            assert np.shares_memory(view, c.pool["embedding"])
            out = torch.zeros(n, HIDDEN, dtype=c.torch_dtype)
            assert room.gather(out) is out
            assert np.array_equal(as_bytes(out), as_bytes(emb))
            aux = room.aux()
            assert aux["total_tokens"] == n and aux["hidden_size"] == HIDDEN
            assert aux["cookie"] == pat_cookie(rid)
            assert aux["mrope_delta"] == pat_delta(rid)
            room.release()
            c.wait_until(lambda: room.ended)
            assert room.state == KVPoll.Success and room.result == 0
    fake.expect("ended 0 rooms, freed 0 blocks")


@pytest.mark.parametrize("dtype", DTYPE_BYTES)
def test_encode_round_trip(fake_gateway, dtype):
    fake = fake_gateway("--mode", "encode", "--port", "enc0",
                        "--dtype", dtype, "--hidden", HIDDEN,
                        "--run-blocks", 4, "--max-runs", 128)
    with embgw.Client(fake.path, "enc0") as c:
        assert c.encode and not c.language
        for i, n in enumerate(LENGTHS):
            rid = 1000 + i
            room = c.send_room(rid, n, nranks=2, mrope_delta=-3, cookie=77)
            assert room.wait(KVPoll.WaitingForInput) == \
                KVPoll.WaitingForInput
            assert room.aux()["cookie"] == 77
            assert room.aux()["mrope_delta"] == -3
            with pytest.raises(TypeError):
                room.scatter(torch.zeros(n, HIDDEN, dtype=torch.float64))
            with pytest.raises(ValueError):
                room.scatter(torch.zeros(n + 1, HIDDEN,
                                         dtype=c.torch_dtype))
            room.scatter(pattern_tensor(c, rid, n))
            room.scatter(torch.from_numpy(pat_fill(rid, n)), kind="fill_ids")
            room.scatter(pat_mrope(rid, n), kind="mrope")
            room.commit()
            assert room.wait(KVPoll.Success) == KVPoll.Success, room
            assert room.ended
            fake.expect("room %d: success, %d tokens checked" % (rid, n))


def test_encode_wrong_bytes_fail(fake_gateway):
    fake = fake_gateway("--mode", "encode", "--port", "enc0")
    with embgw.Client(fake.path, "enc0") as c:
        room = c.send_room(5, 200)
        room.wait(KVPoll.WaitingForInput)
        room.scatter(pattern_tensor(c, 5, 200))
        room.scatter(pat_fill(5, 200), kind="fill_ids")
        room.scatter(pat_mrope(5, 200) + 1, kind="mrope")
        room.commit()
        assert room.wait(KVPoll.Success) == KVPoll.Failed
        assert room.result == -1021 and "transport" in room.reason
        fake.expect("room 5: 200 units differ from the pattern")


def test_two_ranks_and_aux_only(fake_gateway):
    fake = fake_gateway("--run-blocks", 2)
    rid = 9 << 24 | 1000
    clients = [embgw.Client(fake.path, "lang0") for _ in range(3)]
    rooms = [c.recv_room(rid, rank=r, nranks=3, aux_only=r == 2)
             for r, c in enumerate(clients)]
    for r in rooms:
        assert r.wait(KVPoll.Success) == KVPoll.Success
    a, b = rooms[0].gather(), rooms[1].gather()
    assert np.array_equal(as_bytes(a), pat_embedding(rid, 1000, HIDDEN * 2))
    assert np.array_equal(as_bytes(a), as_bytes(b))
    only = rooms[2]
    assert only.aux()["total_tokens"] == 1000
    assert only.aux()["cookie"] == pat_cookie(rid)
    assert len(only.runs()) == 1 and only.runs()[0][1] == 1
    with pytest.raises(ValueError, match="aux-only"):
        only.views()
    for r, c in zip(rooms, clients):
        r.release()
        c.wait_until(lambda: r.ended)
        c.close()
    # a third of the pool is cut out (--run-blocks 2)
    fake.expect("ended 0 rooms, freed 0 blocks; pool free 683 of 683")


def test_failure_and_abort(fake_gateway):
    from conftest import PAT_FAIL
    fake = fake_gateway()
    with embgw.Client(fake.path, "lang0") as c:
        failed = c.recv_room(PAT_FAIL | 50)
        assert failed.wait(KVPoll.Success) == KVPoll.Failed
        assert failed.result == -1019 and failed.reason == "peer dead"
        stalled = c.recv_room(PAT_STALL | 50)
        assert stalled.wait(KVPoll.WaitingForInput) == \
            KVPoll.WaitingForInput
        stalled.release()      # before Success: the gateway refuses it
        c.wait_until(lambda: stalled.refusals)
        assert stalled.refusals[0][1] == -errno.EBADFD
        stalled.abort()
        c.wait_until(lambda: stalled.ended)
        assert stalled.state == KVPoll.Failed
        assert stalled.reason == "aborted by this client"


def test_overflow_recovery(fake_gateway):
    fake = fake_gateway("--run-blocks", 3)
    with embgw.Client(fake.path, "lang0", cq_entries=2) as c:
        ids = [(i + 1) << 24 | 300 for i in range(6)]
        rooms = [c.recv_room(r) for r in ids]
        for r in ids:
            fake.expect("room %d rank 0: delivered" % r)
        assert c.overflow > 0
        c.progress()
        assert [r.state for r in rooms] == [KVPoll.Success] * 6
        for r, rid in zip(rooms, ids):
            assert np.array_equal(as_bytes(r.gather()),
                                  pat_embedding(rid, 300, HIDDEN * 2))
            r.release()
        c.wait_until(lambda: all(r.ended for r in rooms))
        assert [r.state for r in rooms] == [KVPoll.Success] * 6
    fake.expect("ended 0 rooms, freed 0 blocks")


def test_wakeup(fake_gateway):
    fake = fake_gateway("--step-ms", 50)
    with embgw.Client(fake.path, "lang0", wakeup=True) as c:
        assert c.wakeup
        room = c.recv_room(77)
        while room.poll() != KVPoll.Success:
            assert c.wait(5000), "no completion within 5 s"
        # the gateway found NEED_WAKEUP set and wrote the eventfd
        fake.expect("wake-up")
        assert not c.wait(20)


def test_lease(fake_gateway):
    fake = fake_gateway("--lease-ms", 500)
    kept = embgw.Client(fake.path, "lang0", lease_thread=True)
    idle = embgw.Client(fake.path, "lang0")
    assert kept.lease_ms == 500
    fake.expect("client 1 given up (lease expired")
    time.sleep(1.5)
    assert kept.nop() == 0
    with pytest.raises(ConnectionResetError):
        idle.wait(5000)
    idle.close()
    kept.close()
    fake.expect("client 0 detached (socket closed)")


CHILD = """
import sys, time, embgw
c = embgw.Client(sys.argv[1], "lang0")
stalled = c.recv_room(int(sys.argv[2]))
stalled.wait(embgw.KVPoll.WaitingForInput)
done = c.recv_room(700)
done.wait(embgw.KVPoll.Success)
print("ready", flush=True)
time.sleep(60)
"""


def test_client_killed(fake_gateway):
    fake = fake_gateway("--run-blocks", 3)
    child = subprocess.Popen([sys.executable, "-c", CHILD, fake.path,
                              str(PAT_STALL | 5)],
                             stdout=subprocess.PIPE, env=os.environ)
    try:
        ready, _, _ = select.select([child.stdout], [], [], 10)
        assert ready and child.stdout.readline() == b"ready\n"
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    assert child.returncode == -9
    fake.expect("room 700 rank 0: released 6 blocks")
    fake.expect("detached (socket closed): ended 2 rooms, freed 6 "
                "blocks; pool free 768 of 768")


def test_gateway_gone(fake_gateway):
    fake = fake_gateway()
    c = embgw.Client(fake.path, "lang0")
    room = c.recv_room(PAT_STALL | 6)
    room.wait(KVPoll.WaitingForInput)
    fake.stop()
    with pytest.raises(ConnectionResetError):
        c.wait(5000)
    assert room.state == KVPoll.Failed and room.ended
    c.close()


def test_full_ring_is_eagain(fake_gateway):
    fake = fake_gateway()
    with embgw.Client(fake.path, "lang0", sq_entries=2) as c:
        fake.proc.send_signal(signal.SIGSTOP)
        try:
            rooms = [c.recv_room(PAT_STALL | i) for i in (1, 2)]
            with pytest.raises(BlockingIOError, match="submission ring"):
                c.recv_room(PAT_STALL | 3)
        finally:
            fake.proc.send_signal(signal.SIGCONT)
        for r in rooms:
            assert r.wait(KVPoll.WaitingForInput) == KVPoll.WaitingForInput
        third = c.recv_room(PAT_STALL | 3)
        assert third.wait(KVPoll.WaitingForInput) == KVPoll.WaitingForInput
    assert third.state == KVPoll.Failed and third.ended
    assert third.reason == "the client detached"
    fake.expect("ended 3 rooms")
