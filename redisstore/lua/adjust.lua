-- Adjusts what a key was charged (Limiter.Adjust): internal/algo/adjust.go,
-- statement by statement, on top of the prelude and the algorithm files.
-- delta > 0 charges unconditionally, delta < 0 gives back, never beyond the
-- key's empty state. The key lives until its state is empty again, as after
-- a decision, and goes at once when it already is.
-- KEYS[1]: the key. ARGV: now (µs; negative: the server's TIME), delta, TTL
-- slack (ms), the compiled limit (see redisstore.args). Returns the time
-- until the key is empty (µs).
local MAX_UNITS = 1125899906842624 -- 2^50: internal/algo's MaxValue, the cap on counts

-- Counts stay in [0, 2^50]; |delta| <= 2^50, so every sum here is exact.
local function add_clamped(count, delta)
  return math.min(math.max(0, count + delta), MAX_UNITS)
end

-- adjustBucket: the backlog moves by delta intervals, within
-- [0, max_ahead·scale]. A backlog already that deep (the clock went
-- backwards) is left as it is by a charge: false, keep the key unchanged.
-- Products that leave 2^53 round, but only where the exact value is past
-- the bound it is compared with.
local function adjust_bucket(p, s, now, delta)
  local b = backlog(p, s, now)
  local deepest = p.max_ahead * p.scale
  if delta < 0 then
    b = math.max(0, b + delta * p.interval)
  elseif b >= deepest then
    return false, ceil_div(b, p.scale)
  else
    b = math.min(deepest, b + delta * p.interval)
  end
  if b == 0 then return nil, 0 end
  local whole = floor(b / p.scale)
  local ticks = b - whole * p.scale
  local reset = whole
  if ticks > 0 then reset = whole + 1 end
  return {now + whole, ticks, p.scale}, reset
end

local function adjust_fixed_window(p, s, now, delta)
  local start = window_start(p, s, now)
  local count = 0
  if s[1] == start then count = s[2] end
  count = add_clamped(count, delta)
  if count == 0 then return nil, 0 end
  return {start, count, 0}, start + p.period - now
end

-- A refund takes from the current window first, then from the previous.
local function adjust_sliding_window(p, s, now, delta)
  local start, current, previous = sliding_counts(p, s, now)
  local rest = current + delta
  if rest < 0 then
    current, previous = 0, math.max(0, previous + rest)
  else
    current = add_clamped(current, delta)
  end
  if current > 0 then return {start, current, previous}, start + 2 * p.period - now end
  if previous > 0 then return {start, current, previous}, start + p.period - now end
  return nil, 0
end

-- AdjustLog: a charge is recorded at now (the newest entry's time if the
-- clock reads earlier), merged into the newest entry when it is at that
-- time or the log already holds rate entries (the entry then moves to now);
-- a refund empties the newest entries first.
local function adjust_log(key, p, now, delta)
  local l = load_log(key)
  local at, newest_at, newest_cost = now, nil, nil
  if l.n > l.h then
    newest_at, newest_cost = log_entry(key, l.n - 1)
    if newest_at > at then at = newest_at end
  end
  log_expire(key, l, at - p.period)
  if delta > 0 then
    local cost = math.min(delta, MAX_UNITS - l.t)
    if cost > 0 then
      if l.n > l.h and (newest_at == at or l.n - l.h >= p.rate) then
        redis.call('HSET', key, fmt(l.n - 1), fmt(at) .. ':' .. fmt(newest_cost + cost))
      else
        redis.call('HSET', key, fmt(l.n), fmt(at) .. ':' .. fmt(cost))
        l.n = l.n + 1
      end
      l.t = l.t + cost
    end
  else
    local units = -delta
    while units > 0 and l.n > l.h do
      local e_at, e_cost = log_entry(key, l.n - 1)
      local take = math.min(units, e_cost)
      if take == e_cost then
        redis.call('HDEL', key, fmt(l.n - 1))
        l.n = l.n - 1
      else
        redis.call('HSET', key, fmt(l.n - 1), fmt(e_at) .. ':' .. fmt(e_cost - take))
      end
      l.t, units = l.t - take, units - take
    end
  end
  local reset = 0
  if l.n > l.h then reset = (log_entry(key, l.n - 1)) + p.period - now end
  return l, reset
end

local now = server_now(tonumber(ARGV[1]))
local delta, slack = tonumber(ARGV[2]), tonumber(ARGV[3])
local p = params(ARGV, 4)
local key = KEYS[1]
if p.kind == SLIDING_LOG then
  local l, reset = adjust_log(key, p, now, delta)
  save_log(key, l, reset, slack)
  return reset
end
local s = load_state(key, p.kind)
local reset
if p.kind == FIXED_WINDOW then
  s, reset = adjust_fixed_window(p, s, now, delta)
elseif p.kind == SLIDING_WINDOW then
  s, reset = adjust_sliding_window(p, s, now, delta)
else
  s, reset = adjust_bucket(p, s, now, delta)
end
if s == nil then
  redis.call('DEL', key)
elseif s then
  save_state(key, p.kind, s, reset, slack)
end
return reset
