-- Floodgate's algorithms in Redis, as structured helpers for the batch,
-- peek and refund scripts (each algorithm's single-request script is written
-- out flat: allow_*.lua). Every line mirrors internal/algo in Go: the same
-- integers, the same order of operations, so that a decision made here
-- equals, field by field, the one the in-memory store makes. Numbers here
-- are doubles, exact up to 2^53; internal/algo keeps every quantity below
-- 2^51. The prelude starts with mul_div.lua: EXACT, floor and mul_div.

local TOKEN_BUCKET, LEAKY_BUCKET, FIXED_WINDOW, SLIDING_LOG, SLIDING_WINDOW = 1, 2, 3, 4, 5

local function ceil_div(a, b)
  local q = floor(a / b)
  if q * b < a then q = q + 1 end
  return q
end

local function mul_div_floor(a, b, c)
  local q = mul_div(a, b, c)
  return q
end

local function mul_div_ceil(a, b, c)
  local q, r = mul_div(a, b, c)
  if r > 0 then q = q + 1 end
  return q
end

local function fmt(n) return string.format('%d', n) end

-- params reads a compiled limit from ARGV starting at i (see redisstore.args).
local function params(argv, i)
  return {
    kind = tonumber(argv[i]), rate = tonumber(argv[i + 1]), period = tonumber(argv[i + 2]),
    burst = tonumber(argv[i + 3]), scale = tonumber(argv[i + 4]), interval = tonumber(argv[i + 5]),
    tolerance = tonumber(argv[i + 6]), max_ahead = tonumber(argv[i + 7]),
  }
end
local PARAMS = 8

local function server_now(now)
  if now >= 0 then return now end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function result(limit)
  return {allowed = 0, limit = limit, remaining = 0, retry = 0, reset = 0, delay = 0}
end

-- State of the bucket and window algorithms: struct.pack('<Bddd', kind, A,
-- B, C), as allow_state.lua reads it. A key that holds another algorithm's
-- state, or another type, starts fresh.
local function load_state(key, kind)
  local v = redis.pcall('GET', key)
  if type(v) == 'string' then
    if #v == 25 then
      local k, a, b, c = struct.unpack('<Bddd', v)
      if k == kind then return {a, b, c}, v end
    end
  elseif type(v) == 'table' and v.err then
    redis.call('DEL', key) -- another type: the sliding log's hash
    v = false
  end
  return {0, 0, 0}, v
end

local function ttl_ms(reset, slack)
  return ceil_div(reset, 1000) + slack
end

local function encode_state(kind, s)
  return struct.pack('<Bddd', kind, s[1], s[2], s[3])
end

local function save_state(key, kind, s, reset, slack)
  redis.call('SET', key, encode_state(kind, s), 'PX', ttl_ms(reset, slack))
end
