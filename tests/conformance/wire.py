"""The embgw control protocol, version 3, as doc/protocol.md writes it:
header, bodies, tag and key derivation. Written from the documentation
alone, as an independent implementation to check the gateway against."""
import functools
import hashlib
import hmac
import struct

try:
    from nacl.bindings import crypto_shorthash_siphashx24
except ImportError as e:  # a bare machine: say what to install
    raise SystemExit("conformance: PyNaCl is missing (%s): Debian's "
                     "python3-nacl, which scripts/deps.sh installs" % e)

MAGIC = 0x45475731
VERSION = 3
HDR = struct.Struct(">IBBHHHHHQQIIQ")
assert HDR.size == 48
TAG_LEN = 16

INIT, RESUME, STATUS, HEARTBEAT, ABORT, ERROR, REGISTER = range(1, 8)
TYPE_NAMES = {INIT: "INIT", RESUME: "RESUME", STATUS: "STATUS",
              HEARTBEAT: "HEARTBEAT", ABORT: "ABORT", ERROR: "ERROR",
              REGISTER: "REGISTER"}

F_DUMMY = 0x0001  # INIT
F_ACK = 0x0002    # ABORT (encode -> language), REGISTER
F_POLL = 0x0004   # STATUS (language -> encode)
F_ADOPTED = 0x0008  # REGISTER

BOOTSTRAPPING, WAITING, TRANSFERRING, SUCCESS, FAILED = range(5)

ERR = dict(UNKNOWN_ROOM=1, BAD_RANK=2, BLOCK_TOKENS=3, ALLOC_MISMATCH=4,
           ZERO_BLOCKS=5, BAD_BLOCKS=6, BEYOND_TOTAL=7, STATE=8,
           TOTAL_CHANGED=9, BAD_STATUS=10, BUSY=11, TOO_LARGE=12, NO_SLOT=13,
           DUPLICATE_ROOM=14, TIMEOUT_BOOTSTRAP=15, TIMEOUT_INPUT=16,
           TIMEOUT_ROUND=17, POOL_EXHAUSTED=18, PEER_DEAD=19, ABORTED=20,
           TRANSPORT=21, UNKNOWN_PEER=22, GEOMETRY=23, UNREACHABLE=24,
           NAME=25)
ERR_NAME = {v: k for k, v in ERR.items()}

WINDOW = struct.Struct(">IIHH4I")  # block_tokens alloc nruns reserved 4 rkeys
assert WINDOW.size == 28
RUN = struct.Struct(">II")
STATUS_BODY = struct.Struct(">BBHIII")
ABORT_BODY = struct.Struct(">HH")
ERROR_BODY = struct.Struct(">BBH")
REGION = struct.Struct(">QII")
REG_HEAD = struct.Struct(">32s16sIIHHIIIII")
REG_TAIL = struct.Struct(">QIIQ")  # peer_session ack_qpn ack_psn peer_seq
REGISTER_LEN = REG_HEAD.size + 4 * REGION.size + REG_TAIL.size
assert REGISTER_LEN == 168
MAX_RUNS = 32


def derive_key(psk_bytes):
    """K = BLAKE2b(out 32, key "embgw-psk-key-v1", the key file's bytes)."""
    return hashlib.blake2b(psk_bytes, key=b"embgw-psk-key-v1",
                           digest_size=32).digest()


@functools.lru_cache(maxsize=8)
def mac_key(key):
    """K_mac = BLAKE2b(out 16, key K, "embgw-mac-v3"): the tag's key."""
    return hashlib.blake2b(b"embgw-mac-v3", key=key, digest_size=16).digest()


def tag(key, data):
    """SipHash-2-4 with a 128-bit output under K_mac (`key` is K)."""
    return crypto_shorthash_siphashx24(data, mac_key(key))


class Msg:
    """A decoded datagram: header fields plus the raw body."""
    FIELDS = ("type", "flags", "rank", "nranks", "session", "room",
              "offset", "seq", "body", "raw", "res14", "res36")

    def __init__(self, **kw):
        for k in self.FIELDS:
            setattr(self, k, kw.get(k, 0))
        if not self.body:
            self.body = b""

    def __repr__(self):
        return ("Msg(%s flags=%#x rank=%d/%d session=%#x room=%#x off=%d "
                "seq=%d body=%d)" % (TYPE_NAMES.get(self.type, self.type),
                                     self.flags, self.rank, self.nranks,
                                     self.session, self.room, self.offset,
                                     self.seq, len(self.body)))


def header(mtype, flags, body_len, rank, nranks, session, room, offset, seq,
           magic=MAGIC, version=VERSION, res14=0, res36=0):
    return HDR.pack(magic, version, mtype, flags, body_len, rank, nranks,
                    res14, session, room, offset, res36, seq)


