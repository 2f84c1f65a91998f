# SPDX-License-Identifier: BSD-3-Clause
"""embgw.Client: one engine process attached to its local gateway."""
import ctypes
import errno
import hashlib
import time

import numpy as np

from . import _lib, _trust
from ._lib import lib, check
from .room import EncodeRoom, LanguageRoom

# welcome dtype -> (name, NumPy element type, torch element type name)
DTYPES = {
    1: ("fp8", np.uint8, "uint8"),       # e4m3: bytes in both
    2: ("int8", np.int8, "int8"),
    3: ("bf16", np.uint16, "bfloat16"),  # NumPy has no bfloat16
    4: ("fp16", np.float16, "float16"),
    5: ("fp32", np.float32, "float32"),
}


LOOKUP_NONE, LOOKUP_LANDED, LOOKUP_IN_FLIGHT = 0, 1, 2


def content_key(content):
    """The 16-byte content key of `content`: 16 bytes are taken as they
    are; any other bytes or str (an engine's content hash such as vLLM's
    mm_hash) are hashed with BLAKE2b to 16 bytes, so every process that
    names the same content gets the same key."""
    if isinstance(content, str):
        content = content.encode()
    if not isinstance(content, (bytes, bytearray)) or not content:
        raise TypeError("content must be a non-empty str or bytes, got %r"
                        % (content,))
    if len(content) == _lib.CONTENT_BYTES:
        return bytes(content)
    return hashlib.blake2b(content, digest_size=_lib.CONTENT_BYTES,
                           person=b"embgw-content").digest()


def _attempt(attempt):
    if isinstance(attempt, bool) or not isinstance(attempt, int) or \
            not 0 <= attempt < 1 << 32:
        raise ValueError("attempt must be an int 0..2^32-1, got %r"
                         % (attempt,))
    return attempt


