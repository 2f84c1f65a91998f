# SPDX-License-Identifier: BSD-3-Clause
"""The embgw package against the attach shim (tests/client/shim.h): the
gateway's attach server, lib/engines, behind a socket.

$EMBGW_ATTACH_SHIM names the shim's program and $EMBGW_CLIENT_LIB the
library (meson sets both); a test that needs the shim fails without them
(test_cuda.py needs neither). The contents of rooms follow lib/pattern
(lib/pattern/egw_pattern.h), written out again here with NumPy.
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

FAKE = os.environ.get("EMBGW_ATTACH_SHIM")

PAT_FAIL = 1 << 62
PAT_STALL = 1 << 61
U32 = 0xffffffff


class FakeGateway:
    """The attach shim in a process of its own, standing in for a gateway;
    expect() reads its lines with a deadline, say() scripts it."""

    def __init__(self, *args):
        self.dir = tempfile.mkdtemp(prefix="egw-pytest-")
        self.path = os.path.join(self.dir, "attach.sock")
        self.proc = subprocess.Popen([FAKE, "--socket", self.path] +
                                     [str(a) for a in args],
                                     stdin=subprocess.PIPE,
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
                raise AssertionError("attach shim: no line with %r within "
                                     "%.1f s; it printed:\n%s"
                                     % (needle, timeout_s, self.seen))
            self.seen += chunk.decode()

    def say(self, line):
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

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
        self.proc.stdin.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def fake_gateway():
    """Start stand-in gateways (attach shims) with fake_gateway(*args); all
    are stopped afterwards."""
    if not FAKE or not os.environ.get("EMBGW_CLIENT_LIB"):
        pytest.fail("set EMBGW_ATTACH_SHIM and EMBGW_CLIENT_LIB (meson "
                    "test does)")
    started = []

    def start(*args):
        f = FakeGateway(*args)
        started.append(f)
        return f
    yield start
    for f in started:
        f.stop()


# ---- lib/pattern (lib/pattern/egw_pattern.h) in NumPy -------------------------

M64 = (1 << 64) - 1
PATTERN_MROPE_DELTA = -7


def _mix(x):
    """splitmix64's finaliser on a uint64 array (arithmetic mod 2^64)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xbf58476d1ce4e5b9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94d049bb133111eb)
    return x ^ (x >> np.uint64(31))


def pat_embedding(room, total, row_bytes):
    t = np.arange(total, dtype=np.uint64)
    s = _mix(np.uint64(room & M64) ^ (t << np.uint64(20)))
    words = (row_bytes + 7) // 8
    k = np.arange(words, dtype=np.uint64) * np.uint64(8)
    w = _mix(s[:, None] + k[None, :]).astype("<u8")
    return w.view(np.uint8).reshape(total, words * 8)[:, :row_bytes].copy()


def pat_fill(room, total):
    t = np.arange(total, dtype=np.uint64)
    return ((t ^ np.uint64(room & U32)) & np.uint64(U32)) \
        .astype(np.uint32).view(np.int32)


def pat_mrope(room, total):
    t = np.arange(total, dtype=np.uint64)
    m = np.empty((total, 3), dtype=np.uint64)
    m[:, 0] = t
    m[:, 1] = (t * np.uint64(3)) & np.uint64(U32)
    m[:, 2] = (room >> 32) & U32
    return m.astype(np.uint32).view(np.int32)


def pat_delta(room):
    """The aux record's mrope delta of a pattern room (any room)."""
    return PATTERN_MROPE_DELTA


def pat_cookie(room):
    """The aux record's cookie of a pattern room: its id."""
    return room & M64
