"""What the conformance checks share: the check registry, the gateway
environments and room transfers with every byte checked."""

import os
import shutil
import tempfile
import time

import gateway
import peer as peermod
import pool as poolmod
import wire
from language import Allocator, LanguageSide

# the deadline of every answer a check waits for: generous, since the
# machine may be shared (a missing answer fails only after it)
ANSWER_S = 5.0

CHECKS = []
# Checks that fail against the gateway for a finding (a gateway bug, the
# doc being right): name -> (the finding, a text the failure must contain).
# A failure without that text is a FAIL all the same; a pass is an XPASS,
# counted as passed and shown loudly: the finding is fixed, its entry must go.
XFAIL = {}


def check(name, about):
    def deco(fn):
        CHECKS.append((name, about, fn))
        return fn
    return deco


class Fail(Exception):
    pass


def expect(cond, why):
    if not cond:
        raise Fail(why)


# geometry of every configuration written by gateway.gen_configs
GEO = dict(block_tokens=128, pool_blocks=2048, hidden_size=32, dtype_bytes=2,
           aux_bytes=64)


class Ctx:
    """What the checks share: the build, a temporary directory and the
    gateways started so far (ended at exit)."""

    def __init__(self, build):
        self.build = build
        self.tmp = tempfile.mkdtemp(prefix="egw-conformance-")
        self.gateways = []
        self.env = None

    def release_shared(self):
        """End the shared gateway: one gateway at a time owns the tap."""
        if self.env is not None:
            self.env.close()
            self.env = None

    def cleanup(self, keep):
        if self.env:
            self.env.close()
            self.env = None
        for g in self.gateways:
            g.kill()
        if not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)


class LanguagePeerEnv:
    """An encode gateway with --produce, and this peer as its language
    peer lang-0 with its own pool file."""

    def __init__(self, ctx, sub="enc", args=("--produce",), timers=gateway.SLACK,
                 handshake=True, geo=GEO, prepare=None, auto_answer=True, **gen):
        self.ctx = ctx
        ctx.release_shared()
        self.dir = os.path.join(ctx.tmp, sub + str(len(ctx.gateways)))
        os.makedirs(self.dir)
        self.psk = gateway.gen_configs(self.dir, timers=timers, **gen)
        self.key = wire.derive_key(self.psk)
        if prepare:
            prepare(os.path.join(self.dir, "encode.cfg"))
        self.geo = dict(geo)
        self.gw = gateway.Gateway(ctx.build, self.dir, "encode", args)
        ctx.gateways.append(self.gw)
        self.pool = None
        self.peer = None
        try:
            self.gw.wait_tap(gateway.PEER_ADDR["encode"], extra=[gateway.STRANGER])
            self.start_peer(handshake=handshake, auto_answer=auto_answer)
        except BaseException:
            self.close()   # its tap must go before the next gateway's
            raise

    def start_peer(self, session=None, handshake=True, psn=None, auto_answer=True):
        if self.peer:
            self.peer.close()
        if self.pool:
            self.pool.close()
        sess = session or int.from_bytes(os.urandom(8), "big") or 1
        self.pool = poolmod.PoolFile(os.path.join(self.dir, "lang-pool-0"),
                                     self.geo, sess)
        self.peer = peermod.Peer(self.key, (gateway.PEER_ADDR["encode"], gateway.PORT),
                                 (gateway.GW_ADDR["encode"], gateway.PORT),
                                 "lang-0", peermod.ROLE_LANGUAGE, self.geo,
                                 self.pool.regions, session=sess, psn=psn,
                                 auto_answer=auto_answer)
        self.alloc = Allocator(self.geo["pool_blocks"])
        self.side = LanguageSide(self.peer, self.pool, self.alloc,
                                 self.geo["block_tokens"])
        if handshake:
            expect(self.peer.handshake(), "no registration with the gateway within 10 s: %s"
                   % self.gw.tail(5))
        self.registered_at = time.monotonic()

    def node(self, key):
        return self.gw.stat(key)

    def rooms(self, key):
        return self.gw.stat(key, "/embgw/rooms")

    def close(self):
        if self.peer:
            self.peer.close()
            self.peer = None
        self.report = self.gw.stop()
        if self.pool:
            self.pool.close()
            self.pool = None
        return self.report


def room_id(total, salt=None):
    hi = int.from_bytes(os.urandom(4), "big") if salt is None else salt
    return (hi << 32) | total


def lang_env(ctx):
    """The shared encode gateway (started on first use)."""
    if ctx.env is None:
        ctx.env = LanguagePeerEnv(ctx)
    return ctx.env


def transfer(env, lengths, default, nranks=1, dummy=False, fragment=False,
             timeout=30):
    """Rooms of the given lengths at once; every rank byte-checked.
    Returns the ranks."""
    side = env.side
    rs = []
    for n in lengths:
        rs += side.open(room_id(n), nranks, default, dummy_last=dummy,
                        fragment=fragment)
    ok = side.run(rs, timeout)
    problems = []
    for r in rs:
        problems += ["room %#x rank %d: %s" % (r.room, r.rank, p) for p in r.problems]
        if r.state != wire.SUCCESS:
            problems.append("room %#x rank %d ended %s error %s (errors %r)" % (
                r.room, r.rank, r.state, wire.ERR_NAME.get(r.error, r.error), r.errors))
            continue
        problems += ["room %#x rank %d: %s" % (r.room, r.rank, p)
                     for p in side.verify(r, env.geo)]
    expect(ok, "not every rank finished within %d s: %s" % (
        timeout, [(hex(r.room), r.rank, r.state, r.landed, r.total) for r in rs if not r.done]))
    expect(not problems, "; ".join(problems[:6]))
    expect(not env.peer.violations, "; ".join(env.peer.violations[:4]))
    side.release(rs)
    return rs


