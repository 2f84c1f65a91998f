# SPDX-License-Identifier: BSD-3-Clause
"""Engine-shaped connectors: one request's embeddings out of an encode
engine (EmbeddingSender) and into one language rank (EmbeddingReceiver).

They follow the connector shape scheduler loops already drive: construct
per request, init(), poll() from the loop until a terminal state, then
read the failure reason or the data. No call blocks and nothing calls
back into the engine; resume rounds, TP fan-out, retransmission and
deadlines stay in the gateway (doc/engines.md).

    sender = EmbeddingSender(client, request_id, nranks=tp_size)
    sender.init(num_tokens, mrope_delta=delta)     # blocks are allocated
    ...                                            # while the encoder runs
    sender.send(embeddings, fill_ids, mrope)       # written once allocated
    # or, blocks there (WaitingForInput): produce into the pool itself
    out = sender.buffer()                          # (num_tokens, hidden)
    ...                                            # the encoder writes out
    sender.send(out, fill_ids, mrope)              # out: nothing copied
    state = sender.poll()                          # ... Success or Failed

    receiver = EmbeddingReceiver(client, request_id, peer="enc-0",
                                 rank=tp_rank, nranks=tp_size)
    receiver.init()
    if receiver.poll() == KVPoll.Success:
        data = receiver.recv(out_embeddings)
        receiver.release()
"""
import collections
import errno

from . import cuda
from .room import KVPoll


class Received(collections.namedtuple("Received",
                                      "embeddings fill_ids mrope aux")):
    """What recv() copied out. `done` is the copies' handle: query() is
    True once the tensors hold the data (at once for CPU tensors; for CUDA
    ones, when the copies on recv()'s stream have run)."""

    done = cuda.Done()


class _All:
    """One handle over several."""

    def __init__(self, handles):
        self.handles = [h for h in handles if not isinstance(h, cuda.Done)]

    def query(self):
        return all(h.query() for h in self.handles)

    def synchronize(self):
        for h in self.handles:
            h.synchronize()


class EmbeddingTransferError(RuntimeError):
    """Why a room failed: `code` is the gateway's result code
    (doc/client.md section 4, or a negated errno for a refused command),
    `reason` its text."""

    def __init__(self, room, code, reason):
        super().__init__("room %d failed: %s (%d)" % (room, reason, code))
        self.room = room
        self.code = code
        self.reason = reason


class _Connector:
    """What sender and receiver share: the room, its state, its failure."""

    def __init__(self, client, room):
        client.check_room_id(room)
        self.client = client
        self.room = room
        self._room = None
        self._failed = None     # (code, reason) of a failure seen here

    def _fail(self, code, reason):
        if self._failed is None:
            self._failed = (code, reason)

    def _state(self):
        if self._failed is not None:
            return KVPoll.Failed
        if self._room is None:
            return KVPoll.Bootstrapping
        try:
            return self._room.poll()
        except ConnectionResetError:
            # the gateway went away: the client has failed every room
            return self._room.state

    @property
    def ended(self):
        """The gateway is done with the room: its last completion came (a
        client that detaches before then aborts the room)."""
        return self._failed is not None and self._room is None or \
            self._room is not None and self._room.ended

    def failure_exception(self):
        """The failure as an EmbeddingTransferError (`raise` it, or log
        it), or None while the room has not failed."""
        if self._failed is not None:
            code, reason = self._failed
        elif self._room is not None and self._room.state == KVPoll.Failed:
            code, reason = self._room.result, self._room.reason
        else:
            return None
        return EmbeddingTransferError(self.room, code,
                                      reason or "unknown failure")

    def abort(self):
        """End the room at once, in any state short of its end; the peer
        hears ABORT and poll() says Failed from now on. A room that has
        ended already stays as it ended."""
        if self._room is not None:
            if self._room.ended:
                return
            try:
                self._room.abort()
            except OSError as e:
                self._fail(-e.errno, "abort: %s" % e.strerror)
        self._fail(-1020, "aborted by this engine")

    def _open(self, how, what):
        if self._room is not None or self._failed is not None:
            raise RuntimeError("init() twice for room %d" % self.room)
        try:
            self._room = how()
        except OSError as e:
            # what the gateway would refuse (a length above the port's
            # max_total_tokens, no free slot, ...) takes the path of a
            # failure it reports: the loop sees Failed from poll() and the
            # reason here. The engine's own mistakes (ValueError,
            # TypeError) raise at once.
            err = getattr(e, "errno", None) or errno.EINVAL
            self._fail(-err, "%s: %s" % (what, e.strerror or e))


