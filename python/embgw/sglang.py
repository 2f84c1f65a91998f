# SPDX-License-Identifier: BSD-3-Clause
"""SGLang's disaggregation sender and receiver over embgw, and its
multimodal path's multi-part requests.

The classes have the shape of SGLang's BaseKVManager / BaseKVSender /
BaseKVReceiver (sglang/srt/disaggregation/base/conn.py: constructors,
init(), send() / send_metadata(), poll(), failure_exception(), clear(),
abort()); they derive from them when SGLang is importable and from
stand-ins with the same methods otherwise, so `import embgw.sglang` needs
no SGLang. install() puts them behind SGLang's get_kv_class.

What differs from a KV backend (doc/engines.md, section 5):
- the manager's buffer is the engine's embedding buffer: `kv_indices`
  are rows of it (one row per multimodal token);
- the room id is the request's bootstrap_room, as SGLang gives both sides;
  a retry (retry()) opens attempt + 1 on both sides;
- the receiver opens its room at init(); poll() says WaitingForInput until
  send_metadata() has named the destination rows, then Success once the
  room's tokens are in them (the blocks go back to the gateway at once).

MultiPartReceiver: one request's embeddings in several parts, each from
its own encoder (SGLang's part_idx, named `<rid>_local_part_<i>`), into
one request's tensors, concatenated per modality in part order.
"""
import dataclasses
import enum
import logging
import os
import time

from . import _engines
from .room import KVPoll as _KVPoll

log = logging.getLogger("embgw.sglang")

try:
    from sglang.srt.disaggregation.base.conn import (  # noqa: F401
        BaseKVManager, BaseKVReceiver, BaseKVSender, KVPoll)
    HAVE_SGLANG = True
except ImportError:
    HAVE_SGLANG = False
    KVPoll = _KVPoll

    class BaseKVManager:
        """SGLang's BaseKVManager: (args, disaggregation_mode,
        server_args, is_mla_backend=False), register_to_bootstrap()."""

        def register_to_bootstrap(self):
            raise NotImplementedError

    class BaseKVSender:
        """SGLang's BaseKVSender: init(num_kv_indices, aux_index=None),
        send(kv_indices, state_indices=None, token_position_offset=0),
        poll(), failure_exception(), get_transfer_metric(), clear(),
        abort()."""

        def pop_decode_prefix_len(self):
            return 0

        def should_send_kv_chunk(self, num_pages, last_chunk):
            return num_pages > 0

        def clear(self):
            pass

        def abort(self):
            pass

    class BaseKVReceiver:
        """SGLang's BaseKVReceiver: init(prefill_dp_rank),
        send_metadata(kv_indices, aux_index=None, state_indices=None,
        decode_prefix_len=None), poll(), failure_exception(), clear(),
        abort()."""

        def clear(self):
            pass

        def abort(self):
            pass


@dataclasses.dataclass
class TransferMetric:
    """What get_transfer_metric() reports (SGLang's KVTransferMetric
    fields)."""
    transfer_latency_s: float = None
    alloc_latency_s: float = None
    transfer_total_bytes: int = None


class EmbgwKVManager(BaseKVManager):
    """One engine process's attachment to its gateway, and the engine's
    embedding buffer that kv_indices index.

    args: SGLang's KVArgs (engine_rank is the TP rank); server_args may
    carry embgw_socket, embgw_port, embgw_peer, embgw_tp_size (else the
    environment's EMBGW_SOCKET, EMBGW_PORT, EMBGW_PEER, or `socket=`...).
    """

    def __init__(self, args, disaggregation_mode, server_args,
                 is_mla_backend=False, *, socket=None, port=None, peer=None,
                 tp_size=None, buffer=None, client=None):
        def pick(given, attr, env, default):
            if given is not None:
                return given
            v = getattr(server_args, attr, None)
            return v if v is not None else os.environ.get(env, default)
        self.args = args
        self.mode = disaggregation_mode
        self.rank = int(getattr(args, "engine_rank", 0) or 0)
        self.tp_size = int(pick(tp_size, "embgw_tp_size", "EMBGW_TP_SIZE",
                                getattr(server_args, "tp_size", 1) or 1))
        self.socket = pick(socket, "embgw_socket", "EMBGW_SOCKET", None)
        self.port = pick(port, "embgw_port", "EMBGW_PORT", "p0")
        # peers by name (None: the port's only peer); an int is an id
        # from Client.peers()
        self.peer = pick(peer, "embgw_peer", "EMBGW_PEER", None)
        self.buffer = buffer
        self.aux = {}           # aux_index -> the room's aux record
        self._client = client
        if client is None and not self.socket:
            raise ValueError("no gateway socket: set embgw_socket in the "
                             "server args or EMBGW_SOCKET")

    def client(self):
        if self._client is None:
            from .client import Client
            self._client = Client(self.socket, self.port,
                                  name="sglang-tp%d" % self.rank,
                                  lease_thread=True)
        return self._client

    def register_buffer(self, tensor):
        """The engine's embedding buffer, (rows, hidden) of the pool's
        dtype: kv_indices are its rows."""
        self.buffer = tensor

    def register_to_bootstrap(self):
        """Nothing to register: the gateway is the rendezvous."""
        return None

    def close(self):
        if self._client is not None:
            self._client.close()
            self._client = None


