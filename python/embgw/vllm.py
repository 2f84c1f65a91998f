# SPDX-License-Identifier: BSD-3-Clause
"""vLLM's encoder-cache (EC) connector over embgw, both roles.

vLLM loads it out of tree from its EC transfer configuration
(doc/engines.md, section 4):

    --ec-transfer-config '{"ec_connector": "EmbgwECConnector",
        "ec_connector_module_path": "embgw.vllm", "ec_role": "ec_consumer",
        "ec_connector_extra_config": {"socket": "/run/embgw/lang-0.sock",
                                      "port": "p0", "peer": "enc-0"}}'

The class has the shape of vLLM's ECConnectorBase (the methods, their
arguments and the order the engine calls them in); it derives from it when
vLLM is importable and from a stand-in with the same methods otherwise, so
`import embgw.vllm` needs no vLLM.

An encoder output is named by its mm_hash: the producer (encode instance)
and every consumer rank derive the room id and the content key from it,
so the two instances exchange nothing but the request itself.

Consumer (language instance), per multimodal item:
  scheduler  ensure_cache_available()  asks the workers to fetch the item
             (metadata), defers the request until every TP rank holds it
  workers    start_load_caches()       open the room for their rank, poll
             build_connector_worker_meta()  report each item's state
  scheduler  update_connector_output() combines the ranks' reports: all
             Success -> ready; one Failed -> the others abort, and the item
             is fetched again with attempt + 1 (max_attempts), or given up
             (vLLM then runs the encoder itself)
  scheduler  has_cache_item() / update_state_after_alloc() -> load
  workers    start_load_caches()       encoder_cache[mm_hash] = a tensor on
             the worker's device; the room is released
Items are shared: two requests with the same mm_hash use one room. Each
item has a deadline (deadline_s) from its first fetch.

Producer (encode instance): save_caches() opens the room for the
consumer's TP ranks and sends the encoder output; get_finished() polls and
retries a failed room with attempt + 1, as the consumer does.
"""
import collections
import dataclasses
import enum
import logging
import os
import time

from . import _engines
from .room import KVPoll

log = logging.getLogger("embgw.vllm")
SENT_MEMORY = 4096      # mm_hashes a producer remembers having sent
BOOTSTRAP_TIMEOUT = -1015   # the encode side never opened the room

try:        # the real base classes when vLLM is there
    from vllm.distributed.ec_transfer.ec_connector.base import (  # noqa
        ECConnectorBase, ECConnectorMetadata, ECConnectorRole,
        ECConnectorWorkerMetadata)
    HAVE_VLLM = True
except ImportError:
    HAVE_VLLM = False

    class ECConnectorRole(enum.Enum):
        """Which process the connector lives in."""
        SCHEDULER = 0
        WORKER = 1

    class ECConnectorMetadata:
        """Scheduler -> workers, once per step."""

    class ECConnectorWorkerMetadata:
        """Workers -> scheduler, once per step; the ranks' are combined
        with aggregate()."""

        def aggregate(self, other):
            raise NotImplementedError

    class ECConnectorBase:
        """The methods vLLM's ECConnectorBase has, with its arguments and
        defaults (doc/engines.md names the interface's commit)."""

        def __init__(self, vllm_config, role):
            self._connector_metadata = None
            self._vllm_config = vllm_config
            self._role = role
            cfg = vllm_config.ec_transfer_config
            if cfg is None:
                raise ValueError("ec_transfer_config must be set for an EC "
                                 "connector")
            self._is_producer = cfg.is_ec_producer
            self._is_consumer = getattr(cfg, "is_ec_consumer",
                                        not cfg.is_ec_producer)

        role = property(lambda self: self._role)
        is_producer = property(lambda self: self._is_producer)
        is_consumer = property(lambda self: self._is_consumer)

        def shutdown(self):
            return None

        # worker side
        def bind_connector_metadata(self, connector_metadata):
            self._connector_metadata = connector_metadata

        def clear_connector_metadata(self):
            self._connector_metadata = None

        def _get_connector_metadata(self):
            assert self._connector_metadata is not None
            return self._connector_metadata

        def register_caches(self, ec_caches):
            return None

        def start_load_caches(self, encoder_cache, **kwargs):
            raise NotImplementedError

        def save_caches(self, encoder_cache, mm_hash, **kwargs):
            raise NotImplementedError

        def get_finished(self, finished_req_ids):
            return None, None

        def build_connector_worker_meta(self):
            return None

        # scheduler side
        def has_cache_item(self, identifier):
            raise NotImplementedError

        def ensure_cache_available(self, request, num_computed_tokens):
            return True

        def update_state_after_alloc(self, request, index):
            raise NotImplementedError

        def build_connector_meta(self, scheduler_output):
            raise NotImplementedError

        def update_connector_output(self, connector_output):
            return None

        def request_finished(self, request):
            return False, None

        @classmethod
        def receive_addresses(cls, vllm_config):
            return []

        def has_pending_push_work(self):
            return False