class EmbeddingSender(_Connector):
    """The encode engine's side of one request, sent to `nranks`
    language ranks.

    poll() reports Bootstrapping until the gateway has the room's blocks,
    WaitingForInput until send() has written them, Transferring while the
    ranks receive, then Success (every rank holds every token) or Failed
    (failure_exception() says why). The blocks are the gateway's after the
    commit: the connector keeps no view of them.
    """

    def __init__(self, client, room, nranks=1, attempt=0):
        super().__init__(client, room)
        if not 1 <= nranks <= 8:
            raise ValueError("nranks must be 1..8, got %r" % (nranks,))
        self.nranks = nranks
        self.attempt = attempt
        self.num_tokens = 0
        self._pending = None    # what send() was given, until it is written
        self.committed = False

    def init(self, num_tokens, mrope_delta=0, cookie=0):
        """Open the room for `num_tokens` tokens; the aux record carries
        `mrope_delta` and `cookie`. Call it as soon as the length is known
        (before the encoder runs) so that allocation overlaps compute."""
        self.client._role(True)
        try:
            self.client.check_tokens(num_tokens)
        except OSError:
            pass        # above the limit: Failed with the limit, below
        self.num_tokens = num_tokens
        self._open(lambda: self.client.send_room(
            self.room, num_tokens, nranks=self.nranks,
            mrope_delta=mrope_delta, cookie=cookie, attempt=self.attempt),
            "open room %d" % self.room)

    def buffer(self, kind="embedding"):
        """A tensor for the encoder to write its output into, before
        send(): (num_tokens, hidden) of the pool's dtype for the
        embeddings, (num_tokens,) int32 for fill_ids, (num_tokens, 3)
        int32 for mrope. Once the blocks are there (poll() said
        WaitingForInput) and are one run, it is the room's own memory in
        the pool: send() of it copies nothing (in_pool() says so, and
        copied_bytes stays 0). Otherwise (blocks not there yet, or the
        room's blocks in several runs) it is a new tensor of this process,
        which send() copies into the runs: the same code works either way.
        The writes into it must be done when send() is called (a copy
        queued on a CUDA stream: synchronise it first), and none may
        follow: from send() on, the blocks are the gateway's, and once
        the room ends they hold other rooms' data. Never blocks."""
        import torch
        if self._room is None and self._failed is None:
            raise RuntimeError("buffer() before init() for room %d"
                               % self.room)
        c = self.client
        if kind not in ("embedding", "fill_ids", "mrope") or \
                kind not in c.pool:
            raise ValueError("kind must be one of %s, got %r"
                             % (", ".join(sorted(c.pool)), kind))
        if self._state() == KVPoll.WaitingForInput and \
                self._pending is None and not self.committed:
            t = self._room.buffer(kind)
            if t is not None:
                return t
        shape, dtype = self._want(kind)
        return torch.empty(shape, dtype=dtype or torch.int32)

    def in_pool(self, tensor, kind="embedding"):
        """`tensor` is the room's own `kind` memory in the pool (what
        buffer() gives once the blocks are there in one run): send()
        copies nothing for it."""
        r = self._room
        if r is None or r.ended or r.state != KVPoll.WaitingForInput:
            return False
        return r.in_place(tensor, kind)

    @property
    def copied_bytes(self):
        """The bytes send() copied into the pool (0 when every tensor it
        was given came from buffer() over the pool)."""
        return self._room.copied_bytes if self._room is not None else 0

    def send(self, embeddings, fill_ids=None, mrope=None, stream=None):
        """Hand over the room's data: embeddings (num_tokens, hidden) of
        the pool's dtype, fill_ids (num_tokens,) int32 and mrope
        (num_tokens, 3) int32 where the engine has them (absent ones stay
        zero), CPU or device tensors or NumPy arrays. They are written into
        the pool and committed now if the blocks are there, else by the
        poll() that finds them; the connector holds the references until
        then. Shapes and types are checked here (ValueError/TypeError); a
        bf16 pool takes torch.bfloat16 or uint16 NumPy arrays (what views()
        gives), bitwise. CUDA tensors are copied on `stream` (default:
        their device's current stream, so after the kernels that made them
        there) into the pinned pool without waiting; a later poll() commits
        once the copies are done."""
        if self._room is None and self._failed is None:
            raise RuntimeError("send() before init() for room %d" % self.room)
        if self._pending is not None or self.committed:
            raise RuntimeError("send() twice for room %d" % self.room)
        if self._failed is not None:
            return      # poll() says Failed; nothing to write
        bf16 = self.client.dtype_name == "bf16"
        data = {"embedding": cuda.as_tensor(embeddings, bf16),
                "fill_ids": cuda.as_tensor(fill_ids),
                "mrope": cuda.as_tensor(mrope)}
        self._check(data)
        self._pending = data
        self._stream = stream
        self._state()       # take the gateway's answers: the blocks may be in
        self._flush()

    def _want(self, kind):
        """(shape, dtype) of `kind`'s tensor; dtype None: int32."""
        c = self.client
        if kind == "embedding":
            return (self.num_tokens, c.hidden_size), c.torch_dtype
        return ((self.num_tokens,) if kind == "fill_ids" else
                (self.num_tokens, 3)), None

    def _check(self, data):
        c = self.client
        import torch
        for kind, t in data.items():
            if t is None:
                continue
            shape, dtype = self._want(kind)
            dtype = dtype or torch.int32
            if tuple(t.shape) != shape:
                raise ValueError("%s: expected shape %s, got %s"
                                 % (kind, shape, tuple(t.shape)))
            if t.dtype != dtype:
                raise TypeError("%s: expected %s, got %s"
                                % (kind, dtype, t.dtype))
            if kind == "mrope" and "mrope" not in c.pool:
                raise ValueError("the pool has no mrope kind")

    def _flush(self):
        r = self._room
        if self._pending is None or r is None or r.ended or \
                r.state != KVPoll.WaitingForInput:
            return
        data, self._pending = self._pending, None
        try:
            copies = [r.scatter(t, kind=kind, stream=self._stream)
                      for kind, t in data.items() if t is not None]
            r.commit(after=_All(copies))
            self.committed = True
        except OSError as e:
            # the room ended under us (its ranks went away): the gateway's
            # completion says why; this is what the commit itself met
            self._fail(-e.errno, "commit: %s" % e.strerror)

    def poll(self):
        """The room's KVPoll state; writes and commits pending data once
        the blocks are there."""
        state = self._state()
        if state == KVPoll.WaitingForInput and self._pending is not None:
            self._flush()
            state = self._state()
        if state == KVPoll.WaitingForInput and self.committed:
            return KVPoll.Transferring  # the commit's answer is on its way
        return state


