-- The fixed window: decideFixedWindow in internal/algo/window.go, statement
-- by statement. The state: a = the window's start (µs), b = units admitted
-- in it.
local floor = math.floor
local rate, period = ARGV[5] + 0, ARGV[6] + 0

-- windowStart: the window that holds now, never before the state's.
local start = floor(now / period) * period
if a > start then start = a end
local count = 0
if a == start then count = b end
local finish = start + period

local allowed, remaining, retry, reset = 0, 0, 0, 0
local write = false
if cost > rate then
  retry = -1 -- Never
elseif count + cost <= rate then
  allowed = 1
  if cost > 0 then count, write = count + cost, true end
else
  retry = finish - now
end
if count < rate then remaining = rate - count end
if count > 0 then reset = finish - now end

if write then
  -- The key lives until the window ends (ttl_ms in prelude.lua).
  local ttl = floor(reset / 1000)
  if ttl * 1000 < reset then ttl = ttl + 1 end
  redis.call('SET', key, struct.pack('<Bddd', kind, start, count, 0), 'PX', ttl + ARGV[3])
end
return {allowed, rate, remaining, retry, reset, 0, now}