# ---- what passes between the scheduler and the workers ------------------
@dataclasses.dataclass
class Fetch:
    mm_hash: str
    attempt: int


@dataclasses.dataclass
class Load:
    mm_hash: str
    attempt: int
    num_tokens: int


@dataclasses.dataclass
class EmbgwECConnectorMetadata(ECConnectorMetadata):
    """One step's orders to every worker: rooms to open (fetch), items to
    copy into the encoder cache (load), rooms to give up (drop: mm_hash ->
    attempt)."""
    fetch: list = dataclasses.field(default_factory=list)
    load: list = dataclasses.field(default_factory=list)
    drop: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Report:
    """One rank's word on one item: its state for `attempt`, why it failed,
    whether the gateway served it without a transfer, whether it is in the
    rank's encoder cache now."""
    attempt: int
    state: int
    code: int = 0
    reason: str = ""
    cached: bool = False
    loaded: bool = False


@dataclasses.dataclass
class EmbgwECWorkerMetadata(ECConnectorWorkerMetadata):
    """mm_hash -> {tp rank: Report}; aggregate() merges the ranks'."""
    reports: dict = dataclasses.field(default_factory=dict)

    def aggregate(self, other):
        out = {h: dict(r) for h, r in self.reports.items()}
        for h, ranks in (other.reports if other else {}).items():
            out.setdefault(h, {}).update(ranks)
        return EmbgwECWorkerMetadata(out)


class Item(enum.Enum):
    """An item's state in the consumer's scheduler."""
    FETCHING = 1    # the ranks are receiving this attempt
    READY = 2       # every rank holds it
    LOADING = 3     # the load is ordered
    LOADED = 4      # every rank put it into its encoder cache
    DEAD = 5        # given up: vLLM runs the encoder itself


class _SchedItem:
    def __init__(self, mm_hash, attempt, deadline):
        self.mm_hash = mm_hash
        self.attempt = attempt
        self.state = Item.FETCHING
        self.deadline = deadline
        self.reports = {}           # rank -> Report for self.attempt
        self.requests = set()       # request ids that need it
        self.failures = []          # (attempt, rank, code, reason)
        self.cached = False

    def __repr__(self):
        return "<item %s attempt %d %s>" % (self.mm_hash, self.attempt,
                                            self.state.name)


def _extra(cfg, key, default):
    """A value from ec_connector_extra_config."""
    get = getattr(cfg, "get_from_extra_config", None)
    if get is not None:
        return get(key, default)
    return (getattr(cfg, "ec_connector_extra_config", None) or {}) \
        .get(key, default)


def _tp_rank_size(vllm_config):
    pc = getattr(vllm_config, "parallel_config", None)
    size = getattr(pc, "tensor_parallel_size", 1) or 1
    try:
        from vllm.distributed.parallel_state import get_tp_group
        return get_tp_group().rank_in_group, size
    except (ImportError, AssertionError, AttributeError):
        return int(os.environ.get("EMBGW_TP_RANK", "0")), size


def _mm_hash(request, index):
    f = request.mm_features[index]
    return getattr(f, "identifier", None) or getattr(f, "mm_hash")


def _num_embeds(request, index):
    fn = getattr(request, "get_num_encoder_embeds", None)
    if fn is not None:
        return fn(index)
    return request.mm_features[index].mm_position.length


