"""The encode side of rooms, played by this peer against a language
gateway: rooms opened on INIT with total = the room id's low 32 bits,
windows checked and accepted at most once, the pattern written into the
peer's pool (doc/xfer.md, "Payload bytes"), STATUS pushed on every change,
ABORT answered with an ACK."""
import time

import payload
import wire

TOTAL_MAX = 1 << 30


class ERank:
    def __init__(self):
        self.windows = []      # (offset, alloc, runs) accepted, in order
        self.accepted = self.landed = 0
        self.inited = self.dummy = self.complete = False


class ERoom:
    def __init__(self, room, nranks, total):
        self.room, self.nranks, self.total = room, nranks, total
        self.ranks = [ERank() for _ in range(nranks)]
        self.state = wire.BOOTSTRAPPING
        self.error = 0
        self.ended = None


class EncodeSide:
    """Rooms served to one registered language peer whose pool (its
    REGISTER's regions, its geometry) is mapped at `mem`."""

    def __init__(self, peer, geo, mem=None, regions=None, pool_blocks=0,
                 dummy_landed_total=False, linger=2.0):
        self.peer, self.geo = peer, geo
        self.mem, self.regions, self.pool_blocks = mem, regions, pool_blocks
        self.bt = geo["block_tokens"]
        self.rooms = {}
        self.linger = linger
        self.dummy_landed_total = dummy_landed_total
        self.ok = self.failed = self.windows = self.errors_sent = 0
        self.problems = []

    # ---- answers --------------------------------------------------------
    def status(self, room, k):
        r = room.ranks[k]
        landed = r.landed
        if r.dummy:
            landed = room.total if (self.dummy_landed_total and r.complete) else 0
        total = room.total if room.state >= wire.TRANSFERRING else 0
        if total == 0:
            landed = 0
        body = wire.status_body(room.state, room.error if room.state == wire.FAILED else 0,
                                total, landed, r.accepted)
        self.peer.send(wire.STATUS, body, rank=k, nranks=room.nranks, room=room.room)

    def refuse(self, m, code):
        self.errors_sent += 1
        self.peer.send(wire.ERROR, wire.error_body(m.type, code), rank=m.rank,
                       nranks=m.nranks, room=m.room, offset=m.offset)

    # ---- requests -------------------------------------------------------
    def handle(self, m):
        if m.type in (wire.INIT, wire.RESUME):
            self._window(m)
        elif m.type == wire.STATUS:
            room = self.rooms.get(m.room)
            if room is None or not m.flags & wire.F_POLL:
                return self.refuse(m, wire.ERR["UNKNOWN_ROOM"])
            if m.nranks != room.nranks:
                return self.refuse(m, wire.ERR["BAD_RANK"])
            self.status(room, m.rank)
        elif m.type == wire.ABORT:
            if m.flags & wire.F_ACK:
                self.problems.append("an ABORT ACK from the language side: %r" % m)
                return
            ab = wire.parse_abort(m.body)
            code = ab["code"]
            room = self.rooms.get(m.room)
            if room is not None and room.state < wire.SUCCESS:
                self._fail(room, code, skip=m.rank)
            # writes are synchronous here: nothing of the room is in flight
            # the ACK echoes the ABORT's abort_id (the quarantine it ends)
            self.peer.send(wire.ABORT, wire.abort_body(code, ab["abort_id"]), flags=wire.F_ACK,
                           rank=m.rank, nranks=m.nranks, room=m.room)
        else:
            self.problems.append("unexpected %r" % m)

    def _fail(self, room, code, skip=None):
        room.state, room.error = wire.FAILED, code
        room.ended = time.monotonic()
        self.failed += 1
        for k in range(room.nranks):
            if k != skip:
                self.status(room, k)

    def _check_runs(self, room, k, bt, alloc, runs):
        if bt != self.bt:
            return "BLOCK_TOKENS"
        if not runs or any(c == 0 for _, c in runs):
            return "ZERO_BLOCKS"
        mine = sorted((s, s + c) for s, c in runs)
        for w in room.ranks[k].windows:
            if w[0] + w[1] > room.ranks[k].landed:
                mine += [(s, s + c) for s, c in w[2]]
        mine.sort()
        for a, b in mine:
            if b > self.pool_blocks:
                return "BAD_BLOCKS"
        for (a1, b1), (a2, b2) in zip(mine, mine[1:]):
            if a2 < b1:
                return "BAD_BLOCKS"
        if alloc != sum(c for _, c in runs) * bt:
            return "ALLOC_MISMATCH"
        return None

    def _window(self, m):
        bt, alloc, runs, rkey = wire.parse_window(m.body)
        room = self.rooms.get(m.room)
        if room is None:
            if m.type != wire.INIT:
                return self.refuse(m, wire.ERR["UNKNOWN_ROOM"])
            total = m.room & 0xffffffff
            if total == 0 or total > TOTAL_MAX:
                return self.refuse(m, wire.ERR["UNKNOWN_ROOM"])
            room = self.rooms[m.room] = ERoom(m.room, m.nranks, total)
        if m.nranks != room.nranks or m.rank >= room.nranks:
            return self.refuse(m, wire.ERR["BAD_RANK"])
        r = room.ranks[m.rank]
        if room.state >= wire.SUCCESS:
            return self.status(room, m.rank)
        if m.type == wire.INIT:
            if r.inited:
                return self.status(room, m.rank)       # a duplicate: no work
            why = self._check_runs(room, m.rank, bt, alloc, runs)
            if why:
                return self.refuse(m, wire.ERR[why])
            r.inited, r.dummy = True, bool(m.flags & wire.F_DUMMY)
            r.windows.append((0, alloc, runs))
            r.accepted = alloc
            self.windows += 1
            if all(x.inited for x in room.ranks):
                room.state = wire.TRANSFERRING
                for k in range(room.nranks):    # the total to every rank at once
                    self.status(room, k)
                for k in range(room.nranks):
                    self._post(room, k)
            else:
                self.status(room, m.rank)
            return
        # RESUME
        if room.state != wire.TRANSFERRING or r.dummy:
            return self.refuse(m, wire.ERR["STATE"])
        if m.offset >= room.total:
            return self.refuse(m, wire.ERR["BEYOND_TOTAL"])
        if m.offset != r.accepted:     # a duplicate, or ahead of a lost one
            return self.status(room, m.rank)
        why = self._check_runs(room, m.rank, bt, alloc, runs)
        if why:
            return self.refuse(m, wire.ERR[why])
        if sum(1 for w in r.windows if w[0] + w[1] > r.landed) >= 4:
            return self.refuse(m, wire.ERR["BUSY"])
        r.windows.append((m.offset, alloc, runs))
        r.accepted = m.offset + alloc
        self.windows += 1
        self.status(room, m.rank)
        self._post(room, m.rank)

    # ---- the bytes ------------------------------------------------------
    def _post(self, room, k):
        r = room.ranks[k]
        for off, alloc, runs in r.windows:
            end = min(off + alloc, room.total)
            if r.dummy:
                end = off
            if end <= r.landed and not (off == 0 and r.landed == 0):
                continue
            self._write(room, off, end, runs)
            r.landed = max(r.landed, end) if not r.dummy else 0
            if r.dummy:
                r.complete = True
            elif r.landed == room.total:
                r.complete = True
            self.status(room, k)
        if all(x.complete for x in room.ranks):
            room.state = wire.SUCCESS
            room.ended = time.monotonic()
            self.ok += 1
            for x in range(room.nranks):
                self.status(room, x)

    def _write(self, room, off, end, runs):
        emb, fill, mrope, aux = self.regions
        mem, bt, R = self.mem, self.bt, room.room
        blocks = [b for s, c in runs for b in range(s, s + c)]
        if off == 0:
            g = self.geo
            rec = payload.aux_record(room.total, g["hidden_size"], g["dtype_bytes"],
                                     bt, R, aux[2])
            a = aux[0] + blocks[0] * aux[2]
            mem[a:a + aux[2]] = rec
        E = emb[2]
        for t in range(off, end):
            j = t - off
            slot = blocks[j // bt] * bt + j % bt
            mem[emb[0] + slot * E: emb[0] + (slot + 1) * E] = payload.embedding(R, t, E)
            mem[fill[0] + slot * 4: fill[0] + slot * 4 + 4] = payload.fill_id(R, t)
            if mrope[2]:
                mem[mrope[0] + slot * 12: mrope[0] + slot * 12 + 12] = payload.mrope(R, t)

    def expire(self):
        now = time.monotonic()
        for key in [k for k, r in self.rooms.items()
                    if r.ended is not None and now - r.ended > self.linger]:
            del self.rooms[key]

    def serve(self, until, stop=lambda: False):
        """Answer requests until the monotonic time `until` or stop()."""
        while time.monotonic() < until and not stop():
            m = self.peer.recv(timeout=0.02)
            if m is not None:
                self.handle(m)
            self.expire()
