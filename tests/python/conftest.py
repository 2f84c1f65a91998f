# SPDX-License-Identifier: BSD-3-Clause
"""The embgw package against the fake gateway (tests/client/fake_gateway.c).

$EMBGW_FAKE_GATEWAY names the fake's program and $EMBGW_CLIENT_LIB the
library (meson sets both); a test that needs the fake fails without them
(test_cuda.py needs neither). The contents of rooms follow
tests/client/pattern.h, written out again here with NumPy.
"""
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time

import numpy as np
import pytest

FAKE = os.environ.get("EMBGW_FAKE_GATEWAY")

PAT_FAIL = 1 << 62
PAT_STALL = 1 << 61
U32 = 0xffffffff


class FakeGateway:
    """The fake gateway in a process of its own; expect() reads its lines
    with a deadline."""

    def __init__(self, *args):
        self.dir = tempfile.mkdtemp(prefix="egw-pytest-")
        self.path = os.path.join(self.dir, "attach.sock")
        self.proc = subprocess.Popen([FAKE, "--socket", self.path] +
                                     [str(a) for a in args],
                                     stdout=subprocess.PIPE)
        self.seen = ""
        self.expect("listening on")

    def expect(self, needle, timeout_s=5.0):
        deadline = time.monotonic() + timeout_s
        while True:
            i = self.seen.find(needle)
            if i >= 0 and "\n" in self.seen[i:]:
                self.seen = self.seen[self.seen.index("\n", i) + 1:]
                return
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.proc.stdout], [], [],
                                    max(left, 0))
            chunk = os.read(self.proc.stdout.fileno(), 65536) if r else b""
            if not chunk:
                raise AssertionError("fake gateway: no line with %r within "
                                     "%.1f s; it printed:\n%s"
                                     % (needle, timeout_s, self.seen))
            self.seen += chunk.decode()

    def stop(self):
        if self.proc.stdout.closed:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def fake_gateway():
    """Start fakes with fake_gateway(*args); all are stopped afterwards."""
    if not FAKE or not os.environ.get("EMBGW_CLIENT_LIB"):
        pytest.fail("set EMBGW_FAKE_GATEWAY and EMBGW_CLIENT_LIB (meson "
                    "test does)")
    started = []

    def start(*args):
        f = FakeGateway(*args)
        started.append(f)
        return f
    yield start
    for f in started:
        f.stop()


# ---- tests/client/pattern.h in NumPy ----------------------------------------

def pat_embedding(room, total, row_bytes):
    t = np.arange(total, dtype=np.uint64)[:, None]
    k = np.arange(row_bytes, dtype=np.uint64)[None, :]
    v = t * 131 + k * 7 + (room & U32) * 13 + (t >> np.uint64(8))
    return (v & 0xff).astype(np.uint8)


def pat_fill(room, total):
    t = np.arange(total, dtype=np.uint64)
    return ((t * 40503 + (room & U32)) & U32).astype(np.uint32) \
        .view(np.int32)


def pat_mrope(room, total):
    t = np.arange(total, dtype=np.uint64)[:, None]
    i = np.arange(3, dtype=np.uint64)[None, :]
    return ((t * 3 + i + ((room >> 8) & U32)) & U32).astype(np.uint32) \
        .view(np.int32)


def pat_delta(room):
    return room % 1000 - 500


def pat_cookie(room):
    return (room * 0x9E3779B97F4A7C15) & ((1 << 64) - 1)
