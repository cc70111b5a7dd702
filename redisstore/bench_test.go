package redisstore_test

import (
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/redisstore"
)

// BenchmarkRedisCeiling loads the token bucket script that decides one
// request and lets redis-benchmark -P 16 hammer it with EVALSHA on one
// local redis-server (10k keys, a token bucket of 10^6/s): the most that
// server can do with that script, the ceiling for BenchmarkRedis in the
// benchmarks module (which compares this store with go-redis/redis_rate).
//
//	go test -run '^$' -bench RedisCeiling ./redisstore
//
// FLOODGATE_BENCH_REDIS=host:port runs it against a server of your own
// instead; it must be disposable: keys user:* are written.
func BenchmarkRedisCeiling(b *testing.B) {
	addr := os.Getenv("FLOODGATE_BENCH_REDIS")
	if addr == "" {
		addr = testkit.StartServer(b).Addr()
	}
	limit := floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 1_000_000, Period: time.Second}
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		b.Skip("redis-benchmark not found (apt-get install redis-tools)")
	}
	sha, err := testkit.Send(addr, "SCRIPT", "LOAD", redisstore.ScriptSource(limit.Algorithm))
	if err != nil {
		b.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	args := append([]string{"-h", host, "-p", port, "-P", "16", "-c", "64", "-n", "400000", "-q", "-r", "10000",
		"EVALSHA", sha.String(), "1", "user:__rand_int__"}, redisstore.ScriptArgs(limit, 1)...)
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

var rpsLine = regexp.MustCompile(`([0-9.]+) requests per second`)
