package floodgate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

// The benchmarks against golang.org/x/time/rate are in the benchmarks
// module (benchmarks/bench_test.go), so that the library's module does not
// require x/time; these measure the Memory store alone.

const manyKeys = 100_000

var benchLimit = floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 1_000_000_000, Period: time.Second}

// BenchmarkAlgorithms decides on one existing key per algorithm, serially,
// unbounded (the path without the shard's lock) and under WithMaxKeys (the
// path under it, which keeps the recency order).
func BenchmarkAlgorithms(b *testing.B) {
	for _, bounded := range []bool{false, true} {
		for _, alg := range floodgate.Algorithms() {
			b.Run(fmt.Sprintf("%s/bounded=%t", alg, bounded), func(b *testing.B) {
				var opts []floodgate.MemoryOption
				if bounded {
					opts = append(opts, floodgate.WithMaxKeys(manyKeys))
				}
				m := floodgate.NewMemory(opts...)
				limit := benchLimit.WithAlgorithm(alg)
				b.ReportAllocs()
				for b.Loop() {
					m.AllowN(ctx, "user:42", limit, 1)
				}
			})
		}
	}
}

// BenchmarkAllowAll decides a batch of two limits on existing keys in two
// shards, as a tenant limit beside a user limit.
func BenchmarkAllowAll(b *testing.B) {
	m := floodgate.NewMemory()
	reqs := []floodgate.Request{
		{Key: "tenant:7", Limit: benchLimit, Cost: 1},
		{Key: "user:42", Limit: benchLimit.WithAlgorithm(floodgate.SlidingWindow), Cost: 1},
	}
	b.ReportAllocs()
	for b.Loop() {
		m.AllowAll(ctx, reqs)
	}
}
