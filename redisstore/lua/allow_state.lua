-- The key's state (internal/algo.State; load_state in prelude.lua reads
-- the same): 25 bytes, struct.pack('<Bddd', kind, A, B, C), the integers as
-- doubles, which hold them exactly. Binary, because writing and parsing the
-- decimal form (string.format, string.match) cost a decision more than
-- its GET. A key that holds another algorithm's state starts fresh, and so
-- does a key of another type, the sliding log's hash: GET answers it
-- WRONGTYPE, which redis.pcall returns as a table where redis.call would
-- raise (on success the two cost the same), and the hash is deleted, as
-- load_state does.
local kind = ARGV[4] + 0
local a, b, c = 0, 0, 0
local v = redis.pcall('GET', key)
if type(v) == 'string' then
  if #v == 25 then
    local k, sa, sb, sc = struct.unpack('<Bddd', v)
    if k == kind then a, b, c = sa, sb, sc end
  end
elseif v then
  redis.call('DEL', key)
end
