package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

// leaseRedisClient connects to a real Redis (standalone or Cluster) and
// closes the connection with the test.
func leaseRedisClient(tb testing.TB, addrs ...string) rueidis.Client {
	tb.Helper()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		tb.Fatalf("connecting to %v: %v", addrs, err)
	}
	tb.Cleanup(client.Close)
	return client
}

func leaseRedisCoordinator(tb testing.TB, client rueidis.Client, prefix string, clock floodgate.Clock) *RedisCoordinator {
	tb.Helper()
	c, err := NewRedisCoordinator(RedisCoordinatorConfig{Client: client, KeyPrefix: prefix, Clock: clock, Timeout: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// TestRedisCoordinatorAgreesWithMemory: the Lua script and the Go book give
// the same grant for the same request at the same time, over random
// sequences of renewals from several nodes, including reports on old
// windows, over-reports, leaving nodes, nodes going silent, changes of
// period, renewals out of order (stale Seq) or unordered (Seq 0), and
// reports from nodes that missed answers (Answered).
func TestRedisCoordinatorAgreesWithMemory(t *testing.T) {
	srv := testkit.StartServer(t)
	client := leaseRedisClient(t, srv.Addr())
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		clock := floodgate.NewManualClock(leasedEpoch.Add(time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(rt, "start"))))
		mem := leaseNewMemory(clock)
		red := leaseRedisCoordinator(t, client, fmt.Sprintf("agree%d:", run), clock)
		rate := rapid.Int64Range(1, 1000).Draw(rt, "rate")
		periods := []time.Duration{100 * time.Millisecond, time.Second, 1500 * time.Microsecond}
		period := rapid.SampledFrom(periods).Draw(rt, "period")
		names := []string{"a", "b", "c", "d"}
		last := map[string]LeaseGrant{}
		seqs := map[string]int64{}
		for range rapid.IntRange(1, 60).Draw(rt, "renewals") {
			if rapid.IntRange(0, 19).Draw(rt, "change_period") == 0 {
				period = rapid.SampledFrom(periods).Draw(rt, "period")
			}
			node := rapid.SampledFrom(names).Draw(rt, "node")
			prev, known := last[node]
			req := LeaseRequest{
				Key: "k", Node: node, Rate: rate, Period: period,
				Lease:   time.Duration(rapid.Int64Range(1, int64(2*period/time.Microsecond)).Draw(rt, "lease_us")) * time.Microsecond,
				Window:  -1,
				Nodes:   rapid.IntRange(1, 5).Draw(rt, "nodes"),
				Demand:  rapid.Int64Range(0, 2*rate).Draw(rt, "demand"),
				Leaving: rapid.IntRange(0, 9).Draw(rt, "leaving") == 0,
				// Mostly in order; sometimes a step back (stale), or none.
				Seq:      max(0, seqs[node]+rapid.Int64Range(-2, 3).Draw(rt, "seq_step")),
				Answered: rapid.Int64Range(0, seqs[node]+1).Draw(rt, "answered"),
			}
			seqs[node] = max(seqs[node], req.Seq)
			if known && rapid.Bool().Draw(rt, "report") {
				req.Window = prev.Window
				req.Used = rapid.Int64Range(0, prev.Granted+2).Draw(rt, "used")
				req.Pinned = rapid.Int64Range(0, 5).Draw(rt, "pinned")
			}
			want, err := mem.Renew(context.Background(), req)
			if err != nil {
				rt.Fatalf("memory: %v", err)
			}
			got, err := red.Renew(context.Background(), req)
			if err != nil {
				rt.Fatalf("redis: %v", err)
			}
			if got != want {
				rt.Fatalf("request %+v\nredis  %+v\nmemory %+v", req, got, want)
			}
			last[node] = want
			clock.Advance(time.Duration(rapid.Int64Range(0, int64(period)).Draw(rt, "advance")))
		}
	})
}

// TestLeasedOnRedisKeepsTheBudget: N nodes sharing one real Redis, their
// clocks skewed by seconds, under skewed load twice the budget, never admit
// more than R per window, and leave no more undershoot than the bound, over
// a table of N and T.
func TestLeasedOnRedisKeepsTheBudget(t *testing.T) {
	srv := testkit.StartServer(t)
	client := leaseRedisClient(t, srv.Addr())
	const steps, step = 300, 10 * time.Millisecond
	for _, nodes := range []int{2, 4} {
		for _, interval := range []time.Duration{100 * time.Millisecond, 250 * time.Millisecond} {
			t.Run(fmt.Sprintf("N=%d/T=%s", nodes, interval), func(t *testing.T) {
				prefix := fmt.Sprintf("budget:%d:%s:", nodes, interval)
				s := leasedNewSim(t, leasedSimConfig{
					nodes: nodes, limit: leasedTestLimit, interval: interval, step: step, skew: time.Second,
					coord: func(clock *floodgate.ManualClock) Coordinator {
						return leaseRedisCoordinator(t, client, prefix, clock)
					},
				})
				share := leasedSkewedShare(0)
				arrivals := func(st, i int) int64 { return leasedSpread(20*share(st, steps, i, nodes), st) }
				s.run(steps, arrivals)
				s.checkNoOvershoot(t)
				s.checkUndershoot(t, arrivals, steps)
				for _, w := range s.windows() {
					t.Logf("window %d: offered %d, admitted %d of R = %d", w, s.offered[w], s.admitted[w], leasedTestLimit.Rate)
				}
			})
		}
	}
}

