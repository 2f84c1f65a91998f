#!/usr/bin/python3
"""The peer against itself over loopback (no gateway): its language side
fetches rooms from its encode side. Run before the checks, so that a
check failing against the gateway is not this peer's own mistake."""
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import payload  # noqa: E402
import peer as peermod  # noqa: E402
import pool as poolmod  # noqa: E402
import wire  # noqa: E402
from encode import EncodeSide  # noqa: E402
from language import Allocator, LanguageSide  # noqa: E402

GEO = dict(block_tokens=128, pool_blocks=2048, hidden_size=5, dtype_bytes=2,
           aux_bytes=64)


def main():
    payload.self_test()
    key = wire.derive_key(os.urandom(48))
    with tempfile.TemporaryDirectory(prefix="egw-selftest-") as tmp:
        run(key, tmp)


def run(key, tmp):
    lang_sess = int.from_bytes(os.urandom(8), "big") | 1
    pf = poolmod.PoolFile(os.path.join(tmp, "pool"), GEO, lang_sess)
    la, ea = ("127.0.0.1", 19471), ("127.0.0.1", 19472)
    lp = peermod.Peer(key, la, ea, "lang", peermod.ROLE_LANGUAGE, GEO, pf.regions,
                      session=lang_sess)
    ep = peermod.Peer(key, ea, la, "enc", peermod.ROLE_ENCODE, GEO, pf.regions)
    ok = lp.handshake(5)
    assert ok and ep.confirmed and lp.confirmed, "handshake"
    hdr = poolmod.read_header(pf.path)
    assert hdr["session"] == lang_sess and poolmod.lock_is_held(pf.path)
    es = EncodeSide(ep, GEO, pf.map, pf.regions, GEO["pool_blocks"])
    stop = []
    th = threading.Thread(target=es.serve, args=(time.monotonic() + 60, lambda: stop))
    th.start()
    side = LanguageSide(lp, pf, Allocator(GEO["pool_blocks"]), 128)
    t0 = time.monotonic()
    rs = []
    for n, nr, frag, dummy in ((500, 1, False, False), (10000, 2, True, False),
                               (3000, 3, False, True)):
        rs += side.open((0xabc << 32) | n, nr, 1024, dummy_last=dummy, fragment=frag)
    assert side.run(rs, 30), [(r.state, r.landed, r.total) for r in rs]
    stop.append(1)
    th.join()
    bad = []
    for r in rs:
        assert r.state == wire.SUCCESS, (r.state, r.errors, r.problems)
        bad += r.problems + side.verify(r, GEO)
    assert not bad, bad
    assert not lp.violations and not ep.violations, (lp.violations, ep.violations)
    print("selftest: %d ranks byte-exact in %.1fs, %d windows" % (
        len(rs), time.monotonic() - t0, es.windows))
    lp.close()
    ep.close()
    pf.close()


if __name__ == "__main__":
    main()
