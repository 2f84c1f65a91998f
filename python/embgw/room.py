# SPDX-License-Identifier: BSD-3-Clause
"""Rooms: one engine request's tokens in the gateway's pool."""
import ctypes
import enum
import time
import warnings

import numpy as np

from . import _lib, _trust, cuda
from ._lib import lib, check


# A room's end that says its peer is not there: UNKNOWN_PEER (22) and
# PEER_REMOVED (26) above the codes' base (doc/client.md section 4); the
# room's reason then names the peer it was opened for.
_PEER_CODES = frozenset(-(_lib.ERR_BASE + w) for w in (22, 26))


class KVPoll(enum.IntEnum):
    """The reference design's KVPoll, in the order of doc/client.md."""
    Failed = 0
    Bootstrapping = 1
    WaitingForInput = 2
    Transferring = 3
    Success = 4


class Room:
    """A room held in one slot of the client. poll() returns its state;
    after Failed, `result` is the code and `reason` the text."""

    def __init__(self, client, room, slot):
        self.client = client
        self.room = room
        self.slot = slot
        self.state = KVPoll.Bootstrapping
        self.result = 0
        self.reason = ""
        self.ended = False
        self.total_tokens = 0
        self.refusals = []     # (op, result) of commands the gateway refused
        self.cached = False    # Success without a transfer of its own
        self._runs = None
        self.success_at = None  # monotonic time Success was seen
        self.warned = False     # the held-too-long warning was given

    def __repr__(self):
        return "<%s %d slot %d %s%s>" % (type(self).__name__, self.room,
                                         self.slot, self.state.name,
                                         " " + self.reason if self.reason
                                         else "")

    # ---- state ----------------------------------------------------------
    def poll(self):
        """Progress the client and return the room's KVPoll state."""
        if not self.ended:
            self.client.progress()
        return self.state

    def wait(self, state, timeout_s=10.0):
        """Wait until the room reaches `state` or ends; @return its state."""
        self.client.wait_until(lambda: self.state >= state or self.ended,
                               timeout_s)
        return self.state

    def _on_event(self, ev):
        if ev.flags & _lib.EV_REFUSED:
            self.refusals.append((ev.op, ev.result))
            if not ev.flags & _lib.EV_END:
                return
            ev.state = KVPoll.Failed
        if ev.total_tokens:
            self.total_tokens = ev.total_tokens
        if ev.flags & _lib.EV_CACHED:
            self.cached = True
        self.state = KVPoll(ev.state)
        if self.state == KVPoll.Success and self.success_at is None:
            self.success_at = time.monotonic()
        if ev.result != 0:
            self.result = ev.result
            self.reason = _lib.explain(ev.result, self.client.geometry)
            peer = getattr(self, "peer", None)
            if peer is not None and ev.result in _PEER_CODES:
                self.reason = "%s: %s %r" % (
                    self.reason, "peer" if isinstance(peer, str) else
                    "peer id", peer)
        elif self.state == KVPoll.Failed and ev.op == _lib.OP_ABORT:
            self.reason = "aborted by this client"
        if ev.flags & _lib.EV_END:
            self.ended = True
            self._runs = None

    def _gone(self, code, reason="the gateway detached this client"):
        self.state = KVPoll.Failed
        self.result = code
        self.reason = reason
        self.ended = True
        self._runs = None

    def _cmd(self, fn, what):
        check(fn(self.client._handle(), self.slot, self.client._next_tag()),
              "%s room %d" % (what, self.room), self.client.geometry)

    def abort(self):
        """End the room; its last state is Failed."""
        self._cmd(lib.egw_client_abort, "abort")

    # ---- the room's blocks ----------------------------------------------
    def runs(self):
        """The room's runs as (first block, blocks) pairs, from its slot."""
        if self._runs is None:
            c = self.client
            n = check(lib.egw_client_room_runs(c._handle(), self.slot, None,
                                               0), "room runs")
            arr = (_lib.Run * max(n, 1))()
            check(lib.egw_client_room_runs(c._handle(), self.slot, arr, n),
                  "room runs")
            info = _lib.RoomInfo()
            check(lib.egw_client_room_info(c._handle(), self.slot,
                                           ctypes.byref(info)), "room info")
            self.total_tokens = info.total_tokens
            self._runs = [(r.start, r.count) for r in arr[:n]]
        return self._runs

    def _token_ranges(self):
        """(first pool token, tokens, first room token) per run."""
        bt = self.client.block_tokens
        left, done, out = self.total_tokens, 0, []
        # runs are numbered in the mapping (the library takes a segment's
        # first block off): offsets into client.pool
        for start, count in self.runs():
            n = min(count * bt, left)
            out.append((start * bt, n, done))
            left -= n
            done += n
        return out

    def views(self, kind="embedding"):
        """NumPy views of the room's tokens in the pool, one per run, no
        copy: embedding (tokens, hidden) of the pool's dtype (uint16 for
        bf16), fill_ids (tokens,) int32, mrope (tokens, 3) int32."""
        if getattr(self, "aux_only", False):
            raise ValueError("an aux-only rank holds only the aux record")
        # every time: a client the gateway gave up holds no room data
        _trust.check(self.client)
        pool = self.client.pool[kind]
        return [pool[p:p + n] for p, n, _ in self._token_ranges()]

    def _bf16(self, kind):
        return kind == "embedding" and self.client.dtype_name == "bf16"

    def tensors(self, kind="embedding"):
        """The same views as PyTorch tensors (torch.bfloat16 for bf16)."""
        views = self.views(kind)
        with warnings.catch_warnings():
            # a read-only pool (language): torch warns that it cannot mark
            # the tensor read-only; a write through it faults
            warnings.simplefilter("ignore", UserWarning)
            return cuda.torch_views(views, self._bf16(kind))

    def _ranges(self):
        return [(n, first) for _, n, first in self._token_ranges()]

    def aux(self):
        """The room's aux record as a dict."""
        a = _lib.Aux()
        check(lib.egw_client_room_aux(self.client._handle(), self.slot,
                                      ctypes.byref(a)), "room aux")
        return {f: getattr(a, f) for f, _ in a._fields_}


