-- Adds a node's counts to one key's window counters and returns the store's
-- view: {now µs, window, current count, previous count}. The same rules as
-- counterWindows in counter.go, so RedisCounter and MemoryCounter agree.
--
-- KEYS[1]  the key's counts as "window:current:previous"; the key carries a
--          hash tag, so every key of a limit key shares one Cluster slot
-- ARGV     now µs (-1: the server's TIME), period µs, window the node named,
--          delta for that window, delta for the one before, TTL slack in ms
--
-- Every number stays below 2^53, so Lua's doubles hold it exactly.

local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local period = tonumber(ARGV[2])
local named = tonumber(ARGV[3])
local delta = tonumber(ARGV[4])
local prev_delta = tonumber(ARGV[5])
local slack = tonumber(ARGV[6])

-- floor(now / period), corrected where the division rounded up.
local window = math.floor(now / period)
if window * period > now then
  window = window - 1
elseif (window + 1) * period <= now then
  window = window + 1
end

local current, previous = 0, 0
local raw = redis.call('GET', KEYS[1])
if raw then
  local w, c, p = string.match(raw, '^(-?%d+):(%d+):(%d+)$')
  local stored = tonumber(w)
  if not stored then
    return redis.error_reply('floodgate counter: ' .. KEYS[1] .. ' holds no counts: ' .. raw)
  end
  -- Never go back to an older window: a clock that stepped back keeps
  -- counting in the newest one.
  if stored > window then
    window = stored
  end
  if stored == window then
    current, previous = tonumber(c), tonumber(p)
  elseif stored == window - 1 then
    previous = tonumber(c)
  end
end

local function add(w, d)
  if d == 0 then
    return
  end
  if w >= window then
    current = current + d
  elseif w == window - 1 then
    previous = previous + d
  end
end
add(named, delta)
add(named - 1, prev_delta)

if current > 0 or previous > 0 then
  -- Live until the current window has also served as a previous one.
  local ttl_ms = math.ceil(((window + 2) * period - now) / 1000) + slack
  redis.call('SET', KEYS[1], string.format('%d:%d:%d', window, current, previous),
    'PX', string.format('%d', ttl_ms))
end
return {now, window, current, previous}