// TestRedisCoordinatorDown: with Redis gone, a renewal fails with an error
// wrapping floodgate.ErrStoreUnavailable; a leased node then serves its
// safe capacity, and returns to leases once Redis is back.
func TestRedisCoordinatorDown(t *testing.T) {
	srv := testkit.StartServer(t)
	client := leaseRedisClient(t, srv.Addr())
	clock := floodgate.NewManualClock(leasedEpoch)
	red, err := NewRedisCoordinator(RedisCoordinatorConfig{Client: client, KeyPrefix: "down:", Clock: clock, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLeased(LeasedConfig{Coordinator: red, Members: StaticMembers{Name: "a", Nodes: 4}, Clock: clock, Interval: 100 * time.Millisecond, WaitForRenewals: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	lim := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 100, Period: time.Second}
	if d, err := l.AllowN(ctx, "k", lim, 1); err != nil || !d.Allowed {
		t.Fatalf("with Redis up: %+v, %v", d, err)
	}

	srv.Kill()
	req := LeaseRequest{Key: "k", Node: "b", Rate: 100, Period: time.Second, Lease: time.Second, Window: -1, Nodes: 1}
	if _, err := red.Renew(ctx, req); !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("Renew with Redis killed: err = %v, want ErrStoreUnavailable", err)
	}
	clock.Advance(time.Second) // the lease is over; a new window
	var admitted int64
	for range 50 {
		d, err := l.AllowN(ctx, "k", lim, 1)
		if err != nil {
			t.Fatalf("with Redis down the safe capacity answers, got %v", err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 25 { // S = R/N = 100/4
		t.Errorf("admitted %d in a window with Redis down, want S = 25", admitted)
	}

	srv.Restart(t)
	clock.Advance(time.Second)
	if err := l.Sync(ctx); err != nil {
		t.Fatalf("Sync with Redis back: %v", err)
	}
	admitted = 0
	for range 150 {
		if d, err := l.AllowN(ctx, "k", lim, 1); err == nil && d.Allowed {
			admitted++
		}
		clock.Advance(time.Millisecond) // let early renewals come
	}
	if admitted <= 25 || admitted > lim.Rate {
		t.Errorf("admitted %d in a window after Redis came back, want leases again: more than S = 25, at most R = 100", admitted)
	}
}

// TestRedisCoordinatorOnCluster: on a real three-master Redis Cluster, each
// key's hash lives in the slot of its hash tag, renewals of many keys
// spread over the masters work, and agree with the in-memory coordinator.
func TestRedisCoordinatorOnCluster(t *testing.T) {
	cluster := testkit.StartCluster(t, 3)
	client := leaseRedisClient(t, cluster.Addrs()...)
	clock := floodgate.NewManualClock(leasedEpoch)
	red := leaseRedisCoordinator(t, client, "fg:lease:", clock)
	mem := leaseNewMemory(clock)
	ctx := context.Background()
	for step := range 5 {
		for k := range 30 {
			for _, node := range []string{"a", "b", "c"} {
				req := LeaseRequest{
					Key: fmt.Sprintf("tenant:%d", k), Node: node, Rate: 90, Period: time.Second,
					Lease: 150 * time.Millisecond, Window: -1, Nodes: 3, Demand: int64(10 * (k%3 + 1)),
				}
				want, err := mem.Renew(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				got, err := red.Renew(ctx, req)
				if err != nil {
					t.Fatalf("step %d key %d node %s: %v", step, k, node, err)
				}
				if got != want {
					t.Fatalf("key %s node %s: redis %+v, memory %+v", req.Key, node, got, want)
				}
			}
			if leased := mem.Leased(fmt.Sprintf("tenant:%d", k)); leased > 90 {
				t.Fatalf("key %d: leased %d > R", k, leased)
			}
		}
		clock.Advance(100 * time.Millisecond)
	}
}

// TestNewRedisCoordinatorRefusesBadConfig names each mistake.
func TestNewRedisCoordinatorRefusesBadConfig(t *testing.T) {
	srv := testkit.StartServer(t)
	client := leaseRedisClient(t, srv.Addr())
	cases := []struct {
		name string
		cfg  RedisCoordinatorConfig
		want string
	}{
		{"no client", RedisCoordinatorConfig{}, "Client is nil"},
		{"negative timeout", RedisCoordinatorConfig{Client: client, Timeout: -time.Second}, "Timeout must not be negative"},
		{"negative slack", RedisCoordinatorConfig{Client: client, ClockSlack: -time.Second}, "ClockSlack must not be negative"},
	}
	for _, c := range cases {
		if _, err := NewRedisCoordinator(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one saying %q", c.name, err, c.want)
		}
	}
}
