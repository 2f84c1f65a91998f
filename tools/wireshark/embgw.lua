-- Wireshark dissector for the embgw control protocol, version 3
-- (doc/protocol.md). Install: copy to ~/.local/lib/wireshark/plugins/ or
-- run tshark -X lua_script:tools/wireshark/embgw.lua. Registered on UDP
-- 9471 ("Decode As" for other ports).

local p = Proto("embgw", "embgw control protocol")

local types = {
  [1] = "INIT", [2] = "RESUME", [3] = "STATUS", [4] = "HEARTBEAT",
  [5] = "ABORT", [6] = "ERROR", [7] = "REGISTER",
}
local states = {
  [0] = "Bootstrapping", [1] = "WaitingForInput", [2] = "Transferring",
  [3] = "Success", [4] = "Failed",
}
local errors = {
  [0] = "ok", [1] = "UNKNOWN_ROOM", [2] = "BAD_RANK", [3] = "BLOCK_TOKENS",
  [4] = "ALLOC_MISMATCH", [5] = "ZERO_BLOCKS", [6] = "BAD_BLOCKS",
  [7] = "BEYOND_TOTAL", [8] = "STATE", [9] = "TOTAL_CHANGED",
  [10] = "BAD_STATUS", [11] = "BUSY", [12] = "TOO_LARGE", [13] = "NO_SLOT",
  [14] = "DUPLICATE_ROOM", [15] = "TIMEOUT_BOOTSTRAP", [16] = "TIMEOUT_INPUT",
  [17] = "TIMEOUT_ROUND", [18] = "POOL_EXHAUSTED", [19] = "PEER_DEAD",
  [20] = "ABORTED", [21] = "TRANSPORT", [22] = "UNKNOWN_PEER",
  [23] = "GEOMETRY", [24] = "UNREACHABLE", [25] = "NAME",
}
local kinds = { [0] = "embedding", [1] = "fill_ids", [2] = "mrope", [3] = "aux" }

local f = p.fields
f.magic = ProtoField.uint32("embgw.magic", "Magic", base.HEX)
f.version = ProtoField.uint8("embgw.version", "Version")
f.type = ProtoField.uint8("embgw.type", "Type", base.DEC, types)
f.flags = ProtoField.uint16("embgw.flags", "Flags", base.HEX)
f.flag_dummy = ProtoField.bool("embgw.flags.dummy", "DUMMY (aux only)", 16, nil, 0x0001)
f.flag_ack = ProtoField.bool("embgw.flags.ack", "ACK", 16, nil, 0x0002)
f.flag_poll = ProtoField.bool("embgw.flags.poll", "POLL", 16, nil, 0x0004)
f.flag_adopted = ProtoField.bool("embgw.flags.adopted", "ADOPTED", 16, nil, 0x0008)
f.body_len = ProtoField.uint16("embgw.body_len", "Body length")
f.rank = ProtoField.uint16("embgw.rank", "Rank")
f.nranks = ProtoField.uint16("embgw.nranks", "Ranks")
f.ranks = ProtoField.uint16("embgw.ranks", "Ranks spoken for (bitmask)", base.HEX)
f.rsv = ProtoField.uint32("embgw.reserved", "Reserved", base.HEX)
f.session = ProtoField.uint64("embgw.session", "Session", base.HEX)
f.room = ProtoField.uint64("embgw.room", "Room", base.HEX)
f.offset = ProtoField.uint32("embgw.offset", "Offset (tokens)")
f.seq = ProtoField.uint64("embgw.seq", "Sequence")
f.block_tokens = ProtoField.uint32("embgw.block_tokens", "Block tokens")
f.alloc_tokens = ProtoField.uint32("embgw.alloc_tokens", "Allocated tokens")
f.nruns = ProtoField.uint16("embgw.nruns", "Runs")
f.rkey_emb = ProtoField.uint32("embgw.rkey.embedding", "Window rkey, embedding (0: the region's)", base.HEX)
f.rkey_fill = ProtoField.uint32("embgw.rkey.fill_ids", "Window rkey, fill_ids (0: the region's)", base.HEX)
f.rkey_mrope = ProtoField.uint32("embgw.rkey.mrope", "Window rkey, mrope (0: the region's)", base.HEX)
f.rkey_aux = ProtoField.uint32("embgw.rkey.aux", "Window rkey, aux (0: the region's)", base.HEX)
f.run = ProtoField.none("embgw.run", "Run")
f.run_start = ProtoField.uint32("embgw.run.start", "Start block")
f.run_count = ProtoField.uint32("embgw.run.count", "Blocks")
f.state = ProtoField.uint8("embgw.state", "State", base.DEC, states)
f.error = ProtoField.uint16("embgw.error", "Error", base.DEC, errors)
f.abort_id = ProtoField.uint16("embgw.abort_id", "Abort id (the quarantine an ACK ends)", base.HEX)
f.total = ProtoField.uint32("embgw.total_tokens", "Total tokens")
f.landed = ProtoField.uint32("embgw.landed_tokens", "Landed tokens")
f.accepted = ProtoField.uint32("embgw.accepted_tokens", "Accepted tokens")
f.refused_type = ProtoField.uint8("embgw.refused_type", "Refused request", base.DEC, types)
f.name = ProtoField.string("embgw.reg.name", "Name")
f.gid = ProtoField.ipv6("embgw.reg.gid", "GID")
f.qpn = ProtoField.uint32("embgw.reg.qpn", "QPN", base.HEX)
f.psn = ProtoField.uint32("embgw.reg.psn", "PSN", base.HEX)
f.mtu = ProtoField.uint16("embgw.reg.mtu", "Path MTU")
f.roles = ProtoField.uint16("embgw.reg.roles", "Roles", base.HEX)
f.pool_blocks = ProtoField.uint32("embgw.reg.pool_blocks", "Pool blocks")
f.hidden = ProtoField.uint32("embgw.reg.hidden_size", "Hidden size")
f.dtype = ProtoField.uint32("embgw.reg.dtype_bytes", "Dtype bytes")
f.aux_bytes = ProtoField.uint32("embgw.reg.aux_bytes", "Aux bytes")
f.region = ProtoField.none("embgw.reg.region", "Region")
f.region_addr = ProtoField.uint64("embgw.reg.region.addr", "Address", base.HEX)
f.region_rkey = ProtoField.uint32("embgw.reg.region.rkey", "rkey", base.HEX)
f.region_unit = ProtoField.uint32("embgw.reg.region.unit_bytes", "Unit bytes")
f.peer_session = ProtoField.uint64("embgw.reg.peer_session", "Peer session (as heard)", base.HEX)
f.ack_qpn = ProtoField.uint32("embgw.reg.ack_qpn", "Acknowledged QPN", base.HEX)
f.ack_psn = ProtoField.uint32("embgw.reg.ack_psn", "Acknowledged PSN", base.HEX)
f.peer_seq = ProtoField.uint64("embgw.reg.peer_seq", "Peer seq (last REGISTER heard)")
f.tag = ProtoField.bytes("embgw.tag", "MAC tag (SipHash-2-4-128)")
f.tag_len = ProtoField.uint8("embgw.tag_len", "MAC tag length")