def seal(key, hdr, body):
    data = hdr + body
    return data + tag(key, data)


def encode(key, mtype, body=b"", flags=0, rank=0, nranks=0, session=0,
           room=0, offset=0, seq=0, **over):
    """A whole datagram; `over` overrides header fields (magic, version,
    body_len, res14, res36) to craft refusals."""
    body_len = over.pop("body_len", len(body))
    hdr = header(mtype, flags, body_len, rank, nranks, session, room, offset,
                 seq, **over)
    return seal(key, hdr, body)


def decode(key, data):
    """Authenticate and split a datagram; None when it is not one of ours
    (a peer under test must never send such a datagram)."""
    if len(data) < 64 or len(data) > 512:
        return None
    (magic, version, mtype, flags, body_len, rank, nranks, res14, session,
     room, offset, res36, seq) = HDR.unpack_from(data)
    if magic != MAGIC or version != VERSION or body_len != len(data) - 64:
        return None
    if not hmac.compare_digest(tag(key, data[:-TAG_LEN]), data[-TAG_LEN:]):
        return None
    m = Msg(type=mtype, flags=flags, rank=rank, nranks=nranks,
            session=session, room=room, offset=offset, seq=seq,
            body=data[48:-TAG_LEN], raw=data)
    m.res14, m.res36 = res14, res36  # checked by the caller
    return m


# ---- bodies ---------------------------------------------------------------

def window_body(block_tokens, alloc_tokens, runs, rkeys=(0, 0, 0, 0),
                nruns=None, reserved=0):
    """INIT/RESUME body: 28 bytes, then 8 per run; rkeys one per kind
    (embedding, fill_ids, mrope, aux), 0 = the region's (shm: always 0)."""
    b = WINDOW.pack(block_tokens, alloc_tokens,
                    len(runs) if nruns is None else nruns, reserved, *rkeys)
    return b + b"".join(RUN.pack(s, c) for s, c in runs)


def parse_window(body):
    bt, alloc, nruns, res, *rkeys = WINDOW.unpack_from(body)
    runs = [RUN.unpack_from(body, WINDOW.size + 8 * i) for i in range(nruns)]
    return bt, alloc, runs, rkeys


def status_body(state=0, error=0, total=0, landed=0, accepted=0, res=0):
    return STATUS_BODY.pack(state, res, error, total, landed, accepted)


def parse_status(body):
    state, res, error, total, landed, accepted = STATUS_BODY.unpack(body)
    return dict(state=state, reserved=res, error=error, total=total,
                landed=landed, accepted=accepted)


def abort_body(code, abort_id=0):
    return ABORT_BODY.pack(code, abort_id)


def error_body(rtype, code, res=0):
    return ERROR_BODY.pack(rtype, res, code)


def parse_error(body):
    rtype, res, code = ERROR_BODY.unpack(body)
    return dict(type=rtype, reserved=res, code=code)


def register_body(name, roles, geo, regions, peer_session=0, qpn=0, psn=0,
                  mtu=4096, gid=b"\0" * 16, ack_qpn=0, ack_psn=0, peer_seq=0):
    """geo: dict block_tokens pool_blocks hidden_size dtype_bytes aux_bytes;
    regions: 4 x (addr, rkey, unit_bytes) for embedding, fill_ids, mrope,
    aux."""
    b = REG_HEAD.pack(name.encode().ljust(32, b"\0"), gid, qpn, psn, mtu,
                      roles, geo["block_tokens"], geo["pool_blocks"],
                      geo["hidden_size"], geo["dtype_bytes"],
                      geo["aux_bytes"])
    b += b"".join(REGION.pack(*r) for r in regions)
    return b + REG_TAIL.pack(peer_session, ack_qpn, ack_psn, peer_seq)


def parse_register(body):
    (name, gid, qpn, psn, mtu, roles, bt, pb, hidden, dtype,
     aux) = REG_HEAD.unpack_from(body)
    regions = [REGION.unpack_from(body, REG_HEAD.size + REGION.size * i)
               for i in range(4)]
    peer_session, ack_qpn, ack_psn, peer_seq = REG_TAIL.unpack_from(
        body, REG_HEAD.size + 4 * REGION.size)
    return dict(name_raw=name, name=name.rstrip(b"\0").decode("ascii", "replace"),
                gid=gid, qpn=qpn, psn=psn, mtu=mtu, roles=roles,
                block_tokens=bt, pool_blocks=pb, hidden_size=hidden,
                dtype_bytes=dtype, aux_bytes=aux, regions=regions,
                peer_session=peer_session, ack_qpn=ack_qpn, ack_psn=ack_psn,
                peer_seq=peer_seq)


def parse_abort(body):
    code, abort_id = ABORT_BODY.unpack(body)
    return dict(code=code, abort_id=abort_id)
