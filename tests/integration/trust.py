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
    trust.py tenants MAIN TENANT
        port p0 is served on the tenant's socket only, which allows uid
        65534: uid 65534 attaches there and is refused on MAIN; the
        gateway's own uid attaches on TENANT and finds no p0 on MAIN
"""
import argparse
import ctypes
import errno
import os
import signal
import socket
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "python"))
import embgw  # noqa: E402
from engine import expected  # noqa: E402


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
    p.add_argument("check", choices=["flood", "readonly", "lost", "tenants"])
    p.add_argument("socket")
    p.add_argument("tenant", nargs="?")
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--engines", type=int, default=12)
    p.add_argument("--room", type=int, default=0)
    p.add_argument("--hold-s", type=float, default=3)
    a = p.parse_args()
    return {"flood": flood, "readonly": readonly, "lost": lost,
            "tenants": tenants}[a.check](a)


if __name__ == "__main__":
    sys.exit(main())
