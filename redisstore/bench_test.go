package redisstore_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
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
// it never writes — never counts — and would be measured doing less work). BenchmarkRedis/ceiling runs redis-benchmark -P 16
// with EVALSHA of the same script on the same server: the most that server
// can do with that script.
//
//	go test -run '^$' -bench Redis -benchtime 3s ./redisstore
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
	b.Run("ceiling", func(b *testing.B) { redisBenchmarkCeiling(b, rdb, addr, limit) })
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

var rpsLine = regexp.MustCompile(`([0-9.]+) requests per second`)

// redisBenchmarkCeiling loads the token bucket script and lets
// redis-benchmark hammer it with EVALSHA, 16 commands per pipeline.
func redisBenchmarkCeiling(b *testing.B, rdb *redis.Client, addr string, limit floodgate.Limit) {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		b.Skip("redis-benchmark not found (apt-get install redis-tools)")
	}
	sha, err := rdb.ScriptLoad(context.Background(), redisstore.ScriptSource(limit.Algorithm)).Result()
	if err != nil {
		b.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	args := append([]string{"-h", host, "-p", port, "-P", "16", "-c", "64", "-n", "400000", "-q", "-r", "10000",
		"EVALSHA", sha, "1", "user:__rand_int__"}, redisstore.ScriptArgs(limit, 1)...)
	b.ResetTimer()
	out, err := exec.Command(bin, args...).CombinedOutput()
	b.StopTimer()
	if err != nil {
		b.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	m := rpsLine.FindStringSubmatch(string(out))
	if m == nil {
		b.Fatalf("no rate in redis-benchmark's output:\n%s", out)
	}
	rps, _ := strconv.ParseFloat(m[1], 64)
	b.ReportMetric(rps, "decisions/s")
}
