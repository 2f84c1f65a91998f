# SPDX-License-Identifier: BSD-3-Clause
"""What a client may still do once it lost the gateway (doc/client.md,
"Trust"): the library's check, and the pool's address range kept mapped
(revoked: zero pages, never another room's bytes) while any NumPy view or
tensor of it exists, so that a view used after Client.close() reads
zeros instead of killing the process."""
import ctypes
import errno

from ._lib import lib, last_error

# the calls' signatures are set where the library is loaded (_lib), on
# first use: importing embgw loads nothing
_P = ctypes.c_void_p

G_POOL_RDONLY = 0x8
G_POOL_SEGMENT = 0x10


class LostError(ConnectionResetError):
    """The gateway gave this client up, went away, or the client was
    closed: its rooms are gone and its pool views hold no room data."""


class PoolKeeper:
    """Owns the pool's address range once the client is closed; every
    buffer the pool's views are made from holds a reference to it, so the
    range is unmapped only after the last view is gone."""

    def __init__(self):
        self.addr = None
        self.bytes = 0

    def buffer(self, ptr, size):
        """A ctypes buffer over pool memory that keeps this keeper."""
        buf = (ctypes.c_uint8 * size).from_address(ptr)
        buf._keeper = self
        return buf

    def __del__(self):
        if self.addr:
            lib.egw_client_unmap_kept(self.addr, self.bytes)
            self.addr = None


def detach(handle, keeper):
    """Detach, leaving the pool's range to `keeper` (revoked)."""
    addr, size = _P(), ctypes.c_size_t()
    lib.egw_client_detach_keep(handle, ctypes.byref(addr), ctypes.byref(size))
    keeper.addr, keeper.bytes = addr.value, size.value


def check(client):
    """Raise LostError unless the gateway still holds `client`."""
    if not client._c:
        raise LostError(errno.ECONNRESET, "the client is closed: its room "
                        "views hold no room data")
    rc = lib.egw_client_check(client._c)
    if rc < 0:
        raise LostError(-rc, last_error() or "the client lost the gateway")
