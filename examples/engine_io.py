# SPDX-License-Identifier: BSD-3-Clause
"""What both example workers do around their loops: attach to the local
gateway, sleep when nothing moved, log."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))
import embgw  # noqa: E402

# how long one attach may take: a loaded host answers late
ATTACH_MS = 30000
ATTACH_TRIES = 5


def log(*a):
    print(*a, flush=True)


def attach(socket, port, name):
    """An embgw.Client with the lease kept from a thread (a long forward
    pass is not a hang). A gateway whose control thread got no CPU for a
    second refuses the attach as late (ETIMEDOUT): tried again, 5 times
    at most; any other refusal is final."""
    for attempt in range(1, ATTACH_TRIES + 1):
        try:
            return embgw.Client(socket, port, name=name, lease_thread=True,
                                timeout_ms=ATTACH_MS)
        except TimeoutError as e:
            if attempt == ATTACH_TRIES:
                raise
            log("%s: attach %d of %d: %s; again" % (name, attempt,
                                                    ATTACH_TRIES, e))
            time.sleep(0.5)


def idle(client):
    """Sleep until the gateway posts something (100 ms at most). A gateway
    that went away has failed every room: the polls say so."""
    try:
        client.wait(100)
    except ConnectionResetError:
        time.sleep(0.1)