def _raise(conn):
    e = conn.failure_exception()
    if e is not None:
        raise e


class EmbgwKVSender(BaseKVSender):
    """The encode side of one request: `bootstrap_room` to the language
    ranks `dest_tp_ranks` (their count is the room's nranks)."""

    def __init__(self, mgr, bootstrap_addr, bootstrap_room, dest_tp_ranks,
                 pp_rank, req_has_disagg_prefill_dp_rank=False):
        self.mgr = mgr
        self.room = int(bootstrap_room)
        self.nranks = len(dest_tp_ranks) if dest_tp_ranks else 1
        self.attempt = 0
        self.num_tokens = 0
        self._rows = []
        self._sent_rows = 0
        self._conn = None
        self._t0 = None
        self._t1 = None

    def _open(self):
        return _engines.open_sender(
            self.mgr.client(), "room-%d" % self.room, self.attempt,
            self.nranks, self.num_tokens, False, room=self.room)

    def init(self, num_kv_indices, aux_index=None):
        """Open the room for num_kv_indices tokens (its blocks are
        allocated while the encoder runs)."""
        self.num_tokens = int(num_kv_indices)
        self._t0 = time.monotonic()
        self._conn = self._open()

    def send(self, kv_indices, state_indices=None, token_position_offset=0):
        """Rows kv_indices of the manager's buffer are the next tokens
        (from token_position_offset); the room is written and committed
        once all num_kv_indices are given."""
        import torch
        idx = torch.as_tensor(kv_indices, dtype=torch.long)
        if token_position_offset != self._sent_rows:
            raise ValueError("room %d: chunk at token %d, expected %d"
                             % (self.room, token_position_offset,
                                self._sent_rows))
        self._rows.append(idx)
        self._sent_rows += len(idx)
        if self._sent_rows > self.num_tokens:
            raise ValueError("room %d: %d rows sent for %d tokens"
                             % (self.room, self._sent_rows, self.num_tokens))
        if self._sent_rows == self.num_tokens:
            self._conn.send(self.mgr.buffer[torch.cat(self._rows)])

    def poll(self):
        st = self._conn.poll() if self._conn is not None else \
            KVPoll.Bootstrapping
        if st == KVPoll.Success and self._t1 is None:
            self._t1 = time.monotonic()
        return st

    @property
    def cached(self):
        return self._conn is not None and _engines.cached(self._conn)

    def failure_exception(self):
        """Raise why the room failed (SGLang catches it and aborts the
        request with its text)."""
        _raise(self._conn)

    def get_transfer_metric(self):
        lat = None if self._t1 is None else self._t1 - self._t0
        c = self.mgr.client()
        return TransferMetric(lat, None,
                              self.num_tokens * c.hidden_size *
                              c.pool["embedding"].itemsize)

    def retry(self):
        """Open attempt + 1 after a failure (the language ranks do the
        same): the rows given are sent again."""
        self.attempt += 1
        self._conn = self._open()
        if self._sent_rows == self.num_tokens:
            import torch
            self._conn.send(self.mgr.buffer[torch.cat(self._rows)])

    def clear(self):
        self._rows = []

    def abort(self):
        if self._conn is not None:
            self._conn.abort()


def _use_content(name):
    return name is not None and _engines.content_key(name) is not None