def _same_memory(src, views):
    """`src` already is the room's one run in the pool: the same address,
    shape, strides and type as its only view (a CPU tensor or an array)."""
    if len(views) != 1:
        return False
    v = views[0]
    if isinstance(src, np.ndarray):
        if not isinstance(v, np.ndarray):
            return False
        ptr = src.__array_interface__["data"][0]
        return (ptr == v.__array_interface__["data"][0] and
                src.shape == v.shape and src.strides == v.strides and
                src.dtype == v.dtype)
    if isinstance(v, np.ndarray) or getattr(src, "is_cuda", False):
        return False
    return (src.data_ptr() == v.data_ptr() and
            tuple(src.shape) == tuple(v.shape) and
            src.stride() == v.stride() and src.dtype == v.dtype)


def _check_shape(src, total, view):
    if tuple(src.shape) != (total,) + tuple(view.shape[1:]):
        raise ValueError("expected shape %s, got %s"
                         % ((total,) + tuple(view.shape[1:]),
                            tuple(src.shape)))


class EncodeRoom(Room):
    """An encode room: write its tokens (scatter or the views), commit.
    `copied_bytes`: what scatter() copied into the pool so far (a tensor
    that already is the room's memory, buffer(), adds nothing)."""

    def __init__(self, client, room, slot):
        super().__init__(client, room, slot)
        self.copied_bytes = 0

    def scatter(self, tensor, kind="embedding", stream=None):
        """Copy a (total_tokens, ...) tensor or array of the pool's type
        into the room's runs. NumPy arrays and CPU tensors are copied now;
        a CUDA tensor is copied on `stream` (default: its device's current
        stream) without waiting. A bf16 pool takes torch.bfloat16 or the
        uint16 arrays views() gives, bitwise. @return a handle whose
        query() is True once the pool holds the bytes (commit(after=...))."""
        if isinstance(tensor, np.ndarray):
            views = self.views(kind)
            _check_shape(tensor, self.total_tokens, views[0])
            if _same_memory(tensor, views):
                return cuda.Done()      # written in place: nothing to copy
            for v, (_, n, first) in zip(views, self._token_ranges()):
                if v.dtype != tensor.dtype:
                    raise TypeError("%s: expected %s, got %s%s"
                                    % (kind, v.dtype, tensor.dtype,
                                       " (a bf16 pool's elements are "
                                       "uint16 in NumPy)"
                                       if self._bf16(kind) else ""))
                v[...] = tensor[first:first + n]
            self.copied_bytes += tensor.nbytes
            return cuda.Done()
        views = self.tensors(kind)
        _check_shape(tensor, self.total_tokens, views[0])
        if tensor.dtype != views[0].dtype:
            raise TypeError("%s: expected %s, got %s"
                            % (kind, views[0].dtype, tensor.dtype))
        if _same_memory(tensor, views):
            return cuda.Done()
        done = cuda.copy_in(views, self._ranges(), tensor, stream)
        self.copied_bytes += tensor.numel() * tensor.element_size()
        return done

    def in_place(self, tensor, kind="embedding"):
        """`tensor` already is the room's `kind` memory in the pool (one
        run, the same address, shape, strides and type): scatter() of it
        copies nothing."""
        views = (self.views(kind) if isinstance(tensor, np.ndarray) else
                 self.tensors(kind))
        return _same_memory(tensor, views)

    def buffer(self, kind="embedding"):
        """The room's tokens of `kind` as one zero-copy tensor over the
        pool ((total_tokens, ...), the pool's type) when the room's blocks
        are one run, else None (the tokens then lie in several runs:
        tensors() lists them, scatter() fills them). scatter() of this
        very tensor copies nothing."""
        views = self.tensors(kind)
        return views[0] if len(views) == 1 else None

    def commit(self, after=None):
        """The tokens are written: serve the room. The blocks are the
        gateway's from now on. after: a handle of scatter() still copying;
        the commit is then sent by the client's progress() once it is done
        (no wait here)."""
        if after is not None and not after.query():
            self.client._defer(after, self._commit_now)
            return
        self._commit_now()

    def _commit_now(self):
        self._cmd(lib.egw_client_send_commit, "commit")
        self._runs = None