class EmbeddingReceiver(_Connector):
    """One language rank's side of one request from encode peer `peer`:
    its name (a peer not listed yet is waited for until the port's
    bootstrap deadline), an id from client.peers(), or None for the port's
    only peer.

    poll() goes Bootstrapping -> (WaitingForInput -> Transferring) ->
    Success or Failed. After Success the room's blocks belong to this rank
    until release(): recv() copies them out, views()/tensors() read them in
    place. An aux-only rank receives just the aux record.
    """

    def __init__(self, client, room, peer=None, rank=0, nranks=1,
                 aux_only=False, attempt=0, content=None):
        super().__init__(client, room)
        client.check_ranks(rank, nranks)
        self.peer = peer
        self.rank = rank
        self.nranks = nranks
        self.aux_only = aux_only
        self.attempt = attempt
        self.content = content
        self.released = False
        self._copy = None       # recv()'s copies, which release() awaits

    def init(self):
        """Ask for the room; the encode engine may open it before or after
        this. An id the port does not list, no peer named on a port of
        several, or a port that only encodes raises ValueError naming
        them; a name not listed fails the room "unknown peer" at the
        port's bootstrap deadline."""
        self.client._role(False)
        if self.peer is not None and not isinstance(self.peer, str):
            self.client.peer_id(self.peer)
        self._open(lambda: self.client.recv_room(
            self.room, peer=self.peer, rank=self.rank, nranks=self.nranks,
            aux_only=self.aux_only, attempt=self.attempt,
            content=self.content), "open room %d" % self.room)

    def poll(self):
        """The room's KVPoll state."""
        if self.released:
            return KVPoll.Success
        return self._state()

    @property
    def cached(self):
        """Success came from the port's content cache or another room's
        transfer of the same content: nothing crossed the wire for it."""
        return self._room is not None and self._room.cached

    @property
    def num_tokens(self):
        """The room's total, known from Transferring on (0 before)."""
        return self._room.total_tokens if self._room is not None else 0

    def _ready(self):
        if self.poll() != KVPoll.Success or self.released:
            raise RuntimeError("room %d holds no data (state %s%s)"
                               % (self.room, self.poll().name,
                                  ", released" if self.released else ""))
        return self._room

    def aux(self):
        """The aux record (total_tokens, mrope_delta, cookie, ...)."""
        return self._ready().aux()

    def recv(self, embeddings=None, fill_ids=None, mrope=None, stream=None):
        """Copy the room out: into the given contiguous tensors (any
        device; shapes (num_tokens, hidden), (num_tokens,),
        (num_tokens, 3)) or new CPU tensors where None. CUDA tensors are
        filled on `stream` (default: their device's current stream, so
        kernels queued there after this see the data) without waiting.
        @return Received (embeddings, fill_ids, mrope, aux) with `.done`,
        the copies' handle (query(), synchronize()); release() keeps the
        blocks until it is done. The tensors are None for an aux-only rank
        and mrope is None when the pool has no mrope."""
        r = self._ready()
        aux = r.aux()
        if self.aux_only:
            return Received(None, None, None, aux)
        emb, h1 = r.gather_async(embeddings, stream=stream)
        fill, h2 = r.gather_async(fill_ids, kind="fill_ids", stream=stream)
        mr, h3 = r.gather_async(mrope, kind="mrope", stream=stream) \
            if "mrope" in self.client.pool else (None, cuda.Done())
        out = Received(emb, fill, mr, aux)
        out.done = self._copy = _All([h1, h2, h3])
        return out

    def tensors(self, kind="embedding"):
        """Zero-copy tensors of the room's runs in the pool (valid until
        release())."""
        return self._ready().tensors(kind)

    def release(self):
        """Done with the data: the gateway frees the blocks. After a
        failure there is nothing to free and this does nothing."""
        if self.released or self._room is None or self._room.ended:
            return
        if self._room.state != KVPoll.Success:
            raise RuntimeError("room %d: release() before Success (state "
                               "%s); abort() ends a room early"
                               % (self.room, self._room.state.name))
        try:
            self._room.release(after=self._copy)
        except ConnectionResetError:
            pass        # the gateway went away, and its blocks with it
        self.released = True
