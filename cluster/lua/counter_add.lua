-- Merges a node's counts of one key into the key's window counters and
-- returns the store's view: {now µs, window, current sum, previous sum, the
-- node's current count, the node's previous count}. The same rules as
-- counterMemoryEntry.merge in internal/shared/counter_memory.go, so
-- RedisCounter and the in-memory clustertest.Counter agree.
--
-- A node sends its whole count of a window, not an increment, and each
-- node's count only grows: the store keeps the larger of what it holds and
-- what it is sent, and adds the difference to the sum. So an add applied
-- twice, late, or after its caller gave up on the reply counts once.
--
-- KEYS[1]  a hash: field "=" holds the sums and field "n:" .. node each
--          node's counts, all as "window:current:previous"; the key carries
--          a hash tag, so every key of a limit key shares one Cluster slot
-- ARGV     now µs (-1: the server's TIME), period µs, node, window the node
--          named, its count of that window, its count of the one before,
--          TTL slack in ms
--
-- Every number stays below 2^53, so Lua's doubles hold it exactly.

local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local period = tonumber(ARGV[2])
local node = 'n:' .. ARGV[3]
local named = tonumber(ARGV[4])
local count = tonumber(ARGV[5])
local prev_count = tonumber(ARGV[6])
local slack = tonumber(ARGV[7])

-- floor(now / period), corrected where the division rounded up.
local window = math.floor(now / period)
if window * period > now then
  window = window - 1
elseif (window + 1) * period <= now then
  window = window + 1
end

local function parse(raw)
  local w, c, p = string.match(raw, '^(-?%d+):(%d+):(%d+)$')
  if not w then
    return nil
  end
  return tonumber(w), tonumber(c), tonumber(p)
end

-- Counts held for window w moved to window to (never back): the current
-- count becomes the previous one, or both are over.
local function roll(w, c, p, to)
  if w == to then
    return c, p
  elseif w == to - 1 then
    return 0, c
  end
  return 0, 0
end

local raw = redis.call('HMGET', KEYS[1], '=', node)
local sw, sc, sp = nil, 0, 0
if raw[1] then
  sw, sc, sp = parse(raw[1])
  if not sw then
    return redis.error_reply('floodgate counter: ' .. KEYS[1] .. ' holds no counts: ' .. raw[1])
  end
  -- Never go back to an older window: a clock that stepped back keeps
  -- counting in the newest one.
  if sw > window then
    window = sw
  end
  sc, sp = roll(sw, sc, sp, window)
end
local mc, mp = 0, 0
if raw[2] then
  local mw, c, p = parse(raw[2])
  if not mw then
    return redis.error_reply('floodgate counter: ' .. KEYS[1] .. ' holds no counts for ' .. node .. ': ' .. raw[2])
  end
  mc, mp = roll(mw, c, p, window)
end

local changed = false
local function merge(w, n)
  if w == window and n > mc then
    sc, mc, changed = sc + n - mc, n, true
  elseif w == window - 1 and n > mp then
    sp, mp, changed = sp + n - mp, n, true
  end
end
merge(named, count)
merge(named - 1, prev_count)

if sw and sw < window then
  if sc == 0 and sp == 0 then
    -- Nothing counted in the windows that matter: the key goes, with the
    -- counts of nodes that have not written since.
    redis.call('DEL', KEYS[1])
    return {now, window, 0, 0, 0, 0}
  end
  -- The sums moved on: forget the counts of nodes that have not written
  -- since the previous window, once per window.
  local fields = redis.call('HGETALL', KEYS[1])
  for i = 1, #fields, 2 do
    local f = fields[i]
    if f ~= '=' and f ~= node then
      local w = parse(fields[i + 1])
      if w and w < window - 1 then
        redis.call('HDEL', KEYS[1], f)
      end
    end
  end
  changed = true
end

if changed then
  -- Live until the current window has also served as a previous one.
  local ttl_ms = math.ceil(((window + 2) * period - now) / 1000) + slack
  redis.call('HSET', KEYS[1], '=', string.format('%d:%d:%d', window, sc, sp),
    node, string.format('%d:%d:%d', window, mc, mp))
  redis.call('PEXPIRE', KEYS[1], string.format('%d', ttl_ms))
end
return {now, window, sc, sp, mc, mp}
