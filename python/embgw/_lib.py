# SPDX-License-Identifier: BSD-3-Clause
"""ctypes bindings of libegw_client.so (lib/client/egw_client.h).

The library is loaded on first use (importing embgw, or embgw.cuda alone,
loads nothing) from the first of: $EMBGW_CLIENT_LIB (a path); the system's
library path (libegw_client.so as installed, found by
ctypes.util.find_library); the build tree of the checkout this package
sits in (build*/lib/client/libegw_client.so next to python/).
"""
import ctypes
import ctypes.util
import errno
import glob
import os
import threading

c_u8, c_u16, c_u32, c_i32, c_u64 = (ctypes.c_uint8, ctypes.c_uint16,
                                    ctypes.c_uint32, ctypes.c_int32,
                                    ctypes.c_uint64)

F_WAKEUP = 0x1
F_LEASE_THREAD = 0x2
F_PEER_EVENTS = 0x4
PEER_READY, PEER_LEAVING = 0x1, 0x2
G_ENCODE, G_LANGUAGE, G_WAKEUP = 0x1, 0x2, 0x4
EV_MORE, EV_CACHED, EV_END, EV_REFUSED = 0x1, 0x2, 0x100, 0x200
AUX_ONLY = 0x1
OP_NOP, OP_SEND_OPEN, OP_SEND_COMMIT, OP_RECV_OPEN, OP_RELEASE, OP_ABORT, \
    OP_LOOKUP, OP_PEERS = range(8)
CONTENT_BYTES = 16
ERR_BASE = 1000  # embgw codes are -(ERR_BASE + wire code), lib/err
OP_RECOVERED = 255
KINDS = {"embedding": 0, "fill_ids": 1, "mrope": 2, "aux": 3}


# The library's ABI these copies of egw_client.h's structs follow
# (EGW_CLIENT_ABI_VERSION); tests/python/test_abi.py compares them with
# the C layouts, _load() refuses a library of another ABI.
ABI_VERSION = 2


class Opts(ctypes.Structure):
    _fields_ = [("size", c_u32), ("flags", c_u32),
                ("name", ctypes.c_char_p),
                ("sq_entries", c_u32), ("cq_entries", c_u32),
                ("nslots", c_u32), ("timeout_ms", c_u32)]

    def __init__(self, **kw):
        super().__init__(size=ctypes.sizeof(Opts), **kw)


class Geometry(ctypes.Structure):
    _fields_ = [(n, c_u32) for n in (
        "flags", "client_id", "capacity_tokens", "block_tokens", "nblocks",
        "hidden_size", "dtype", "dtype_bytes", "aux_bytes", "mrope",
        "max_runs", "max_total_tokens", "lease_ms", "max_peers", "nslots",
        "sq_entries", "cq_entries", "first_block")] + [
        ("pool_bytes", c_u64), ("region_offset", c_u64 * 4),
        ("region_bytes", c_u64 * 4)]


class Event(ctypes.Structure):
    _fields_ = [("tag", c_u64), ("room", c_u64), ("result", c_i32),
                ("slot", c_u32), ("op", c_u32), ("state", c_u32),
                ("flags", c_u32), ("total_tokens", c_u32),
                ("nruns", c_u32), ("landed_tokens", c_u32)]


class RoomInfo(ctypes.Structure):
    _fields_ = [("room", c_u64), ("state", c_u32), ("error", c_i32),
                ("total_tokens", c_u32), ("nruns", c_u32),
                ("first_block", c_u32), ("slot", c_u32)]


class Run(ctypes.Structure):
    _fields_ = [("start", c_u32), ("count", c_u32)]


class Aux(ctypes.Structure):
    _fields_ = [("total_tokens", c_u32), ("hidden_size", c_u32),
                ("dtype_bytes", c_u32), ("mrope_delta", c_i32),
                ("block_tokens", c_u32), ("flags", c_u32),
                ("cookie", c_u64)]


class Peer(ctypes.Structure):
    _fields_ = [("id", c_u32), ("flags", c_u32), ("name", ctypes.c_char * 32)]


class Stats(ctypes.Structure):
    _fields_ = [("updated_ns", c_u64), ("pool_blocks", c_u32),
                ("free_blocks", c_u32), ("quarantined_blocks", c_u32),
                ("admission_queue", c_u32), ("cache_entries", c_u32),
                ("cache_blocks", c_u32), ("cache_pinned", c_u32),
                ("reserved", c_u32), ("cache_hits", c_u64),
                ("cache_misses", c_u64), ("cache_shared", c_u64),
                ("cache_evictions", c_u64)]


