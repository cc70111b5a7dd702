-- The sliding log: DecideLog in internal/algo/log.go, with commit, on the
-- hash that log.lua describes: fields h (sequence of the oldest entry), n
-- (the sequence after the newest) and t (their total), and one field per
-- entry, "<seq>" = "<at>:<cost>". Sequences and counts go to Redis as Lua
-- numbers, which it writes as the integers they are (%.17g, or since Redis
-- 7.2 as integers: the same digits below 2^53).
local rate, period = ARGV[5] + 0, ARGV[6] + 0
local ENTRY = '^(%-?%d+):(%d+)$'

-- The header. A key that holds another algorithm's string starts fresh:
-- HMGET answers WRONGTYPE, which redis.pcall returns as a table where
-- redis.call would raise (on success the two cost the same), and the string
-- is deleted.
local h, n, t = 0, 0, 0
local meta = redis.pcall('HMGET', key, 'h', 'n', 't')
if meta.err then
  redis.call('DEL', key)
elseif meta[1] then
  h, n, t = meta[1] + 0, meta[2] + 0, meta[3] + 0
end

-- The newest and the oldest entry, in one call. A clock that reads earlier
-- than the newest entry is taken as reading its time.
local at = now
local newest_at, newest_cost, oldest_at, oldest_cost
if n > h then
  local e = redis.call('HMGET', key, n - 1, h)
  local x, y = string.match(e[1], ENTRY)
  newest_at, newest_cost = x + 0, y + 0
  if n - 1 == h then
    oldest_at, oldest_cost = newest_at, newest_cost
  else
    x, y = string.match(e[2], ENTRY)
    oldest_at, oldest_cost = x + 0, y + 0
  end
  if newest_at > at then at = newest_at end
end

-- Log.expire(at − Period): drop the entries at or before the cutoff.
local cutoff = at - period
local dropped = false
if n > h and newest_at <= cutoff then
  -- All of them, the newest too: the log is empty, the key goes in one
  -- call, and the sequences start again from 0 (nothing depends on them
  -- but the hash itself).
  redis.call('DEL', key)
  h, n, t = 0, 0, 0
elseif n > h and oldest_at <= cutoff then
  -- The oldest first; the newest is after the cutoff, so it ends there at
  -- the latest.
  repeat
    redis.call('HDEL', key, h)
    t, h = t - oldest_cost, h + 1
    local x, y = string.match(redis.call('HGET', key, h), ENTRY)
    oldest_at, oldest_cost = x + 0, y + 0
  until oldest_at > cutoff
  dropped = true
end

local allowed, remaining, retry, reset = 0, 0, 0, 0
if cost > rate then
  retry = -1 -- Never
elseif t + cost <= rate then
  allowed = 1
  if cost > 0 then
    -- Log.record, with the header in the same call: a request in the
    -- newest entry's microsecond is merged into it.
    if n > h and newest_at == at then
      redis.call('HSET', key, n - 1, string.format('%d:%d', at, newest_cost + cost), 'h', h, 'n', n, 't', t + cost)
    else
      redis.call('HSET', key, n, string.format('%d:%d', at, cost), 'h', h, 'n', n + 1, 't', t + cost)
      n = n + 1
    end
    t, newest_at = t + cost, at
  end
else
  -- freedAt(t + cost − Rate): the time of the entry whose expiry frees
  -- enough, counting from the oldest (the log is not empty: t > Rate − cost
  -- ≥ 0).
  local need, seq, freed = t + cost - rate - oldest_cost, h, oldest_at
  while need > 0 and seq < n - 1 do
    seq = seq + 1
    local x, y = string.match(redis.call('HGET', key, seq), ENTRY)
    freed, need = x + 0, need - y
  end
  retry = freed + period - now
end
if t < rate then remaining = rate - t end
if n > h then reset = newest_at + period - now end

if allowed == 1 and cost > 0 then
  -- The key lives until the newest entry leaves the log (ttl_ms in
  -- prelude.lua).
  local ttl = math.floor(reset / 1000)
  if ttl * 1000 < reset then ttl = ttl + 1 end
  redis.call('PEXPIRE', key, ttl + ARGV[3])
elseif dropped then
  -- Entries were dropped and nothing recorded: the header follows. The
  -- TTL, set when the newest entry was recorded, still holds: it ends when
  -- that entry leaves the log.
  redis.call('HSET', key, 'h', h, 't', t)
end
return {allowed, rate, remaining, retry, reset, 0, now}
