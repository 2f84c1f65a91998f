# SPDX-License-Identifier: BSD-3-Clause
"""The attach boundary's trust checks against a real gateway (doc/client.md,
"Trust"), one process per check; each prints one `trust-NAME: ...` line and
exits 0 when the check holds.

    trust.py flood SOCKET --seconds S --engines N
        a child as uid/gid 65534 (refused) opens silent connections as
        fast as it can for S s while N engines attach, NOP and detach
    trust.py readonly SOCKET
        a language engine's pool mapping is read-only: /proc/self/maps
        says r--s, a write through the library's mapping faults (in a
        child: SIGSEGV), a write through a view raises
    trust.py lost SOCKET --room ID --hold-s S
        a language engine receives ROOM, keeps a view and stops calling
        the library for S s (longer than the lease); then, before any
        call, the view still holds ROOM's bytes (the gateway held the
        blocks); release() and views() raise; the view holds zeros after
    trust.py segments SOCKET --rooms IDS --segments N
        two encode engines A and B on a port cut into N segments: each
        maps its own segment only (B's file holds no more: mapping past
        it fails, it cannot grow), A's rooms lie in A's segment; B writes
        0x41 over everything it maps between A's scatter and commit and
        A's rooms keep their bytes (the language engine checks them on
        arrival); N - 2 more engines attach, one more is refused (EBUSY),
        and once one of them detaches a new one attaches again
    trust.py tenants MAIN TENANT
        port p0 is served on the tenant's socket only, which allows uid
        65534: uid 65534 attaches there and is refused on MAIN; the
        gateway's own uid attaches on TENANT and finds no p0 on MAIN
"""
import argparse
import ctypes
import errno
import mmap
import os
import signal
import socket
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "python"))
import embgw  # noqa: E402
from engine import expected, same  # noqa: E402


def flood(a):
    pid = os.fork()
    if pid == 0:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
        conns, opened, refused = [], 0, 0
        end = time.monotonic() + a.seconds
        while time.monotonic() < end:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.settimeout(0.5)
            try:
                s.connect(a.socket)
                opened += 1
                conns.append(s)
            except OSError:
                refused += 1
                s.close()
            if len(conns) > 200:       # a file descriptor budget
                conns.pop(0).close()
        print("flood-child: opened=%d failed=%d" % (opened, refused),
              flush=True)
        os._exit(0)
    time.sleep(0.5)                    # the flood is on
    ok, errs = 0, []
    for i in range(a.engines):
        try:
            with embgw.Client(a.socket, "p0", name="legit%d" % i,
                              timeout_ms=3000) as c:
                if c.nop() == 0:
                    ok += 1
        except OSError as e:
            errs.append(str(e))
    _, status = os.waitpid(pid, 0)
    print("trust-flood: attached=%d of %d during the flood%s"
          % (ok, a.engines, (" errors=" + "; ".join(errs[:3])) if errs
             else ""), flush=True)
    return 0 if ok == a.engines and status == 0 else 1


def readonly(a):
    c = embgw.Client(a.socket, "p0")
    size = ctypes.c_uint64()
    ptr = embgw._lib.lib.egw_client_region(c._c, 0, ctypes.byref(size))
    perms = None
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= ptr < hi:
                perms = line.split()[1]
    view_raised = False
    try:
        c.pool["embedding"][0] = 1
    except ValueError:
        view_raised = True
    pid = os.fork()
    if pid == 0:
        ctypes.memset(ptr, 0x55, 64)   # must fault
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    faulted = os.WIFSIGNALED(status) and os.WTERMSIG(status) in (
        signal.SIGSEGV, signal.SIGBUS)
    print("trust-readonly: readonly=%d maps=%s write=%s view_write_raises=%d"
          % (c.pool_readonly, perms, "fault" if faulted else "went through",
             view_raised), flush=True)
    c.close()
    return 0 if perms == "r--s" and faulted and view_raised and \
        c.pool_readonly else 1


def lost(a):
    c = embgw.Client(a.socket, "p0", name="stopped")
    r = c.recv_room(a.room, peer=1)
    if r.wait(embgw.KVPoll.Success, 60) != embgw.KVPoll.Success:
        print("trust-lost: room did not land: %r" % r, flush=True)
        return 1
    views = r.tensors()
    first = views[0].clone()
    print("trust-lost: landed, stopping", flush=True)
    time.sleep(a.hold_s)               # as if SIGSTOPped: no call, no beat
    n = a.room & 0xffffffff
    want = expected(a.room, n, c.hidden_size, c.torch_dtype)[0]
    got = torch.cat([v.clone() for v in views])   # before any call
    held = bool(torch.equal(got.view(torch.int16), want.view(torch.int16)))
    raised = []
    for what, fn in (("release", r.release), ("poll", c.progress),
                     ("views", r.views)):
        try:
            fn()
        except ConnectionResetError as e:
            raised.append(what)
            why = str(e)
    zeros = int(torch.count_nonzero(views[0].view(torch.int16))) == 0
    print("trust-lost: held_bytes_exact=%d raised=%s revoked_zeros=%d "
          "first_was_data=%d why=%s" % (held, ",".join(raised), zeros,
                                        int(torch.count_nonzero(
                                            first.view(torch.int16)) > 0),
                                        why if raised else "-"),
          flush=True)
    c.close()
    return 0 if held and len(raised) == 3 and zeros else 1


