-- One renewal of the leased strategy: the same steps as leaseRenewBook in
-- internal/shared/lease_book.go, on the key's hash, atomically.
--
-- KEYS[1]: the key's hash. Field "p" holds the period (µs); field "n:NODE"
-- holds "window granted used demand live_until seq wseq" for each node
-- (records written before seq existed have five numbers: seq and wseq 0).
-- ARGV: now (µs; negative: the server's TIME), TTL slack (ms), node, rate,
-- period (µs), lease (µs), window, used, pinned, demand, leaving (1 or 0),
-- nodes, seq (0: unordered), answered.
-- Returns {window, granted, used, valid (µs), window_left (µs), unleased,
-- stale (1 or 0)}.
--
-- Numbers stay below 2^53 (see MaxLeasedRate and leaseMaxSpan), so the
-- doubles of Lua hold them, and their floored quotients, exactly.
local key = KEYS[1]
local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local slack = tonumber(ARGV[2])
local self = 'n:' .. ARGV[3]
local rate, period, lease = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local req_window, req_used = tonumber(ARGV[7]), tonumber(ARGV[8])
local req_pinned, req_demand = tonumber(ARGV[9]), tonumber(ARGV[10])
local leaving = ARGV[11] == '1'
local nodes = tonumber(ARGV[12])
local req_seq, req_answered = tonumber(ARGV[13]), tonumber(ARGV[14])

local window = math.floor(now / period)
local window_end = (window + 1) * period

-- A new period renumbers the windows: start the key afresh.
if redis.call('HGET', key, 'p') ~= string.format('%d', period) then
  redis.call('DEL', key)
end

local granted_others, used_others = 0, 0
local demands, drop = {}, {}
local me
local all = redis.call('HGETALL', key)
for i = 1, #all, 2 do
  local field = all[i]
  if field ~= 'p' then
    local w, g, u, d, live, seq, wseq = string.match(all[i + 1], '^(%S+) (%S+) (%S+) (%S+) (%S+) ?(%S*) ?(%S*)$')
    w, g, u, d, live = tonumber(w), tonumber(g), tonumber(u), tonumber(d), tonumber(live)
    if field == self then
      me = {w = w, g = g, u = u, seq = tonumber(seq) or 0, wseq = tonumber(wseq) or 0}
    else
      local current = w == window
      if live < now and not current then
        drop[#drop + 1] = field -- gone, and holds nothing of this window
      else
        if current then
          granted_others = granted_others + g
          used_others = used_others + u
        end
        if live >= now then
          demands[#demands + 1] = d
        end
      end
    end
  end
end

-- A renewal older than one applied changes nothing (see LeaseRequest.Seq).
if me and req_seq > 0 and req_seq <= me.seq then
  local g, u = 0, 0
  if me.w == window then
    g, u = me.g, me.u
  end
  return {window, g, u, 0, window_end - now, 0, 1}
end

local granted, used, floor = 0, 0, 0
if me and me.w == window then
  granted, used = me.g, me.u
  if req_window == window then
    used = math.max(used, math.min(req_used, granted))
    floor = math.min(req_used + req_pinned, granted)
  elseif req_answered > 0 and me.wseq > 0 and req_answered < me.wseq then
    -- made by renewals whose answers never reached the node: none used
  else
    used = granted -- a grant the node does not report on may be all used
  end
end
local wseq = req_seq
if me and me.w == window then
  wseq = me.wseq
end
floor = math.max(floor, used)
local demand = math.min(req_demand, rate)

-- Water-filling, as leaseWaterfill.
local function waterfill(free, ds, mine)
  local total = 0
  for i = 1, #ds do
    total = total + ds[i]
  end
  local count = #ds
  if total <= free then
    return mine + math.floor((free - total) / math.max(count, nodes))
  end
  table.sort(ds)
  local remaining, left = free, count
  for i = 1, #ds do
    local level = math.floor(remaining / left)
    if ds[i] > level then
      return math.min(mine, level)
    end
    remaining = remaining - ds[i]
    left = left - 1
  end
  return mine
end

local new_granted, new_demand, live_until
if leaving then
  new_granted, new_demand, live_until = floor, 0, now - 1
else
  local free = math.max(0, rate - used_others - used)
  demands[#demands + 1] = demand
  local share = waterfill(free, demands, demand)
  local available = math.max(0, rate - granted_others)
  new_granted = math.max(floor, math.min(used + share, available))
  new_demand, live_until = demand, now + 2 * lease
end

if #drop > 0 then
  redis.call('HDEL', key, unpack(drop))
end
redis.call('HSET', key, 'p', string.format('%d', period),
  self, string.format('%d %d %d %d %d %d %d', window, new_granted, used, new_demand, live_until, req_seq, wseq))
local ttl = math.max(window_end - now, 2 * lease)
redis.call('PEXPIRE', key, math.ceil(ttl / 1000) + slack)

return {window, new_granted, used, math.min(lease, window_end - now), window_end - now,
  math.max(0, rate - granted_others - new_granted), 0}
