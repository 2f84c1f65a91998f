# SPDX-License-Identifier: BSD-3-Clause
"""embgw: an inference engine's side of a local embgw gateway.

    with embgw.Client("/run/embgw/attach.sock", "lang0") as c:
        room = c.recv_room(request_id, peer="enc0", rank=tp_rank,
                           nranks=tp_size)
        while room.poll() not in (KVPoll.Success, KVPoll.Failed):
            c.wait(100)
        embeddings = room.gather()
        room.release()

ctypes over libegw_client.so (lib/client), loaded on first use; the
contract is doc/client.md. embgw.aio waits in an asyncio loop; embgw.cuda
moves rooms' tokens to and from CUDA devices.
"""
from .client import (Client, DTYPES, LOOKUP_IN_FLIGHT, LOOKUP_LANDED, Peer,
                     LOOKUP_NONE, HeldRoomWarning, RoleError, content_key)
from .room import EncodeRoom, KVPoll, LanguageRoom, Room
from ._lib import strerror
from .connector import (EmbeddingReceiver, EmbeddingSender,
                        EmbeddingTransferError, Received)

__all__ = ["Client", "DTYPES", "LOOKUP_IN_FLIGHT", "LOOKUP_LANDED",
           "LOOKUP_NONE", "content_key", "EmbeddingReceiver", "EmbeddingSender",
           "EmbeddingTransferError", "EncodeRoom", "HeldRoomWarning",
           "KVPoll", "LanguageRoom", "Peer", "Received", "RoleError", "Room",
           "strerror"]
