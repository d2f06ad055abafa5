-- felix.lua: a Wireshark / tshark dissector for the Felix wire protocol v1
-- (FLX1 frames inside QUIC streams). No build step:
--
--   tshark -X lua_script:tools/wireshark/felix.lua -o tls.keylog_file:keys.log -r capture.pcapng
--   wireshark -X lua_script:tools/wireshark/felix.lua capture.pcapng
--
-- (or copy the file into the personal Lua plugins folder shown under
-- Help > About Wireshark > Folders). docs/debugging.md §5 walks through a
-- capture. The format it decodes: docs/frame.md (header, flag bits,
-- combination rules, size limits), docs/binary.md (binary layouts),
-- docs/messages.md (JSON control messages) and vectors/FORMAT.md (the
-- error classes reported in the field felix.error).
--
-- How it finds Felix: a postdissector reads the decrypted QUIC STREAM
-- frames (the quic.stream_data fields; decryption needs the TLS key log,
-- SSLKEYLOGFILE), reassembles every stream per direction by stream offset
-- (retransmissions and out-of-order data included) and cuts it into
-- frames. A Felix frame split over several QUIC packets is shown in the
-- packet that completes it; several frames in one packet are all shown. A
-- stream is taken for Felix when its connection negotiated ALPN felix/1,
-- when its first bytes are the FLX1 magic, or when another stream of its
-- connection began so (Felix without ALPN); preference felix.all_streams
-- takes every decrypted QUIC stream.
--
-- The same decoder is registered as the dissector "felix" for Decode As
-- (udp.port) and exported PDUs: there a PDU holds exactly one frame, as
-- `felix decode` takes one, so bytes after it are trailing bytes.

local felix = Proto("felix", "Felix wire protocol v1")

local MAGIC = 0x464C5831
local HEADER_LEN = 12

local bit = bit32 or bit
local band, bor, lshift = bit.band, bit.bor, bit.lshift

------------------------------------------------------------------------
-- Preferences

felix.prefs.max_frame_bytes = Pref.uint("Largest payload (bytes)", 16777216,
	"max_frame_bytes: a header length above it is frame_too_large (docs/frame.md §5; default 16 MiB)")
felix.prefs.all_streams = Pref.bool("Every decrypted QUIC stream is Felix", false,
	"Dissect every QUIC stream as Felix, even one that does not begin with the FLX1 magic")

------------------------------------------------------------------------
-- Flag bits (docs/frame.md §2)

local FLAG = {
	PUBLISH_BATCH = 0x0001, EVENT_BATCH = 0x0002, EVENT_BATCH_SHARED = 0x0004,
	PUBLISH_ACKED = 0x0008, PUBLISH_ACK = 0x0010, EVENT_OFFSETS = 0x0020,
	PUBLISH_KEYED = 0x0040, ACK_OWNER = 0x0080, PUBLISH_IDEMPOTENT = 0x0100,
	ACK_CODE = 0x0200, ACK_DETAIL = 0x0400, EVENT_SKIPPED = 0x0800,
	ACK_OFFSET = 0x1000, EVENT_PUBLISHER = 0x2000, EVENT_TIMESTAMPS = 0x4000,
}
local KNOWN_FLAGS = 0x7FFF
local PUBLISH_MASK = 0x0001 + 0x0008 + 0x0040 + 0x0100
local ACK_MASK = 0x0010 + 0x0080 + 0x0200 + 0x0400 + 0x1000
local EVENT_MODIFIERS = 0x0020 + 0x0800 + 0x2000 + 0x4000

local FLAG_NAMES = {
	"BINARY_PUBLISH_BATCH", "BINARY_EVENT_BATCH", "BINARY_EVENT_BATCH_SHARED",
	"BINARY_PUBLISH_ACKED", "BINARY_PUBLISH_ACK", "EVENT_BATCH_OFFSETS",
	"BINARY_PUBLISH_KEYED", "BINARY_PUBLISH_ACK_OWNER", "BINARY_PUBLISH_IDEMPOTENT",
	"BINARY_PUBLISH_ACK_CODE", "BINARY_PUBLISH_ACK_DETAIL", "EVENT_BATCH_SKIPPED",
	"BINARY_PUBLISH_ACK_OFFSET", "EVENT_BATCH_PUBLISHER", "EVENT_BATCH_TIMESTAMPS",
}

local function has(f, bits) return band(f, bits) == bits end
local function any(f, bits) return band(f, bits) ~= 0 end

