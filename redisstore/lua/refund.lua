-- Gives back what an earlier request took: the refund half of "take in
-- order, refund on denial" for batches whose keys live on different nodes.
-- KEYS[1]: the key. ARGV: now (negative: the server's TIME), cost, TTL
-- slack, the compiled limit, then at: the now the request was decided at.
local now = server_now(tonumber(ARGV[1]))
local cost, slack = tonumber(ARGV[2]), tonumber(ARGV[3])
local p = params(ARGV, 4)
local at = tonumber(ARGV[4 + PARAMS])
local key = KEYS[1]
if p.kind == SLIDING_LOG then
  local l = load_log(key)
  refund_log(key, l, at, cost)
  if l.n == l.h then redis.call('DEL', key) else redis.call('HSET', key, 'h', fmt(l.h), 'n', fmt(l.n), 't', fmt(l.t)) end
  return 1
end
local s, raw = load_state(key, p.kind)
if not raw then return 0 end
if p.kind == FIXED_WINDOW or p.kind == SLIDING_WINDOW then
  s = refund_window(p, s, at, cost)
  redis.call('SET', key, encode_state(p.kind, s), 'KEEPTTL')
  return 1
end
local reset
s, reset = refund_bucket(p, s, now, cost)
if reset == 0 then
  redis.call('DEL', key)
else
  save_state(key, p.kind, s, reset, slack)
end
return 1