class EmbgwECConnector(ECConnectorBase):
    """The EC connector; ec_connector_extra_config keys:

    socket       the local gateway's attach socket (required)
    port         its port name (default "p0")
    peer         consumer: the encode peer's name (default: the port's only
                 peer; an int is an id from Client.peers()); a peer not
                 known yet is waited for until the gateway's bootstrap_ms
    consumer_tp  producer: the consumer's TP size (default 1)
    max_attempts attempts per item before giving up (default 3)
    deadline_s   an item's deadline from its first fetch (default 120)
    device       worker: where loaded tensors go (default: the current CUDA
                 device, else cpu)
    """

    def __init__(self, vllm_config, role):
        super().__init__(vllm_config, role)
        cfg = vllm_config.ec_transfer_config
        self.socket = _extra(cfg, "socket", None)
        if not self.socket:
            raise ValueError("ec_connector_extra_config.socket must name the "
                             "gateway's attach socket")
        self.port = _extra(cfg, "port", "p0")
        # a name (an int: an id from Client.peers())
        self.peer = _extra(cfg, "peer", None)
        self.consumer_tp = int(_extra(cfg, "consumer_tp", 1))
        self.max_attempts = int(_extra(cfg, "max_attempts", 3))
        self.deadline_s = float(_extra(cfg, "deadline_s", 120.0))
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1, got %d"
                             % self.max_attempts)
        self.tp_rank, self.tp_size = _tp_rank_size(vllm_config)
        self._device = _extra(cfg, "device", None)
        self._client = None
        # scheduler side (consumer)
        self._items = {}            # mm_hash -> _SchedItem
        self._req_items = {}        # request id -> set of mm_hash
        self._fetch, self._load, self._drop = [], [], {}
        self._last = collections.OrderedDict()  # mm_hash -> last attempt
        self.given_up = {}          # mm_hash -> last reason, for logs/tests
        # worker side
        self._rooms = {}            # consumer: mm_hash -> _WorkerItem
        self._sends = {}            # producer: mm_hash -> _Send
        self._sent = collections.OrderedDict()  # producer: recently sent
        self._done_send = set()
        self._done_recv = set()

    # ---- the client, made on first use in the process that uses it ------
    def client(self):
        if self._client is None:
            from .client import Client
            who = "sched" if self.role == ECConnectorRole.SCHEDULER else \
                "tp%d" % self.tp_rank
            self._client = Client(self.socket, self.port,
                                  name="vllm-%s-%s" % (
                                      "enc" if self.is_producer else "lang",
                                      who), lease_thread=True)
        return self._client

    def shutdown(self):
        for w in list(self._rooms.values()):
            w.close()
        self._rooms.clear()
        for s in self._sends.values():
            s.s.abort()
        self._sends.clear()
        if self._client is not None:
            self._client.close()
            self._client = None

    def _use_content(self):
        return _engines.content_key("x") is not None

    # =================== scheduler side ==================================
    def _lookup(self, mm_hash):
        """The language gateway holds landed data for the item (a room
        for it will be served from its cache)."""
        key = _engines.content_key(mm_hash)
        if key is None or not self.is_consumer:
            return False
        c = self.client()
        if not _engines.has_lookup(c):
            return False
        return bool(c.lookup(key))

    def _item(self, mm_hash, request_id=None):
        it = self._items.get(mm_hash)
        if it is None:
            # an item fetched before is fetched again under a fresh attempt
            # (its earlier rooms have ended; the gateway's cache serves it)
            last = self._last.pop(mm_hash, None)
            it = _SchedItem(mm_hash, 0 if last is None else last + 1,
                            time.monotonic() + self.deadline_s)
            self._items[mm_hash] = it
            self._fetch.append(Fetch(mm_hash, it.attempt))
        if request_id is not None:
            it.requests.add(request_id)
            self._req_items.setdefault(request_id, set()).add(mm_hash)
        return it

    def _forget(self, it):
        del self._items[it.mm_hash]
        self._last[it.mm_hash] = it.attempt
        while len(self._last) > SENT_MEMORY:
            self._last.popitem(last=False)

    def _needed(self, request, num_computed_tokens):
        """(index, mm_hash) of the request's items not yet behind
        num_computed_tokens."""
        for i, f in enumerate(request.mm_features):
            pos = getattr(f, "mm_position", None)
            if pos is not None and \
                    pos.offset + pos.length <= num_computed_tokens:
                continue
            yield i, _mm_hash(request, i)

    def ensure_cache_available(self, request, num_computed_tokens):
        """Defer the request (False) while one of its items is still on its
        way to some rank; True once each is held by every rank or given
        up."""
        if not self.is_consumer:
            return True
        self._expire()
        ready = True
        for _, h in self._needed(request, num_computed_tokens):
            it = self._item(h, request.request_id)
            if it.state == Item.FETCHING:
                ready = False
        return ready

    def has_cache_item(self, identifier):
        """Every rank holds the item (or the gateway has it cached, for an
        item this connector has not fetched)."""
        if not self.is_consumer:
            return False
        it = self._items.get(identifier)
        if it is None:
            if not self._lookup(identifier):
                return False
            it = self._item(identifier)     # served from the cache
            it.cached = True
            return True
        if it.state == Item.LOADED:
            # loaded before and gone from vLLM's cache since (preempted,
            # re-queued): only the gateway's content cache has it now
            return self._use_content()
        return it.state in (Item.READY, Item.LOADING)

    def update_state_after_alloc(self, request, index):
        if not self.is_consumer:
            return
        h = _mm_hash(request, index)
        it = self._items.get(h)
        if it is None or it.state == Item.DEAD:
            return
        it.requests.add(request.request_id)
        self._req_items.setdefault(request.request_id, set()).add(h)
        if it.state == Item.LOADED:
            if not self._use_content():
                return
            # a fresh room, served from the gateway's cache
            it.attempt += 1
            it.reports = {}
            it.state = Item.LOADING
            self._load.append(Load(h, it.attempt, _num_embeds(request, index)))
        elif it.state == Item.READY or \
                (it.state == Item.FETCHING and it.cached):
            self._load.append(Load(h, it.attempt,
                                   _num_embeds(request, index)))
            if it.state != Item.FETCHING:
                it.state = Item.LOADING

    def build_connector_meta(self, scheduler_output):
        self._expire()
        meta = EmbgwECConnectorMetadata(self._fetch, self._load, self._drop)
        self._fetch, self._load, self._drop = [], [], {}
        return meta

    def update_connector_output(self, connector_output):
        """Combine the ranks' reports: all Success -> READY (LOADED once
        all loaded); any Failed -> the other ranks give up this attempt
        and the item is fetched again with attempt + 1, or given up."""
        meta = getattr(connector_output, "ec_connector_worker_meta", None)
        for h, ranks in (meta.reports if meta else {}).items():
            it = self._items.get(h)
            if it is None:
                continue
            for rank, rep in ranks.items():
                if rep.attempt == it.attempt:
                    it.reports[rank] = rep
            self._combine(it)

    def _combine(self, it):
        reps = it.reports
        failed = [(r, p) for r, p in reps.items()
                  if p.state == KVPoll.Failed]
        if failed and it.state in (Item.FETCHING, Item.READY, Item.LOADING):
            if all(p.code == BOOTSTRAP_TIMEOUT for _, p in failed) and \
                    time.monotonic() < it.deadline and it.requests:
                # the producer has not opened this attempt yet (its earlier
                # one may still be waiting to fail): wait for it again,
                # under the same attempt, until the item's deadline
                self._drop[it.mm_hash] = it.attempt
                it.reports = {}
                self._fetch.append(Fetch(it.mm_hash, it.attempt))
                return
            for r, p in failed:
                it.failures.append((it.attempt, r, p.code, p.reason))
            rank, p = failed[0]
            self._retry(it, "rank %d: %s (%d)" % (rank, p.reason, p.code))
            return
        if len(reps) < self.tp_size:
            return
        if all(p.loaded for p in reps.values()):
            it.state = Item.LOADED
            it.cached = all(p.cached for p in reps.values())
            if not it.requests:
                self._forget(it)
        elif it.state == Item.FETCHING and \
                all(p.state == KVPoll.Success for p in reps.values()):
            it.state = Item.READY
            it.cached = all(p.cached for p in reps.values())

    def _retry(self, it, why):
        """Attempt it.attempt failed on some rank: every rank gives it up;
        attempt + 1 if any is left and the deadline allows."""
        self._drop[it.mm_hash] = it.attempt
        it.reports = {}
        if it.attempt + 1 >= self.max_attempts or \
                time.monotonic() > it.deadline or not it.requests:
            self._give_up(it, "%s; attempt %d of %d" %
                          (why, it.attempt + 1, self.max_attempts))
            return
        log.warning("item %s attempt %d failed (%s): fetching attempt %d",
                    it.mm_hash, it.attempt, why, it.attempt + 1)
        it.attempt += 1
        it.state = Item.FETCHING
        self._fetch.append(Fetch(it.mm_hash, it.attempt))

    def _give_up(self, it, why):
        log.error("item %s given up: %s; the encoder runs here", it.mm_hash,
                  why)
        it.state = Item.DEAD
        self.given_up[it.mm_hash] = why
        self._drop[it.mm_hash] = it.attempt

    def _expire(self):
        now = time.monotonic()
        for it in self._items.values():
            if it.state == Item.FETCHING and now > it.deadline:
                self._give_up(it, "deadline of %.0f s passed at attempt %d"
                              % (self.deadline_s, it.attempt))

    def request_finished(self, request):
        """The request's items lose a reference; one no request needs any
        more is given up on every rank (its rooms aborted or released)."""
        for h in self._req_items.pop(request.request_id, ()):
            it = self._items.get(h)
            if it is None:
                continue
            it.requests.discard(request.request_id)
            if it.requests:
                continue
            if it.state != Item.LOADED:
                self._drop[h] = it.attempt
            self._forget(it)
        return False, None

    def item_state(self, mm_hash):
        """The scheduler's state of an item (None: not tracked)."""
        it = self._items.get(mm_hash)
        return None if it is None else it.state

    # =================== worker side =====================================
    def _dev(self):
        if self._device is None:
            import torch
            self._device = "cuda:%d" % torch.cuda.current_device() \
                if torch.cuda.is_available() else "cpu"
        return self._device

    def start_load_caches(self, encoder_cache, **kwargs):
        """Carry out the step's orders: give up dropped rooms, open fetched
        ones, poll, and put loaded items into encoder_cache[mm_hash] (a
        tensor on this worker's device); the room is released at once."""
        meta = self._connector_metadata
        if meta is None or not self.is_consumer:
            return
        for h, attempt in meta.drop.items():
            w = self._rooms.get(h)
            if w is not None and w.attempt <= attempt:
                w.close()
                self._rooms.pop(h)
        for f in meta.fetch:
            w = self._rooms.get(f.mm_hash)
            if w is None or w.attempt < f.attempt or \
                    w.state == KVPoll.Failed:
                if w is not None:
                    w.close()
                self._rooms[f.mm_hash] = _WorkerItem(self, f.mm_hash,
                                                     f.attempt)
        for w in self._rooms.values():
            w.step()
        for ld in meta.load:
            w = self._rooms.get(ld.mm_hash)
            if w is not None and w.loaded and w.attempt == ld.attempt:
                continue        # two requests, one item: loaded once
            if w is None or w.attempt != ld.attempt:
                # an item the gateway holds that this rank has not opened
                # (load() waits for it: it is served from the cache)
                w = _WorkerItem(self, ld.mm_hash, ld.attempt)
                self._rooms[ld.mm_hash] = w
            w.load(encoder_cache, ld.num_tokens)

    def wait_for_load(self):
        """Loads are synchronous: nothing is left in flight."""
        return None

    def save_caches(self, encoder_cache, mm_hash, **kwargs):
        """Producer: send the encoder output of mm_hash to the consumer's
        TP ranks (rank 0 sends: the output is the same on every rank). A
        send already in flight for the same mm_hash is shared."""
        if not self.is_producer or self.tp_rank != 0:
            return
        if mm_hash in self._sends or mm_hash in self._sent:
            return      # in flight, or landed (the consumer's gateway has it)
        self._sends[mm_hash] = _Send(self, mm_hash,
                                     encoder_cache[mm_hash].detach())

    def get_finished(self, finished_req_ids):
        """(sent mm_hashes, loaded mm_hashes) since the last call; the
        producer's sends progress (and retry) here."""
        for h, s in list(self._sends.items()):
            if s.step():
                del self._sends[h]
                self._done_send.add(h)
                if s.s.poll() == KVPoll.Success:
                    self._sent[h] = True
                    while len(self._sent) > SENT_MEMORY:
                        self._sent.popitem(last=False)
        for w in self._rooms.values():
            w.step()
        sent, self._done_send = self._done_send, set()
        got, self._done_recv = self._done_recv, set()
        return (sent or None), (got or None)

    def build_connector_worker_meta(self):
        """This rank's report on each item it holds or held this step."""
        if not self.is_consumer:
            return None
        reports = {}
        for h, w in list(self._rooms.items()):
            reports[h] = {self.tp_rank: w.report()}
            if w.loaded or w.state == KVPoll.Failed:
                w.close()
                del self._rooms[h]
        return EmbgwECWorkerMetadata(reports) if reports else None

    def has_pending_push_work(self):
        return bool(self._sends)


