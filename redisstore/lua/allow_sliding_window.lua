-- The sliding window counter: decideSlidingWindow and slidingRetry in
-- internal/algo/window.go, statement by statement. The state: a = the
-- current window's start (µs), b = its count, c = the previous window's.
-- floor and mul_div (exact a·b/c, prelude.lua's) come from mul_div.lua.
local rate, period = ARGV[5] + 0, ARGV[6] + 0

-- windowStart: the window that holds now, never before the state's.
local start = floor(now / period) * period
if a > start then start = a end
local current, previous = 0, 0
if a == start then
  current, previous = b, c
elseif a == start - period then
  previous = b
end
local elapsed = now - start
if elapsed < 0 then elapsed = 0 end
-- weighted = ⌈previous·(Period − elapsed)/Period⌉ (mulDivCeil)
local weighted, r = mul_div(previous, period - elapsed, period)
if r > 0 then weighted = weighted + 1 end

local allowed, remaining, retry, reset = 0, 0, 0, 0
local write = false
if cost > rate then
  retry = -1 -- Never
elseif weighted + current + cost <= rate then
  allowed = 1
  if cost > 0 then current, write = current + cost, true end
else
  -- slidingRetry: the first moment the estimate leaves room for cost.
  local room = rate - current - cost
  if room >= 0 then
    -- Within this window, once previous·(Period − e) ≤ room·Period.
    retry = start + period - mul_div(room, period, previous) - now
  else
    -- In the next window, once current·(Period − e) ≤ (Rate − cost)·Period.
    retry = start + 2 * period - mul_div(rate - cost, period, current) - now
  end
end
local left = rate - current - weighted
if left > 0 then remaining = left end
if current > 0 then
  reset = start + 2 * period - now
elseif previous > 0 then
  reset = start + period - now
end

if write then
  -- The key lives until both windows are empty (ttl_ms in prelude.lua).
  local ttl = floor(reset / 1000)
  if ttl * 1000 < reset then ttl = ttl + 1 end
  redis.call('SET', key, struct.pack('<Bddd', kind, start, current, previous),
    'PX', ttl + ARGV[3])
end
return {allowed, rate, remaining, retry, reset, 0, now}
