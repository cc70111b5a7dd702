-- Several requests, all or nothing, atomically (the keys share a hash
-- slot). KEYS: one per request. ARGV: now, TTL slack, then per request its
-- cost and compiled limit. Returns one reply per request, as single.lua.
-- When one denies, what was taken is undone and every request is reported
-- denied: Remaining and ResetAfter as the key stands, RetryAfter its own
-- wait (0 when it alone would pass), as Memory.AllowAll does.
local now = server_now(tonumber(ARGV[1]))
local slack = tonumber(ARGV[2])
local reqs = {}
for i = 1, #KEYS do
  local base = 3 + (i - 1) * (PARAMS + 1)
  reqs[i] = {key = KEYS[i], cost = tonumber(ARGV[base]), p = params(ARGV, base + 1)}
end
local out, undos, failed = {}, {}, nil
for i, q in ipairs(reqs) do
  local r, u = decide(q.key, q.p, now, q.cost, true, slack, true)
  out[i] = r
  if r.allowed == 0 then failed = i break end
  undos[i] = u
end
if failed == nil then
  local replies = {}
  for i, r in ipairs(out) do replies[i] = reply(r, now) end
  return replies
end
for i = failed - 1, 1, -1 do undo_decide(reqs[i].key, undos[i]) end
local sequential = out[failed].retry
local replies = {}
for i, q in ipairs(reqs) do
  local peek = decide(q.key, q.p, now, 0, false, slack)
  local try = decide(q.key, q.p, now, q.cost, false, slack)
  peek.allowed, peek.delay, peek.retry = 0, 0, 0
  if try.allowed == 0 then peek.retry = try.retry end
  if i == failed and peek.retry == 0 then peek.retry = sequential end
  replies[i] = reply(peek, now)
end
return replies
