"""(b) This peer as the encode side against a language gateway that drives
rooms (--drive): it maps the gateway's pool file after checking its header
and session, answers INIT/RESUME with STATUS and writes the pattern; the
gateway's exit report must say every room verified."""
import os
import stat
import struct
import time

import gateway
import peer as peermod
import pool as poolmod
import wire
from encode import EncodeSide
from harness import GEO, check, expect


def drive(ctx, args, rooms, dummy_landed_total=False, secs=60):
    ctx.release_shared()
    d = os.path.join(ctx.tmp, "drive%d" % len(ctx.gateways))
    os.makedirs(d)
    psk = gateway.gen_configs(d)
    key = wire.derive_key(psk)
    gw = gateway.Gateway(ctx.build, d, "language",
                         ["--exit-when-done", "--start-delay-ms", "500"] + args, secs=secs)
    ctx.gateways.append(gw)
    gw.wait_tap(gateway.PEER_ADDR["language"])
    regions, _ = poolmod.layout(GEO)
    p = peermod.Peer(key, (gateway.PEER_ADDR["language"], gateway.PORT),
                     (gateway.GW_ADDR["language"], gateway.PORT), "enc-0",
                     peermod.ROLE_ENCODE, GEO, regions)
    problems, mapped = [], None
    try:
        expect(p.handshake(deadline=20), "no registration with the language gateway: heard %#x adopted %#x confirmed %s; REGISTERs received %r; its counters %r" % (
            p.heard, p.adopted, p.confirmed,
            [(m.flags, hex(wire.parse_register(m.body)["peer_session"])) for m in p.registers[-4:]
             if m.type == wire.REGISTER], gw.telemetry("/embgw/stats")))
        reg = next(m for m in reversed(p.registers)
                   if m.type == wire.REGISTER and m.session == p.adopted)
        r = wire.parse_register(reg.body)
        expect(r["name"] == "lang-0" and r["roles"] == peermod.ROLE_LANGUAGE,
               "REGISTER name %r roles %d" % (r["name"], r["roles"]))
        # the pool file, as "Reaching it" says
        path = os.path.join(d, "lang-pool-0")
        h = poolmod.read_header(path)
        st = os.stat(path)
        if h["magic"] != poolmod.PMAGIC or h["format"] != 1 or h["reserved"]:
            problems.append("pool header magic %#x format %d" % (h["magic"], h["format"]))
        if h["session"] != reg.session:
            problems.append("pool file session %#x, REGISTER session %#x" % (h["session"], reg.session))
        if h["file_bytes"] != st.st_size or h["data_offset"] != 4096:
            problems.append("file_bytes %d (size %d) data_offset %d" % (
                h["file_bytes"], st.st_size, h["data_offset"]))
        for k in ("block_tokens", "hidden_size", "dtype_bytes", "aux_bytes"):
            if h[k] != GEO[k] or r[k] != GEO[k]:
                problems.append("%s: file %d REGISTER %d configured %d" % (k, h[k], r[k], GEO[k]))
        if h["pool_blocks"] != r["pool_blocks"]:
            problems.append("pool_blocks: file %d REGISTER %d" % (h["pool_blocks"], r["pool_blocks"]))
        if any(h["reserved_tail"]):
            problems.append("header bytes 56..4095 not 0")
        if stat.S_IMODE(st.st_mode) != 0o600:
            problems.append("mode %o" % stat.S_IMODE(st.st_mode))
        if not poolmod.lock_is_held(path):
            problems.append("the pool file is not locked by its owner")
        units = poolmod.unit_bytes(GEO)
        for i, (addr, rkey, unit) in enumerate(r["regions"]):
            n = r["pool_blocks"] * (unit if i == 3 else unit * GEO["block_tokens"])
            if unit != units[i] or rkey != 0 or addr < 4096 or addr + n > h["file_bytes"]:
                problems.append("region %s %r (unit want %d, file %d bytes)" % (
                    poolmod.KINDS[i], (addr, rkey, unit), units[i], h["file_bytes"]))
        # a header against the doc is a finding; the rooms are still served
        # (within the file's real size) so that one finding hides no other
        mapped = poolmod.MappedPeerPool(path, st.st_size)
        es = EncodeSide(p, GEO, mapped.map, r["regions"], r["pool_blocks"],
                        dummy_landed_total=dummy_landed_total)
        es.serve(time.monotonic() + secs - 5, stop=lambda: gw.proc.poll() is not None)
        rep = gw.wait(10)
        problems += (es.problems + p.violations)[:4]
        lang, res = rep.get("language", {}), rep.get("result", {})
        if not (lang.get("ok") == rooms and lang.get("bad") == 0 and lang.get("failed") == 0
                and res.get("errors") == 0 and res.get("leaked") == 0):
            problems.append("the gateway's report: language %r result %r failed %r" % (
                lang, res, rep.get("failed")))
        if os.path.exists(path):
            problems.append("the pool file is still there after the gateway's exit")
        expect(not problems, "; ".join(problems))
        return "%d rooms verified by the gateway (%d bytes, %d rounds), %d windows served" % (
            lang["ok"], lang.get("bytes", 0), lang.get("rounds", 0), es.windows)
    finally:
        p.close()
        if mapped:
            mapped.close()
        gw.kill()


