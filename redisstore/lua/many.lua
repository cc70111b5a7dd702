-- Several independent requests in one call: the concurrent callers of one
-- algorithm (and, on a cluster, one hash slot) gathered by coalesce.go.
-- Each is decided by one_request, which is the algorithm's single-request
-- script (allow_*.lua) made a function whose KEYS and ARGV are its own and
-- which returns its reply's values instead of a table (manySource in
-- scripts.go), and in arrival order, so each decision is the one that script
-- would have made alone at this instant: batching saves Redis the fixed cost
-- of a call per request (reading the command, setting up the script, the
-- ARGV strings of its limit), not a step of any decision.
--
-- KEYS: one per request. ARGV: now (µs; negative: the server's TIME), TTL
-- slack (ms), m, then m limits of WIDTH values each (the algorithm and the
-- parameters its single-request script reads, see singleArgs in
-- scripts.go), then the costs: one, when every request costs the same, else
-- one per request; then, when m > 1, the number of each request's limit
-- (1..m).
-- Returns per request, flat, allowed + 2·remaining, retry_after,
-- reset_after and, for the buckets (REPLY = 4), delay; then the time they
-- were decided at. Not the limit, which the client knows, nor a delay that
-- is always 0: every value of a reply costs Redis a conversion and the
-- client a message to parse. (remaining < 2^51, so 2·remaining + 1 is
-- exact.)
local now = ARGV[1] + 0
if now < 0 then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local m = ARGV[3] + 0
local n = #KEYS
local costs = 3 + m * WIDTH
local which = #ARGV - n -- the limits' numbers, when m > 1
local same = nil -- the cost of every request, when sent once
if m == 1 and #ARGV == costs + 1 or m > 1 and #ARGV == costs + 1 + n then
  same = ARGV[costs + 1] + 0
end
-- The limits' values go to one_request as numbers, converted once per
-- batch, not per request: its "ARGV[i] + 0" then costs an addition, not a
-- string-to-number conversion (strtod, the dearest step of a decision after
-- the Redis commands).
local keys, argv = {}, {now, 0, ARGV[2] + 0}
local out, o, current = {}, 0, 0
for i = 1, n do
  local s = 1
  if m > 1 then s = ARGV[which + i] + 0 end
  if s ~= current then
    local base = 3 + (s - 1) * WIDTH
    for j = 1, WIDTH do argv[3 + j] = ARGV[base + j] + 0 end
    current = s
  end
  keys[1], argv[2] = KEYS[i], same or ARGV[costs + i]
  local allowed, _, remaining, retry, reset, delay = one_request(keys, argv)
  out[o + 1], out[o + 2], out[o + 3] = allowed + 2 * remaining, retry, reset
  if REPLY == 4 then out[o + 4] = delay end
  o = o + REPLY
end
out[o + 1] = now
return out
