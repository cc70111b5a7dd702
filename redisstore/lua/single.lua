-- One request. KEYS[1]: the key. ARGV: now (µs; negative: the server's
-- TIME), cost, TTL slack (ms), then the compiled limit (see params).
-- Returns {allowed, limit, remaining, retry_after, reset_after, delay, now}.
local now = server_now(tonumber(ARGV[1]))
local r = decide(KEYS[1], params(ARGV, 4), now, tonumber(ARGV[2]), true, tonumber(ARGV[3]))
return reply(r, now)
