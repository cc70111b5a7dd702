-- GCRA, the token bucket and the leaky bucket: decideBucket in
-- internal/algo/bucket.go, statement by statement. The state: a = TAT (µs),
-- b = ticks past it, c = the Scale they were counted in. Quotients are
-- floor(x / y) of integers below 2^53, which is exact, as in prelude.lua.
local floor = math.floor
local burst, scale, interval = ARGV[5] + 0, ARGV[6] + 0, ARGV[7] + 0
local tolerance, max_ahead = ARGV[8] + 0, ARGV[9] + 0

-- backlog = max(0, TAT − now) in ticks (Params.backlog).
local tat, ticks = a, b
if c ~= scale and ticks ~= 0 then
  -- The limit changed since the state was written: round the sub-µs part up.
  tat, ticks = tat + 1, 0
end
local backlog = 0
if tat >= now then
  local ahead = tat - now
  if ahead <= max_ahead then
    backlog = ahead * scale + ticks
  else
    backlog = max_ahead * scale -- the clock went backwards: saturate
  end
end

local allowed, remaining, retry, delay = 0, 0, 0, 0
if cost > burst then
  retry = -1 -- Never
else
  local need = backlog + cost * interval
  if need <= tolerance then
    allowed = 1
    if kind == 2 then -- the leaky bucket: Delay = ⌈backlog/Scale⌉
      delay = floor(backlog / scale)
      if delay * scale < backlog then delay = delay + 1 end
    end
    if cost > 0 then backlog = need end
  else
    -- RetryAfter = ⌈(need − Tolerance)/Scale⌉
    local over = need - tolerance
    retry = floor(over / scale)
    if retry * scale < over then retry = retry + 1 end
  end
end
if backlog < tolerance then remaining = floor((tolerance - backlog) / interval) end
local whole = floor(backlog / scale)
ticks = backlog - whole * scale
local reset = whole -- ResetAfter = ⌈backlog/Scale⌉
if ticks > 0 then reset = whole + 1 end

if allowed == 1 and cost > 0 then
  -- The key lives until the bucket is full again (ttl_ms in prelude.lua).
  local ttl = floor(reset / 1000)
  if ttl * 1000 < reset then ttl = ttl + 1 end
  redis.call('SET', key, struct.pack('<Bddd', kind, now + whole, ticks, scale),
    'PX', ttl + ARGV[3])
end
return {allowed, burst, remaining, retry, reset, delay, now}
