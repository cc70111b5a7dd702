-- What one request of a denied batch reports, without consuming: KEYS[1]
-- the key; ARGV: now, cost, TTL slack, the compiled limit. Remaining and
-- ResetAfter are the key's as it stands, RetryAfter the request's own wait
-- (0 when it would pass), as in batch.lua.
local now = server_now(tonumber(ARGV[1]))
local cost, slack = tonumber(ARGV[2]), tonumber(ARGV[3])
local p = params(ARGV, 4)
local peek = decide(KEYS[1], p, now, 0, false, slack)
local try = decide(KEYS[1], p, now, cost, false, slack)
peek.allowed, peek.delay, peek.retry = 0, 0, 0
if try.allowed == 0 then peek.retry = try.retry end
return reply(peek, now)