class LanguageRoom(Room):
    """A language room: once Success, read its tokens (gather or the
    views, read-only by convention), then release()."""

    def __init__(self, client, room, slot, aux_only=False, peer=None):
        super().__init__(client, room, slot)
        self.aux_only = aux_only
        self.peer = peer        # as recv_room() named it: a name or an id
        self.released = False

    def gather(self, out=None, kind="embedding", stream=None):
        """Copy the room's tokens into `out`, a contiguous
        (total_tokens, ...) tensor of the pool's type on any device, or a
        new CPU tensor. A CUDA `out` is filled on `stream` (default: its
        device's current stream) without waiting: gather_async() returns
        the handle that says when. @return out."""
        return self.gather_async(out, kind, stream)[0]

    def gather_async(self, out=None, kind="embedding", stream=None):
        """gather(), @return (out, handle): out holds the tokens once
        handle.query() is True; release(after=handle) keeps the blocks
        until then."""
        import torch
        views = self.tensors(kind)
        shape = (self.total_tokens,) + tuple(views[0].shape[1:])
        if out is None:
            out = torch.empty(shape, dtype=views[0].dtype)
        if tuple(out.shape) != shape or out.dtype != views[0].dtype:
            raise ValueError("%s: expected %s %s, got %s %s"
                             % (kind, shape, views[0].dtype,
                                tuple(out.shape), out.dtype))
        return out, cuda.copy_out(views, self._ranges(), out, stream)

    def release(self, after=None):
        """Done with the blocks: the gateway frees them. after: a handle of
        gather_async() still copying; the release is then sent by the
        client's progress() once it is done (no wait here)."""
        self.released = True
        if after is not None and not after.query():
            self.client._defer(after, self._release_now)
            return
        self._release_now()

    def _release_now(self):
        self._cmd(lib.egw_client_release, "release")
        self._runs = None