class _WorkerItem:
    """One consumer rank's room for one item and attempt."""

    def __init__(self, conn, mm_hash, attempt):
        self.conn = conn
        self.mm_hash = mm_hash
        self.attempt = attempt
        self.loaded = False
        self.state = KVPoll.Bootstrapping
        self.r = _engines.open_receiver(
            conn.client(), mm_hash, attempt, conn.peer, conn.tp_rank,
            conn.tp_size, conn._use_content())

    def step(self):
        if not self.loaded:
            self.state = self.r.poll()
        return self.state

    def wait(self, timeout_s):
        deadline = time.monotonic() + timeout_s
        while self.step() not in _engines.TERMINAL:
            left = deadline - time.monotonic()
            if left <= 0:
                log.error("item %s: not received within %.0f s",
                          self.mm_hash, timeout_s)
                return
            self.conn.client().wait(min(left, 0.1) * 1000)

    def load(self, encoder_cache, num_tokens):
        if self.step() not in _engines.TERMINAL:
            self.wait(self.conn.deadline_s)    # served from the cache
        if self.state != KVPoll.Success:
            log.error("item %s: load ordered in state %s", self.mm_hash,
                      self.state.name)
            return
        import torch
        n = self.r.num_tokens
        if num_tokens and num_tokens != n:
            log.warning("item %s: %d tokens received, the request has %d",
                        self.mm_hash, n, num_tokens)
        c = self.conn.client()
        out = torch.empty((n, c.hidden_size), dtype=c.torch_dtype,
                          device=self.conn._dev())
        self.r.recv(embeddings=out)
        self.r.release()
        encoder_cache[self.mm_hash] = out
        self.loaded = True
        self.conn._done_recv.add(self.mm_hash)

    def report(self):
        code, reason = _engines.failure(self.r)
        return Report(self.attempt, int(self.state), code, reason,
                      _engines.cached(self.r), self.loaded)

    def close(self):
        """Give the room up: abort it in flight, release it held."""
        if self.loaded or self.r.ended:
            return
        if self.state == KVPoll.Success:
            self.r.release()
        else:
            self.r.abort()