@check("b-drive", "a language gateway --drive 8 (500..20000 tokens): the pool file's header checked, this peer writes the pattern, the gateway verifies every room")
def b_drive(ctx):
    return drive(ctx, ["--drive", "8", "--concurrency", "2",
                       "--lengths", "500,2000,10000,20000"], 8)


@check("b-drive-ranks", "the same over 3 ranks, the last aux-only (--ranks 3 --dummy-rank)")
def b_drive_ranks(ctx):
    # a dummy rank's final STATUS says landed = total (xfer.md: "Success
    # without landed = total" is BAD_STATUS), although it holds one block
    return drive(ctx, ["--drive", "4", "--concurrency", "2", "--ranks", "3",
                       "--dummy-rank", "--lengths", "700,9000"], 4,
                 dummy_landed_total=True)


@check("b-pool-file-ownership", "the language gateway's pool path: a foreign file, a directory or a live pool there is refused at start and left untouched; a killed gateway's pool (header, lock free) is taken over as a new file")
def b_pool_ownership(ctx):
    ctx.release_shared()
    d = os.path.join(ctx.tmp, "owner%d" % len(ctx.gateways))
    os.makedirs(d)
    gateway.gen_configs(d)
    path = os.path.join(d, "lang-pool-0")
    problems = []

    def start(label):
        gw = gateway.Gateway(ctx.build, d, "language", [], secs=90)
        ctx.gateways.append(gw)
        return gw

    def refused(label):
        gw = start(label)
        end = time.monotonic() + 60   # a start on a loaded machine is slow
        while gw.proc.poll() is None and time.monotonic() < end:
            if gw.telemetry("/embgw/stats", tries=1):   # it runs
                break
            time.sleep(0.1)
        if gw.proc.poll() is None:
            gw.stop()
            problems.append("%s: the gateway started" % label)
            return
        gw.wait(1)
        if gw.proc.returncode != 1:
            problems.append("%s: exit status %d, want 1" % (label, gw.proc.returncode))

    with open(path, "w") as f:
        f.write("not a pool file\n")
    refused("a foreign file")
    try:
        with open(path) as f:
            if f.read() != "not a pool file\n":
                problems.append("the foreign file was changed")
        os.unlink(path)
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError):
        problems.append("the foreign file was removed or replaced")
        if os.path.exists(path):
            os.unlink(path)
    os.mkdir(path)
    refused("a directory")
    if not os.path.isdir(path):
        problems.append("the directory is gone")
    if os.path.isdir(path):
        os.rmdir(path)
    elif os.path.exists(path):
        os.unlink(path)
    live = poolmod.PoolFile(path, GEO, 0x1234)
    refused("a live pool")
    try:
        if not os.path.exists(path) or poolmod.read_header(path)["session"] != 0x1234 or \
                os.stat(path).st_ino != live.ident[1]:
            problems.append("the live pool was changed, replaced or removed")
            if os.path.exists(path):
                os.unlink(path)
            with open(path, "wb") as f:
                f.write(bytes(live.map[:4096]))
    finally:
        live.map.close()
        os.close(live.fd)     # the lock is free now; the file stays: a stale pool
    # an open descriptor of the stale file (no lock) keeps its inode alive,
    # as a sender's mapping would: the new pool must be another file
    old_fd = os.open(path, os.O_RDONLY)
    gw = start("a stale pool")
    try:
        end = time.monotonic() + 60
        taken = False
        while time.monotonic() < end and gw.proc.poll() is None and not taken:
            try:
                h = poolmod.read_header(path)
                taken = h["session"] not in (0, 0x1234)
            except (OSError, ValueError, struct.error):
                pass
            time.sleep(0.1)
        old = os.fstat(old_fd)
        if not taken:
            problems.append("a stale pool: not taken over (exit %r)" % gw.proc.poll())
        elif old.st_nlink != 0 or os.stat(path).st_ino == old.st_ino:
            problems.append("a stale pool: reused, not unlinked and created anew")
        elif os.pread(old_fd, 8, 8) != struct.pack(">Q", 0x1234):
            problems.append("a stale pool: the old file was written")
    finally:
        os.close(old_fd)
        gw.stop()
    if os.path.exists(path):
        problems.append("the taken-over pool file is still there after the gateway's exit")
    expect(not problems, " | ".join(problems))
    return "foreign file, directory, live pool refused (exit 1) and untouched; a stale pool replaced by a new file, unlinked at exit"
