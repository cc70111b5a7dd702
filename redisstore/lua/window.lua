-- The fixed window and the sliding window counter (internal/algo/window.go).

local function window_start(p, s, now)
  local start = floor(now / p.period) * p.period
  if s[1] > start then return s[1] end
  return start
end

local function decide_fixed_window(p, s, now, cost)
  local start = window_start(p, s, now)
  local count = 0
  if s[1] == start then count = s[2] end
  local finish = start + p.period
  local r = result(p.rate)
  local changed = false
  if cost > p.rate then
    r.retry = -1
  elseif count + cost <= p.rate then
    r.allowed = 1
    if cost > 0 then
      count = count + cost
      s, changed = {start, count, 0}, true
    end
  else
    r.retry = finish - now
  end
  r.remaining = math.max(0, p.rate - count)
  if count > 0 then r.reset = finish - now end
  return r, s, changed
end

local function sliding_retry(p, start, current, previous, cost)
  local room = p.rate - current - cost
  if room >= 0 then
    return start + p.period - mul_div_floor(room, p.period, previous)
  end
  return start + 2 * p.period - mul_div_floor(p.rate - cost, p.period, current)
end

-- sliding_counts reads a sliding window's state at now: the current
-- window's start and count, and the previous window's count
-- (slidingCounts in internal/algo/window.go).
local function sliding_counts(p, s, now)
  local start = window_start(p, s, now)
  if s[1] == start then return start, s[2], s[3] end
  if s[1] == start - p.period then return start, 0, s[2] end
  return start, 0, 0
end

local function decide_sliding_window(p, s, now, cost)
  local start, current, previous = sliding_counts(p, s, now)
  local elapsed = math.max(0, now - start)
  local weighted = mul_div_ceil(previous, p.period - elapsed, p.period)
  local r = result(p.rate)
  local changed = false
  if cost > p.rate then
    r.retry = -1
  elseif weighted + current + cost <= p.rate then
    r.allowed = 1
    if cost > 0 then
      current = current + cost
      s, changed = {start, current, previous}, true
    end
  else
    r.retry = sliding_retry(p, start, current, previous, cost) - now
  end
  r.remaining = math.max(0, p.rate - current - weighted)
  if current > 0 then
    r.reset = start + 2 * p.period - now
  elseif previous > 0 then
    r.reset = start + p.period - now
  end
  return r, s, changed
end

-- refund_window takes cost back from the window it was counted in (the one
-- holding at), wherever that window now stands; nothing if it has gone.
local function refund_window(p, s, at, cost)
  local start = floor(at / p.period) * p.period
  if s[1] == start then
    s[2] = math.max(0, s[2] - cost)
  elseif p.kind == SLIDING_WINDOW and s[1] == start + p.period then
    s[3] = math.max(0, s[3] - cost)
  end
  return s
end
