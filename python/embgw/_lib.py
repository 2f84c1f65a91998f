# SPDX-License-Identifier: BSD-3-Clause
"""ctypes bindings of libegw_client.so (lib/client/egw_client.h).

The library is found through $EMBGW_CLIENT_LIB (a path), else the system's
library path (libegw_client.so, as installed with its pkg-config file).
"""
import ctypes
import ctypes.util
import os

c_u8, c_u16, c_u32, c_i32, c_u64 = (ctypes.c_uint8, ctypes.c_uint16,
                                    ctypes.c_uint32, ctypes.c_int32,
                                    ctypes.c_uint64)

F_WAKEUP = 0x1
F_LEASE_THREAD = 0x2
G_ENCODE, G_LANGUAGE, G_WAKEUP = 0x1, 0x2, 0x4
EV_MORE, EV_CACHED, EV_END, EV_REFUSED = 0x1, 0x2, 0x100, 0x200
AUX_ONLY = 0x1
OP_NOP, OP_SEND_OPEN, OP_SEND_COMMIT, OP_RECV_OPEN, OP_RELEASE, OP_ABORT, \
    OP_LOOKUP = range(7)
CONTENT_BYTES = 16
OP_RECOVERED = 255
KINDS = {"embedding": 0, "fill_ids": 1, "mrope": 2, "aux": 3}


class Opts(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("flags", c_u32),
                ("sq_entries", c_u32), ("cq_entries", c_u32),
                ("nslots", c_u32), ("timeout_ms", c_u32)]


class Geometry(ctypes.Structure):
    _fields_ = [(n, c_u32) for n in (
        "flags", "client_id", "capacity_tokens", "block_tokens", "nblocks",
        "hidden_size", "dtype", "dtype_bytes", "aux_bytes", "mrope",
        "max_runs", "max_total_tokens", "lease_ms", "npeers", "nslots",
        "sq_entries", "cq_entries", "reserved")] + [
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


def _load():
    path = os.environ.get("EMBGW_CLIENT_LIB") or \
        ctypes.util.find_library("egw_client") or "libegw_client.so"
    lib = ctypes.CDLL(path)
    P = ctypes.c_void_p
    sigs = {
        "egw_client_attach": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p,
                                             ctypes.POINTER(Opts),
                                             ctypes.POINTER(P)]),
        "egw_client_last_error": (ctypes.c_char_p, []),
        "egw_client_detach": (None, [P]),
        "egw_client_geometry": (ctypes.POINTER(Geometry), [P]),
        "egw_client_peer": (ctypes.c_char_p, [P, c_u32]),
        "egw_client_region": (P, [P, ctypes.c_int, ctypes.POINTER(c_u64)]),
        "egw_client_socket_fd": (ctypes.c_int, [P]),
        "egw_client_event_fd": (ctypes.c_int, [P]),
        "egw_client_send_open": (ctypes.c_int, [P, c_u64, c_u32, c_u16,
                                                c_i32, c_u64, c_u64]),
        "egw_client_send_commit": (ctypes.c_int, [P, c_u32, c_u64]),
        "egw_client_recv_open": (ctypes.c_int, [P, c_u64, c_u16, c_u16,
                                                c_u16, c_u32, c_u64]),
        "egw_client_send_open_ex": (ctypes.c_int, [P, c_u64, c_u32, c_u16,
                                                   c_i32, c_u64, c_u32,
                                                   ctypes.c_char_p, c_u64]),
        "egw_client_recv_open_ex": (ctypes.c_int, [P, c_u64, c_u16, c_u16,
                                                   c_u16, c_u32, c_u32,
                                                   ctypes.c_char_p, c_u64]),
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
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib


lib = _load()


def last_error():
    return (lib.egw_client_last_error() or b"").decode(errors="replace")


def strerror(code):
    return lib.egw_client_strerror(code).decode()


def check(rc, what):
    """A negative errno becomes an OSError (FileNotFoundError for ENOENT,
    BlockingIOError for EAGAIN, ...) carrying the library's message."""
    if rc < 0:
        raise OSError(-rc, "%s: %s" % (what, last_error() or
                                       os.strerror(-rc)))
    return rc
