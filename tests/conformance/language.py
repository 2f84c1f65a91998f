"""The language side of rooms, played by this peer against an encode
gateway: windows from our own pool, INIT/RESUME, retransmission and polls,
STATUS bookkeeping and the payload checked by value (doc/xfer.md)."""
import time

import payload
import wire

SENTINEL = 0x5A


class Allocator:
    """Blocks of our pool, free or not; `fragment` hands out every other
    free block so that a window needs many runs."""

    def __init__(self, nblocks):
        self.free = [True] * nblocks

    def alloc(self, nblocks, fragment=False, max_runs=wire.MAX_RUNS):
        """Up to nblocks blocks as at most max_runs runs (fewer blocks when
        the runs run out); [] when none is free."""
        runs, got, b, n = [], 0, 0, len(self.free)
        while b < n and got < nblocks and len(runs) < max_runs:
            if not self.free[b]:
                b += 1
                continue
            start = b
            while b < n and self.free[b] and got < nblocks:
                self.free[b] = False
                got += 1
                b += 1
                if fragment:
                    break
            runs.append((start, b - start))
            b += 1 if fragment else 0
        return runs

    def release(self, runs):
        for s, c in runs:
            for b in range(s, s + c):
                assert not self.free[b], "block %d freed twice" % b
                self.free[b] = True


class Rank:
    def __init__(self, room, rank, nranks, dummy=False):
        self.room, self.rank, self.nranks, self.dummy = room, rank, nranks, dummy
        self.windows = []      # [offset, alloc, runs]
        self.total = self.landed = self.accepted = self.state = 0
        self.error = 0
        self.statuses = []
        self.errors = []
        self.stray_errors = []
        self.aborts = []
        self.problems = []     # STATUS/ERROR against the doc
        self.rto = 0.0
        self.timer = 0.0
        self.sends = 0

    @property
    def alloc_end(self):
        return sum(w[1] for w in self.windows)

    @property
    def done(self):
        return self.state in (wire.SUCCESS, wire.FAILED)

    def take_status(self, st):
        """STATUS fields only grow; a total once announced never changes."""
        self.statuses.append(st)
        if st["state"] < self.state:
            self.problems.append("state went back %d -> %d" % (self.state, st["state"]))
        if self.total and st["total"] != self.total:
            self.problems.append("total changed %d -> %d" % (self.total, st["total"]))
        if st["landed"] < self.landed or st["accepted"] < self.accepted:
            self.problems.append("landed/accepted went back: %r after landed=%d accepted=%d"
                                 % (st, self.landed, self.accepted))
        if st["total"] == 0 and st["landed"]:
            self.problems.append("landed without a total: %r" % st)
        if st["accepted"] > self.alloc_end:
            self.problems.append("accepted %d beyond our allocation %d" % (st["accepted"], self.alloc_end))
        if st["total"] and st["landed"] > st["total"]:
            self.problems.append("landed beyond total: %r" % st)
        if st["state"] != wire.FAILED and st["error"]:
            self.problems.append("error code outside Failed: %r" % st)
        if st["state"] == wire.SUCCESS and st["landed"] != st["total"] and not self.dummy:
            self.problems.append("Success without landed = total: %r" % st)
        self.state = max(self.state, st["state"])
        self.total = self.total or st["total"]
        self.landed = max(self.landed, st["landed"])
        self.accepted = max(self.accepted, st["accepted"])
        if st["state"] == wire.FAILED:
            self.error = st["error"]


