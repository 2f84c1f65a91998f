# SPDX-License-Identifier: BSD-3-Clause
"""embgw.Client: one engine process attached to its local gateway."""
import collections
import ctypes
import errno
import hashlib
import logging
import sys
import threading
import time
import warnings

import numpy as np

from . import _lib, _trust, cuda
from ._lib import lib, check
from .room import EncodeRoom, KVPoll, LanguageRoom

log = logging.getLogger("embgw")


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


Peer = collections.namedtuple("Peer", "id name ready leaving")
Peer.__doc__ = ("A live peer of the port: `id` the gateway's (never reused),"
                " `name`, `ready` (registered: rooms move now), `leaving` "
                "(removed: its rooms are ending).")


class RoleError(OSError, ValueError):
    """A room asked of a port that does not serve that side: errno
    EOPNOTSUPP (what the library answers), and a ValueError (the engine's
    own mistake)."""


class HeldRoomWarning(ResourceWarning):
    """A language room stayed Success, its blocks unreleased, longer than
    the client's held_warning_s: the pool fills with data nobody reads."""

# welcome dtype -> (name, NumPy element type, torch element type name)
DTYPES = {
    1: ("fp8", np.uint8, "uint8"),       # e4m3: bytes in both
    2: ("int8", np.int8, "int8"),
    3: ("bf16", np.uint16, "bfloat16"),  # NumPy has no bfloat16
    4: ("fp16", np.float16, "float16"),
    5: ("fp32", np.float32, "float32"),
}


