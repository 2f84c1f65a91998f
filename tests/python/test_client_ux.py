# SPDX-License-Identifier: BSD-3-Clause
"""What an engine meets first, against the attach shim: the package finds
its library without a variable; one descriptor for the engine's own event
loop (fileno/arm, asyncio); reconnecting after the gateway restarted;
arguments refused early with the rule and the value; bf16 views and
send() agreeing bitwise; a Success room held too long warned about."""
import asyncio
import errno
import os
import select
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import embgw
import embgw.aio
from embgw import (EmbeddingReceiver, EmbeddingSender, HeldRoomWarning,
                   KVPoll)
from conftest import (PAT_STALL, pat_embedding, pat_fill, pat_mrope)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
HIDDEN = 64


def env_without_lib():
    env = dict(os.environ)
    env.pop("EMBGW_CLIENT_LIB", None)
    env.pop("LD_LIBRARY_PATH", None)
    return env


# ---- A. the library without EMBGW_CLIENT_LIB --------------------------------

def test_library_found_in_build_tree(tmp_path):
    """A checkout laid out as python/embgw next to build/lib/client: the
    package loads the library from there with no variable set."""
    built = os.environ["EMBGW_CLIENT_LIB"]
    shutil.copytree(os.path.join(ROOT, "python", "embgw"),
                    tmp_path / "python" / "embgw")
    libdir = tmp_path / "build" / "lib" / "client"
    libdir.mkdir(parents=True)
    os.symlink(os.path.abspath(built), libdir / "libegw_client.so")
    # a build directory that built other targets only: the soname's link
    # is there, the library it names is not - passed over
    other = tmp_path / "build-other" / "lib" / "client"
    other.mkdir(parents=True)
    os.symlink("libegw_client.so.1", other / "libegw_client.so")
    env = env_without_lib()
    env["PYTHONPATH"] = str(tmp_path / "python")
    code = ("import embgw, embgw._lib as l\n"
            "assert embgw.strerror(-1021)\n"
            "print(l.lib.path)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    found = out.stdout.strip()
    # an installed copy as new as this package would come first
    assert found in (str(libdir / "libegw_client.so"),
                     embgw_find_installed()), found


def embgw_find_installed():
    """The installed library the package would take before the build
    tree: one as new as the package, or None."""
    import ctypes.util
    path = ctypes.util.find_library("egw_client")
    if not path:
        return None
    try:
        return path if all(hasattr(ctypes.CDLL(path), n) for n in
                           ("egw_client_send_open_ex", "egw_client_check")) \
            else None
    except OSError:
        return None


def test_library_missing_says_where_it_looked(tmp_path):
    shutil.copytree(os.path.join(ROOT, "python", "embgw"),
                    tmp_path / "python" / "embgw")
    env = env_without_lib()
    env["PYTHONPATH"] = str(tmp_path / "python")
    out = subprocess.run([sys.executable, "-c",
                          "import embgw; embgw.strerror(-1)"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "libegw_client.so not found" in out.stderr
    assert "EMBGW_CLIENT_LIB" in out.stderr
    env["EMBGW_CLIENT_LIB"] = str(tmp_path / "nothing.so")
    out = subprocess.run([sys.executable, "-c",
                          "import embgw; embgw.strerror(-1)"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert "EMBGW_CLIENT_LIB=%s cannot be used" % (tmp_path / "nothing.so") \
        in out.stderr


def test_import_loads_nothing():
    """import embgw (and embgw.cuda) touches no library: a machine without
    libegw_client.so can use embgw.cuda."""
    env = dict(os.environ, EMBGW_CLIENT_LIB="/nonexistent/libegw_client.so")
    code = ("import embgw, embgw.cuda, embgw._lib as l\n"
            "assert not l.lib.loaded()\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "ok\n", out.stderr


def test_readme_attach_option():
    """--attach takes no argument (scripts/gen-configs.sh): no page shows
    it with one."""
    for page in ("README.md", "doc/engines.md"):
        with open(os.path.join(ROOT, page)) as f:
            assert "--attach DIR" not in f.read(), page


# ---- B. event loops ----------------------------------------------------------

def test_fileno_wakes_select(fake_gateway):
    fake = fake_gateway("--step-ms", 50)
    with embgw.Client(fake.path, "lang0") as c:
        fd = c.fileno()
        assert fd == c.fileno() and fd >= 0
        room = c.recv_room(77)
        seen = []
        while room.poll() != KVPoll.Success:
            if c.arm():
                continue
            timeout = 5.0 if c.max_sleep_ms is None else \
                min(5.0, c.max_sleep_ms / 1000)
            r, _, _ = select.select([fd], [], [], timeout)
            seen.append(bool(r))
        # the room went through states announced by the eventfd only
        assert True in seen
        fake.expect("wake-up")
        # nothing waiting: armed, and the descriptor stays quiet
        assert not c.arm()
        assert select.select([fd], [], [], 0.05)[0] == []


def test_fileno_without_wakeup(fake_gateway):
    fake = fake_gateway()
    with embgw.Client(fake.path, "lang0", wakeup=False) as c:
        with pytest.raises(OSError) as e:
            c.fileno()
        assert e.value.errno == errno.EOPNOTSUPP
        assert "wake-up eventfd" in str(e.value)


def test_fileno_readable_when_gateway_gone(fake_gateway):
    fake = fake_gateway()
    c = embgw.Client(fake.path, "lang0")
    room = c.recv_room(PAT_STALL | 6)
    room.wait(KVPoll.WaitingForInput)
    fd = c.fileno()
    assert not c.arm()
    fake.stop()
    r, _, _ = select.select([fd], [], [], 5.0)
    assert r == [fd], "the descriptor did not wake when the gateway went"
    with pytest.raises(ConnectionResetError):
        c.arm()
    assert room.state == KVPoll.Failed and room.ended
    c.close()


def test_aio_until_done(fake_gateway):
    fake = fake_gateway("--step-ms", 20)

    async def main(c):
        rx = EmbeddingReceiver(c, 300, peer="enc0")
        rx.init()
        other = asyncio.ensure_future(asyncio.sleep(0.01))
        state = await embgw.aio.until_done(rx, timeout=10)
        await other         # the loop ran other work meanwhile
        assert await embgw.aio.client_wait(c, 0.05) is False
        return state, rx

    with embgw.Client(fake.path, "lang0") as c:
        state, rx = asyncio.run(main(c))
        assert state == KVPoll.Success
        rx.release()


def test_aio_gateway_gone(fake_gateway):
    fake = fake_gateway()

    async def main(c):
        room = c.recv_room(PAT_STALL | 9)
        while room.poll() < KVPoll.WaitingForInput:
            await embgw.aio.client_wait(c, 5)
        fake.stop()
        with pytest.raises(ConnectionResetError):
            await embgw.aio.client_wait(c, 10)
        return room

    c = embgw.Client(fake.path, "lang0")
    room = asyncio.run(main(c))
    assert room.state == KVPoll.Failed
    c.close()


def test_reconnect_after_restart(fake_gateway):
    fake = fake_gateway("--peers", "encA")
    c = embgw.Client(fake.path, "lang0")
    old = c.recv_room(PAT_STALL | 3, peer="encA")
    old.wait(KVPoll.WaitingForInput)
    path = fake.path
    fake.proc.terminate()
    fake.proc.wait(5)
    with pytest.raises(ConnectionResetError):
        c.wait(5000)
    # the same socket path, served again (another geometry: the new one
    # is what the client sees)
    again = fake_gateway("--peers", "encB", "--hidden", 32)
    os.replace(again.path, path)
    c.reconnect(timeout_s=10)
    assert old.state == KVPoll.Failed and old.ended
    assert "reconnect" in old.reason or "went away" in old.reason
    assert [p.name for p in c.peers()] == ["encB"] and c.hidden_size == 32
    assert c.nop() == 0
    room = c.recv_room(PAT_STALL | 4, peer="encB")
    assert room.wait(KVPoll.WaitingForInput) == KVPoll.WaitingForInput
    c.close()


def test_reconnect_gives_up(fake_gateway, tmp_path):
    fake = fake_gateway()
    c = embgw.Client(fake.path, "lang0")
    fake.stop()
    with pytest.raises(TimeoutError, match="no attach"):
        c.reconnect(timeout_s=0.3)
    c.close()


def test_stats(fake_gateway):
    fake = fake_gateway()
    with embgw.Client(fake.path, "lang0") as c:
        if not hasattr(embgw._lib.lib, "egw_client_stats"):
            with pytest.raises(NotImplementedError):
                c.stats()
            return
        # the fake publishes the pool's blocks as it steps its rooms
        c.wait_until(lambda: c.stats() is not None)
        s = c.stats()
        for k in ("admission_queue", "cache_entries", "cache_hits",
                  "cache_misses", "cache_shared", "cache_evictions",
                  "quarantined_blocks", "cache_pinned", "updated_ns"):
            assert k in s
        assert s["pool_blocks"] == 1024 and s["free_blocks"] == 1024
        assert s["used_blocks"] == 0 and s["updated_ns"] > 0
        room = c.recv_room(300)         # 300 tokens: 3 blocks of 128
        room.wait(KVPoll.Success)
        c.wait_until(lambda: c.stats()["used_blocks"] > 0)
        s = c.stats()
        assert s["used_blocks"] == 3 and s["free_blocks"] == 1021
        room.release()
        c.wait_until(lambda: c.stats()["used_blocks"] == 0)


# ---- C. arguments refused early, naming the rule -----------------------------

def test_token_counts(fake_gateway):
    fake = fake_gateway("--mode", "encode", "--port", "enc0",
                        "--max-total", 1000)
    with embgw.Client(fake.path, "enc0") as c:
        assert c.max_total_tokens == 1000
        for bad in (2.5, True, "12", None):
            with pytest.raises(TypeError, match="total_tokens must be an int"):
                c.send_room(5, bad)
        for bad in (0, -1):
            with pytest.raises(ValueError, match="at least 1, got %d" % bad):
                c.send_room(5, bad)
        with pytest.raises(OSError, match="1001 above port enc0's "
                           "max_total_tokens 1000") as e:
            c.send_room(5, 1001)
        assert e.value.errno == errno.EFBIG
        # the connector: a type mistake raises, a length above the limit
        # is a Failed request whose reason names the limit
        with pytest.raises(TypeError):
            EmbeddingSender(c, 6).init(-1.0)
        with pytest.raises(ValueError):
            EmbeddingSender(c, 6).init(-1)
        big = EmbeddingSender(c, 7)
        big.init(5000)
        assert big.poll() == KVPoll.Failed
        err = big.failure_exception()
        assert err.code == -errno.EFBIG
        assert "max_total_tokens 1000" in err.reason and "5000" in err.reason
        ok = c.send_room(8, 1000)
        assert ok.wait(KVPoll.WaitingForInput) == KVPoll.WaitingForInput


def test_roles_and_peers(fake_gateway):
    enc = fake_gateway("--mode", "encode", "--port", "enc0")
    lang = fake_gateway("--peers", "encA,encB")
    with embgw.Client(enc.path, "enc0") as e, \
            embgw.Client(lang.path, "lang0") as l:  # noqa: E741
        with pytest.raises(ValueError, match="port enc0 is an encode port.*"
                           "recv_room needs a language port") as x:
            e.recv_room(5)
        assert x.value.errno == errno.EOPNOTSUPP
        with pytest.raises(ValueError, match="encode port"):
            EmbeddingReceiver(e, 5).init()
        with pytest.raises(ValueError, match="port lang0 is a language port"):
            EmbeddingSender(l, 5).init(10)
        with pytest.raises(ValueError,
                           match=r"no peer 'encC'.*encA \(id 1\), encB"):
            l.peer_id("encC")
        with pytest.raises(ValueError, match=r"no peer 7.*encA \(id 1\)"):
            EmbeddingReceiver(l, 5, peer=7).init()
        with pytest.raises(ValueError, match=r"name or an id"):
            l.recv_room(5, peer=0)
        with pytest.raises(ValueError, match=r"name the peer"):
            l.recv_room(5)
        for bad in (0, -3, 2.0, 1 << 64):
            with pytest.raises(ValueError, match="room must be"):
                l.recv_room(bad)
        with pytest.raises(ValueError, match="rank 3 of 2"):
            l.recv_room(5, rank=3, nranks=2)


def test_refusal_names_limit(fake_gateway):
    fake = fake_gateway("--mode", "encode", "--port", "enc0")
    with embgw.Client(fake.path, "enc0", nslots=2) as c:
        c.send_room(1, 10)
        c.send_room(2, 10)
        with pytest.raises(OSError) as e:
            c.send_room(3, 10)
        assert e.value.errno == errno.ENOSPC
        assert "2 slots" in str(e.value)


def test_bf16_views_and_send_agree(fake_gateway):
    """views() of a bf16 pool are uint16; send() and scatter() take them
    bitwise, as they take torch.bfloat16."""
    fake = fake_gateway("--mode", "encode", "--port", "enc0",
                        "--dtype", "bf16", "--hidden", HIDDEN)
    with embgw.Client(fake.path, "enc0") as c:
        assert c.numpy_dtype == np.uint16
        for rid, n in ((41, 300), (42, 129)):
            raw = pat_embedding(rid, n, HIDDEN * 2).view(np.uint16)
            tx = EmbeddingSender(c, rid)
            tx.init(n)
            tx.send(raw, torch.from_numpy(pat_fill(rid, n)),
                    torch.from_numpy(pat_mrope(rid, n)))
            c.wait_until(lambda: tx.poll() in (KVPoll.Success,
                                               KVPoll.Failed))
            assert tx.poll() == KVPoll.Success, tx.failure_exception()
            fake.expect("room %d: success, %d tokens checked" % (rid, n))
        room = c.send_room(43, 200)
        room.wait(KVPoll.WaitingForInput)
        assert room.views()[0].dtype == np.uint16
        with pytest.raises(TypeError, match="uint16 in NumPy"):
            room.scatter(np.zeros((200, HIDDEN), np.float16))
        room.scatter(pat_embedding(43, 200, HIDDEN * 2).view(np.uint16))
        room.scatter(pat_fill(43, 200), kind="fill_ids")
        room.scatter(pat_mrope(43, 200), kind="mrope")
        room.commit()
        assert room.wait(KVPoll.Success) == KVPoll.Success
        with pytest.raises(TypeError, match="embedding: expected "
                           "torch.bfloat16"):
            tx = EmbeddingSender(c, 44)
            tx.init(10)
            tx.send(np.zeros((10, HIDDEN), np.int16))


def test_held_room_warned_once(fake_gateway, caplog):
    fake = fake_gateway()
    with embgw.Client(fake.path, "lang0", held_warning_s=0.2) as c:
        held = c.recv_room(4000)
        quick = c.recv_room(4001)
        held.wait(KVPoll.Success)
        quick.wait(KVPoll.Success)
        quick.release()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            c.wait_until(lambda: held.warned, timeout_s=5)
            for _ in range(5):
                c.wait(100)
                c.progress()
        mine = [x for x in w if issubclass(x.category, HeldRoomWarning)]
        assert len(mine) == 1, [str(x.message) for x in w]
        assert "room 4000" in str(mine[0].message)
        assert "held_warning_s=0.2" in str(mine[0].message)
        assert not quick.warned
        assert any("room 4000" in r.message for r in caplog.records)
        held.release()
    with embgw.Client(fake.path, "lang0", held_warning_s=None) as c:
        r = c.recv_room(4002)
        r.wait(KVPoll.Success)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(3):
                c.wait(100)
                c.progress()
        assert not r.warned


# ---- D. commands that wait for a copy (the CUDA path's, without CUDA) --------

class Flag:
    """A copy's handle that is done when told."""

    def __init__(self):
        self.done = False

    def query(self):
        return self.done

    def synchronize(self):
        self.done = True


def test_commit_and_release_wait_for_copies(fake_gateway):
    enc = fake_gateway("--mode", "encode", "--port", "enc0",
                       "--hidden", HIDDEN)
    lang = fake_gateway("--step-ms", 5)
    with embgw.Client(enc.path, "enc0") as c:
        room = c.send_room(51, 100)
        room.wait(KVPoll.WaitingForInput)
        room.scatter(torch.from_numpy(pat_embedding(51, 100, HIDDEN * 2)
                                      .view(np.int16)).view(torch.bfloat16))
        room.scatter(pat_fill(51, 100), kind="fill_ids")
        room.scatter(pat_mrope(51, 100), kind="mrope")
        copy = Flag()
        room.commit(after=copy)
        for _ in range(5):      # the copy runs: nothing is committed
            c.wait(20)
            c.progress()
        assert room.state == KVPoll.WaitingForInput
        copy.done = True
        assert room.wait(KVPoll.Success) == KVPoll.Success
        enc.expect("room 51: success, 100 tokens checked")
    with embgw.Client(lang.path, "lang0") as c:
        room = c.recv_room(52)
        room.wait(KVPoll.Success)
        out, h = room.gather_async()
        assert h.query()        # a CPU tensor is filled at once
        copy = Flag()
        room.release(after=copy)
        for _ in range(5):
            c.wait(20)
            c.progress()
        assert not room.ended   # the blocks are still this client's
        copy.done = True
        c.wait_until(lambda: room.ended)
        assert room.state == KVPoll.Success
        # close() waits for copies still running, then detaches
        other = c.recv_room(53)
        other.wait(KVPoll.Success)
        late = Flag()
        other.release(after=late)
    assert late.done