class EmbgwKVReceiver(BaseKVReceiver):
    """One language rank's side of one request."""

    def __init__(self, mgr, bootstrap_addr, bootstrap_room=None, *,
                 content=None):
        self.mgr = mgr
        self.room = int(bootstrap_room)
        self.content = content
        self.attempt = 0
        self._conn = None
        self._dest = None           # (kv_indices, aux_index)
        self._done = False
        self._failed = None

    def _open(self):
        m = self.mgr
        name = self.content if self.content is not None else \
            "room-%d" % self.room
        return _engines.open_receiver(
            m.client(), name, self.attempt, m.peer, m.rank, m.tp_size,
            _use_content(self.content), room=self.room)

    def init(self, prefill_dp_rank=0):
        """Open the room for this rank (prefill_dp_rank: one gateway peer
        serves every DP rank of the encoder; it is not needed here)."""
        self._conn = self._open()

    def send_metadata(self, kv_indices, aux_index=None, state_indices=None,
                      decode_prefix_len=None):
        """The rows of the manager's buffer the room's tokens go to."""
        import torch
        self._dest = (torch.as_tensor(kv_indices, dtype=torch.long),
                      aux_index)

    def poll(self):
        if self._failed is not None:
            return KVPoll.Failed
        if self._done:
            return KVPoll.Success
        if self._conn is None:
            return KVPoll.Bootstrapping
        st = self._conn.poll()
        if st == KVPoll.Failed:
            return KVPoll.Failed
        if self._dest is None:
            return KVPoll.WaitingForInput
        if st != KVPoll.Success:
            return KVPoll.Transferring
        self._land()
        return KVPoll.Failed if self._failed else KVPoll.Success

    def _land(self):
        rows, aux_index = self._dest
        n = self._conn.num_tokens
        if len(rows) != n:
            self._failed = (-22, "room %d holds %d tokens, %d rows given"
                            % (self.room, n, len(rows)))
            self._conn.release()
            return
        c = self.mgr.client()
        import torch
        tmp = torch.empty((n, c.hidden_size), dtype=c.torch_dtype)
        got = self._conn.recv(embeddings=tmp)
        self._conn.release()
        buf = self.mgr.buffer
        buf[rows.to(buf.device)] = tmp.to(buf.device)
        if aux_index is not None:
            self.mgr.aux[aux_index] = got.aux
        self._done = True

    @property
    def cached(self):
        return self._conn is not None and _engines.cached(self._conn)

    def failure_exception(self):
        if self._failed is not None:
            from .connector import EmbeddingTransferError
            raise EmbeddingTransferError(self.room, *self._failed)
        if self._conn is not None:
            _raise(self._conn)

    def retry(self):
        """Open attempt + 1 after a failure (every rank and the encoder do
        the same); the destination named stays."""
        if self._conn is not None and not self._conn.ended:
            self._conn.abort()
        self.attempt += 1
        self._failed = None
        self._done = False
        self._conn = self._open()

    def clear(self):
        self._dest = None

    def abort(self):
        if self._conn is not None and not self._done:
            self._conn.abort()


def create_part_req_id(req_id, part_idx):
    """The name of part `part_idx` of request `req_id`, as SGLang's
    multimodal path names it; each part's room is named by it."""
    return "%s_local_part_%d" % (req_id, part_idx)


def part_room(req_id, part_idx):
    """The room id of part `part_idx` of request `req_id` (the encoder
    sending that part passes it as its bootstrap_room)."""
    return _engines.room_id(create_part_req_id(req_id, part_idx))


class WaitingImageRequestStatus(enum.IntEnum):
    """SGLang's states of a request waiting for its parts."""
    FAIL = -1
    PENDING = 0
    SUCCESS = 1
    TIMEOUT = -2


