# SPDX-License-Identifier: BSD-3-Clause
"""What the engine adapters (embgw.vllm, embgw.sglang) share: room ids and
content keys both sides derive from the same name, and opening connectors
with an attempt number and a content key where the client has them.

Rooms are named by content: the encode side and every language rank
compute the room id and the content key from the same string (vLLM's
mm_hash, SGLang's request id and part index), so no address, table or
bootstrap message passes between the engines.
"""
import hashlib
import inspect

from .connector import EmbeddingReceiver, EmbeddingSender
from .room import KVPoll

TERMINAL = (KVPoll.Success, KVPoll.Failed)


def room_id(name, attempt=None):
    """A non-zero 64-bit room id for `name` (str or bytes). `attempt` is
    folded in only where the client cannot carry an attempt number itself
    (then each retry is a room of its own)."""
    if isinstance(name, str):
        name = name.encode()
    if attempt is not None:
        name += b"#attempt=%d" % attempt
    h = hashlib.blake2b(name, digest_size=8, person=b"embgw-room").digest()
    return int.from_bytes(h, "little") or 1


def content_key(name):
    """The 16-byte content key of `name`: embgw.content_key where the
    package has it (the gateways' content cache), else None (no cache:
    rooms open without a key)."""
    from . import client as _client
    fn = getattr(_client, "content_key", None)
    if fn is None:
        import embgw
        fn = getattr(embgw, "content_key", None)
    return None if fn is None else fn(name)


def _takes(fn, name):
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def has_attempts():
    """The connectors take attempt= (both sides agree on a retry's
    number); without it each retry uses a room id of its own."""
    return _takes(EmbeddingReceiver.__init__, "attempt") or \
        _takes(EmbeddingReceiver.init, "attempt")


def has_lookup(client):
    return callable(getattr(client, "lookup", None))


def _make(cls, args, kwargs, attempt, content):
    """Construct `cls` and call init(); attempt and content go to
    whichever of the two takes them."""
    ctor, init = {}, {}
    for k, v in (("attempt", attempt), ("content", content)):
        if v is None or k == "attempt" and not has_attempts():
            continue
        if _takes(cls.__init__, k):
            ctor[k] = v
        elif _takes(cls.init, k):
            init[k] = v
    return cls(*args, **kwargs, **ctor), init


def _room(name, attempt, room):
    """The room id: `room` where the engine gives one, else derived from
    `name`; without attempt numbers a retry gets an id of its own."""
    if has_attempts():
        return room if room is not None else room_id(name)
    if room is not None and attempt == 0:
        return room
    return room_id(name, attempt or None)


def open_receiver(client, name, attempt, peer, rank, nranks, use_content,
                  room=None):
    """An EmbeddingReceiver for `name`'s room, attempt `attempt`, opened
    (with `name`'s content key when use_content)."""
    key = content_key(name) if use_content else None
    rid = _room(name, attempt, room)
    r, init = _make(EmbeddingReceiver, (client, rid),
                    dict(peer=peer, rank=rank, nranks=nranks), attempt, key)
    r.init(**init)
    return r


def open_sender(client, name, attempt, nranks, num_tokens, use_content,
                mrope_delta=0, cookie=0, room=None):
    """An EmbeddingSender for `name`'s room, attempt `attempt`, opened for
    `num_tokens` tokens."""
    key = content_key(name) if use_content else None
    rid = _room(name, attempt, room)
    s, init = _make(EmbeddingSender, (client, rid), dict(nranks=nranks),
                    attempt, key)
    s.init(num_tokens, mrope_delta=mrope_delta, cookie=cookie, **init)
    return s


def cached(connector):
    """The room was served from the gateway's content cache or by another
    room's transfer (no transfer of its own)."""
    room = getattr(connector, "_room", None)
    return bool(getattr(connector, "cached", False) or
                getattr(room, "cached", False))


def failure(connector):
    """(code, reason) of a failed connector."""
    e = connector.failure_exception()
    if e is None:
        return 0, ""
    return e.code, e.reason
