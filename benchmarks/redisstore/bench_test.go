package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/redisstore"
)

// BenchmarkRedis compares, on one local redis-server and in one run, the
// decisions per second and the p99 latency of redisstore and of
// go-redis/redis_rate (the GCRA token bucket most Go services use with
// Redis) at 1, 8 and 64 concurrent callers, with equivalent limits
// (a token bucket of 10^6/s over 10k keys, so that the decision, not the
// denial, is measured; not faster: redis_rate keeps its state in float
// seconds since 2017, where a step below about 60 ns is lost, so at 10^9/s
// it never writes — never counts — and would be measured doing less work).
// BenchmarkRedisCeiling, in the redisstore package itself (it loads the
// package's script), runs redis-benchmark -P 16 with EVALSHA of the same
// script on a server: the most that server can do with that script.
//
//	cd benchmarks && go test -run '^$' -bench Redis -benchtime 3s ./redisstore
//
// FLOODGATE_BENCH_REDIS=host:port runs it against a server of your own
// instead (for example one pinned to its own core with taskset, so that the
// benchmark does not take Redis's CPU); it must be disposable: keys user:*
// are written.
func BenchmarkRedis(b *testing.B) {
	addr := os.Getenv("FLOODGATE_BENCH_REDIS")
	if addr == "" {
		addr = testkit.StartServer(b).Addr()
	}
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	limit := floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 1_000_000, Period: time.Second}

	store, err := redisstore.New(redisstore.Config{Addrs: []string{addr}, Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	unbatched, err := redisstore.New(redisstore.Config{Addrs: []string{addr}, Timeout: time.Second, MaxBatch: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer unbatched.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	defer rdb.Close()
	rr := redis_rate.NewLimiter(rdb)
	rrLimit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Second}

	for _, callers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("floodgate/callers=%d", callers), func(b *testing.B) {
			runCallers(b, callers, keys, func(ctx context.Context, key string) error {
				_, err := store.AllowN(ctx, key, limit, 1)
				return err
			})
		})
		b.Run(fmt.Sprintf("floodgate-unbatched/callers=%d", callers), func(b *testing.B) {
			runCallers(b, callers, keys, func(ctx context.Context, key string) error {
				_, err := unbatched.AllowN(ctx, key, limit, 1)
				return err
			})
		})
		b.Run(fmt.Sprintf("redis_rate/callers=%d", callers), func(b *testing.B) {
			runCallers(b, callers, keys, func(ctx context.Context, key string) error {
				_, err := rr.AllowN(ctx, key, rrLimit, 1)
				return err
			})
		})
	}
}

// runCallers spreads b.N decisions over n goroutines and reports
// decisions/s and the p99 of one decision's latency.
func runCallers(b *testing.B, n int, keys []string, decide func(context.Context, string) error) {
	ctx := context.Background()
	var next atomic.Int64
	latencies := make([][]time.Duration, n)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for g := range n {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := decide(ctx, keys[(int(i)*7919)%len(keys)]); err != nil {
					b.Error(err)
					return
				}
				latencies[g] = append(latencies[g], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(latencies...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
}

// newLimiter is a Redis store closed when the test ends.
func newLimiter(t *testing.T, cfg redisstore.Config) *redisstore.Limiter {
	t.Helper()
	l, err := redisstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}
