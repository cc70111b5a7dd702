-- One request (Limiter.AllowN), in one pass over locals. This script holds
-- only the code its algorithm runs, and what internal/algo computes in
-- helpers is written out where it is used: the structured helpers that the
-- batch, peek and refund scripts share (prelude.lua, decide.lua) are a new
-- closure each, their params and results a new table each, on every call,
-- and made a single request cost about 1.6 times what it costs here. Two
-- more things a call pays for, as counted (callgrind, instructions per call):
--
--   - about 800 instructions per ARGV element, for Redis to build the ARGV
--     table: the script takes only the parameters its algorithm reads;
--   - tonumber(s) parses s twice (lua_isnumber, then lua_tonumber) and is a
--     C call, while arithmetic parses it once; strtod is the dearest thing a
--     script does after the Redis commands and string.format. So numbers are
--     read as s + 0: the same value, exactly.
--
-- KEYS[1]: the key. ARGV: now (µs; negative: the server's TIME), cost, TTL
-- slack (ms), the algorithm (its internal/algo.Kind), then the limit's
-- parameters that algorithm reads (see singleArgs in scripts.go): for the
-- buckets burst, scale, interval, tolerance, max_ahead; for the others rate,
-- period.
-- Returns {allowed, limit, remaining, retry_after, reset_after, delay, now}:
-- the decision (internal/algo.Result, µs) and the time it was made at.
local key = KEYS[1]
local now, cost = ARGV[1] + 0, ARGV[2] + 0
if now < 0 then
  local t = redis.call('TIME') -- seconds and microseconds, as strings
  now = t[1] * 1000000 + t[2]
end