def candidates():
    """Where the library is looked for, in order, as (how, path)."""
    out = []
    env = os.environ.get("EMBGW_CLIENT_LIB")
    if env:
        out.append(("$EMBGW_CLIENT_LIB", env))
    found = ctypes.util.find_library("egw_client")
    if found:
        out.append(("the system's library path", found))
    # <checkout>/python/embgw/_lib.py -> <checkout>/build*/lib/client/;
    # build/ first, then the other build directories, newest first
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    # only files that are there: a build directory that built other
    # targets only can hold the soname's link without its library
    tree = [p for p in glob.glob(os.path.join(root, "build*", "lib",
                                              "client", "libegw_client.so"))
            if os.path.isfile(p)]
    tree.sort(key=lambda p: (os.path.basename(os.path.dirname(
        os.path.dirname(os.path.dirname(p)))) != "build",
        -os.path.getmtime(p)))
    out.extend(("the build tree", p) for p in tree)
    return out


def _open(required):
    """The first candidate that loads and has every call in `required`;
    an installed copy older than this package is passed over."""
    tried = []
    for how, path in candidates():
        try:
            lib = ctypes.CDLL(path)
            missing = [n for n in required if not hasattr(lib, n)]
            if missing:
                raise OSError("an older library than this package (no %s)"
                              % ", ".join(missing[:3]))
            abi = lib.egw_client_abi_version()
            if abi != ABI_VERSION:
                raise OSError("a library of ABI %d, this package speaks "
                              "ABI %d (libegw_client.so.%d)"
                              % (abi, ABI_VERSION, ABI_VERSION))
            return lib, path
        except OSError as e:
            if how == "$EMBGW_CLIENT_LIB":
                # a path the user named is not second-guessed
                raise OSError(e.errno, "EMBGW_CLIENT_LIB=%s cannot be "
                              "used: %s" % (path, e)) from None
            tried.append("%s (%s): %s" % (path, how, e))
    raise OSError("libegw_client.so not found: set EMBGW_CLIENT_LIB to its "
                  "path, install it (meson install), or build this checkout "
                  "(meson setup build; ninja -C build)%s"
                  % ("; tried " + "; ".join(tried) if tried else ""))


def _load():
    P = ctypes.c_void_p
    sigs = {
        "egw_client_abi_version": (ctypes.c_uint, []),
        "egw_client_attach": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p,
                                             ctypes.POINTER(Opts),
                                             ctypes.POINTER(P)]),
        "egw_client_last_error": (ctypes.c_char_p, []),
        "egw_client_detach": (None, [P]),
        "egw_client_geometry": (ctypes.POINTER(Geometry), [P]),
        "egw_client_peers": (ctypes.c_int, [P, ctypes.POINTER(Peer), c_u32,
                                            ctypes.POINTER(c_u64)]),
        "egw_client_peer_id": (ctypes.c_int, [P, ctypes.c_char_p]),
        "egw_client_region": (P, [P, ctypes.c_int, ctypes.POINTER(c_u64)]),
        "egw_client_socket_fd": (ctypes.c_int, [P]),
        "egw_client_event_fd": (ctypes.c_int, [P]),
        "egw_client_send_open": (ctypes.c_int, [P, c_u64, c_u32, c_u16,
                                                c_i32, c_u64, c_u64]),
        "egw_client_send_commit": (ctypes.c_int, [P, c_u32, c_u64]),
        "egw_client_recv_open": (ctypes.c_int, [P, c_u64, c_u32, c_u16,
                                                c_u16, c_u32, c_u64]),
        "egw_client_send_open_ex": (ctypes.c_int, [P, c_u64, c_u32, c_u16,
                                                   c_i32, c_u64, c_u32,
                                                   ctypes.c_char_p, c_u64]),
        "egw_client_recv_open_ex": (ctypes.c_int, [P, c_u64, c_u32, c_u16,
                                                   c_u16, c_u32, c_u32,
                                                   ctypes.c_char_p, c_u64]),
        "egw_client_recv_open_named": (ctypes.c_int, [P, c_u64,
                                                      ctypes.c_char_p, c_u16,
                                                      c_u16, c_u32, c_u32,
                                                      ctypes.c_char_p,
                                                      c_u64]),
        "egw_client_lookup": (ctypes.c_int, [P, ctypes.c_char_p, c_u64]),
        "egw_client_release": (ctypes.c_int, [P, c_u32, c_u64]),
        "egw_client_abort": (ctypes.c_int, [P, c_u32, c_u64]),
        "egw_client_nop": (ctypes.c_int, [P, c_u64]),
        "egw_client_poll": (ctypes.c_int, [P, ctypes.POINTER(Event),
                                           ctypes.c_uint]),
        "egw_client_wait": (ctypes.c_int, [P, ctypes.c_uint]),
        "egw_client_beat": (None, [P]),
        "egw_client_overflow": (c_u32, [P]),
        "egw_client_room_info": (ctypes.c_int, [P, c_u32,
                                                ctypes.POINTER(RoomInfo)]),
        "egw_client_room_runs": (ctypes.c_int, [P, c_u32, ctypes.POINTER(Run),
                                                c_u32]),
        "egw_client_room_aux": (ctypes.c_int, [P, c_u32,
                                               ctypes.POINTER(Aux)]),
        "egw_client_strerror": (ctypes.c_char_p, [ctypes.c_int]),
        "egw_client_state_name": (ctypes.c_char_p, [c_u32]),
        # _trust's
        "egw_client_check": (ctypes.c_int, [P]),
        "egw_client_lost": (c_u32, [P]),
        "egw_client_detach_keep": (None, [P, ctypes.POINTER(P),
                                          ctypes.POINTER(ctypes.c_size_t)]),
        "egw_client_unmap_kept": (None, [P, ctypes.c_size_t]),
    }
    # newer calls: a library without them still loads (hasattr says)
    optional = {
        "egw_client_poll_fd": (ctypes.c_int, [P]),
        "egw_client_prepare": (ctypes.c_int, [P, ctypes.POINTER(c_u32)]),
        "egw_client_stats": (ctypes.c_int, [P, ctypes.POINTER(Stats)]),
    }
    lib, path = _open(sigs)
    for name, (res, args) in list(sigs.items()) + list(optional.items()):
        f = getattr(lib, name, None)
        if f is None:
            continue
        f.restype = res
        f.argtypes = args
    lib.path = path
    return lib