class Client:
    """Attach to the gateway at `socket_path` as a client of `port`.

    wakeup: ask for the eventfd so that wait() sleeps instead of polling.
    lease_thread: keep the lease from a thread (for an engine that may stay
    away from this object longer than half the lease).
    Refusals raise OSError with the gateway's message (FileNotFoundError
    for an unknown port, errno EPROTONOSUPPORT for a version mismatch...).
    The pool views of rooms are valid until close().
    """

    def __init__(self, socket_path, port, name="embgw-python", wakeup=True,
                 lease_thread=False, sq_entries=0, cq_entries=0, nslots=0,
                 timeout_ms=5000):
        opts = _lib.Opts(name.encode(),
                         (_lib.F_WAKEUP if wakeup else 0) |
                         (_lib.F_LEASE_THREAD if lease_thread else 0),
                         sq_entries, cq_entries, nslots, timeout_ms)
        handle = ctypes.c_void_p()
        check(lib.egw_client_attach(str(socket_path).encode(), port.encode(),
                                    ctypes.byref(opts), ctypes.byref(handle)),
              "attach to %s port %s" % (socket_path, port))
        self._c = handle
        self._rooms = {}      # slot -> Room
        self._nops = {}       # tag -> result
        self._tag = 0
        self._events = (_lib.Event * 64)()
        g = lib.egw_client_geometry(handle).contents
        self.geometry = {f: getattr(g, f) for f, _ in g._fields_
                         if f not in ("region_offset", "region_bytes")}
        self.block_tokens = g.block_tokens
        self.hidden_size = g.hidden_size
        self.dtype_name, self.numpy_dtype, torch_name = DTYPES[g.dtype]
        self._torch_dtype_name = torch_name
        self.encode = bool(g.flags & _lib.G_ENCODE)
        self.language = bool(g.flags & _lib.G_LANGUAGE)
        self.wakeup = bool(g.flags & _lib.G_WAKEUP)
        self.lease_ms = g.lease_ms
        self.peers = [lib.egw_client_peer(handle, i).decode()
                      for i in range(g.npeers)]
        self._regions = {}
        # views outlive close(): the range stays mapped (revoked) for them
        self._keeper = _trust.PoolKeeper()
        self.pool_readonly = bool(g.flags & _trust.G_POOL_RDONLY)
        for kind, k in _lib.KINDS.items():
            size = _lib.c_u64()
            ptr = lib.egw_client_region(handle, k, ctypes.byref(size))
            if ptr:
                buf = self._keeper.buffer(ptr, size.value)
                self._regions[kind] = np.frombuffer(buf, dtype=np.uint8)
                # a language port's pool is mapped read-only: a write
                # through a view raises instead of faulting
                self._regions[kind].flags.writeable = not self.pool_readonly
        cap = g.capacity_tokens
        self.pool = {"embedding": self._regions["embedding"]
                     [:cap * g.hidden_size * g.dtype_bytes]
                     .view(self.numpy_dtype).reshape(cap, g.hidden_size),
                     "fill_ids": self._regions["fill_ids"][:cap * 4]
                     .view(np.int32)}
        if "mrope" in self._regions:
            self.pool["mrope"] = self._regions["mrope"][:cap * 12] \
                .view(np.int32).reshape(cap, 3)
        self._aux_bytes = g.aux_bytes

    @property
    def torch_dtype(self):
        import torch
        return getattr(torch, self._torch_dtype_name)

    # ---- lifetime -------------------------------------------------------
    def close(self):
        """Detach: the gateway aborts every room still held. Views of the
        pool made before stay valid memory but hold zeros (never another
        room's bytes); rooms' views(), tensors() and gather() raise."""
        if self._c:
            _trust.detach(self._c, self._keeper)
            self._keeper = None   # the views keep it while they live
            self._c = None
            for r in self._rooms.values():
                r._gone(0, "the client detached")
            self._rooms.clear()
            self.pool = {}
            self._regions = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _handle(self):
        if not self._c:
            raise ValueError("the client is closed")
        return self._c

    def _next_tag(self):
        self._tag += 1
        return self._tag

    # ---- rooms ----------------------------------------------------------
    def send_room(self, room, total_tokens, nranks=1, mrope_delta=0, cookie=0,
                  attempt=0):
        """Encode side: open a room of `total_tokens` for `nranks` ranks.
        Its blocks are writable once room.poll() says WaitingForInput.
        `attempt`: 0 for a room's first try, n for its n-th retry (the
        language side opens the same attempt; doc/client.md, "Attempts")."""
        slot = check(lib.egw_client_send_open_ex(
            self._handle(), room, total_tokens, nranks, mrope_delta, cookie,
            _attempt(attempt), None, self._next_tag()),
            "send_open room %d" % room)
        r = EncodeRoom(self, room, slot)
        self._rooms[slot] = r
        return r

    def recv_room(self, room, peer=0, rank=0, nranks=1, aux_only=False,
                  attempt=0, content=None):
        """Language side: receive `room` from `peer` (an index or a name)
        as `rank` of `nranks`. `content` names what the room holds (a
        content_key(), or any str/bytes hashed by it): data the port holds
        for it is served without a transfer, and a transfer of it already
        under way is shared (room.cached says so at Success)."""
        if isinstance(peer, str):
            if peer not in self.peers:
                raise ValueError("no peer %r (the port has %s)"
                                 % (peer, self.peers))
            peer = self.peers.index(peer)
        key = content_key(content) if content is not None else None
        slot = check(lib.egw_client_recv_open_ex(
            self._handle(), room, peer, rank, nranks,
            _lib.AUX_ONLY if aux_only else 0, _attempt(attempt), key,
            self._next_tag()), "recv_open room %d" % room)
        r = LanguageRoom(self, room, slot, aux_only)
        self._rooms[slot] = r
        return r

    def lookup(self, content, timeout_s=5.0):
        """Language side: what the port holds for `content` (see
        recv_room): LOOKUP_LANDED (a room is served at once),
        LOOKUP_IN_FLIGHT (a transfer of it is under way: a room shares it)
        or LOOKUP_NONE (0: a room transfers). A round trip through the
        rings, answered within one poll of the gateway's worker."""
        tag = self._next_tag()
        check(lib.egw_client_lookup(self._handle(), content_key(content),
                                    tag), "lookup")
        self.wait_until(lambda: tag in self._nops, timeout_s)
        return self._nops.pop(tag)

    # ---- completions ----------------------------------------------------
    def progress(self):
        """Take every waiting event and hand it to its room.
        @return the number of events taken."""
        taken = 0
        while True:
            n = lib.egw_client_poll(self._handle(), self._events, 64)
            if n == -errno.ECONNRESET or n == -errno.EBADMSG:
                self._fail_all(n)
            check(n, "poll")
            for ev in self._events[:n]:
                self._dispatch(ev)
            taken += n
            if n < 64:
                return taken

    def _dispatch(self, ev):
        if ev.op in (_lib.OP_NOP, _lib.OP_LOOKUP):
            self._nops[ev.tag] = ev.result
            return
        r = self._rooms.get(ev.slot)
        if r is None or r.room != ev.room:
            return
        r._on_event(ev)
        if ev.flags & _lib.EV_END:
            del self._rooms[ev.slot]

    def _fail_all(self, code):
        for r in list(self._rooms.values()):
            r._gone(code)
        self._rooms.clear()

    def wait(self, timeout_ms):
        """Sleep until an event is waiting (True) or the deadline (False).
        Raises ConnectionResetError when the gateway went away."""
        rc = lib.egw_client_wait(self._handle(), int(timeout_ms))
        if rc == -errno.ECONNRESET:
            self._fail_all(rc)
        return check(rc, "wait") == 1

    def wait_until(self, predicate, timeout_s=10.0):
        """Progress and wait until predicate() holds; TimeoutError after
        timeout_s."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.progress()
            if predicate():
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no progress within %.1f s" % timeout_s)
            self.wait(min(left, 1.0) * 1000)

    def nop(self, timeout_s=5.0):
        """Round trip through both rings. @return the completion's result."""
        tag = self._next_tag()
        check(lib.egw_client_nop(self._handle(), tag), "nop")
        self.wait_until(lambda: tag in self._nops, timeout_s)
        return self._nops.pop(tag)

    @property
    def overflow(self):
        """Completions the gateway dropped on a full ring (recovered from
        the slots)."""
        return lib.egw_client_overflow(self._handle())
