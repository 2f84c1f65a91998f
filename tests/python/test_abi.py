# SPDX-License-Identifier: BSD-3-Clause
"""The Python package's ctypes copies of egw_client.h against the C
library they load: struct sizes, field names, offsets and sizes (from
tests/python/abi_layout.c), the ABI version, and the options' size rule.

$EMBGW_ABI_LAYOUT names the layout program; without it the program is
looked for in the build tree of $EMBGW_CLIENT_LIB (meson sets both).
"""
import ctypes
import errno
import os
import subprocess

import pytest

from embgw import _lib

STRUCTS = {
    "egw_client_opts": _lib.Opts,
    "egw_client_geometry": _lib.Geometry,
    "egw_client_event": _lib.Event,
    "egw_client_room": _lib.RoomInfo,
    "egw_client_run": _lib.Run,
    "egw_client_aux": _lib.Aux,
    "egw_client_stats": _lib.Stats,
    "egw_client_peer": _lib.Peer,
}


def layout_program():
    path = os.environ.get("EMBGW_ABI_LAYOUT")
    if not path and os.environ.get("EMBGW_CLIENT_LIB"):
        build = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(os.environ["EMBGW_CLIENT_LIB"]))))
        path = os.path.join(build, "tests", "python", "abi_layout")
    if not path or not os.access(path, os.X_OK):
        pytest.fail("no layout program (tests/python/abi_layout.c): set "
                    "$EMBGW_ABI_LAYOUT or $EMBGW_CLIENT_LIB (meson test "
                    "sets both); tried %r" % path)
    return path


@pytest.fixture(scope="module")
def c_layout():
    """{"abi": n, struct: (size, [(field, offset, size), ...])}"""
    out = subprocess.run([layout_program()], check=True,
                         capture_output=True, text=True).stdout
    layout, cur = {}, None
    for line in out.splitlines():
        kind, *rest = line.split()
        if kind == "abi":
            layout["abi"] = int(rest[0])
        elif kind == "struct":
            cur = rest[0]
            layout[cur] = (int(rest[1]), [])
        else:
            layout[cur][1].append((rest[0], int(rest[1]), int(rest[2])))
    return layout


def py_fields(cls):
    return [(name, getattr(cls, name).offset, getattr(cls, name).size)
            for name, _ in cls._fields_]


def test_every_public_struct_has_a_ctypes_copy(c_layout):
    assert sorted(k for k in c_layout if k != "abi") == sorted(STRUCTS)


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_ctypes_layout_is_the_c_layout(c_layout, name):
    size, fields = c_layout[name]
    cls = STRUCTS[name]
    assert fields, "the layout program listed no field of " + name
    assert py_fields(cls) == fields, name
    assert ctypes.sizeof(cls) == size, name


def test_the_library_speaks_the_package_abi(c_layout):
    assert c_layout["abi"] == _lib.ABI_VERSION
    assert _lib.lib.egw_client_abi_version() == _lib.ABI_VERSION
    real = os.path.basename(os.path.realpath(_lib.lib.path))
    assert real.startswith("libegw_client.so.%d." % _lib.ABI_VERSION), real


def attach_with(opts):
    handle = ctypes.c_void_p()
    as_opts = ctypes.cast(ctypes.pointer(opts), ctypes.POINTER(_lib.Opts))
    return _lib.lib.egw_client_attach(b"/nonexistent/embgw-abi.sock",
                                      b"port0", as_opts, ctypes.byref(handle))


def test_options_carry_their_size():
    assert _lib.Opts().size == ctypes.sizeof(_lib.Opts)
    # a valid size gets as far as the socket
    assert attach_with(_lib.Opts()) == -errno.ENOENT


def test_options_of_an_unknown_newer_header_are_refused():
    class Newer(ctypes.Structure):
        _fields_ = _lib.Opts._fields_ + [("later", ctypes.c_uint64)]

    rc = attach_with(Newer(size=ctypes.sizeof(Newer)))
    assert rc == -errno.EINVAL
    assert "newer egw_client.h" in _lib.last_error()


def test_options_without_a_size_are_refused():
    opts = _lib.Opts()
    opts.size = 0
    assert attach_with(opts) == -errno.EINVAL
    assert "egw_client_opts.size is 0" in _lib.last_error()
