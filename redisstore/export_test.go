package redisstore

import (
	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/algo"
)

// ScriptSource and ScriptArgs serve the benchmark that loads a script into
// redis-benchmark (BenchmarkRedisCeiling): test-only, so they are no part of the
// package's API.

// ScriptSource returns the Lua source of the script that decides requests
// for an algorithm ("" for an unknown one): to inspect it, or to load it
// into a tool such as redis-benchmark.
func ScriptSource(a floodgate.Algorithm) string {
	k, ok := algo.ParseKind(string(a))
	if !ok {
		return ""
	}
	return luaSource(singleParts(k)...)
}

// ScriptArgs returns the ARGV that script takes for one request of cost
// under limit, deciding at the server's time; nil for an invalid limit.
func ScriptArgs(limit floodgate.Limit, cost int64) []string {
	p, err := algo.Compile(string(limit.Algorithm), limit.Rate, limit.Period, limit.Burst)
	if err != nil {
		return nil
	}
	return singleArgs("-1", compile(p), cost, "0")
}
