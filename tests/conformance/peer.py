"""One side of an embgw link, played over an ordinary UDP socket: sessions
and incarnations, the REGISTER handshake, replay windows, heartbeats
(doc/protocol.md). Room logic lives in language.py and encode.py."""
import os
import queue
import socket
import threading
import time

import wire

ROLE_ENCODE, ROLE_LANGUAGE = 1, 2


class ReplayWindow:
    """(top, 64-bit bitmap), as "Replay" specifies."""

    def __init__(self, seq=0):
        self.top, self.bits = seq, 1 if seq else 0

    def check(self, seq):
        if seq > self.top:
            return True
        return self.top - seq < 64 and not self.bits >> (self.top - seq) & 1

    def update(self, seq):
        if seq > self.top:
            shift = seq - self.top
            self.bits = (self.bits << shift | 1) & ((1 << 64) - 1) if shift < 64 else 1
            self.top = seq
        else:
            self.bits |= 1 << (self.top - seq)


class Peer:
    """A peer of the gateway under test: our own session, the gateway's
    `heard`, `adopted`, `retired` and `confirmed`."""

    def __init__(self, key, local, remote, name, roles, geo, regions,
                 session=None, expect_name=None, psn=None, auto_answer=True):
        self.key, self.local, self.remote = key, local, remote
        self.name, self.roles, self.geo, self.regions = name, roles, geo, regions
        self.expect_name = expect_name
        self.session = session or int.from_bytes(os.urandom(8), "big") or 1
        self.qpn, self.psn = 0, (psn if psn is not None else
                                 int.from_bytes(os.urandom(3), "big"))
        self.seq = 0
        self.heard = self.adopted = 0
        self.heard_seq = 0     # the seq of the REGISTER `heard` came from
        self.reg_sent = {}     # seq -> send time of our recent REGISTERs (16)
        self.proof = 0         # the last peer_seq taken as proof of freshness
        self.retired = []
        self.confirmed = False
        self.win = ReplayWindow()
        self.heard_win = ReplayWindow()
        self.lock = threading.Lock()
        self.inbox = queue.Queue()
        self.log = []          # (time, Msg) of every authenticated datagram
        self.violations = []   # what the gateway sent against the doc
        self.registers = []    # REGISTERs and ERRORs about REGISTER received
        self.heartbeats = 0
        self.send_errors = []
        self.sent = []         # (time, type) of what we sent through send()
        self.auto_answer = auto_answer
        self.heartbeat_on = False
        self.stop = False
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(local)
        self.sock.settimeout(0.05)
        self.threads = [threading.Thread(target=self._rx, daemon=True),
                        threading.Thread(target=self._beat, daemon=True)]
        for t in self.threads:
            t.start()

    # ---- sending ------------------------------------------------------
    def next_seq(self):
        with self.lock:
            self.seq += 1
            return self.seq

    def send_raw(self, data):
        try:
            self.sock.sendto(data, self.remote)
        except OSError as e:   # the gateway's tap is gone: it has exited
            self.send_errors.append(str(e))

    def send(self, mtype, body=b"", **kw):
        kw.setdefault("session", self.session)
        if "seq" not in kw:
            kw["seq"] = self.next_seq()
        data = wire.encode(self.key, mtype, body, **kw)
        self.sent.append((time.monotonic(), mtype))
        self.send_raw(data)
        return data

    def register_body(self, peer_session=None, ack_of=None, name=None,
                      geo=None, regions=None, roles=None, qpn=None, psn=None,
                      mtu=4096, peer_seq=None):
        """Our REGISTER's body; every field can be overridden. peer_seq:
        the seq of the REGISTER answered (an ACK), else of the one `heard`
        came from; 0 with peer_session 0."""
        ack = (ack_of["qpn"], ack_of["psn"]) if ack_of is not None else (0, 0)
        ps = self.heard if peer_session is None else peer_session
        if peer_seq is None:
            if ack_of is not None:
                peer_seq = ack_of["seq"]
            else:
                peer_seq = self.heard_seq if ps and ps == self.heard else 0
        return wire.register_body(
            self.name if name is None else name,
            self.roles if roles is None else roles,
            self.geo if geo is None else geo,
            self.regions if regions is None else regions,
            peer_session=ps,
            qpn=self.qpn if qpn is None else qpn,
            psn=self.psn if psn is None else psn, mtu=mtu,
            ack_qpn=ack[0], ack_psn=ack[1], peer_seq=peer_seq)

    def send_register(self, ack_of=None, flags=None, **over):
        ps = over.pop("peer_session", self.heard)
        if flags is None:
            flags = wire.F_ADOPTED if ps and ps == self.adopted else 0
            if ack_of is not None:
                flags |= wire.F_ACK
        body = self.register_body(peer_session=ps, ack_of=ack_of, **over)
        seq = self.next_seq()
        self.reg_sent[seq] = time.monotonic()
        if len(self.reg_sent) > 16:
            del self.reg_sent[min(self.reg_sent)]
        return self.send(wire.REGISTER, body, flags=flags, seq=seq)

    # ---- receiving ----------------------------------------------------
    def _rx(self):
        while not self.stop:
            try:
                data, src = self.sock.recvfrom(2048)
            except socket.timeout:
                continue
            except OSError:
                return
            if src != self.remote:
                continue
            m = wire.decode(self.key, data)
            if m is None:
                self.violations.append("undecodable datagram of %d bytes" % len(data))
                continue
            self.log.append((time.monotonic(), m))
            self._check_fields(m)
            if m.type == wire.REGISTER or (m.type == wire.ERROR and m.nranks == 0
                                           and wire.parse_error(m.body)["type"] == wire.REGISTER):
                self._register(m)
                continue
            if m.session != self.adopted:
                # dropped (SESSION); room messages must come from the
                # session we adopted (rule 5), heartbeats go to every peer
                if m.type != wire.HEARTBEAT:
                    self.violations.append("%r from a session not adopted" % m)
                continue
            if not self.win.check(m.seq):
                self.violations.append("%r repeats a sequence number" % m)
                continue
            self.win.update(m.seq)
            if m.type == wire.HEARTBEAT:
                self.heartbeats += 1
                continue
            self.inbox.put(m)

    def _check_fields(self, m):
        bad = []
        if m.session == 0 or m.seq == 0:
            bad.append("session or seq 0")
        if m.res14 or m.res36:
            bad.append("reserved header field not 0")
        if m.type in (wire.HEARTBEAT, wire.REGISTER) and (m.rank or m.nranks or m.room or m.offset):
            bad.append("rank/nranks/room/offset not 0")
        if m.type in (wire.INIT, wire.RESUME, wire.STATUS, wire.ABORT) and not (
                1 <= m.nranks <= 8 and m.rank < m.nranks):
            bad.append("nranks/rank out of range")
        if bad:
            self.violations.append("%r: %s" % (m, ", ".join(bad)))

    def _register(self, m):
        self.registers.append(m)
        if m.type == wire.ERROR:
            return
        s = m.session
        if s in self.retired:
            return
        if s == self.adopted:
            if not self.win.check(m.seq):
                self.violations.append("%r repeats a sequence number" % m)
                return
            self.win.update(m.seq)
        else:
            if s != self.heard:
                self.heard_win = ReplayWindow()
            if not self.heard_win.check(m.seq):
                return
            self.heard_win.update(m.seq)
        r = wire.parse_register(m.body)
        r["seq"] = m.seq
        m.reg = r
        self.heard, self.heard_seq = s, m.seq
        sent_at = self.reg_sent.get(r["peer_seq"])
        fresh = (sent_at is not None and time.monotonic() - sent_at < 2.0
                 and r["peer_seq"] > self.proof)
        if r["peer_session"] == self.session and s != self.adopted and fresh:
            self.proof = r["peer_seq"]
            if self.adopted:
                self.retired = (self.retired + [self.adopted])[-4:]
            self.adopted = s
            self.confirmed = False
            self.win = self.heard_win   # the window this REGISTER passed
            if self.auto_answer and m.flags & wire.F_ACK:
                self.send_register()
        if (s == self.adopted and m.flags & wire.F_ADOPTED
                and r["peer_session"] == self.session):
            if not m.flags & wire.F_ACK or (r["ack_qpn"] == self.qpn and r["ack_psn"] == self.psn):
                self.confirmed = True
        if self.auto_answer and not m.flags & wire.F_ACK:
            self.send_register(ack_of=r)

    def _beat(self):
        while not self.stop:
            time.sleep(0.05)
            if self.heartbeat_on and self.adopted:
                try:
                    self.send(wire.HEARTBEAT)
                except OSError:
                    return

    # ---- helpers for checks -------------------------------------------
    def handshake(self, deadline=10.0):
        """REGISTER until both sides are confirmed; True on success."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if self.confirmed and self.adopted:
                break
            self.send_register()
            time.sleep(0.2)
        else:
            return False
        # we may be confirmed before the peer is (its REGISTER with ADOPTED
        # can come before it has our ADOPTED): an ACK with ADOPTED that
        # answers a REGISTER of ours with ADOPTED says it has us too
        while time.monotonic() < end:
            mark = len(self.registers)
            self.send_register()
            step = time.monotonic() + 0.2
            while time.monotonic() < step:
                for m in self.registers[mark:]:
                    if (m.type == wire.REGISTER and m.flags & wire.F_ACK and
                            m.flags & wire.F_ADOPTED and m.session == self.adopted and
                            wire.parse_register(m.body)["peer_session"] == self.session):
                        self.heartbeat_on = True
                        return True
                time.sleep(0.01)
        return False

    def recv(self, timeout=1.0, pred=None):
        """The next queued message (matching pred), None at the deadline;
        messages that do not match are dropped."""
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None
            try:
                m = self.inbox.get(timeout=left)
            except queue.Empty:
                return None
            if pred is None or pred(m):
                return m

    def drain(self):
        while True:
            try:
                self.inbox.get_nowait()
            except queue.Empty:
                return

    def close(self):
        self.stop = True
        for t in self.threads:
            t.join(1)
        self.sock.close()