class _Lazy:
    """The library, loaded on the first attribute asked for."""

    _lock = threading.Lock()
    _lib = None

    def __getattr__(self, name):
        if _Lazy._lib is None:
            with _Lazy._lock:
                if _Lazy._lib is None:
                    _Lazy._lib = _load()
        return getattr(_Lazy._lib, name)

    @staticmethod
    def loaded():
        return _Lazy._lib is not None


lib = _Lazy()


def last_error():
    return (lib.egw_client_last_error() or b"").decode(errors="replace")


def strerror(code):
    return lib.egw_client_strerror(code).decode()


# the rule behind a refusal's errno, with the limit from the welcome
_RULES = {
    errno.EFBIG: "total_tokens above the port's max_total_tokens "
                 "(%(max_total_tokens)d)",
    errno.ENOSPC: "every one of the client's %(nslots)d slots holds a room "
                  "(end or release one first)",
    errno.EAGAIN: "the submission ring (%(sq_entries)d entries) is full: "
                  "progress() and try again",
    errno.ERANGE: "rank or nranks outside 0 <= rank < nranks <= 8",
    errno.EOPNOTSUPP: "the port does not serve this side (encode %(enc)s, "
                      "language %(lang)s)",
}


def explain(code, geometry=None):
    """A result code as text; a refused command's errno also names the
    rule and the limit (from the client's geometry)."""
    text = strerror(code)
    rule = _RULES.get(-code) if -4096 < code < 0 else None
    if rule and geometry is not None:
        g = dict(geometry)
        g.setdefault("enc", bool(g.get("flags", 0) & G_ENCODE))
        g.setdefault("lang", bool(g.get("flags", 0) & G_LANGUAGE))
        try:
            text = "%s: %s" % (text, rule % g)
        except (KeyError, TypeError):
            pass
    return text


def check(rc, what, geometry=None):
    """A negative errno becomes an OSError (FileNotFoundError for ENOENT,
    BlockingIOError for EAGAIN, ...) carrying the library's message and,
    given the client's geometry, the rule with its limit."""
    if rc < 0:
        msg = last_error() or os.strerror(-rc)
        rule = explain(rc, geometry) if geometry is not None else ""
        if rule and rule != strerror(rc):
            msg = "%s [%s]" % (msg, rule[len(strerror(rc)) + 2:])
        raise OSError(-rc, "%s: %s" % (what, msg))
    return rc
