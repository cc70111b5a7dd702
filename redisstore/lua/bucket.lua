-- GCRA: the token bucket and the leaky bucket (internal/algo/bucket.go).

local function backlog(p, s, now)
  local tat, ticks = s[1], s[2]
  if s[3] ~= p.scale and ticks ~= 0 then tat, ticks = tat + 1, 0 end
  if tat < now then return 0 end
  local ahead = tat - now
  if ahead <= p.max_ahead then return ahead * p.scale + ticks end
  return p.max_ahead * p.scale
end

local function decide_bucket(p, s, now, cost)
  local b = backlog(p, s, now)
  local r = result(p.burst)
  if cost > p.burst then
    r.retry = -1
  else
    local need = b + cost * p.interval
    if need <= p.tolerance then
      r.allowed = 1
      if p.kind == LEAKY_BUCKET then r.delay = ceil_div(b, p.scale) end
      if cost > 0 then b = need end
    else
      r.retry = ceil_div(need - p.tolerance, p.scale)
    end
  end
  if b < p.tolerance then r.remaining = floor((p.tolerance - b) / p.interval) end
  local whole = floor(b / p.scale)
  local ticks = b - whole * p.scale
  local changed = r.allowed == 1 and cost > 0
  if changed then s = {now + whole, ticks, p.scale} end
  r.reset = whole
  if ticks > 0 then r.reset = whole + 1 end
  return r, s, changed
end

-- refund_bucket gives cost back: the backlog shrinks by cost intervals.
local function refund_bucket(p, s, now, cost)
  local b = backlog(p, s, now) - cost * p.interval
  if b < 0 then b = 0 end
  local whole = floor(b / p.scale)
  return {now + whole, b - whole * p.scale, p.scale}, ceil_div(b, p.scale)
end