local e_len = ProtoExpert.new("embgw.bad_length", "Length disagrees with the header",
  expert.group.MALFORMED, expert.severity.ERROR)
local e_short = ProtoExpert.new("embgw.short", "Shorter than header and tag",
  expert.group.MALFORMED, expert.severity.ERROR)
local e_magic = ProtoExpert.new("embgw.bad_magic", "Bad magic",
  expert.group.MALFORMED, expert.severity.ERROR)
local e_version = ProtoExpert.new("embgw.bad_version", "Not version 3",
  expert.group.MALFORMED, expert.severity.ERROR)
p.experts = { e_len, e_short, e_magic, e_version }

local HDR, TAG = 48, 16

function p.dissector(buf, pinfo, tree)
  local len = buf:len()
  pinfo.cols.protocol = "EMBGW"
  local t = tree:add(p, buf(), "embgw control protocol")
  if len < HDR + TAG then
    t:add_proto_expert_info(e_short)
    return len
  end
  t:add(f.magic, buf(0, 4))
  if buf(0, 4):uint() ~= 0x45475731 then
    t:add_proto_expert_info(e_magic)
    return len
  end
  local ty = buf(5, 1):uint()
  local body = buf(8, 2):uint()
  local ver = t:add(f.version, buf(4, 1))
  if buf(4, 1):uint() ~= 3 then
    ver:add_proto_expert_info(e_version)
    return len
  end
  t:add(f.type, buf(5, 1))
  local ft = t:add(f.flags, buf(6, 2))
  ft:add(f.flag_dummy, buf(6, 2))
  ft:add(f.flag_ack, buf(6, 2))
  ft:add(f.flag_poll, buf(6, 2))
  ft:add(f.flag_adopted, buf(6, 2))
  local bl = t:add(f.body_len, buf(8, 2))
  t:add(f.rank, buf(10, 2))
  t:add(f.nranks, buf(12, 2))
  t:add(f.ranks, buf(14, 2))
  t:add(f.session, buf(16, 8))
  t:add(f.room, buf(24, 8))
  t:add(f.offset, buf(32, 4))
  t:add(f.seq, buf(40, 8))
  if HDR + body + TAG ~= len then
    bl:add_proto_expert_info(e_len)
    return len
  end
  local b = HDR
  local info = (types[ty] or ("type " .. ty))
  if ty == 1 or ty == 2 then
    t:add(f.block_tokens, buf(b, 4))
    t:add(f.alloc_tokens, buf(b + 4, 4))
    t:add(f.nruns, buf(b + 8, 2))
    t:add(f.rkey_emb, buf(b + 12, 4))
    t:add(f.rkey_fill, buf(b + 16, 4))
    t:add(f.rkey_mrope, buf(b + 20, 4))
    t:add(f.rkey_aux, buf(b + 24, 4))
    local n = buf(b + 8, 2):uint()
    for i = 0, n - 1 do
      local o = b + 28 + 8 * i
      local r = t:add(f.run, buf(o, 8))
      r:add(f.run_start, buf(o, 4))
      r:add(f.run_count, buf(o + 4, 4))
      r:append_text(string.format(": blocks %d..%d", buf(o, 4):uint(),
        buf(o, 4):uint() + buf(o + 4, 4):uint() - 1))
    end
    info = string.format("%s room=%s rank=%d/%d offset=%d alloc=%d runs=%d", info,
      buf(24, 8):uint64():tohex(), buf(10, 2):uint(), buf(12, 2):uint(),
      buf(32, 4):uint(), buf(b + 4, 4):uint(), n)
  elseif ty == 3 then
    t:add(f.state, buf(b, 1))
    t:add(f.error, buf(b + 2, 2))
    t:add(f.total, buf(b + 4, 4))
    t:add(f.landed, buf(b + 8, 4))
    t:add(f.accepted, buf(b + 12, 4))
    if bit.band(buf(6, 2):uint(), 4) ~= 0 then
      info = string.format("STATUS poll room=%s rank=%d", buf(24, 8):uint64():tohex(),
        buf(10, 2):uint())
    else
      info = string.format("STATUS room=%s rank=%d %s total=%d landed=%d accepted=%d",
        buf(24, 8):uint64():tohex(), buf(10, 2):uint(),
        states[buf(b, 1):uint()] or "?", buf(b + 4, 4):uint(),
        buf(b + 8, 4):uint(), buf(b + 12, 4):uint())
    end
  elseif ty == 5 then
    t:add(f.error, buf(b, 2))
    t:add(f.abort_id, buf(b + 2, 2))
    info = info .. (bit.band(buf(6, 2):uint(), 2) ~= 0 and " ACK " or " ") ..
      (errors[buf(b, 2):uint()] or "?") ..
      string.format(" id=%d", buf(b + 2, 2):uint())
  elseif ty == 6 then
    t:add(f.refused_type, buf(b, 1))
    t:add(f.error, buf(b + 2, 2))
    info = string.format("ERROR %s for %s", errors[buf(b + 2, 2):uint()] or "?",
      types[buf(b, 1):uint()] or "?")
  elseif ty == 7 then
    t:add(f.name, buf(b, 32))
    t:add(f.gid, buf(b + 32, 16))
    t:add(f.qpn, buf(b + 48, 4))
    t:add(f.psn, buf(b + 52, 4))
    t:add(f.mtu, buf(b + 56, 2))
    t:add(f.roles, buf(b + 58, 2))
    t:add(f.block_tokens, buf(b + 60, 4))
    t:add(f.pool_blocks, buf(b + 64, 4))
    t:add(f.hidden, buf(b + 68, 4))
    t:add(f.dtype, buf(b + 72, 4))
    t:add(f.aux_bytes, buf(b + 76, 4))
    for k = 0, 3 do
      local o = b + 80 + 16 * k
      local r = t:add(f.region, buf(o, 16))
      r:append_text(": " .. kinds[k])
      r:add(f.region_addr, buf(o, 8))
      r:add(f.region_rkey, buf(o + 8, 4))
      r:add(f.region_unit, buf(o + 12, 4))
    end
    t:add(f.peer_session, buf(b + 144, 8))
    t:add(f.ack_qpn, buf(b + 152, 4))
    t:add(f.ack_psn, buf(b + 156, 4))
    t:add(f.peer_seq, buf(b + 160, 8))
    local fl = buf(6, 2):uint()
    info = string.format("REGISTER%s%s %s peer_session=%s peer_seq=%s",
      bit.band(fl, 2) ~= 0 and " ACK" or "", bit.band(fl, 8) ~= 0 and " ADOPTED" or "",
      buf(b, 32):stringz(), buf(b + 144, 8):uint64():tohex(),
      tostring(buf(b + 160, 8):uint64()))
  end
  local tg = t:add(f.tag, buf(len - TAG, TAG))
  tg:add(f.tag_len, TAG):set_generated()
  pinfo.cols.info = info
  return len
end

DissectorTable.get("udp.port"):add(9471, p)
