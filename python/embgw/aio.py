# SPDX-License-Identifier: BSD-3-Clause
"""asyncio beside an engine's own: wait for a client's completions on its
fileno() in the running loop, and poll rooms or connectors until they end,
without a thread and without spinning.

    await embgw.aio.client_wait(client, 1.0)     # True: events waiting
    state = await embgw.aio.until_done(receiver, timeout=30)
"""
import asyncio
import time

from .room import KVPoll

TERMINAL = (KVPoll.Success, KVPoll.Failed)


async def client_wait(client, timeout=None):
    """Wait until the client has events waiting (True) or `timeout`
    seconds passed (False). Raises ConnectionResetError when the gateway
    went away. Takes no events: call client.progress() (or poll a room)."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    fd = client.fileno()
    while True:
        if client.arm():
            return True
        left = None if deadline is None else deadline - loop.time()
        if left is not None and left <= 0:
            return False
        if client.max_sleep_ms is not None:
            cap = client.max_sleep_ms / 1000.0
            left = cap if left is None else min(left, cap)
        woke = loop.create_future()
        loop.add_reader(fd, lambda: woke.done() or woke.set_result(True))
        try:
            await asyncio.wait_for(woke, left)
        except asyncio.TimeoutError:
            pass
        finally:
            loop.remove_reader(fd)
        # the socket hung up, or completions came: arm() says which


async def until_done(obj, timeout=None):
    """Poll `obj` (a Room, an EmbeddingSender or an EmbeddingReceiver)
    until it is Success or Failed, sleeping in the loop in between.
    @return the final KVPoll state; TimeoutError after `timeout` s."""
    client = obj.client
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        state = obj.poll()
        if state in TERMINAL:
            return state
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError("room %d still %s after %.1f s"
                               % (obj.room, KVPoll(state).name, timeout))
        try:
            await client_wait(client, left)
        except ConnectionResetError:
            pass        # the client failed its rooms: poll() says Failed