class Client:
    """Attach to the gateway at `socket_path` as a client of `port`.

    wakeup: ask for the eventfd so that wait() sleeps instead of polling.
    lease_thread: keep the lease from a thread (for an engine that may stay
    away from this object longer than half the lease).
    held_warning_s: a language room left Success and unreleased for this
    long gets one HeldRoomWarning (warnings, and the "embgw" logger); None
    turns it off.
    cuda: pin the pool for CUDA copies (embgw.cuda.register): None where
    the process has imported torch and torch.cuda.is_available(), True
    always (RuntimeError without CUDA), False never.
    prefault: map every page of the pool into this process from a thread
    started at attach (madvise MADV_POPULATE_WRITE, READ for a read-only
    pool), so that rooms' first writes and reads do not fault page by
    page; attach does not wait for it (about 0.1-0.4 s per 512 MiB on a
    busy 2-core host), close() does. `prefaulted` says how it went (None
    while it runs); where the kernel cannot (before Linux 5.14) pages fault
    in on first use.
    Refusals raise OSError with the gateway's message (FileNotFoundError
    for an unknown port, errno EPROTONOSUPPORT for a version mismatch...).
    The pool views of rooms are valid until close() or reconnect().
    """

    _prefaulter = None      # the thread that maps the pool's pages in

    def __init__(self, socket_path, port, name="embgw-python", wakeup=True,
                 lease_thread=False, sq_entries=0, cq_entries=0, nslots=0,
                 timeout_ms=5000, held_warning_s=30.0, cuda=None,
                 prefault=True):
        if not isinstance(port, str) or not port:
            raise ValueError("port must be the port's name, got %r"
                             % (port,))
        self.socket_path = str(socket_path)
        self.port = port
        self.name = name
        self.held_warning_s = held_warning_s
        self._want_cuda = cuda
        self._prefault = prefault
        self._pinned = None
        self._opts = dict(name=name.encode(),
                          flags=(_lib.F_WAKEUP if wakeup else 0) |
                          (_lib.F_LEASE_THREAD if lease_thread else 0) |
                          _lib.F_PEER_EVENTS,
                          sq_entries=sq_entries, cq_entries=cq_entries,
                          nslots=nslots, timeout_ms=timeout_ms)
        self._c = None
        self._rooms = {}      # slot -> Room
        self._nops = {}       # tag -> result
        self._deferred = []   # (handle, fn): fn() once handle.query()
        self._tag = 0
        self._held_check = 0.0
        self._events = (_lib.Event * 64)()
        self._attach()

    def _attach(self):
        opts = _lib.Opts(**self._opts)
        handle = ctypes.c_void_p()
        check(lib.egw_client_attach(self.socket_path.encode(),
                                    self.port.encode(), ctypes.byref(opts),
                                    ctypes.byref(handle)),
              "attach to %s port %s" % (self.socket_path, self.port))
        self._c = handle
        self.max_sleep_ms = None
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
        self._regions = {}
        # views outlive close(): the range stays mapped (revoked) for them
        self._keeper = _trust.PoolKeeper()
        self.pool_readonly = bool(g.flags & _trust.G_POOL_RDONLY)
        # an encode port cut per client: only its own segment is mapped,
        # the port's blocks first_block.. (room runs count from the
        # mapping's start, as the library gives them)
        self.pool_segment = bool(g.flags & _trust.G_POOL_SEGMENT)
        self.first_block = g.first_block
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
        self.max_total_tokens = g.max_total_tokens
        self._prefaulter = None
        self.prefaulted = None
        if self._prefault:
            self._prefaulter = threading.Thread(
                target=self._populate, name="embgw-prefault", daemon=True,
                args=(self._pool_mapping(g), not self.pool_readonly))
            self._prefaulter.start()
        # auto: only a process that uses torch already (importing it here
        # would cost every other client seconds)
        if self._want_cuda or (self._want_cuda is None and
                               "torch" in sys.modules):
            try:
                self._pinned = cuda.register(self._pool_mapping(g),
                                             required=bool(self._want_cuda),
                                             readonly=self.pool_readonly)
            except Exception:
                self.close()
                raise

    def _populate(self, mapping, write):
        self.prefaulted = _populate(mapping, write)

    def _pool_mapping(self, g):
        """The whole pool mapping as one uint8 array (what CUDA pins)."""
        ptr = lib.egw_client_region(self._c, 0, None) - g.region_offset[0]
        return np.frombuffer((ctypes.c_uint8 * g.pool_bytes)
                             .from_address(ptr), dtype=np.uint8)

    @property
    def pinned(self):
        """The pool is pinned for CUDA copies."""
        return self._pinned is not None

    @property
    def torch_dtype(self):
        import torch
        return getattr(torch, self._torch_dtype_name)

    # ---- lifetime -------------------------------------------------------
    def close(self):
        """Detach: the gateway aborts every room still held. Views of the
        pool made before stay valid memory but hold zeros (never another
        room's bytes); rooms' views(), tensors() and gather() raise.
        Copies still running into or out of the pool are waited for
        first."""
        self._detach(0, "the client detached")

    def _detach(self, code, reason):
        for h, _ in self._deferred:
            h.synchronize()     # a device copy must not outlive the pool
        self._deferred = []
        if self._pinned is not None:
            self._pinned.close()
            self._pinned = None
        if self._prefaulter is not None:
            # the range is remapped (revoked) below: not under its madvise
            self._prefaulter.join()
            self._prefaulter = None
        if self._c:
            _trust.detach(self._c, self._keeper)
            self._keeper = None   # the views keep it while they live
            self._c = None
            for r in self._rooms.values():
                r._gone(code, reason)
            self._rooms.clear()
            self.pool = {}
            self._regions = {}

    def reconnect(self, timeout_s=30.0, interval_s=0.1):
        """Attach again after the gateway went away (or restarted): the
        rooms of the old attachment end Failed (code -ECONNRESET, reason
        says so) and the pool views of the old attachment are gone; the
        geometry, peers and pool are the new gateway's. Tries until
        `timeout_s` (TimeoutError naming the last refusal)."""
        self._detach(-errno.ECONNRESET, "the gateway went away: the "
                     "attachment was replaced by reconnect()")
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._attach()
                log.info("embgw: reattached to %s port %s",
                         self.socket_path, self.port)
                return
            except OSError as e:
                if e.errno in (errno.EPROTONOSUPPORT, errno.EACCES,
                               errno.EINVAL):
                    raise       # a refusal that waiting does not change
                if time.monotonic() + interval_s > deadline:
                    raise TimeoutError("no attach to %s port %s within "
                                       "%.1f s: %s" % (self.socket_path,
                                                       self.port, timeout_s,
                                                       e)) from e
                time.sleep(interval_s)

    def stats(self):
        """The gateway's published figures for the port (pool occupancy,
        admission queue, content cache), a dict of egw_client_stats's
        fields and used_blocks; updated_ns is the gateway's clock of the
        snapshot. None before the gateway published any.
        NotImplementedError with a library that has no egw_client_stats."""
        if not hasattr(lib, "egw_client_stats"):
            raise NotImplementedError("%s has no egw_client_stats: an older "
                                      "library" % lib.path)
        st = _lib.Stats()
        for _ in range(100):
            rc = lib.egw_client_stats(self._handle(), ctypes.byref(st))
            if rc != -errno.EAGAIN:     # the gateway was writing them
                break
        if rc == -errno.ENODATA:
            return None
        check(rc, "stats")
        out = {f: getattr(st, f) for f, _ in st._fields_ if f != "reserved"}
        out["used_blocks"] = out["pool_blocks"] - out["free_blocks"]
        return out

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

    # ---- what a room may ask for (checked before anything is sent) ------
    def _role(self, encode):
        if encode and not self.encode:
            raise RoleError(errno.EOPNOTSUPP, "port %s is a language port (the gateway "
                             "granted this client: language): it receives "
                             "rooms, send_room needs an encode port"
                             % self.port)
        if not encode and not self.language:
            raise RoleError(errno.EOPNOTSUPP, "port %s is an encode port (the gateway "
                             "granted this client: encode): it sends "
                             "rooms, recv_room needs a language port"
                             % self.port)

    @staticmethod
    def check_room_id(room):
        if not _is_int(room) or not 0 < room < 1 << 64:
            raise ValueError("room must be a non-zero 64-bit request id "
                             "(an int), got %r" % (room,))

    def check_tokens(self, total_tokens):
        """TypeError/ValueError unless 1 <= total_tokens (an int) <= the
        port's max_total_tokens (an OSError EFBIG naming the limit: the
        same refusal the gateway would give)."""
        if not _is_int(total_tokens):
            raise TypeError("total_tokens must be an int, got %r (%s)"
                            % (total_tokens, type(total_tokens).__name__))
        if total_tokens <= 0:
            raise ValueError("total_tokens must be at least 1, got %d"
                             % total_tokens)
        if self.max_total_tokens and total_tokens > self.max_total_tokens:
            raise OSError(errno.EFBIG, "total_tokens %d above port %s's "
                          "max_total_tokens %d" % (total_tokens, self.port,
                                                   self.max_total_tokens))

    # ---- the port's peers -------------------------------------------------
    def peers(self):
        """The port's live peers now, as Peer(id, name, ready, leaving) in
        ascending id order. Ids are the gateway's and never reused: a peer
        that leaves and comes back has a new one."""
        return self._read_peers()[0]

    @property
    def peers_generation(self):
        """The peer list's generation: it moves with every change."""
        return self._read_peers(0)[1]

    def _read_peers(self, cap=None):
        cap = self.geometry["max_peers"] if cap is None else cap
        buf = (_lib.Peer * max(cap, 1))()
        gen = _lib.c_u64()
        n = check(lib.egw_client_peers(self._handle(), buf, cap,
                                       ctypes.byref(gen)), "peers")
        return [Peer(p.id, p.name.decode(), bool(p.flags & _lib.PEER_READY),
                     bool(p.flags & _lib.PEER_LEAVING))
                for p in buf[:min(n, cap)]], gen.value

    def wait_peers(self, generation=None, timeout_s=10.0):
        """Wait until the peer list changes from `generation` (None: from
        now) and return the new list; TimeoutError after timeout_s. The
        gateway posts an event on each change, so this sleeps, not spins."""
        if generation is None:
            generation = self.peers_generation
        # the event only wakes the wait: the table says what changed
        self.wait_until(lambda: self.peers_generation != generation,
                        timeout_s)
        return self.peers()

    def peer_id(self, peer):
        """A live peer's id from its name (or an id, checked); ValueError
        listing the port's peers when there is none such."""
        live = [p for p in self.peers() if not p.leaving]
        for p in live:
            if p.name == peer or (_is_int(peer) and p.id == peer):
                return p.id
        raise ValueError("no peer %r: port %s's peers are %s (a name, or an "
                         "id from Client.peers())"
                         % (peer, self.port,
                            ", ".join("%s (id %d)" % (p.name, p.id)
                                      for p in live) or "none"))

    def _default_peer(self):
        live = [p for p in self.peers() if not p.leaving]
        if len(live) != 1:
            raise ValueError("recv_room: name the peer (peer=NAME or an id):"
                             " port %s lists %s" % (
                                 self.port,
                                 ", ".join("%s (id %d)" % (p.name, p.id)
                                           for p in live) or "no peer"))
        return live[0].id

    @staticmethod
    def check_ranks(rank, nranks):
        if not _is_int(nranks) or not _is_int(rank) or \
                not 1 <= nranks <= 8 or not 0 <= rank < nranks:
            raise ValueError("need 0 <= rank < nranks <= 8 (ints), got "
                             "rank %r of %r" % (rank, nranks))

    # ---- rooms ----------------------------------------------------------
    def send_room(self, room, total_tokens, nranks=1, mrope_delta=0, cookie=0,
                  attempt=0):
        """Encode side: open a room of `total_tokens` for `nranks` ranks.
        Its blocks are writable once room.poll() says WaitingForInput.
        `attempt`: 0 for a room's first try, n for its n-th retry (the
        language side opens the same attempt; doc/client.md, "Attempts")."""
        self._role(True)
        self.check_room_id(room)
        self.check_ranks(0, nranks)
        self.check_tokens(total_tokens)
        slot = check(lib.egw_client_send_open_ex(
            self._handle(), room, total_tokens, nranks, mrope_delta, cookie,
            _attempt(attempt), None, self._next_tag()),
            "send_open room %d" % room, self.geometry)
        r = EncodeRoom(self, room, slot)
        self._rooms[slot] = r
        return r

    def recv_room(self, room, peer=None, rank=0, nranks=1, aux_only=False,
                  attempt=0, content=None):
        """Language side: receive `room` from `peer` as `rank` of `nranks`.
        `peer` is a name ("enc-3": a peer not listed yet is waited for
        until the port's bootstrap deadline, then the room fails "unknown
        peer"), an id from peers() (one no longer listed fails the room
        "peer removed"), or None for the port's only peer. `content` names
        what the room holds (a content_key(), or any str/bytes hashed by
        it): data the port holds for it is served without a transfer, and
        a transfer of it already under way is shared (room.cached says so
        at Success)."""
        self._role(False)
        self.check_room_id(room)
        self.check_ranks(rank, nranks)
        if peer is None:
            peer = self._default_peer()
        key = content_key(content) if content is not None else None
        flags = _lib.AUX_ONLY if aux_only else 0
        if isinstance(peer, str):
            slot = check(lib.egw_client_recv_open_named(
                self._handle(), room, peer.encode(), rank, nranks, flags,
                _attempt(attempt), key, self._next_tag()),
                "recv_open room %d from %r" % (room, peer), self.geometry)
        elif _is_int(peer) and 0 < peer < 1 << 32:
            slot = check(lib.egw_client_recv_open_ex(
                self._handle(), room, peer, rank, nranks, flags,
                _attempt(attempt), key, self._next_tag()),
                "recv_open room %d from peer id %d" % (room, peer),
                self.geometry)
        else:
            raise ValueError("peer must be a name or an id (1..2^32-1) from "
                             "Client.peers(), got %r" % (peer,))
        r = LanguageRoom(self, room, slot, aux_only, peer=peer)
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
    def _defer(self, handle, fn):
        self._deferred.append((handle, fn))

    def _run_deferred(self):
        left = []
        for h, fn in self._deferred:
            if h.query():
                try:
                    fn()
                except OSError as e:
                    # the room ended under us: its completion says why
                    log.info("embgw: deferred command: %s", e)
            else:
                left.append((h, fn))
        self._deferred = left

    def _check_held(self):
        lim = self.held_warning_s
        if lim is None:
            return
        now = time.monotonic()
        if now < self._held_check:
            return
        self._held_check = now + min(1.0, lim / 4)
        for r in self._rooms.values():
            if isinstance(r, LanguageRoom) and r.state == KVPoll.Success \
                    and not r.released and not r.warned and \
                    r.success_at is not None and now - r.success_at > lim:
                r.warned = True
                msg = ("room %d has held %d tokens' blocks in Success for "
                       "%.0f s without release() (limit held_warning_s=%g):"
                       " the pool fills with data nobody reads"
                       % (r.room, r.total_tokens, now - r.success_at, lim))
                log.warning("embgw: %s", msg)
                warnings.warn(msg, HeldRoomWarning, stacklevel=3)

    def progress(self):
        """Take every waiting event and hand it to its room; send the
        commits and releases that waited for device copies.
        @return the number of events taken."""
        if self._deferred:
            self._run_deferred()
        self._check_held()
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
        if ev.op == _lib.OP_PEERS:
            return  # it woke the wait; peers() reads the list
        r = self._rooms.get(ev.slot)
        if r is None or r.room != ev.room:
            return
        r._on_event(ev)
        if ev.flags & _lib.EV_END:
            del self._rooms[ev.slot]

    def _fail_all(self, code):
        reason = ("the gateway went away: its attach socket closed (it "
                  "stopped, or detached this client)"
                  if code == -errno.ECONNRESET else
                  "the gateway broke the completion ring: %s"
                  % _lib.strerror(code))
        for r in list(self._rooms.values()):
            r._gone(code, reason)
        self._rooms.clear()

    def wait(self, timeout_ms):
        """Sleep until an event is waiting (True) or the deadline (False).
        Raises ConnectionResetError when the gateway went away."""
        if self._deferred:
            # a device copy's end is no completion: look every millisecond
            timeout_ms = min(timeout_ms, 1)
        rc = lib.egw_client_wait(self._handle(), int(timeout_ms))
        if rc == -errno.ECONNRESET:
            self._fail_all(rc)
        return check(rc, "wait") == 1

    # ---- an engine's own event loop ---------------------------------------
    def fileno(self):
        """One descriptor for select/poll/epoll/asyncio beside the engine's
        own: readable when completions are waiting (after arm()) or the
        gateway went away. Needs the wake-up eventfd (wakeup=True, which
        the gateway granted: OSError EOPNOTSUPP otherwise)."""
        return check(lib.egw_client_poll_fd(self._handle()), "poll_fd")

    def arm(self):
        """Before sleeping on fileno(): True when events are waiting (call
        progress(), do not sleep); False when armed - sleep on fileno() for
        at most self.max_sleep_ms (None: no limit; a quarter lease, or 1 ms
        while something no wake-up announces is pending). Raises
        ConnectionResetError when the gateway went away."""
        lim = _lib.c_u32(0)
        rc = lib.egw_client_prepare(self._handle(), ctypes.byref(lim))
        if rc == -errno.ECONNRESET:
            self._fail_all(rc)
        if check(rc, "arm") == 1:
            self.max_sleep_ms = 0
            return True
        ms = None if lim.value == 0xffffffff else lim.value
        if self._deferred:
            ms = 1
        if self.held_warning_s is not None:
            cap = int(self.held_warning_s * 1000 / 4) + 1
            ms = cap if ms is None else min(ms, cap)
        self.max_sleep_ms = ms
        return False

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


_MADV_POPULATE_READ, _MADV_POPULATE_WRITE = 22, 23
_libc = None


def _populate(mapping, write):
    """Fault every page of `mapping` (a NumPy array over a shared
    mapping) in now. @return True where the kernel did."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_int)
    ptr = mapping.__array_interface__["data"][0]
    if _libc.madvise(ptr, mapping.nbytes, _MADV_POPULATE_WRITE if write
                     else _MADV_POPULATE_READ) == 0:
        return True
    log.info("embgw: the pool's pages fault in on first use (madvise "
             "populate: %s)", errno.errorcode.get(ctypes.get_errno(), "?"))
    return False


def _is_int(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)
