-- The key's state, "kind:A:B:C" (internal/algo.State; load_state in
-- prelude.lua reads the same). A key that holds another algorithm's state
-- starts fresh, and so does a key of another type, the sliding log's hash:
-- GET answers it WRONGTYPE, which redis.pcall returns as a table where
-- redis.call would raise (on success the two cost the same), and the hash
-- is deleted, as load_state does. The kind is compared as the string it was
-- written as.
local kind = ARGV[4]
local a, b, c = 0, 0, 0
local v = redis.pcall('GET', key)
if type(v) == 'string' then
  local k, sa, sb, sc = string.match(v, '^(%d+):(%-?%d+):(%-?%d+):(%-?%d+)$')
  if k == kind then a, b, c = sa + 0, sb + 0, sc + 0 end
elseif v then
  redis.call('DEL', key)
end
