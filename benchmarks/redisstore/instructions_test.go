package redisstore_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// TestRedisInstructionsPerDecision counts what a decision costs Redis
// itself, in instructions (valgrind's callgrind), for redisstore with and
// without batching and for go-redis/redis_rate, with 64 concurrent
// callers. Instruction counts do not depend on what else the machine is
// doing, so this figure is the one to trust on a shared machine: when Redis
// is the bottleneck, throughput goes as its inverse.
//
//	FLOODGATE_CALLGRIND=1 go test -run RedisInstructions -v ./redisstore
func TestRedisInstructionsPerDecision(t *testing.T) {
	if os.Getenv("FLOODGATE_CALLGRIND") == "" {
		t.Skip("set FLOODGATE_CALLGRIND=1 to count Redis's instructions under valgrind (takes a minute)")
	}
	testkit.RequireBinaries(t, "valgrind", "callgrind_control")
	out := filepath.Join(t.TempDir(), "callgrind.out")
	srv := testkit.StartServer(t, testkit.UnderProgram("valgrind", "--tool=callgrind", "--callgrind-out-file="+out))
	limit := floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 1_000_000, Period: time.Second}
	ctx := context.Background()
	batched := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}, Timeout: time.Minute})
	single := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}, Timeout: time.Minute, MaxBatch: 1})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64, ReadTimeout: time.Minute})
	t.Cleanup(func() { rdb.Close() })
	rr := redis_rate.NewLimiter(rdb)
	rrLimit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Second}
	clients := []struct {
		name   string
		decide func(key string) error
	}{
		{"floodgate (batched)", func(key string) error { _, err := batched.AllowN(ctx, key, limit, 1); return err }},
		{"floodgate (MaxBatch 1)", func(key string) error { _, err := single.AllowN(ctx, key, limit, 1); return err }},
		{"redis_rate", func(key string) error { _, err := rr.AllowN(ctx, key, rrLimit, 1); return err }},
	}
	pid := strconv.Itoa(srv.Pid())
	count := func(decide func(string) error, n int) int64 {
		t.Helper()
		if b, err := exec.Command("callgrind_control", "-z", pid).CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control -z: %v\n%s", err, b)
		}
		run64(t, n, decide)
		if b, err := exec.Command("callgrind_control", "-d", pid).CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control -d: %v\n%s", err, b)
		}
		return latestTotal(t, out)
	}
	for _, c := range clients {
		run64(t, 2000, c.decide) // keys and scripts in place
		small, large := count(c.decide, 3000), count(c.decide, 8000)
		t.Logf("%-24s %6d instructions per decision", c.name, (large-small)/5000)
	}
}

// run64 makes n decisions from 64 goroutines over 10k keys.
func run64(t *testing.T, n int, decide func(string) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if err := decide("user:" + strconv.Itoa(int(i*7919)%10_000)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

var totalsLine = regexp.MustCompile(`(?m)^(?:summary|totals): (\d+)`)

// latestTotal reads the instruction total of callgrind's newest dump.
func latestTotal(t *testing.T, base string) int64 {
	t.Helper()
	dumps, _ := filepath.Glob(base + ".*")
	var newest string
	var at time.Time
	for _, d := range dumps {
		if st, err := os.Stat(d); err == nil && st.ModTime().After(at) {
			newest, at = d, st.ModTime()
		}
	}
	b, err := os.ReadFile(newest)
	m := totalsLine.FindSubmatch(b)
	if err != nil || m == nil {
		t.Fatalf("no totals in callgrind dump %q: %v", newest, err)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}
