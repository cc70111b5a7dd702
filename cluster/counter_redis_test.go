package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cluster/clustertest"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/redisstore"
)

// counterRedisClient connects to Redis the way a node does: through a
// redisstore.Limiter, whose client the counter shares.
func counterRedisClient(t *testing.T, addrs ...string) rueidis.Client {
	t.Helper()
	l, err := redisstore.New(redisstore.Config{Addrs: addrs, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l.Client()
}

func counterNewRedis(t *testing.T, cfg cluster.RedisCounterConfig) *cluster.RedisCounter {
	t.Helper()
	c, err := cluster.NewRedisCounter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// counterGenBatch draws a batch of adds around the current window: keys
// from a small set, a few periods, windows from three before to one after
// the current one, three nodes, small counts (a count below what the node
// sent before exercises the merge).
func counterGenBatch(t *rapid.T, now time.Time) []cluster.CounterAdd {
	periods := []time.Duration{time.Millisecond, 7 * time.Millisecond, time.Second}
	n := rapid.IntRange(1, 6).Draw(t, "adds")
	adds := make([]cluster.CounterAdd, n)
	for i := range adds {
		period := rapid.SampledFrom(periods).Draw(t, "period")
		w := now.UnixMicro() / period.Microseconds()
		adds[i] = cluster.CounterAdd{
			Key:       rapid.SampledFrom([]string{"a", "b", "user:{42}"}).Draw(t, "key"),
			Period:    period,
			Node:      rapid.SampledFrom([]string{"n1", "n2", "n3"}).Draw(t, "node"),
			Window:    w + rapid.Int64Range(-3, 1).Draw(t, "window"),
			Count:     rapid.Int64Range(0, 20).Draw(t, "count"),
			PrevCount: rapid.Int64Range(0, 10).Draw(t, "prev"),
		}
	}
	return adds
}

// The Redis script and the Go implementation give the same reads for the
// same adds at the same times.
func TestRedisCounterAgreesWithMemory(t *testing.T) {
	srv := testkit.StartServer(t)
	client := counterRedisClient(t, srv.Addr())
	run := 0
	rapid.Check(t, func(t *rapid.T) {
		run++
		clock := floodgate.NewManualClock(counterEpoch.Add(time.Duration(rapid.Int64Range(0, 1e6).Draw(t, "start")) * time.Microsecond))
		mem, _ := clustertest.NewCounter(clock)
		red, err := cluster.NewRedisCounter(cluster.RedisCounterConfig{Client: client, KeyPrefix: fmt.Sprintf("agree%d:", run), Clock: clock, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for step := range rapid.IntRange(1, 30).Draw(t, "steps") {
			clock.Advance(time.Duration(rapid.Int64Range(0, 3000).Draw(t, "advance µs")) * time.Microsecond)
			adds := counterGenBatch(t, clock.Now())
			want, err1 := mem.Add(context.Background(), adds)
			got, err2 := red.Add(context.Background(), adds)
			if err1 != nil || err2 != nil {
				t.Fatalf("step %d: memory %v, redis %v", step, err1, err2)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("step %d, add %+v: redis %+v, memory %+v", step, adds[i], got[i], want[i])
				}
			}
		}
	})
}

// A key's counts live in one Redis key, hash-tagged on the limit key, that
// expires once its current window has served as a previous one; a read
// creates nothing.
func TestRedisCounterKeyLayoutAndExpiry(t *testing.T) {
	srv := testkit.StartServer(t)
	c := counterNewRedis(t, cluster.RedisCounterConfig{Client: counterRedisClient(t, srv.Addr()), KeyPrefix: "fg:"})
	read := counterAdd(t, c, cluster.CounterAdd{Key: "user:1", Period: 10 * time.Second, Node: "n1", Window: 0})[0]
	if srv.Do(t, "DBSIZE") != "0" {
		t.Fatal("a read created a key")
	}
	read = counterAdd(t, c, cluster.CounterAdd{Key: "user:1", Period: 10 * time.Second, Node: "n1", Window: read.Window, Count: 2})[0]
	if read.Current != 2 {
		t.Fatalf("read %+v", read)
	}
	// Redis TIME decided: the store's window holds its clock.
	if now := time.Now().UnixMicro(); read.Now < now-5e6 || read.Now > now+5e6 || read.Window != read.Now/10e6 {
		t.Fatalf("store time %d, window %d; local time %d", read.Now, read.Window, now)
	}
	key := "fg:{user:1}:10000000:nodes"
	for field, want := range map[string]string{"=": fmt.Sprintf("%d:2:0", read.Window), "n:n1": fmt.Sprintf("%d:2:0", read.Window)} {
		if got := srv.Do(t, "HGET", key, field); got != want {
			t.Fatalf("HGET %s %s = %q, want %q", key, field, got, want)
		}
	}
	ttl, _ := strconv.ParseInt(srv.Do(t, "PTTL", key), 10, 64)
	want := ((read.Window+2)*10e6 - read.Now) / 1000
	if ttl > want+1 || ttl < want-2000 {
		t.Fatalf("PTTL %dms, want about %dms (the end of the next window)", ttl, want)
	}
}

// A restarted server has no script: the counter sends its source once.
func TestRedisCounterReloadsItsScript(t *testing.T) {
	srv := testkit.StartServer(t)
	c := counterNewRedis(t, cluster.RedisCounterConfig{Client: counterRedisClient(t, srv.Addr())})
	add := cluster.CounterAdd{Key: "k", Period: time.Hour, Node: "n1", Window: time.Now().Unix() / 3600, Count: 1}
	counterAdd(t, c, add)
	srv.Do(t, "SCRIPT", "FLUSH")
	again := add
	again.Count = 3
	if r := counterAdd(t, c, again, add)[1]; r.Current != 3 {
		t.Fatalf("after SCRIPT FLUSH: %+v, want 3, each add applied once", r)
	}
}

// A server that does not answer yields errors wrapping
// ErrStoreUnavailable; a Redis error reply does not.
func TestRedisCounterErrors(t *testing.T) {
	srv := testkit.StartServer(t)
	c := counterNewRedis(t, cluster.RedisCounterConfig{Client: counterRedisClient(t, srv.Addr()), Timeout: 500 * time.Millisecond})
	add := cluster.CounterAdd{Key: "k", Period: time.Second, Node: "n1", Count: 1}

	srv.Do(t, "HSET", "{k}:1000000:nodes", "=", "not counts")
	_, err := c.Add(context.Background(), []cluster.CounterAdd{add})
	if err == nil || errors.Is(err, floodgate.ErrStoreUnavailable) || !strings.Contains(err.Error(), "holds no counts") {
		t.Fatalf("corrupt key: got %v, want the script's error, not unavailability", err)
	}

	srv.Kill()
	_, err = c.Add(context.Background(), []cluster.CounterAdd{add})
	if !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("server down: got %v, want ErrStoreUnavailable", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Add(ctx, []cluster.CounterAdd{add}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled context: got %v", err)
	}
}

func TestNewRedisCounterRejectsBadConfig(t *testing.T) {
	srv := testkit.StartServer(t)
	client := counterRedisClient(t, srv.Addr())
	cases := []struct {
		cfg  cluster.RedisCounterConfig
		says string
	}{
		{cluster.RedisCounterConfig{}, "Client is nil"},
		{cluster.RedisCounterConfig{Client: client, Timeout: -time.Second}, "Timeout must not be negative"},
		{cluster.RedisCounterConfig{Client: client, ClockSlack: -time.Second}, "ClockSlack must not be negative"},
	}
	for _, tc := range cases {
		if _, err := cluster.NewRedisCounter(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: got %v, want %q", tc.cfg, err, tc.says)
		}
	}
}

// In a 3-master Redis Cluster one batch spans every master (one script
// call per key, each in its key's slot) and agrees with memory.
func TestRedisCounterCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-master cluster")
	}
	rc := testkit.StartCluster(t, 3)
	clock := floodgate.NewManualClock(counterEpoch)
	red := counterNewRedis(t, cluster.RedisCounterConfig{Client: counterRedisClient(t, rc.Addrs()...), Clock: clock, Timeout: 5 * time.Second})
	mem := counterNewMemory(t, clock)
	w := counterEpoch.Unix()
	var adds []cluster.CounterAdd
	masters := map[int]bool{}
	for i := range 30 {
		key := fmt.Sprintf("tenant:%d", i)
		masters[rc.NodeForKey(t, "{"+key+"}:1000000:nodes").Port()] = true
		adds = append(adds, cluster.CounterAdd{Key: key, Period: time.Second, Node: "n1", Window: w, Count: int64(i)})
	}
	if len(masters) != 3 {
		t.Fatalf("the keys reach %d masters, want 3", len(masters))
	}
	for range 3 {
		want := counterAdd(t, mem, adds...)
		got := counterAdd(t, red, adds...)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: cluster %+v, memory %+v", adds[i].Key, got[i], want[i])
			}
		}
		clock.Advance(600 * time.Millisecond)
	}
}
