# SPDX-License-Identifier: BSD-3-Clause
"""An engine's event loop around a real gateway that stops and starts
again, for the integration tests (run.sh client-gateway-restart):

    client_gateway.py SOCKET PORT STOPPED_FILE

Attaches, opens a room that stays open (no encoder serves it), and sleeps
in select() on Client.fileno() - the descriptor an engine puts beside its
own. The test then stops the gateway, writing the wall clock of the stop
into STOPPED_FILE first: the descriptor must wake and arm() and wait()
must raise ConnectionResetError, within DEADLINE_S of the stop. Then
Client.reconnect() attaches to the gateway started again, and a NOP and a
new room go through. Each step prints a `client-STEP: key=value ...` line
(the shell waits for them); the process exits 0 only when all held.
"""
import os
import select
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "python"))
import embgw  # noqa: E402
from embgw import KVPoll  # noqa: E402

DEADLINE_S = 10.0       # a stopped gateway is noticed within this


def say(step, **kv):
    print("client-%s: %s" % (step, " ".join("%s=%s" % i for i in kv.items())),
          flush=True)


def main():
    path, port, stopped = sys.argv[1:4]
    c = embgw.Client(path, port, name="client-gateway")
    fd = c.fileno()
    room = c.recv_room(7 << 32 | 100, peer=1)
    woke = taken = 0
    # the open's completion (Bootstrapping) wakes the descriptor, unless
    # it came before arm() looked
    while not taken:
        if c.arm():
            taken += c.progress()
            continue
        r, _, _ = select.select([fd], [], [], 5.0)
        if not r:
            say("fail", why="no completion woke the descriptor in 5 s")
            return 1
        woke += 1
        taken += c.progress()
    if room.refusals or room.state == KVPoll.Failed:
        say("fail", why="the room failed: %s" % room.reason)
        return 1
    say("attached", room_state=room.state.name, woke=woke)
    # sleep beside the engine's own descriptors until the gateway goes
    give_up = time.monotonic() + 120
    while True:
        try:
            if c.arm():
                c.progress()
                continue
        except ConnectionResetError:
            break
        left = give_up - time.monotonic()
        if left <= 0:
            say("fail", why="the gateway never went away")
            return 1
        ms = c.max_sleep_ms
        select.select([fd], [], [], min(left, ms / 1000 if ms else left))
    gone = time.time()
    try:
        with open(stopped) as f:
            since = gone - float(f.read().strip() or gone)
    except OSError:
        since = -1.0
    try:
        c.wait(5000)
        say("fail", why="wait() did not raise after the reset")
        return 1
    except ConnectionResetError:
        pass
    say("reset", after_stop_s="%.3f" % since, room_state=room.state.name,
        reason='"%s"' % room.reason)
    if not 0 <= since <= DEADLINE_S or room.state != KVPoll.Failed:
        say("fail", why="reset %.3f s after the stop (at most %.0f s), room "
            "%s" % (since, DEADLINE_S, room.state.name))
        return 1
    t0 = time.monotonic()
    c.reconnect(timeout_s=60)
    again = c.recv_room(8 << 32 | 100, peer=1)
    # commands are taken in order: once the NOP is answered, so is the open
    nop = c.nop()
    ok = nop == 0 and not again.refusals and again.state != KVPoll.Failed
    say("reattached", after_s="%.3f" % (time.monotonic() - t0), nop=nop,
        room_state=again.state.name, old_room=room.state.name,
        ok=int(ok))
    again.abort()
    c.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
