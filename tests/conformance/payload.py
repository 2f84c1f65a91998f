"""What lands in a receiver's blocks (doc/xfer.md, "Payload bytes"): the
built-in producer's pattern as a formula, and the aux record."""
import struct

M64 = (1 << 64) - 1
AUX = struct.Struct("<IIIiIIQ")  # total hidden dtype mrope_delta bt flags cookie
MROPE_DELTA = -7


def mix(x):
    x &= M64
    x ^= x >> 30
    x = (x * 0xbf58476d1ce4e5b9) & M64
    x ^= x >> 27
    x = (x * 0x94d049bb133111eb) & M64
    x ^= x >> 31
    return x


def embedding(room, t, nbytes):
    """The embedding bytes of token t of room `room` (E = nbytes)."""
    s = mix(room ^ ((t << 20) & M64))
    words = [mix(s + 8 * k) for k in range((nbytes + 7) // 8)]
    return struct.pack("<%dQ" % len(words), *words)[:nbytes]


def fill_id(room, t):
    return struct.pack("<I", (t ^ room) & 0xffffffff)


def mrope(room, t):
    return struct.pack("<III", t & 0xffffffff, (3 * t) & 0xffffffff,
                       (room >> 32) & 0xffffffff)


def aux_record(total, hidden, dtype, block_tokens, cookie, aux_bytes,
               mrope_delta=MROPE_DELTA):
    rec = AUX.pack(total, hidden, dtype, mrope_delta, block_tokens, 0, cookie)
    return rec.ljust(aux_bytes, b"\0")


def self_test():
    """The worked example of doc/xfer.md."""
    assert mix(0x2710) == 0x994a0f4abab2e080, hex(mix(0x2710))
    assert embedding(0x2710, 0, 8) == bytes.fromhex("18431cea5818bbcd")
    assert fill_id(0x2710, 0) == struct.pack("<I", 0x2710)
    assert mrope(0x2710, 0) == b"\0" * 12