class _Send:
    """The producer's room for one mm_hash, retried with attempt + 1 when
    it fails (the consumer's ranks do the same)."""

    def __init__(self, conn, mm_hash, tensor):
        self.conn = conn
        self.mm_hash = mm_hash
        self.tensor = tensor
        self.attempt = 0
        self.deadline = time.monotonic() + conn.deadline_s
        self.failures = []
        self._open()

    def _open(self):
        c = self.conn
        self.s = _engines.open_sender(c.client(), self.mm_hash, self.attempt,
                                      c.consumer_tp, self.tensor.shape[0],
                                      c._use_content())
        self.s.send(self.tensor)

    @property
    def cached(self):
        return _engines.cached(self.s)

    def step(self):
        """@return True when done (sent, or given up)."""
        st = self.s.poll()
        if st == KVPoll.Success:
            return True
        if st != KVPoll.Failed:
            return False
        code, reason = _engines.failure(self.s)
        self.failures.append((self.attempt, code, reason))
        if self.attempt + 1 >= self.conn.max_attempts or \
                time.monotonic() > self.deadline:
            log.error("item %s: send given up after attempt %d: %s (%d)",
                      self.mm_hash, self.attempt, reason, code)
            return True
        log.warning("item %s: send attempt %d failed: %s (%d); retrying",
                    self.mm_hash, self.attempt, reason, code)
        self.attempt += 1
        self._open()
        return False
