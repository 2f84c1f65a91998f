"""The shm pool file (doc/protocol.md, "The shm pool file"): the receiving
side's pool in a file the sending side maps."""
import errno
import fcntl
import mmap
import os
import struct

PMAGIC = 0x45475750
FORMAT = 1
HDR = struct.Struct(">IHHQQQIIIII I")
assert HDR.size == 56
DATA_OFFSET = 4096
KINDS = ("embedding", "fill_ids", "mrope", "aux")


def unit_bytes(geo, mrope=True):
    """Bytes per token (per block for aux) of each kind."""
    return [geo["hidden_size"] * geo["dtype_bytes"], 4, 12 if mrope else 0,
            geo["aux_bytes"]]


def layout(geo, mrope=True):
    """(addr, rkey, unit_bytes) per kind, regions back to back from 4096,
    each rounded up to 4096 bytes; and the file's size."""
    regions, addr = [], DATA_OFFSET
    for i, unit in enumerate(unit_bytes(geo, mrope)):
        if unit == 0:
            regions.append((0, 0, 0))
            continue
        per_block = unit if i == 3 else unit * geo["block_tokens"]
        size = per_block * geo["pool_blocks"]
        regions.append((addr, 0, unit))
        addr += (size + 4095) // 4096 * 4096
    return regions, addr


class PoolFile:
    """A pool file this peer owns (the language side's pool)."""

    def __init__(self, path, geo, session, mrope=True):
        self.path, self.geo = path, geo
        self.regions, self.size = layout(geo, mrope)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        self.fd = fd
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.posix_fallocate(fd, 0, self.size)
        self.map = mmap.mmap(fd, self.size)
        st = os.fstat(fd)
        self.ident = (st.st_dev, st.st_ino)
        self.write_header(session)

    def write_header(self, session):
        g = self.geo
        self.map[0:56] = HDR.pack(PMAGIC, FORMAT, 0, 0, self.size, DATA_OFFSET,
                                  g["block_tokens"], g["pool_blocks"],
                                  g["hidden_size"], g["dtype_bytes"],
                                  g["aux_bytes"], os.getpid())
        # the session last, when the file is ready
        self.map[8:16] = struct.pack(">Q", session)

    def close(self):
        self.map.close()
        try:
            st = os.stat(self.path)
            if (st.st_dev, st.st_ino) == self.ident:
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        os.close(self.fd)


def read_header(path):
    with open(path, "rb") as f:
        raw = f.read(4096)
    (magic, fmt, res, session, file_bytes, data_offset, bt, pb, hidden,
     dtype, aux, pid) = HDR.unpack_from(raw)
    return dict(magic=magic, format=fmt, reserved=res, session=session,
                file_bytes=file_bytes, data_offset=data_offset,
                block_tokens=bt, pool_blocks=pb, hidden_size=hidden,
                dtype_bytes=dtype, aux_bytes=aux, owner_pid=pid,
                reserved_tail=raw[56:4096])


def lock_is_held(path):
    """True when another process holds the flock of the file at path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return True
        raise
    finally:
        os.close(fd)
    return False


class MappedPeerPool:
    """The language gateway's pool file mapped by this (encode) peer."""

    def __init__(self, path, size):
        self.fd = os.open(path, os.O_RDWR)
        self.map = mmap.mmap(self.fd, size)

    def close(self):
        self.map.close()
        os.close(self.fd)
