-- The sliding log (internal/algo/log.go) in a hash: fields h (sequence of
-- the oldest entry), n (sequence after the newest) and t (their total), and
-- one field per entry, "<seq>" = "<at>:<cost>".

local function log_entry(key, seq)
  local v = redis.call('HGET', key, fmt(seq))
  local at, cost = string.match(v, '^(%-?%d+):(%d+)$')
  return tonumber(at), tonumber(cost)
end

local function load_log(key)
  local meta = redis.pcall('HMGET', key, 'h', 'n', 't')
  if type(meta) == 'table' and meta.err then
    redis.call('DEL', key) -- another algorithm's string
    return {h = 0, n = 0, t = 0}
  end
  return {h = tonumber(meta[1]) or 0, n = tonumber(meta[2]) or 0, t = tonumber(meta[3]) or 0}
end

local function save_log(key, l, reset, slack)
  if l.n == l.h then
    redis.call('DEL', key)
    return
  end
  redis.call('HSET', key, 'h', fmt(l.h), 'n', fmt(l.n), 't', fmt(l.t))
  redis.call('PEXPIRE', key, ttl_ms(reset, slack))
end

local function log_expire(key, l, cutoff)
  while l.n > l.h do
    local at, cost = log_entry(key, l.h)
    if at > cutoff then return end
    redis.call('HDEL', key, fmt(l.h))
    l.t, l.h = l.t - cost, l.h + 1
  end
end

local function log_freed_at(key, l, need)
  for seq = l.h, l.n - 1 do
    local at, cost = log_entry(key, seq)
    need = need - cost
    if need <= 0 then return at end
  end
  return (log_entry(key, l.n - 1))
end

-- decide_log decides and, with commit, records. It returns the decision, the
-- log's header, whether it changed, and how to undo the record: the
-- sequence written and the cost it held before (nil for a new entry).
local function decide_log(key, p, now, cost, commit)
  local l = load_log(key)
  local at, newest = now, nil
  if l.n > l.h then
    newest = log_entry(key, l.n - 1)
    if newest > at then at = newest end
  end
  local oldest = l.h
  log_expire(key, l, at - p.period)
  local changed = l.h ~= oldest
  local undo = nil
  local r = result(p.rate)
  if cost > p.rate then
    r.retry = -1
  elseif l.t + cost <= p.rate then
    r.allowed = 1
    if commit and cost > 0 then
      if l.n > l.h and newest == at then
        local _, old = log_entry(key, l.n - 1)
        redis.call('HSET', key, fmt(l.n - 1), fmt(at) .. ':' .. fmt(old + cost))
        undo = {seq = l.n - 1, at = at, old = old}
      else
        redis.call('HSET', key, fmt(l.n), fmt(at) .. ':' .. fmt(cost))
        undo = {seq = l.n, at = at}
        l.n = l.n + 1
      end
      l.t, changed = l.t + cost, true
    end
  else
    r.retry = log_freed_at(key, l, l.t + cost - p.rate) + p.period - now
  end
  r.remaining = math.max(0, p.rate - l.t)
  if l.n > l.h then r.reset = (log_entry(key, l.n - 1)) + p.period - now end
  return r, l, changed, undo
end

-- refund_log takes cost back off the entry recorded at time at, searching
-- from the newest; an emptied newest entry is dropped, an emptied older one
-- stays with cost 0 so that the sequence stays contiguous.
local function refund_log(key, l, at, cost)
  for seq = l.n - 1, l.h, -1 do
    local e_at, e_cost = log_entry(key, seq)
    if e_at < at then return end
    if e_at == at then
      local take = math.min(cost, e_cost)
      l.t = l.t - take
      if e_cost == take and seq == l.n - 1 then
        redis.call('HDEL', key, fmt(seq))
        l.n = l.n - 1
      else
        redis.call('HSET', key, fmt(seq), fmt(at) .. ':' .. fmt(e_cost - take))
      end
      return
    end
  end
end
