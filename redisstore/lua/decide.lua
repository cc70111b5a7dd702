-- decide runs one request on key and stores what changed. It returns the
-- decision and, with undoable, how to undo it (for all-or-nothing batches).
local function decide(key, p, now, cost, commit, slack, undoable)
  if p.kind == SLIDING_LOG then
    local r, l, changed, undo = decide_log(key, p, now, cost, commit)
    if changed then save_log(key, l, r.reset, slack) end
    return r, {log = undo, cost = cost}
  end
  local s, raw = load_state(key, p.kind)
  local r, changed
  if p.kind == FIXED_WINDOW then
    r, s, changed = decide_fixed_window(p, s, now, cost)
  elseif p.kind == SLIDING_WINDOW then
    r, s, changed = decide_sliding_window(p, s, now, cost)
  else
    r, s, changed = decide_bucket(p, s, now, cost)
  end
  local undo = nil
  if changed and commit then
    if undoable then undo = {raw = raw, pttl = redis.call('PTTL', key)} end
    save_state(key, p.kind, s, r.reset, slack)
  end
  return r, undo
end

-- undo puts a key back as it was before decide committed on it.
local function undo_decide(key, u)
  if u == nil then return end
  if u.log ~= nil then
    local l = load_log(key)
    refund_log(key, l, u.log.at, u.cost)
    if l.n == l.h then redis.call('DEL', key) else redis.call('HSET', key, 'h', fmt(l.h), 'n', fmt(l.n), 't', fmt(l.t)) end
    return
  end
  if u.pttl == nil then return end
  if not u.raw then
    redis.call('DEL', key)
  elseif u.pttl > 0 then
    redis.call('SET', key, u.raw, 'PX', u.pttl)
  else
    redis.call('SET', key, u.raw)
  end
end

local function reply(r, now)
  return {r.allowed, r.limit, r.remaining, r.retry, r.reset, r.delay, now}
end