local function flag_names(f)
	if f == 0 then return "JSON" end
	local out = {}
	for i = 0, 15 do
		local b = lshift(1, i)
		if band(f, b) ~= 0 then
			out[#out + 1] = FLAG_NAMES[i + 1] or string.format("0x%04x", b)
		end
	end
	return table.concat(out, "|")
end

-- Error codes (docs/errors.md §3) and retry classes (§2).
local CODES = {
	[1] = "unauthenticated", [2] = "forbidden", [3] = "not_found", [4] = "invalid_request",
	[5] = "shard_unavailable", [6] = "not_leader", [7] = "quorum_timeout", [8] = "leadership_lost",
	[9] = "unacknowledged", [10] = "overloaded", [11] = "limit_exceeded", [12] = "draining",
	[13] = "internal", [14] = "storage", [15] = "stale_claim",
}
local RETRY = { [1] = "retry", [2] = "retry_after", [3] = "redirect", [4] = "outcome_unknown", [5] = "fatal" }
local ACK_MODES = { [1] = "per_message", [2] = "per_batch" }
local STATUS = { [0] = "ok", [1] = "error" }

------------------------------------------------------------------------
-- Fields

local pf = {
	magic = ProtoField.uint32("felix.magic", "Magic", base.HEX),
	version = ProtoField.uint16("felix.version", "Version", base.DEC),
	flags = ProtoField.uint16("felix.flags", "Flags", base.HEX),
	flag_names = ProtoField.string("felix.flag_names", "Flag names"),
	flags_reserved = ProtoField.bool("felix.flags.reserved", "reserved (0x8000)", 16, nil, 0x8000),
	length = ProtoField.uint32("felix.length", "Payload length", base.DEC),
	layout = ProtoField.string("felix.layout", "Layout"),
	error = ProtoField.string("felix.error", "Error class"),
	direction = ProtoField.string("felix.direction", "Direction"),
	conn = ProtoField.uint32("felix.quic_connection", "QUIC connection"),
	stream_id = ProtoField.uint64("felix.stream_id", "QUIC stream id"),
	stream_offset = ProtoField.uint64("felix.stream_offset", "Stream offset of the frame"),
	payload = ProtoField.bytes("felix.payload", "Payload"),
	-- JSON
	json = ProtoField.string("felix.json", "JSON"),
	type = ProtoField.string("felix.type", "Message type"),
	member = ProtoField.string("felix.json.member", "Member"),
	-- publish batch
	request_id = ProtoField.uint64("felix.request_id", "Request id"),
	ack_mode = ProtoField.uint8("felix.ack_mode", "Ack mode", base.DEC, ACK_MODES),
	producer_id = ProtoField.uint64("felix.producer_id", "Producer id"),
	sequence = ProtoField.uint64("felix.sequence", "Sequence"),
	key_len = ProtoField.uint16("felix.key_length", "Routing key length"),
	key = ProtoField.bytes("felix.key", "Routing key"),
	tenant_id = ProtoField.string("felix.tenant_id", "Tenant"),
	namespace = ProtoField.string("felix.namespace", "Namespace"),
	stream = ProtoField.string("felix.stream", "Stream"),
	str_len = ProtoField.uint16("felix.string_length", "String length"),
	count = ProtoField.uint32("felix.count", "Count"),
	record = ProtoField.bytes("felix.record", "Record"),
	record_len = ProtoField.uint32("felix.record_length", "Record length"),
	record_data = ProtoField.bytes("felix.record_data", "Record data"),
	-- ack
	status = ProtoField.uint8("felix.status", "Status", base.DEC, STATUS),
	message = ProtoField.string("felix.message", "Message"),
	code = ProtoField.uint16("felix.code", "Error code", base.DEC),
	code_name = ProtoField.string("felix.code_name", "Error code name"),
	retry = ProtoField.uint8("felix.retry", "Retry class", base.DEC),
	retry_name = ProtoField.string("felix.retry_name", "Retry class name"),
	reason = ProtoField.string("felix.reason", "Reason"),
	retry_after_ms = ProtoField.uint64("felix.retry_after_ms", "Suggested wait (ms)"),
	owner_node = ProtoField.string("felix.owner.node_id", "Owner node id"),
	owner_addr = ProtoField.string("felix.owner.addr", "Owner address"),
	owner_generation = ProtoField.uint64("felix.owner.generation", "Owner generation"),
	offset = ProtoField.uint64("felix.offset", "Offset of the first record"),
	-- event batch
	subscription_id = ProtoField.uint64("felix.subscription_id", "Subscription id"),
	base_offset = ProtoField.uint64("felix.base_offset", "Base offset"),
	skipped_before = ProtoField.uint64("felix.skipped_before", "Skipped before"),
	publisher_len = ProtoField.uint8("felix.publisher_length", "Publisher length"),
	publisher = ProtoField.bytes("felix.publisher", "Publisher"),
	timestamp = ProtoField.uint64("felix.timestamp_micros", "Append time (µs since the Unix epoch)"),
	record_offset = ProtoField.uint64("felix.record_offset", "Record offset"),
	trailing = ProtoField.bytes("felix.trailing", "Trailing bytes"),
	partial = ProtoField.uint32("felix.partial", "Bytes of a frame that a later packet completes"),
}
local flag_bit_fields = {}
for i = 0, 14 do
	local f = ProtoField.bool("felix.flags." .. FLAG_NAMES[i + 1]:lower(), FLAG_NAMES[i + 1], 16, nil, lshift(1, i))
	flag_bit_fields[#flag_bit_fields + 1] = f
	pf["flagbit" .. i] = f
end
local fieldlist = {}
for _, f in pairs(pf) do fieldlist[#fieldlist + 1] = f end
felix.fields = fieldlist

-- One expert field per error class of vectors/FORMAT.md §5.
local CLASSES = {
	truncated = "Truncated: fewer bytes than the header, a length or a count calls for",
	bad_magic = "Bad magic: not FLX1 (the stream is broken from here)",
	bad_version = "Bad version: not 1 (the stream is broken from here)",
	unknown_flags = "Unknown flag bit (outside 0x7FFF)",
	bad_flag_combination = "Bad flag combination for the layout",
	frame_too_large = "Frame too large: length above max_frame_bytes (the stream is broken from here)",
	trailing_bytes = "Trailing bytes after the layout",
	invalid_utf8 = "Invalid UTF-8 in a text field",
	invalid_value = "Field outside its allowed values",
	invalid_json = "Invalid JSON control message",
}
local ex = {}
local exlist = {}
for class, text in pairs(CLASSES) do
	ex[class] = ProtoExpert.new("felix." .. class, text, expert.group.MALFORMED, expert.severity.WARN)
	exlist[#exlist + 1] = ex[class]
end
ex.unknown_type = ProtoExpert.new("felix.unknown_type", "JSON message of a type this dissector does not know",
	expert.group.UNDECODED, expert.severity.NOTE)
ex.incomplete = ProtoExpert.new("felix.incomplete", "Felix frame continues in a later packet",
	expert.group.REASSEMBLE, expert.severity.CHAT)
exlist[#exlist + 1] = ex.unknown_type
exlist[#exlist + 1] = ex.incomplete
felix.experts = exlist

------------------------------------------------------------------------
-- UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF)

local byte, sub = string.byte, string.sub

local function utf8_valid(s)
	local i, n = 1, #s
	while i <= n do
		local c = byte(s, i)
		if c < 0x80 then
			i = i + 1
		else
			local len, lo, hi
			if c >= 0xC2 and c <= 0xDF then len = 2; lo, hi = 0x80, 0xBF
			elseif c == 0xE0 then len = 3; lo, hi = 0xA0, 0xBF
			elseif (c >= 0xE1 and c <= 0xEC) or c == 0xEE or c == 0xEF then len = 3; lo, hi = 0x80, 0xBF
			elseif c == 0xED then len = 3; lo, hi = 0x80, 0x9F
			elseif c == 0xF0 then len = 4; lo, hi = 0x90, 0xBF
			elseif c >= 0xF1 and c <= 0xF3 then len = 4; lo, hi = 0x80, 0xBF
			elseif c == 0xF4 then len = 4; lo, hi = 0x80, 0x8F
			else return false, i - 1 end
			if i + len - 1 > n then return false, i - 1 end
			local c2 = byte(s, i + 1)
			if c2 < lo or c2 > hi then return false, i - 1 end
			for k = i + 2, i + len - 1 do
				local ck = byte(s, k)
				if ck < 0x80 or ck > 0xBF then return false, i - 1 end
			end
			i = i + len
		end
	end
	return true
end

------------------------------------------------------------------------
-- Reporting: every failure goes through fail(), which records the class
-- in felix.error, adds the expert item and stops the layout.

local Stop = {}

local function fail(ctx, class, range, text)
	ctx.error = ctx.error or class
	local ti = ctx.tree:add(pf.error, range, class)
	ti:add_proto_expert_info(ex[class], text and (CLASSES[class] .. ": " .. text) or nil)
	ctx.tree:append_text(" [" .. class .. "]")
	error(Stop, 0)
end

-- A cursor over [pos, stop) of tvb.
local function need(ctx, n, what)
	if ctx.pos + n > ctx.stop then
		local left = ctx.stop - ctx.pos
		fail(ctx, "truncated", ctx.tvb(ctx.pos, left), string.format("%s needs %d bytes, %d left", what, n, left))
	end
end

local function take(ctx, n, what)
	need(ctx, n, what)
	local r = ctx.tvb(ctx.pos, n)
	ctx.pos = ctx.pos + n
	return r
end

local function add_u64(ctx, tree, field, what)
	local r = take(ctx, 8, what)
	tree:add(field, r)
	return r:uint64()
end

local function add_text(ctx, tree, field, lenwidth, what, check_utf8)
	local lr = take(ctx, lenwidth, what .. " length")
	local len = lr:uint()
	need(ctx, len, what)
	local r = len > 0 and ctx.tvb(ctx.pos, len) or ctx.tvb(ctx.pos, 0)
	local s = len > 0 and r:raw() or ""
	ctx.pos = ctx.pos + len
	tree:add(pf.str_len, lr):append_text(" (" .. what .. ")")
	tree:add(field, r, s)
	if check_utf8 and not utf8_valid(s) then
		fail(ctx, "invalid_utf8", r, what .. " is not UTF-8")
	end
	return s, r
end

local function add_bytes32_records(ctx, tree, with_ts, base_offset)
	local cr = take(ctx, 4, "count")
	local count = cr:uint()
	tree:add(pf.count, cr)
	local per = with_ts and 12 or 4
	-- the count is bounded by the bytes left before anything else is read
	if count > math.floor((ctx.stop - ctx.pos) / per) then
		fail(ctx, "truncated", cr, string.format("count %d needs at least %d bytes, %d left", count, count * per, ctx.stop - ctx.pos))
	end
	for i = 0, count - 1 do
		local start = ctx.pos
		local rt = tree:add(pf.record, ctx.tvb(start, 0))
		rt:set_text(string.format("Record %d", i))
		local when = ""
		if with_ts then
			local us = add_u64(ctx, rt, pf.timestamp, "timestamp")
			local n = tonumber(tostring(us))
			if n / 1e6 < 253402300800 then -- before the year 10000
				when = os.date("!, appended %Y-%m-%dT%H:%M:%S", math.floor(n / 1e6)) .. string.format(".%06dZ", n % 1000000)
			end
		end
		local lr = take(ctx, 4, "record length")
		local len = lr:uint()
		rt:add(pf.record_len, lr)
		need(ctx, len, "record")
		local dr = ctx.tvb(ctx.pos, len)
		rt:add(pf.record_data, dr)
		ctx.pos = ctx.pos + len
		rt:set_len(ctx.pos - start)
		local label = string.format("Record %d", i)
		if base_offset then
			rt:add(pf.record_offset, ctx.tvb(start, 0), base_offset + i):set_generated()
			label = label .. ", offset " .. tostring(base_offset + i)
		end
		label = label .. string.format(", %d bytes", len)
		if len > 0 and len <= 64 and not dr:raw():find("[^%w%p ]") then
			label = label .. string.format(" %q", dr:raw())
		end
		rt:set_text(label .. when)
	end
	return count
end

------------------------------------------------------------------------
-- Binary layouts (docs/binary.md)

local function layout_of(f)
	if f == 0 then return "json_message" end
	if has(f, FLAG.PUBLISH_BATCH) then
		if has(f, FLAG.PUBLISH_ACKED) then return "binary_acked_publish_batch" end
		return "binary_publish_batch"
	end
	if has(f, FLAG.PUBLISH_ACK) then return "binary_publish_ack" end
	if any(f, FLAG.EVENT_BATCH + FLAG.EVENT_BATCH_SHARED) then return "binary_event_batch" end
	return "unknown"
end

-- check_layout returns nil or the reason a known flag word is refused
-- (docs/frame.md §4 and its "felix differs" note).
local function check_layout(f, layout)
	if layout == "binary_publish_batch" or layout == "binary_acked_publish_batch" then
		if band(f, bit.bnot(PUBLISH_MASK)) ~= 0 then return "bits not valid on a publish batch" end
		if has(f, FLAG.PUBLISH_IDEMPOTENT) and not has(f, FLAG.PUBLISH_ACKED) then
			return "an idempotent publish must be acked (0x0100 needs 0x0008)"
		end
	elseif layout == "binary_publish_ack" then
		if band(f, bit.bnot(ACK_MASK)) ~= 0 then return "bits not valid on a publish ack" end
	elseif layout == "binary_event_batch" then
		local b = band(f, FLAG.EVENT_BATCH + FLAG.EVENT_BATCH_SHARED)
		if b ~= FLAG.EVENT_BATCH and b ~= FLAG.EVENT_BATCH_SHARED then
			return "an event batch needs exactly one of 0x0002, 0x0004"
		end
		if band(f, bit.bnot(b + EVENT_MODIFIERS)) ~= 0 then return "bits not valid on an event batch" end
		if has(f, FLAG.EVENT_SKIPPED) and not has(f, FLAG.EVENT_OFFSETS) then return "0x0800 needs 0x0020" end
	elseif layout == "unknown" then
		return "no base layout bit (0x0001, 0x0002, 0x0004 or 0x0010)"
	end
	return nil
end

local function dissect_publish(ctx, f, t)
	if has(f, FLAG.PUBLISH_ACKED) then
		local rid = add_u64(ctx, t, pf.request_id, "request_id")
		local mr = take(ctx, 1, "ack_mode")
		local mode = mr:uint()
		t:add(pf.ack_mode, mr)
		if not ACK_MODES[mode] then fail(ctx, "invalid_value", mr, "ack_mode " .. mode .. " (1 per_message, 2 per_batch)") end
		ctx.info = ctx.info .. " req=" .. tostring(rid)
		if has(f, FLAG.PUBLISH_IDEMPOTENT) then
			add_u64(ctx, t, pf.producer_id, "producer_id")
			add_u64(ctx, t, pf.sequence, "sequence")
		end
	end
	if has(f, FLAG.PUBLISH_KEYED) then
		local lr = take(ctx, 2, "key length")
		local len = lr:uint()
		need(ctx, len, "key")
		local kt = t:add(pf.key, ctx.tvb(ctx.pos, len))
		kt:add(pf.key_len, lr)
		ctx.pos = ctx.pos + len
	end
	-- the three names and the count are bounds-checked before the names'
	-- UTF-8 (docs/binary.md §1, decoding steps 3 and 4)
	local tenant, tr = add_text(ctx, t, pf.tenant_id, 2, "tenant_id", false)
	local ns, nr = add_text(ctx, t, pf.namespace, 2, "namespace", false)
	local stream, sr = add_text(ctx, t, pf.stream, 2, "stream", false)
	need(ctx, 4, "count")
	for _, x in ipairs({ { tenant, tr, "tenant_id" }, { ns, nr, "namespace" }, { stream, sr, "stream" } }) do
		if not utf8_valid(x[1]) then fail(ctx, "invalid_utf8", x[2], x[3] .. " is not UTF-8") end
	end
	local n = add_bytes32_records(ctx, t, false, nil)
	ctx.info = ctx.info .. string.format(" %s ×%d", stream, n)
end

local function dissect_ack(ctx, f, t)
	need(ctx, 11, "ack status, request_id and message length")
	local sr = take(ctx, 1, "status")
	local status = sr:uint()
	t:add(pf.status, sr)
	local rid = add_u64(ctx, t, pf.request_id, "request_id")
	-- the message is bounds-checked before the status is judged, and a
	-- success's message bytes are skipped unchecked (docs/binary.md §6)
	local _, mr = add_text(ctx, t, pf.message, 2, "message", false)
	if not STATUS[status] then fail(ctx, "invalid_value", sr, "ack status " .. status .. " (0 ok, 1 error)") end
	if status == 1 and not utf8_valid(mr:len() > 0 and mr:raw() or "") then
		fail(ctx, "invalid_utf8", mr, "message is not UTF-8")
	end
	ctx.info = ctx.info .. string.format(" req=%s %s", tostring(rid), STATUS[status])
	if has(f, FLAG.ACK_CODE) then
		local cr = take(ctx, 2, "code")
		local code = cr:uint()
		local ct = t:add(pf.code, cr)
		local name = CODES[code] or ("code_" .. code)
		ct:append_text(" (" .. name .. ")")
		t:add(pf.code_name, cr, name):set_generated()
		local rr = take(ctx, 1, "retry class")
		local retry = rr:uint()
		local rname = RETRY[retry] or "fatal"
		t:add(pf.retry, rr):append_text(" (" .. rname .. (RETRY[retry] and "" or ": unknown byte reads as fatal") .. ")")
		t:add(pf.retry_name, rr, rname):set_generated()
		ctx.info = ctx.info .. " " .. name
	end
	if has(f, FLAG.ACK_DETAIL) then
		-- reason_len + 8 bytes are bounds-checked before the reason's UTF-8
		local reason, rr = add_text(ctx, t, pf.reason, 2, "reason", false)
		need(ctx, 8, "retry_after_ms")
		if not utf8_valid(reason) then fail(ctx, "invalid_utf8", rr, "reason is not UTF-8") end
		add_u64(ctx, t, pf.retry_after_ms, "retry_after_ms")
	end
	if has(f, FLAG.ACK_OWNER) then
		-- all bounds first, then UTF-8 (docs/binary.md §6)
		local start = ctx.pos
		local nl = take(ctx, 2, "owner node_id length"):uint()
		need(ctx, nl + 2, "owner node_id and addr length")
		ctx.pos = ctx.pos + nl
		local al = take(ctx, 2, "owner addr length"):uint()
		need(ctx, al + 8, "owner addr and generation")
		ctx.pos = start
		local ot = t:add(ctx.tvb(start, 2 + nl + 2 + al + 8), "Owner (the batch was forwarded)")
		local node = add_text(ctx, ot, pf.owner_node, 2, "owner node_id", true)
		local addr = add_text(ctx, ot, pf.owner_addr, 2, "owner addr", true)
		add_u64(ctx, ot, pf.owner_generation, "owner generation")
		if addr == "" then ot:append_text(": " .. node .. ", address not published")
		else ot:append_text(": " .. node .. " at " .. addr) end
	end
	if has(f, FLAG.ACK_OFFSET) then
		local off = add_u64(ctx, t, pf.offset, "offset")
		ctx.info = ctx.info .. " offset=" .. tostring(off)
	end
end

local function dissect_event(ctx, f, t)
	local legacy = not has(f, FLAG.EVENT_BATCH_SHARED)
	if legacy then
		add_u64(ctx, t, pf.subscription_id, "subscription_id")
	end
	local base_off
	if has(f, FLAG.EVENT_OFFSETS) then
		base_off = add_u64(ctx, t, pf.base_offset, "base_offset")
		if has(f, FLAG.EVENT_SKIPPED) then
			add_u64(ctx, t, pf.skipped_before, "skipped_before")
		end
	end
	if has(f, FLAG.EVENT_PUBLISHER) then
		local lr = take(ctx, 1, "publisher length")
		local len = lr:uint()
		need(ctx, len, "publisher")
		local r = ctx.tvb(ctx.pos, len)
		local pt = t:add(pf.publisher, r)
		pt:add(pf.publisher_len, lr)
		if len > 0 then pt:append_text(" (" .. r:raw() .. ")") end
		ctx.pos = ctx.pos + len
	end
	local n = add_bytes32_records(ctx, t, has(f, FLAG.EVENT_TIMESTAMPS), base_off)
	ctx.info = ctx.info .. string.format(" ×%d", n)
	if base_off then ctx.info = ctx.info .. " @" .. tostring(base_off) end
end

------------------------------------------------------------------------
-- JSON (RFC 8259, strict: docs/messages.md §1)

local function jfail(at, msg) error({ jerr = msg, at = at }, 0) end

local function utf8_encode(cp)
	if cp < 0x80 then return string.char(cp) end
	if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 0x40), 0x80 + cp % 0x40) end
	if cp < 0x10000 then
		return string.char(0xE0 + math.floor(cp / 0x1000), 0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
	end
	return string.char(0xF0 + math.floor(cp / 0x40000), 0x80 + math.floor(cp / 0x1000) % 0x40,
		0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
end

local ESC = { [34] = '"', [92] = "\\", [47] = "/", [98] = "\b", [102] = "\f", [110] = "\n", [114] = "\r", [116] = "\t" }

-- json_parse returns the value tree of s: nodes {t=kind, v=value, s=first
-- byte, e=last byte}; objects keep their members in order, duplicates
-- included ({k=name, v=node}).
local function json_parse(s)
	local i, n = 1, #s
	local depth = 0
	local utf8_at -- the first byte of invalid UTF-8 inside a string
	local function ws()
		while i <= n do
			local c = byte(s, i)
			if c == 32 or c == 9 or c == 10 or c == 13 then i = i + 1 else return end
		end
	end
	local value
	local function str()
		local start = i
		i = i + 1
		local buf = {}
		while true do
			if i > n then jfail(i, "unterminated string") end
			local c = byte(s, i)
			if c == 34 then
				i = i + 1
				break
			elseif c == 92 then
				local e = byte(s, i + 1)
				if e == 117 then
					local h = sub(s, i + 2, i + 5)
					if not h:match("^%x%x%x%x$") then jfail(i, "bad \\u escape") end
					local cp = tonumber(h, 16)
					i = i + 6
					if cp >= 0xD800 and cp <= 0xDBFF then
						local h2 = sub(s, i + 2, i + 5)
						if sub(s, i, i + 1) ~= "\\u" or not h2:match("^%x%x%x%x$") then jfail(i, "lone surrogate") end
						local lo = tonumber(h2, 16)
						if lo < 0xDC00 or lo > 0xDFFF then jfail(i, "lone surrogate") end
						cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
						i = i + 6
					elseif cp >= 0xDC00 and cp <= 0xDFFF then
						jfail(i, "lone surrogate")
					end
					buf[#buf + 1] = utf8_encode(cp)
				elseif e and ESC[e] then
					buf[#buf + 1] = ESC[e]
					i = i + 2
				else
					jfail(i, "bad escape")
				end
			elseif c < 0x20 then
				jfail(i, "raw control character in a string")
			else
				local j = i
				while j <= n do
					local d = byte(s, j)
					if d == 34 or d == 92 or d < 0x20 then break end
					j = j + 1
				end
				local run = sub(s, i, j - 1)
				local ok8, bad = utf8_valid(run)
				if not ok8 and not utf8_at then utf8_at = i + bad end
				buf[#buf + 1] = run
				i = j
			end
		end
		return { t = "str", v = table.concat(buf), s = start, e = i - 1 }
	end
	local function num()
		local start = i
		if byte(s, i) == 45 then i = i + 1 end
		local c = byte(s, i)
		if c == 48 then
			i = i + 1
		elseif c and c >= 49 and c <= 57 then
			while i <= n and byte(s, i) >= 48 and byte(s, i) <= 57 do i = i + 1 end
		else
			jfail(start, "bad number")
		end
		if byte(s, i) == 46 then
			i = i + 1
			local d0 = i
			while i <= n and byte(s, i) >= 48 and byte(s, i) <= 57 do i = i + 1 end
			if i == d0 then jfail(start, "bad number") end
		end
		c = byte(s, i)
		if c == 101 or c == 69 then
			i = i + 1
			c = byte(s, i)
			if c == 43 or c == 45 then i = i + 1 end
			local d0 = i
			while i <= n and byte(s, i) >= 48 and byte(s, i) <= 57 do i = i + 1 end
			if i == d0 then jfail(start, "bad number") end
		end
		return { t = "num", v = sub(s, start, i - 1), s = start, e = i - 1 }
	end
	local function lit(word, t, v)
		if sub(s, i, i + #word - 1) ~= word then jfail(i, "unexpected character") end
		local node = { t = t, v = v, s = i, e = i + #word - 1 }
		i = i + #word
		return node
	end
	-- value parses one value and hands it to attach: an object or array as
	-- soon as it opens (e = math.huge until it closes), so that the tree
	-- built before a syntax error can still be judged
	value = function(attach)
		ws()
		local c = byte(s, i)
		if c == nil then jfail(i, "unexpected end of input") end
		if c == 123 or c == 91 then
			depth = depth + 1
			if depth > 128 then jfail(i, "nested too deeply") end
			local start = i
			i = i + 1
			ws()
			local node
			if c == 123 then
				node = { t = "obj", m = {}, s = start, e = math.huge }
				attach(node)
				if byte(s, i) == 125 then
					i = i + 1
				else
					while true do
						ws()
						if byte(s, i) ~= 34 then jfail(i, "expected a member name") end
						local k = str()
						ws()
						if byte(s, i) ~= 58 then jfail(i, "expected ':'") end
						i = i + 1
						value(function(v) node.m[#node.m + 1] = { k = k.v, kn = k, v = v } end)
						ws()
						local d = byte(s, i)
						if d == 44 then i = i + 1
						elseif d == 125 then i = i + 1; break
						else jfail(i, "expected ',' or '}'") end
					end
				end
			else
				node = { t = "arr", a = {}, s = start, e = math.huge }
				attach(node)
				if byte(s, i) == 93 then
					i = i + 1
				else
					while true do
						value(function(v) node.a[#node.a + 1] = v end)
						ws()
						local d = byte(s, i)
						if d == 44 then i = i + 1
						elseif d == 93 then i = i + 1; break
						else jfail(i, "expected ',' or ']'") end
					end
				end
			end
			depth = depth - 1
			node.e = i - 1
			return
		elseif c == 34 then
			-- attached before it is read, so that a member expecting
			-- another type is judged at the opening quote
			local node = { t = "str", v = "", s = i, e = math.huge }
			attach(node)
			local full = str()
			node.v, node.e = full.v, full.e
			return
		elseif c == 45 or (c >= 48 and c <= 57) then return attach(num())
		elseif c == 116 then return attach(lit("true", "bool", true))
		elseif c == 102 then return attach(lit("false", "bool", false))
		elseif c == 110 then return attach(lit("null", "null", nil))
		end
		jfail(i, "unexpected character")
	end
	local root
	local ok, err = pcall(function()
		ws()
		if i <= n and byte(s, i) ~= 123 then jfail(i, "the payload is not a JSON object") end
		value(function(v) root = v end)
		ws()
		if i <= n then jfail(i, "text after the object") end
		if root.t ~= "obj" then jfail(root.s, "the payload is not a JSON object") end
	end)
	-- ok, the root object (partial after a syntax error), the syntax
	-- error, the first invalid UTF-8 byte in a string
	return ok, root, (not ok) and err or nil, utf8_at
end

-- The message schema: the field tables of docs/messages.md as kept in
-- vectors/json/gen/schema.txt (samples and notes left out; test.sh checks
-- that this copy matches). "struct NAME" / "msg TYPE" open a block; a field
-- line is "name TYPE ENC".
local SCHEMA_TEXT = [[
-- BEGIN SCHEMA
struct BrokerEndpoint
  node_id str req
  addr str req
struct ErrorDetail
  reason str omit
  retry_after_ms u64 omit
struct GroupRecord
  offset u64 req
  payload b64 req
  attempts u32 dflt
  skipped_before u64 omit0
  publisher str omit
  timestamp_micros u64 omit
struct StreamRecord
  offset u64 req
  payload b64 req
  publisher str omit
  timestamp_micros u64 req
struct ShardOwner
  shard u32 req
  node_id str omit
  addr str omit
  generation u64 req
  unavailable str omit
struct Assignment
  generation u64 req
  leader str req
  replicas [str] req
  draining bool omit0
  successor str omit
struct Fence
  took [str] req
  pending [str] req
  attempts u32 req
  retry_in_ms u64 omit
struct Lease
  held bool req
  remaining_ms u64 req
struct Replica
  node_id str req
  role str req
  next_offset u64 omit
  lag u64 omit
  fence bool omit
  state str req
  halted str omit
struct ShardInspection
  node_id str req
  shards u32 req
  role str req
  phase str req
  serving bool req
  reason str omit
  detail str omit
  generation u64 omit
  assignment Assignment omit
  fence Fence omit
  lease Lease omit
  tail u64 omit
  committed u64 omit
  accepted_generation u64 omit
  replicas [Replica] omitempty
struct SubFilter
  tenant_id str omit
  namespace str omit
  stream str omit
  shard u32 omit
  principal str omit
  dropping bool omit0
struct SubCursor
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  subscriber_id u64 req
struct SubEntry
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  subscriber_id u64 req
  subscription_id u64 omit
  connection u64 omit
  peer str omit
  principal str omit
  policy str req
  depth u64 req
  capacity u64 req
  dropped u64 req
  position u64 omit
  tail u64 req
  age_ms u64 req
msg auth
  tenant_id str req
  token str req
  client_flags u16 omit
  client_features u32 omit
  client_features_hi u32 omit
msg auth_ok
  server_flags u16 req
  server_features u32 omit
  server_features_hi u32 omit
  listener_ports [u16] omit
  publish_window u32 omit
msg ok
msg error
  message str req
  code str omit
  retry retry omit
  detail ErrorDetail omit
msg unsupported
  request_type str req
  extension str omit
  request_id u64 omit
msg extension
  name str req
  request_id u64 omit
  body any nullomit
msg not_leader
  node_id str req
  addr str omit
  generation u64 req
msg topology
msg topology_view
  brokers [BrokerEndpoint] req
msg stream_shards
  tenant_id str req
  namespace str req
  stream str req
  request_id u64 req
msg stream_shards_view
  shards u32 req
  request_id u64 req
  routing enum:jump_hash|modulo omit
msg cache_shards
  tenant_id str req
  namespace str req
  cache str req
  request_id u64 req
msg cache_shards_view
  shards u32 req
  request_id u64 req
msg shard_owners
  tenant_id str req
  namespace str req
  name str req
  kind enum:stream|cache req
  request_id u64 req
msg shard_owners_view
  owners [ShardOwner] req
  request_id u64 req
msg shard_inspect
  tenant_id str req
  namespace str req
  name str req
  kind enum:stream|cache req
  shard u32 req
  request_id u64 req
msg shard_inspect_info
  view ShardInspection req
  request_id u64 req
msg subscriptions_list
  filter SubFilter dflt
  limit u32 omit
  cursor SubCursor omit
  request_id u64 req
msg subscriptions_list_info
  node_id str req
  subscriptions [SubEntry] req
  next_cursor SubCursor omit
  request_id u64 req
msg publish
  tenant_id str req
  namespace str req
  stream str req
  payload b64 req
  key b64 omit
  request_id u64 omit
  ack enum:none|per_message|per_batch omit
msg publish_batch
  tenant_id str req
  namespace str req
  stream str req
  payloads [b64] req
  key b64 omit
  request_id u64 omit
  ack enum:none|per_message|per_batch omit
msg publish_ok
  request_id u64 req
  offset u64 omit
msg publish_error
  request_id u64 req
  message str req
  code str omit
  retry retry omit
  detail ErrorDetail omit
msg producer_init
  request_id u64 req
msg producer_init_ok
  request_id u64 req
  producer_id u64 req
msg publish_idempotent
  tenant_id str req
  namespace str req
  stream str req
  payloads [b64] req
  key b64 omit
  request_id u64 req
  producer_id u64 req
  sequence u64 req
msg publish_refused
  request_id u64 req
  reason prr req
  message str req
msg publish_if
  tenant_id str req
  namespace str req
  stream str req
  payloads [b64] req
  key b64 omit
  expected_offset u64 req
  request_id u64 req
msg commit
  tenant_id str req
  namespace str req
  stream str req
  entity_key b64 req
  event b64 req
  changes [change] req
  request_id u64 req
  expected_offset u64 omit
msg commit_ok
  request_id u64 req
  offset u64 req
msg state_get
  tenant_id str req
  namespace str req
  stream str req
  entity_key b64 req
  key str req
  request_id u64 req
msg state_value
  value b64 null
  version u64 omit
  as_of u64 omit
  request_id u64 req
msg subscribe
  tenant_id str req
  namespace str req
  stream str req
  subscription_id u64 omit
  start start omit
  shard u32 omit
  queue_capacity u32 omit
msg subscribed
  subscription_id u64 req
  start_offset u64 omit
  live_offset u64 omit
  queue_capacity u32 omit
msg subscribe_cursor_error
  reason enum:too_old|in_future req
  requested u64 req
  available u64 req
msg event_stream_hello
  subscription_id u64 req
msg event
  tenant_id str req
  namespace str req
  stream str req
  payload b64 req
  offset u64 omit
msg event_batch
  tenant_id str req
  namespace str req
  stream str req
  payloads [b64] req
  base_offset u64 omit
msg shard_moved
  subscription_id u64 req
  resume_from u64 omit
  node_id str omit
  addr str omit
  generation u64 req
msg subscription_lagged
  subscription_id u64 req
  resume_from u64 req
msg stream_deleted
  subscription_id u64 req
msg offset_for_time
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  at_micros u64 req
  request_id u64 req
msg offset_value
  offset u64 omit
  request_id u64 req
msg stream_read
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  from u64 req
  end u64 omit
  max_records u32 omit0
  max_bytes u64 omit0
  request_id u64 req
msg stream_records
  records [StreamRecord] req
  next_offset u64 req
  request_id u64 req
msg cache_put
  tenant_id str req
  namespace str req
  cache str req
  key str req
  value b64 req
  request_id u64 omit
  ttl_ms u64 null
msg cache_get
  tenant_id str req
  namespace str req
  cache str req
  key str req
  request_id u64 omit
msg cache_delete
  tenant_id str req
  namespace str req
  cache str req
  key str req
  request_id u64 omit
msg cache_value
  tenant_id str req
  namespace str req
  cache str req
  key str req
  value b64 null!
  request_id u64 omit
  version u64 omit
msg cache_ok
  request_id u64 req
msg cache_put_if
  tenant_id str req
  namespace str req
  cache str req
  key str req
  value b64 req
  ttl_ms u64 omit
  condition cond req
  request_id u64 req
msg cache_delete_if
  tenant_id str req
  namespace str req
  cache str req
  key str req
  version u64 req
  request_id u64 req
msg cache_condition_result
  applied bool req
  version u64 omit
  request_id u64 req
msg cache_watch
  tenant_id str req
  namespace str req
  cache str req
  key str omit
  prefix str omit
  shard u32 omit
  from_offset u64 omit
  retained bool omit0
  subscription_id u64 omit
msg cache_watch_started
  subscription_id u64 req
  resume_offset u64 req
  resnapshot bool dflt
  retained_count u64 omit
msg cache_event
  key str req
  value b64 omit
  offset u64 req
  expires_at_millis u64 dflt
msg cache_watch_lagged
  resume_from u64 req
msg counter_add
  tenant_id str req
  namespace str req
  cache str req
  key str req
  delta i64 req
  request_id u64 req
msg counter_get
  tenant_id str req
  namespace str req
  cache str req
  key str req
  request_id u64 req
msg counter_value
  value i64 omit
  request_id u64 req
msg group_poll
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  group str req
  max_records u32 req
  wait_ms u64 dflt
  request_id u64 req
  consumer str omit
  reclaim bool omit0
  visibility_ms u64 omit0
msg group_records
  records [GroupRecord] req
  request_id u64 req
msg group_ack
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  group str req
  offset u64 req
  request_id u64 req
msg group_nack
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  group str req
  offset u64 req
  request_id u64 req
  delay_ms u64 omit0
  attempts u32 omit0
msg group_extend
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  group str req
  offset u64 req
  attempts u32 req
  extend_ms u64 req
  request_id u64 req
msg group_extended
  visible_ms u64 req
  request_id u64 req
msg group_dead_letter
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  group str req
  offset u64 req
  request_id u64 req
msg group_dead_letters
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  group str req
  request_id u64 req
msg group_dead_letter_list
  offsets [u64] req
  request_id u64 req
msg group_discard
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  group str req
  offset u64 req
  request_id u64 req
msg group_redrive
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  group str req
  offset u64 req
  request_id u64 req
msg group_seek
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  group str req
  start start req
  if_new bool omit0
  request_id u64 req
msg group_describe
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  group str req
  request_id u64 req
msg group_delete
  tenant_id str req
  namespace str req
  stream str req
  shard u32 req
  group str req
  request_id u64 req
msg group_position
  offset u64 req
  moved bool req
  request_id u64 req
msg group_info
  committed u64 omit
  tail u64 req
  in_flight u64 req
  owed u64 req
  dead_letters u64 req
  request_id u64 req
msg group_deleted
  existed bool req
  request_id u64 req
-- END SCHEMA
]]

local STRUCTS, MSGS = {}, {}
do
	local cur
	for line in SCHEMA_TEXT:gmatch("[^\n]+") do
		local kind, name = line:match("^(%a+) (%S+)$")
		if kind == "struct" or kind == "msg" then
			cur = {}
			if kind == "struct" then STRUCTS[name] = cur else MSGS[name] = cur end
		elseif cur then
			local fname, ftype, enc = line:match("^%s+(%S+) (%S+) (%S+)$")
			if fname then cur[#cur + 1] = { name = fname, typ = ftype, enc = enc } end
		end
	end
end

local MAXU = { u16 = "65535", u32 = "4294967295", u64 = "18446744073709551615" }
local function digits_le(a, b) -- decimal digit strings without leading zeros
	if #a ~= #b then return #a < #b end
	return a <= b
end

local B64 = {}
do
	local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for k = 1, 64 do B64[byte(alphabet, k)] = k - 1 end
end
local function b64_canonical(s)
	local n = #s
	if n % 4 ~= 0 then return false end
	if n == 0 then return true end
	local pad = 0
	if byte(s, n) == 61 then pad = 1; if byte(s, n - 1) == 61 then pad = 2 end end
	for k = 1, n - pad do
		if not B64[byte(s, k)] then return false end
	end
	if pad == 1 then return B64[byte(s, n - 1)] % 4 == 0 end
	if pad == 2 then return B64[byte(s, n - 2)] % 16 == 0 end
	return true
end

local validate_struct

-- Every failure of a known member is judged where a one-pass decoder meets
-- it, so that the first one in document order wins (as against an invalid
-- UTF-8 byte, see dissect_json): a wrong JSON type at the value's first
-- byte, a bad value (range, form, base64, word) at its last byte, a missing
-- member at the end of its object, a duplicate at the repeated name.
-- check_value returns nil, or why node is not a value of type typ and the
-- byte where that shows.
local function check_value(node, typ, path)
	local t = node.t
	local function wrong(what) return path .. ": " .. what .. " was expected", node.s end
	local function bad(why) return path .. ": " .. why, node.e end
	if typ == "str" or typ == "retry" then
		if t ~= "str" then return wrong("a string") end
	elseif MAXU[typ] then
		if t ~= "num" then return wrong("an integer") end
		if not node.v:match("^%d+$") then return bad("not a plain non-negative integer") end
		if not digits_le(node.v, MAXU[typ]) then return bad("out of the " .. typ .. " range") end
	elseif typ == "i64" then
		if t ~= "num" then return wrong("an integer") end
		local neg, d = node.v:match("^(%-?)(%d+)$")
		if not d then return bad("not a plain integer") end
		if not digits_le(d, neg == "-" and "9223372036854775808" or "9223372036854775807") then
			return bad("out of the i64 range")
		end
	elseif typ == "bool" then
		if t ~= "bool" then return wrong("true or false") end
	elseif typ == "b64" then
		if t ~= "str" then return wrong("a base64 string") end
		if not b64_canonical(node.v) then return bad("not canonical padded standard base64") end
	elseif typ == "any" then
		return nil
	elseif typ:sub(1, 1) == "[" then
		if t ~= "arr" then return wrong("an array") end
		local et = typ:sub(2, -2)
		for k, el in ipairs(node.a) do
			if el.t == "null" then return path .. "[" .. (k - 1) .. "]: null in a list", el.s end
			local e, at = check_value(el, et, path .. "[" .. (k - 1) .. "]")
			if e then return e, at end
		end
	elseif typ:sub(1, 5) == "enum:" then
		if t ~= "str" then return wrong("a string") end
		for w in typ:sub(6):gmatch("[^|]+") do
			if w == node.v then return nil end
		end
		return bad("unknown word " .. node.v)
	elseif typ == "start" or typ == "cond" or typ == "prr" then
		local words = ({ start = { latest = 1, earliest = 1 }, cond = { absent = 1 },
			prr = { unknown_producer = 1, sequence_expired = 1, sequence_reused = 1 } })[typ]
		if t == "str" then
			if words[node.v] then return nil end
			return bad("unknown word " .. node.v)
		end
		if t ~= "obj" then return wrong("a word or a one-member object") end
		if #node.m == 0 then return bad("an empty object is no variant") end
		local m = node.m[1]
		local inner = ({
			start = { offset = "u64" }, cond = { version = "u64" },
			prr = {
				sequence_gap = { { name = "expected", typ = "u64", enc = "req" } },
				offset_mismatch = { { name = "tail", typ = "u64", enc = "req" } },
				not_leader = { { name = "node_id", typ = "str", enc = "req" }, { name = "addr", typ = "str", enc = "omit" } },
			},
		})[typ][m.k]
		if not inner then return path .. ": unknown variant " .. m.k, m.kn.e end
		local e, at
		if type(inner) == "string" then
			e, at = check_value(m.v, inner, path .. "." .. m.k)
		elseif m.v.t ~= "obj" then
			e, at = path .. "." .. m.k .. ": an object was expected", m.v.s
		else
			e, at = validate_struct(m.v, inner, path .. "." .. m.k)
		end
		if e then return e, at end
		if #node.m > 1 then return path .. ": a variant is a one-member object", node.m[2].kn.s end
	elseif typ == "change" then
		-- op may stand anywhere, so a change is judged as a whole once it
		-- is read: every failure inside it shows at its end
		if t ~= "obj" then return wrong("an object") end
		local op
		for _, m in ipairs(node.m) do
			if m.k == "op" then
				if op then return path .. ": duplicate member op", node.e end
				op = m.v
			end
		end
		if not op then return path .. ": missing op", node.e end
		if op.t ~= "str" then return path .. ".op: a string was expected", node.e end
		local fields
		if op.v == "put" then
			fields = { { name = "op", typ = "str", enc = "req" }, { name = "key", typ = "str", enc = "req" }, { name = "value", typ = "b64", enc = "req" } }
		elseif op.v == "delete" then
			fields = { { name = "op", typ = "str", enc = "req" }, { name = "key", typ = "str", enc = "req" } }
		else
			return path .. ".op: unknown word " .. op.v, node.e
		end
		local e = validate_struct(node, fields, path)
		if e then return e, node.e end
	elseif STRUCTS[typ] then
		if t ~= "obj" then return wrong("an object") end
		return validate_struct(node, STRUCTS[typ], path)
	else
		return path .. ": schema type " .. typ .. " unknown to the dissector", node.s
	end
	return nil
end

-- validate_struct applies the member encodings of docs/messages.md 1.2 and
-- returns the first failure in document order.
validate_struct = function(obj, fields, path)
	local known = {}
	for _, f in ipairs(fields) do known[f.name] = f end
	local first, at
	local function note(e, pos)
		if e and (not at or pos < at) then first, at = e, pos end
	end
	local seen = {}
	for _, m in ipairs(obj.m) do
		local f = known[m.k]
		if f then
			local p = path .. "." .. f.name
			if seen[m.k] then
				note(path .. ": duplicate member " .. m.k, m.kn.e)
			elseif m.v.t == "null" then
				if f.enc == "req" or f.enc == "dflt" or f.enc == "omit0" then note(p .. ": null is not allowed", m.v.s) end
			else
				note(check_value(m.v, f.typ, p))
			end
			seen[m.k] = true
		end
	end
	for _, f in ipairs(fields) do
		if not seen[f.name] and (f.enc == "req" or f.enc == "null!") then
			note(path .. "." .. f.name .. ": missing", obj.e)
		end
	end
	return first, at
end

local function dissect_json(ctx, t)
	local len = ctx.stop - ctx.pos
	local r = ctx.tvb(ctx.pos, len)
	local s = len > 0 and r:raw() or ""
	t:add(pf.json, r, s)
	-- UTF-8 is judged inside strings: a byte there that is not UTF-8 is
	-- invalid_utf8, unless a failure that a one-pass decoder meets earlier
	-- comes first; any other byte that is not JSON is a syntax error
	local okp, root, serr, utf8_at = json_parse(s)
	if not okp and not (type(serr) == "table" and serr.jerr) then error(serr, 0) end
	local syntax_at = okp and math.huge or serr.at
	-- The first failure wins, in the order a decoder that looks for "type"
	-- first meets them: a syntax error or invalid UTF-8 in a string before
	-- the type member (met while scanning for it), then every failure in
	-- document order (a syntax error, invalid UTF-8, a member failure judged
	-- on the tree read so far).
	local type_at = math.huge
	if root and root.t == "obj" then
		for _, m in ipairs(root.m) do
			if m.k == "type" then type_at = m.kn.s; break end
		end
	end
	local class, at, why, phase
	local function note(c, pos, w, scan)
		if not pos or pos >= math.huge then return end
		local ph = (scan and pos < type_at) and 0 or 1
		if not at or ph < phase or (ph == phase and pos < at) then class, at, why, phase = c, pos, w, ph end
	end
	if not okp then note("invalid_json", serr.at, serr.jerr, true) end
	note("invalid_utf8", utf8_at, "invalid UTF-8 in a string", true)
	local typ, fields
	if root and root.t == "obj" then
		for _, m in ipairs(root.m) do
			if m.k == "type" then
				if typ then note("invalid_json", m.kn.e, "duplicate member type") end
				typ = typ or m.v
			end
		end
		if not typ then
			note("invalid_json", root.e, "no type member")
		elseif typ.t ~= "str" then
			note("invalid_json", typ.s, "type is not a string")
		else
			fields = MSGS[typ.v]
			if fields then
				local e, pos = validate_struct(root, fields, typ.v)
				if e and pos < syntax_at then note("invalid_json", pos, e) end
			end
		end
	end
	if class then
		local b = math.min(at - 1, math.max(len - 1, 0))
		fail(ctx, class, ctx.tvb(ctx.pos + b, len > 0 and 1 or 0), why .. " at byte " .. b)
	end
	local base = ctx.pos - 1
	local function rng(node) return ctx.tvb(base + node.s, node.e - node.s + 1) end
	for _, m in ipairs(root.m) do
		local raw = sub(s, m.v.s, m.v.e)
		if #raw > 200 then raw = raw:sub(1, 200) .. "…" end
		t:add(pf.member, ctx.tvb(base + m.kn.s, m.v.e - m.kn.s + 1), m.k .. ": " .. raw)
	end
	t:add(pf.type, rng(typ), typ.v)
	ctx.type = typ.v
	ctx.info = ctx.info .. " " .. typ.v
	if not fields then
		t:add_proto_expert_info(ex.unknown_type, "unknown message type " .. typ.v)
	end
end

------------------------------------------------------------------------
-- One frame

-- dissect_frame adds the tree of the frame that starts at off of tvb,
-- where avail bytes are all there is of it (fewer than its header and
-- length call for: truncated). opts.single: the PDU holds exactly one frame,
-- so bytes after it are trailing bytes; opts.max: the payload limit;
-- opts.meta adds the stream fields. Returns the context: info (for the
-- Info column) and error (the class, if any).
local function dissect_frame(tvb, off, avail, tree, opts)
	local t = tree:add(felix, tvb(off, avail))
	local ctx = { tvb = tvb, tree = t, pos = off, stop = off + avail, info = "" }
	local ok, err = pcall(function()
		if opts.meta then opts.meta(t) end
		if avail < HEADER_LEN then
			fail(ctx, "truncated", tvb(off, avail), string.format("a header needs 12 bytes, %d present", avail))
		end
		t:set_len(HEADER_LEN)
		local magic = tvb(off, 4):uint()
		t:add(pf.magic, tvb(off, 4))
		if magic ~= MAGIC then
			fail(ctx, "bad_magic", tvb(off, 4), string.format("0x%08x", magic))
		end
		local version = tvb(off + 4, 2):uint()
		t:add(pf.version, tvb(off + 4, 2))
		if version ~= 1 then
			fail(ctx, "bad_version", tvb(off + 4, 2), "version " .. version)
		end
		local fr = tvb(off + 6, 2)
		local f = fr:uint()
		local ft = t:add(pf.flags, fr)
		ft:append_text(" (" .. flag_names(f) .. ")")
		for _, bf in ipairs(flag_bit_fields) do ft:add(bf, fr) end
		ft:add(pf.flags_reserved, fr)
		t:add(pf.flag_names, fr, flag_names(f)):set_generated()
		local lr = tvb(off + 8, 4)
		local len = lr:uint()
		t:add(pf.length, lr)
		local layout = layout_of(f)
		t:add(pf.layout, fr, layout):set_generated()
		ctx.info = string.format("0x%04x", f)
		t:append_text(string.format(", flags 0x%04x (%s), %d bytes", f, flag_names(f), len))
		if band(f, bit.bnot(KNOWN_FLAGS)) ~= 0 then
			-- the strict header parse refuses it before looking at the
			-- length; a stream reader still skips the frame by its length
			t:set_len(math.min(avail, HEADER_LEN + len))
			fail(ctx, "unknown_flags", fr, string.format("0x%04x (a broker skips the frame and answers an error)", band(f, bit.bnot(KNOWN_FLAGS))))
		end
		if len > opts.max then
			fail(ctx, "frame_too_large", lr, string.format("%d > %d", len, opts.max))
		end
		if avail < HEADER_LEN + len then
			ctx.pos = off + HEADER_LEN
			fail(ctx, "truncated", tvb(off + 8, 4), string.format("length %d, %d payload bytes present", len, avail - HEADER_LEN))
		end
		local flen = HEADER_LEN + len
		t:set_len(flen)
		ctx.pos, ctx.stop = off + HEADER_LEN, off + flen
		if opts.single and avail > flen then
			fail(ctx, "trailing_bytes", tvb(off + flen, avail - flen), string.format("%d bytes after the frame", avail - flen))
		end
		local why = check_layout(f, layout)
		if why then fail(ctx, "bad_flag_combination", fr, why) end
		if len > 0 and layout ~= "json_message" then t:add(pf.payload, tvb(off + HEADER_LEN, len)) end
		if layout == "json_message" then
			dissect_json(ctx, t)
			ctx.pos = ctx.stop
		elseif layout == "binary_publish_batch" or layout == "binary_acked_publish_batch" then
			dissect_publish(ctx, f, t)
		elseif layout == "binary_publish_ack" then
			dissect_ack(ctx, f, t)
		else
			dissect_event(ctx, f, t)
		end
		if ctx.pos < ctx.stop then
			t:add(pf.trailing, tvb(ctx.pos, ctx.stop - ctx.pos))
			fail(ctx, "trailing_bytes", tvb(ctx.pos, ctx.stop - ctx.pos), string.format("%d bytes after the layout", ctx.stop - ctx.pos))
		end
	end)
	if not ok and err ~= Stop then error(err, 0) end
	return ctx
end

------------------------------------------------------------------------
-- Decode As: one frame per PDU

function felix.dissector(tvb, pinfo, tree)
	pinfo.cols.protocol = "Felix"
	local ctx = dissect_frame(tvb, 0, tvb:len(), tree, { single = true, max = felix.prefs.max_frame_bytes })
	pinfo.cols.info = "Felix " .. (ctx.info or "") .. (ctx.error and (" [" .. ctx.error .. "]") or "")
	return tvb:len()
end

DissectorTable.get("udp.port"):add_for_decode_as(felix)

------------------------------------------------------------------------
-- QUIC streams: reassembly in a postdissector

-- State built on the first pass over the packets, kept for later visits
-- (Wireshark re-dissects packets in any order when the user clicks):
--   conns[conn]        {client=endpoint, felix=bool}
--   streams[key]       per stream and direction: next offset, pending
--                      out-of-order data, bytes not yet framed, state
--   results[pinfo.number] list of chunks to show in that packet
local conns, streams, results

local function reset()
	conns, streams, results = {}, {}, {}
end
reset()
felix.init = reset

-- be32 reads a big-endian u32 at off of a ByteArray (without making a Tvb,
-- which would add a data source to the packet).
local function be32(ba, off)
	return ((ba:get_index(off) * 256 + ba:get_index(off + 1)) * 256 + ba:get_index(off + 2)) * 256 + ba:get_index(off + 3)
end

local function endpoint(pinfo) return tostring(pinfo.src) .. ":" .. tostring(pinfo.src_port) end

local function emit(num, chunk)
	local list = results[num]
	if not list then list = {}; results[num] = list end
	list[#list + 1] = chunk
end

-- frame_stream cuts the buffered bytes of st into frames and records the
-- complete ones (and, at the end of the stream, a short rest) for packet num.
local function frame_stream(st, num, meta)
	local maxb = felix.prefs.max_frame_bytes
	while not st.broken do
		local have = st.buf:len()
		if have == 0 then return end
		local need_len
		if have >= HEADER_LEN then
			local b = st.buf
			local ok_hdr = be32(b, 0) == MAGIC and b:get_index(4) == 0 and b:get_index(5) == 1
			local len = be32(b, 8)
			if not ok_hdr or len > maxb then
				emit(num, { data = st.buf:subset(0, have), meta = meta, offset = st.base })
				st.broken = true
				return
			end
			need_len = HEADER_LEN + len
		end
		if need_len and have >= need_len then
			emit(num, { data = st.buf:subset(0, need_len), meta = meta, offset = st.base })
			st.base = st.base + need_len
			if have > need_len then st.buf = st.buf:subset(need_len, have - need_len) else st.buf = ByteArray.new() end
			st.started = nil
		else
			if st.fin and st.next >= st.fin then
				emit(num, { data = st.buf:subset(0, have), meta = meta, offset = st.base })
				st.broken = true
				return
			end
			if not st.started then
				st.started = num
				emit(num, { partial = true, meta = meta, offset = st.base, have = have })
			end
			return
		end
	end
end

local function add_stream_data(pinfo, conn, sid, off, data, fin)
	local c = conns[conn]
	local dir = (c.client == endpoint(pinfo)) and "c2b" or "b2c"
	local key = conn .. "/" .. sid .. "/" .. dir
	local st = streams[key]
	local len = data and data:len() or 0
	if not st then
		if off ~= 0 then return end -- the stream began before the capture
		local starts_flx = len >= 4 and be32(data, 0) == MAGIC
		if not (c.felix or starts_flx or felix.prefs.all_streams) then return end
		if starts_flx then c.felix = true end
		st = { next = 0, base = 0, buf = ByteArray.new(), pending = {}, conn = conn, sid = sid, dir = dir }
		streams[key] = st
	end
	if st.broken then return end
	if fin then st.fin = off + len end
	local meta = { conn = conn, sid = sid, dir = dir }
	if len > 0 then
		if off + len <= st.next then
			-- a retransmission of data already framed
		elseif off <= st.next then
			local skip = st.next - off
			st.buf:append(data:subset(skip, len - skip))
			st.next = off + len
		else
			st.pending[off] = data
		end
		-- drain out-of-order data that now fits
		local progressed = true
		while progressed do
			progressed = false
			for po, pd in pairs(st.pending) do
				if po <= st.next then
					st.pending[po] = nil
					if po + pd:len() > st.next then
						local skip = st.next - po
						st.buf:append(pd:subset(skip, pd:len() - skip))
						st.next = po + pd:len()
					end
					progressed = true
				end
			end
		end
	end
	frame_stream(st, pinfo.number, meta)
end

local fi_all = all_field_infos

local function scan_packet(pinfo)
	local conn
	local cur -- the STREAM frame being collected
	local function flush()
		if cur and cur.sid and conn then add_stream_data(pinfo, conn, cur.sid, cur.off, cur.data, cur.fin) end
		cur = nil
	end
	for _, fi in ipairs({ fi_all() }) do
		local name = fi.name
		if name == "quic.connection.number" then
			flush()
			conn = fi.value
			if not conns[conn] then conns[conn] = { client = endpoint(pinfo) } end
		elseif name == "tls.handshake.extensions_alpn_str" then
			if conn and fi.value == "felix/1" then conns[conn].felix = true end
		elseif name == "quic.stream.fin" then
			flush()
			cur = { off = 0, fin = fi.value }
		elseif cur then
			if name == "quic.stream.stream_id" then cur.sid = tostring(fi.value)
			elseif name == "quic.stream.offset" then cur.off = tonumber(tostring(fi.value))
			elseif name == "quic.stream_data" then cur.data = fi.range:bytes()
			end
		end
	end
	flush()
end

local function render(list, pinfo, tree, test)
	local infos = {}
	local all = ByteArray.new()
	local parts = {}
	for _, ch in ipairs(list) do
		if (ch.meta.conn == "test") ~= test then
			-- shown by the other entry point
		elseif ch.data then
			parts[#parts + 1] = { ch = ch, at = all:len() }
			all:append(ch.data)
		else
			parts[#parts + 1] = { ch = ch }
		end
	end
	local tvb = all:len() > 0 and all:tvb("Felix frames") or nil
	for _, p in ipairs(parts) do
		local ch = p.ch
		local meta = function(t)
			t:add(pf.direction, ch.meta.dir):set_generated()
			if ch.meta.conn ~= "test" then t:add(pf.conn, ch.meta.conn):set_generated() end
			t:add(pf.stream_id, UInt64(tonumber(ch.meta.sid))):set_generated()
			t:add(pf.stream_offset, UInt64(ch.offset)):set_generated()
		end
		if ch.partial then
			local t = tree:add(felix, string.format("Felix frame, start (%d bytes) on QUIC connection %s stream %s %s; completed in a later packet",
				ch.have, tostring(ch.meta.conn), ch.meta.sid, ch.meta.dir))
			meta(t)
			t:add(pf.partial, ch.have):set_generated()
			t:add_proto_expert_info(ex.incomplete)
		else
			local ctx = dissect_frame(tvb, p.at, ch.data:len(), tree, { max = felix.prefs.max_frame_bytes, meta = meta })
			infos[#infos + 1] = (ctx.info or "") .. (ctx.error and ("[" .. ctx.error .. "]") or "")
		end
	end
	if #infos > 0 then
		pinfo.cols.protocol = "Felix"
		pinfo.cols.info:append(" Felix: " .. table.concat(infos, ", "))
	end
end

local post = Proto("felix_quic", "Felix over QUIC (stream reassembly)")
function post.dissector(tvb, pinfo, tree)
	if not pinfo.visited then
		scan_packet(pinfo)
	end
	local list = results[pinfo.number]
	if list then render(list, pinfo, tree, false) end
end
post.init = reset
register_postdissector(post, true)

-- Test entry point of the stream reassembly (tools/wireshark/test.sh):
-- the dissector "felix_stream_test" takes each PDU as a piece of one
-- Felix stream, u64 stream offset, u8 FIN (1), then the data; all PDUs of
-- a capture form that one stream, in capture order, through the same
-- code as the QUIC streams above.
local stream_test = Proto("felix_stream_test", "Felix stream reassembly test input")
function stream_test.dissector(tvb, pinfo, tree)
	if not pinfo.visited and tvb:len() >= 9 then
		if not conns.test then conns.test = { client = endpoint(pinfo), felix = true } end
		local data = tvb:len() > 9 and tvb(9):bytes() or ByteArray.new()
		add_stream_data(pinfo, "test", "0", tvb(0, 8):uint64():tonumber(), data, tvb(8, 1):uint() == 1)
	end
	local list = results[pinfo.number]
	if list then render(list, pinfo, tree, true) end
	return tvb:len()
end