def pool_file(c):
    """The file behind the client's pool mapping, opened again through
    /proc/self/map_files (None where that is not allowed): its size, and
    whether mapping past its end or growing it fails."""
    ptr = embgw._lib.lib.egw_client_region(c._c, 0, None)
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= ptr < hi:
                break
        else:
            return None
    try:
        fd = os.open("/proc/self/map_files/%x-%x" % (lo, hi), os.O_RDWR)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        try:
            mmap.mmap(fd, size + mmap.PAGESIZE).close()
            past = "mapped"
        except (ValueError, OSError):
            past = "fails"
        try:
            os.ftruncate(fd, size + mmap.PAGESIZE)
            grow = "grew"
        except OSError:
            grow = "fails"
        return size, past, grow
    finally:
        os.close(fd)


def attach_errno(path, name):
    try:
        return embgw.Client(path, "p0", name=name, timeout_ms=3000), "ok"
    except OSError as e:
        return None, errno.errorcode.get(e.errno, str(e.errno))


def segments(a):
    rooms = [int(x) for x in a.rooms.split(",")]
    ca = embgw.Client(a.socket, "p0", name="seg-a")
    cb = embgw.Client(a.socket, "p0", name="seg-b")
    ga, gb = ca.geometry, cb.geometry
    cut = ca.pool_segment and cb.pool_segment
    opened, inside = [], True
    for rid in rooms:
        n = rid & 0xffffffff
        r = ca.send_room(rid, n, cookie=rid)
        if r.wait(embgw.KVPoll.WaitingForInput, 60) != \
                embgw.KVPoll.WaitingForInput:
            print("trust-segments: room %#x not open: %r" % (rid, r),
                  flush=True)
            return 1
        emb, fill, mrope = expected(rid, n, ca.hidden_size, ca.torch_dtype)
        r.scatter(emb)
        r.scatter(fill, kind="fill_ids")
        r.scatter(mrope, kind="mrope")
        opened.append((r, emb, fill))
        # runs in A's mapping (the library refuses any outside it)
        inside = inside and all(
            k > 0 and s + k <= ga["nblocks"] for s, k in r.runs())
    # B: everything it can write, every kind, between A's scatter and
    # commit (the attack the segments are for)
    for arr in cb._regions.values():
        arr[:] = 0x41
    intact = all(same(torch.cat([v.clone() for v in r.tensors()]), emb) and
                 same(torch.cat([v.clone() for v in
                                 r.tensors("fill_ids")]), fill)
                 for r, emb, fill in opened)
    for r, _, _ in opened:
        r.commit()
    done = sum(r.wait(embgw.KVPoll.Success, 60) == embgw.KVPoll.Success
               for r, _, _ in opened)
    fb = pool_file(cb)
    line = ("trust-segments: cut=%d a_first=%d b_first=%d blocks=%d "
            "rooms_inside_a=%d a_intact_after_b_wrote=%d delivered=%d/%d "
            "b_file=%s" % (cut, ca.first_block, cb.first_block,
                           gb["nblocks"], inside, intact, done, len(opened),
                           fb))
    ok = cut and inside and intact and done == len(opened) and \
        ca.first_block != cb.first_block and \
        (fb is None or (fb[0] == gb["pool_bytes"] and fb[1:] ==
                        ("fails", "fails")))
    # every segment taken, one more engine refused; one detaches, and
    # its segment (no rooms) is given again
    more = [attach_errno(a.socket, "seg-%d" % i)
            for i in range(a.segments - 2)]
    _, over = attach_errno(a.socket, "seg-over")
    again = "-"
    if more and more[-1][0] is not None:
        more[-1][0].close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            c, again = attach_errno(a.socket, "seg-again")
            if c is not None:
                c.close()
                break
            time.sleep(0.1)
    line += " more=%s over=%s again=%s" % (
        ",".join(r for _, r in more), over, again)
    ok = ok and all(r == "ok" for _, r in more) and over == "EBUSY" and \
        again == "ok"
    print(line, flush=True)
    for c, _ in more:
        if c is not None:
            c.close()
    ca.close()
    cb.close()
    return 0 if ok else 1


def attach_result(path):
    """'ok', or the errno name of the refusal."""
    try:
        with embgw.Client(path, "p0", timeout_ms=3000) as c:
            return "ok" if c.nop() == 0 else "nop-failed"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def tenants(a):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
        out = "%s %s" % (attach_result(a.tenant), attach_result(a.socket))
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    child = os.read(r, 256).decode().split()
    os.waitpid(pid, 0)
    own = [attach_result(a.tenant), attach_result(a.socket)]
    print("trust-tenants: uid65534 tenant=%s main=%s; own uid tenant=%s "
          "main=%s" % (tuple(child + ["-", "-"])[:2] + tuple(own)),
          flush=True)
    return 0 if child == ["ok", "EACCES"] and own == ["ok", "ENOENT"] \
        else 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("check", choices=["flood", "readonly", "lost", "tenants",
                                     "segments"])
    p.add_argument("socket")
    p.add_argument("tenant", nargs="?")
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--engines", type=int, default=12)
    p.add_argument("--room", type=int, default=0)
    p.add_argument("--hold-s", type=float, default=3)
    p.add_argument("--rooms", default="")
    p.add_argument("--segments", type=int, default=4)
    a = p.parse_args()
    return {"flood": flood, "readonly": readonly, "lost": lost,
            "tenants": tenants, "segments": segments}[a.check](a)


if __name__ == "__main__":
    sys.exit(main())