class MultiPartReceiver:
    """One language rank's side of a request whose embeddings come in
    `len(parts)` parts, each from its own encoder.

    parts: one (peer, modality) per part, in part order (peer: the encode
    peer's name on this gateway; modality: any label, e.g.
    "image"); contents: optional names (e.g. the items' hashes) whose
    content keys the parts carry, so that a repeat is served from the
    gateway's cache.

    poll() is PENDING until every part is in, SUCCESS, FAIL once a part
    failed max_attempts times (the other parts are aborted), TIMEOUT at
    the deadline. part_states() are the parts' KVPoll states, for a TP
    group to reduce (min) before retry(parts) on every rank.
    """

    def __init__(self, mgr, req_id, parts, contents=None, max_attempts=3,
                 timeout_s=120.0):
        if not parts:
            raise ValueError("a multi-part request needs at least one part")
        self.mgr = mgr
        self.req_id = req_id
        self.parts = list(parts)
        self.contents = list(contents) if contents else None
        self.max_attempts = max_attempts
        self.deadline = time.monotonic() + timeout_s
        self.attempts = [0] * len(parts)
        self.failures = []          # (part, attempt, code, reason)
        self.status = WaitingImageRequestStatus.PENDING
        self.error_msg = None
        self.error_code = None
        self._rx = [self._open(i) for i in range(len(parts))]
        self._data = [None] * len(parts)

    def _open(self, i):
        m = self.mgr
        peer = self.parts[i][0]
        # the room of EmbgwKVSender with part_room() as its bootstrap_room;
        # the content name, where given, is the key the gateway caches
        room = part_room(self.req_id, i)
        name = self.contents[i] if self.contents else "room-%d" % room
        return _engines.open_receiver(
            m.client(), name, self.attempts[i], peer, m.rank, m.tp_size,
            _use_content(self.contents[i] if self.contents else None),
            room=room)

    def part_states(self):
        """Each part's state (a part already copied out says Success;
        after FAIL or TIMEOUT every part says Failed)."""
        if self.status in (WaitingImageRequestStatus.FAIL,
                           WaitingImageRequestStatus.TIMEOUT):
            return [KVPoll.Failed] * len(self._rx)
        return [KVPoll.Success if self._data[i] is not None
                else r.poll() for i, r in enumerate(self._rx)]

    def poll(self):
        if self.status != WaitingImageRequestStatus.PENDING:
            return self.status
        states = self.part_states()
        for i, st in enumerate(states):
            if st == KVPoll.Success and self._data[i] is None:
                self._data[i] = self._rx[i].recv()
                self._rx[i].release()
        if all(d is not None for d in self._data):
            self.status = WaitingImageRequestStatus.SUCCESS
        elif time.monotonic() > self.deadline:
            self._end(WaitingImageRequestStatus.TIMEOUT, -1015,
                      "parts not in by the deadline")
        return self.status

    def retry(self, parts):
        """Parts `parts` failed (on some rank): open attempt + 1 for each
        (their encoders do the same); FAIL once one has no attempt left."""
        if self.status != WaitingImageRequestStatus.PENDING:
            return
        for i in parts:
            code, reason = _engines.failure(self._rx[i])
            self.failures.append((i, self.attempts[i], code, reason))
            if code == -1015 and time.monotonic() < self.deadline:
                # its encoder has not opened this attempt yet: wait again
                self._rx[i] = self._open(i)
                continue
            if self.attempts[i] + 1 >= self.max_attempts:
                self._end(WaitingImageRequestStatus.FAIL, code,
                          "part %d: %s after %d attempts"
                          % (i, reason, self.attempts[i] + 1))
                return
            r = self._rx[i]
            if not r.ended:
                if r.poll() == KVPoll.Success:
                    r.release()
                else:
                    r.abort()
            self._data[i] = None
            self.attempts[i] += 1
            self._rx[i] = self._open(i)

    def _end(self, status, code, msg):
        self.status = status
        self.error_code = code
        self.error_msg = msg
        for i, r in enumerate(self._rx):
            if self._data[i] is None and not r.ended:
                r.abort()       # a part copied out is released already

    def abort(self):
        if self.status == WaitingImageRequestStatus.PENDING:
            self._end(WaitingImageRequestStatus.FAIL, -1020, "aborted")

    def cached(self):
        """Per part: served without a transfer of its own."""
        return [_engines.cached(r) for r in self._rx]

    def get_embedding(self, is_concat=False):
        """The parts' embeddings in part order, or (is_concat) one tensor
        per modality, the parts concatenated in part order."""
        if self.status != WaitingImageRequestStatus.SUCCESS:
            raise RuntimeError("request %s: status %s"
                               % (self.req_id, self.status.name))
        embs = [d.embeddings for d in self._data]
        if not is_concat:
            return embs
        import torch
        groups = {}
        for (_, modality), e in zip(self.parts, embs):
            groups.setdefault(modality, []).append(e)
        return {m: torch.cat(t) for m, t in groups.items()}

    def aux(self):
        return [d.aux for d in self._data]


def install(backend="mooncake"):
    """Route SGLang's get_kv_class for `backend` (a TransferBackend value)
    to these classes: run it in every SGLang process before the scheduler
    starts (e.g. from a sitecustomize), then start SGLang with
    --disaggregation-transfer-backend `backend`."""
    from sglang.srt.disaggregation import utils
    original = utils.get_kv_class
    if getattr(original, "_embgw", False):
        return
    mapping = {"MANAGER": EmbgwKVManager, "SENDER": EmbgwKVSender,
               "RECEIVER": EmbgwKVReceiver}

    def get_kv_class(transfer_backend, class_type):
        if getattr(transfer_backend, "value", transfer_backend) == backend \
                and class_type.name in mapping:
            return mapping[class_type.name]
        return original(transfer_backend, class_type)

    get_kv_class._embgw = True
    utils.get_kv_class = get_kv_class