class LanguageSide:
    """Rooms of this peer (language role) against the gateway."""

    def __init__(self, peer, pool, alloc, block_tokens, rto=0.01,
                 rto_max=0.2, depth=2):
        self.peer, self.pool, self.alloc = peer, pool, alloc
        self.bt = block_tokens
        self.rto0, self.rto_max, self.depth = rto, rto_max, depth
        self.ranks = {}
        self.other = []        # messages for no rank of ours

    # ---- windows --------------------------------------------------------
    def _new_window(self, r, tokens, fragment):
        blocks = max(1, -(-tokens // self.bt))
        runs = self.alloc.alloc(blocks, fragment)
        if not runs:
            raise RuntimeError("our pool is exhausted")
        got = sum(c for _, c in runs)
        self._sentinel(runs)
        w = [r.alloc_end, got * self.bt, runs]
        r.windows.append(w)
        return w

    def _sentinel(self, runs):
        emb = self.pool.regions[0]
        per_block = emb[2] * self.bt
        for s, c in runs:
            a = emb[0] + s * per_block
            self.pool.map[a:a + c * per_block] = bytes([SENTINEL]) * (c * per_block)
            aux = self.pool.regions[3]
            a = aux[0] + s * aux[2]
            self.pool.map[a:a + c * aux[2]] = bytes([SENTINEL]) * (c * aux[2])

    def send_window(self, r, w, flags=0, **over):
        off, alloc, runs = w
        mtype = wire.INIT if off == 0 else wire.RESUME
        if r.dummy and off == 0:
            flags |= wire.F_DUMMY
        body = wire.window_body(self.bt, alloc, runs)
        r.sends += 1
        return self.peer.send(mtype, body, flags=flags, rank=r.rank,
                              nranks=r.nranks, room=r.room, offset=off, **over)

    def poll(self, r):
        return self.peer.send(wire.STATUS, wire.status_body(), flags=wire.F_POLL,
                              rank=r.rank, nranks=r.nranks, room=r.room)

    # ---- rooms ----------------------------------------------------------
    def open(self, room, nranks, default_tokens, dummy_last=False,
             fragment=False, send=True):
        rs = []
        for k in range(nranks):
            dummy = dummy_last and k == nranks - 1 and nranks > 1
            r = Rank(room, k, nranks, dummy)
            r.fragment = fragment
            self._new_window(r, self.bt if dummy else default_tokens, fragment)
            self.ranks[(room, k)] = r
            rs.append(r)
            if send:
                self.send_window(r, r.windows[0])
            r.rto, r.timer = self.rto0, time.monotonic() + self.rto0
        return rs

    def _grow(self, r):
        """Further windows once the total is known, up to `depth` windows
        not yet landed."""
        if r.dummy or not r.total or r.state != wire.TRANSFERRING:
            return
        while r.alloc_end < r.total:
            ahead = sum(1 for w in r.windows if w[0] + w[1] > r.landed)
            if ahead >= self.depth:
                return
            w = self._new_window(r, r.total - r.alloc_end, r.fragment)
            self.send_window(r, w)

    def handle(self, m):
        r = self.ranks.get((m.room, m.rank))
        if r is None:
            self.other.append(m)
            return None
        if m.type == wire.STATUS:
            if m.flags & wire.F_POLL:
                r.problems.append("a STATUS poll from the encode side")
            before = (r.accepted, r.landed, r.state)
            r.take_status(wire.parse_status(m.body))
            if (r.accepted, r.landed, r.state) != before:
                r.rto = self.rto0
                r.timer = time.monotonic() + r.rto
            self._grow(r)
        elif m.type == wire.ERROR:
            e = wire.parse_error(m.body)
            mine = e["type"] == wire.STATUS or any(
                w[0] == m.offset and (e["type"] == wire.INIT) == (w[0] == 0) for w in r.windows)
            if not mine:        # a probe of a check's own, not one of our windows
                r.stray_errors.append((m.offset, e))
                return r
            r.errors.append((m.offset, e))
            stale = m.offset + 1 <= r.accepted and e["type"] != wire.STATUS
            if e["code"] in (wire.ERR["BUSY"], wire.ERR["NO_SLOT"]) or stale or (
                    e["code"] == wire.ERR["UNKNOWN_ROOM"] and e["type"] == wire.INIT):
                pass
            else:
                r.state, r.error = wire.FAILED, e["code"]
        elif m.type == wire.ABORT:
            r.aborts.append(m)
            if not m.flags & wire.F_ACK:
                r.state, r.error = wire.FAILED, wire.parse_abort(m.body)["code"]
        else:
            r.problems.append("unexpected %r" % m)
        return r

    def tick(self):
        now = time.monotonic()
        for r in self.ranks.values():
            if r.done or now < r.timer:
                continue
            unacked = [w for w in r.windows if w[0] + w[1] > r.accepted]
            if unacked:
                for w in unacked:
                    self.send_window(r, w)
            else:
                self.poll(r)
            r.rto = min(r.rto * 2, self.rto_max)
            r.timer = now + r.rto

    def run(self, rs, timeout=30.0):
        """Until every rank of rs is Success or Failed; True if all done."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if all(r.done for r in rs):
                return True
            m = self.peer.recv(timeout=0.005)
            while m is not None:
                self.handle(m)
                m = self.peer.recv(timeout=0)
            self.tick()
        return all(r.done for r in rs)

    def release(self, rs):
        for r in rs:
            for w in r.windows:
                self.alloc.release(w[2])
            r.released = r.windows
            r.windows = []
            self.ranks.pop((r.room, r.rank), None)

    # ---- the bytes ------------------------------------------------------
    def verify(self, r, geo, producer_geo=None):
        """Every token of rank r by value (doc/xfer.md's formula), the aux
        record, and nothing written past the total; a list of problems."""
        pg = producer_geo or geo
        regs = self.pool.regions
        emb, fill, mrope, aux = regs
        bt, E = self.bt, emb[2]
        mem = self.pool.map
        bad = []
        total = r.total
        blocks = [b for w in r.windows for s, c in w[2] for b in range(s, s + c)]
        if not r.windows:
            return ["no window"]
        first = r.windows[0][2][0][0]
        want_aux = payload.aux_record(total, pg["hidden_size"], pg["dtype_bytes"],
                                      pg["block_tokens"], r.room, aux[2])
        got_aux = bytes(mem[aux[0] + first * aux[2]: aux[0] + (first + 1) * aux[2]])
        if got_aux != want_aux:
            bad.append("aux record: got %s want %s" % (got_aux[:32].hex(), want_aux[:32].hex()))
        sentinel_e = bytes([SENTINEL]) * E
        upto = 0 if r.dummy else total
        for t in range(len(blocks) * bt):
            b, k = blocks[t // bt], t % bt
            slot = b * bt + k
            e = bytes(mem[emb[0] + slot * E: emb[0] + (slot + 1) * E])
            if t < upto:
                if e != payload.embedding(r.room, t, E):
                    bad.append("token %d embedding %s" % (t, e[:8].hex()))
                f = bytes(mem[fill[0] + slot * 4: fill[0] + slot * 4 + 4])
                if f != payload.fill_id(r.room, t):
                    bad.append("token %d fill id %s" % (t, f.hex()))
                if mrope[2]:
                    p = bytes(mem[mrope[0] + slot * 12: mrope[0] + slot * 12 + 12])
                    if p != payload.mrope(r.room, t):
                        bad.append("token %d mrope %s" % (t, p.hex()))
            elif e != sentinel_e:
                bad.append("token %d past the total (%d) was written" % (t, total))
            if len(bad) > 5:
                break
        return bad
