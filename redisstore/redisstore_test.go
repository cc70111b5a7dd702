package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/conformance"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
	"github.com/floodgate-io/floodgate/redisstore"
)

var ctx = context.Background()

func newLimiter(t *testing.T, cfg redisstore.Config) *redisstore.Limiter {
	t.Helper()
	l, err := redisstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// Decisions, and adjustments, as the in-memory store makes them, Decision
// for Decision.
func TestConformanceStandalone(t *testing.T) {
	srv := testkit.StartServer(t)
	factory := func(t *testing.T, clock floodgate.Clock) floodgate.Limiter {
		return newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}, KeyPrefix: "fg:", Clock: clock, Timeout: 5 * time.Second})
	}
	conformance.Run(t, factory)
	conformance.RunAdjust(t, factory)
}

func TestConformanceCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-master cluster")
	}
	c := testkit.StartCluster(t, 3)
	factory := func(t *testing.T, clock floodgate.Clock) floodgate.Limiter {
		return newLimiter(t, redisstore.Config{Addrs: c.Addrs(), Clock: clock, Timeout: 5 * time.Second})
	}
	conformance.Run(t, factory)
	// Each adjustment is one script on the key's node: the random sequences
	// show it (the properties are the standalone's).
	conformance.RunAdjustRandom(t, factory)
}

func TestServerTimeAndTTL(t *testing.T) {
	srv := testkit.StartServer(t)
	l := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}, KeyPrefix: "fg:"})
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 5, Period: time.Hour}
	d, err := l.AllowN(ctx, "user:1", limit, 2)
	if err != nil || !d.Allowed || d.Remaining != 3 {
		t.Fatalf("first decision: %+v, %v", d, err)
	}
	// The key lives exactly until its window ends: its state is then full.
	ttl, _ := strconv.ParseInt(srv.Do(t, "PTTL", "fg:user:1"), 10, 64)
	want := d.ResetAfter.Milliseconds()
	if ttl <= 0 || ttl > want+1 || ttl < want-1000 {
		t.Fatalf("PTTL %dms, ResetAfter %v", ttl, d.ResetAfter)
	}
	// A read consumes nothing and writes nothing.
	srv.Do(t, "DEL", "fg:user:2")
	if d, _ := l.AllowN(ctx, "user:2", limit, 0); !d.Allowed || d.Remaining != 5 {
		t.Fatalf("read: %+v", d)
	}
	if got := srv.Do(t, "EXISTS", "fg:user:2"); got != "0" {
		t.Fatalf("a read created the key (EXISTS %s)", got)
	}
}

func TestEveryAlgorithmExpiresItsKeys(t *testing.T) {
	srv := testkit.StartServer(t)
	l := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}})
	for _, a := range floodgate.Algorithms() {
		limit := floodgate.Limit{Algorithm: a, Rate: 10, Period: 50 * time.Millisecond}
		if d, err := l.AllowN(ctx, string(a), limit, 3); err != nil || !d.Allowed {
			t.Fatalf("%s: %+v, %v", a, d, err)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for srv.Do(t, "DBSIZE") != "0" {
		if time.Now().After(deadline) {
			t.Fatalf("keys left after their state was full: %s", srv.Do(t, "KEYS", "*"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBadInput(t *testing.T) {
	srv := testkit.StartServer(t)
	l := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}})
	ok := floodgate.PerSecond(1)
	for _, tc := range []struct {
		name  string
		key   string
		limit floodgate.Limit
		cost  int64
		want  error
	}{
		{"empty key", "", ok, 1, floodgate.ErrInvalidKey},
		{"key over the maximum", strings.Repeat("k", floodgate.MaxKeyBytes+1), ok, 1, floodgate.ErrKeyTooLong},
		{"negative cost", "k", ok, -1, floodgate.ErrInvalidCost},
		{"zero rate", "k", floodgate.Limit{Algorithm: floodgate.TokenBucket, Period: time.Second}, 1, floodgate.ErrInvalidLimit},
		{"unknown algorithm", "k", ok.WithAlgorithm("gcra"), 1, floodgate.ErrInvalidLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := l.AllowN(ctx, tc.key, tc.limit, tc.cost); !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if _, err := l.AllowAll(ctx, []floodgate.Request{{Key: tc.key, Limit: tc.limit, Cost: tc.cost}}); !errors.Is(err, tc.want) {
				t.Fatalf("AllowAll: error %v, want %v", err, tc.want)
			}
		})
	}
	// Adjust checks its input as AllowN does, the delta in its own range.
	for _, tc := range []struct {
		name  string
		key   string
		limit floodgate.Limit
		delta int64
		want  error
	}{
		{"adjust: empty key", "", ok, 1, floodgate.ErrInvalidKey},
		{"adjust: key over the maximum", strings.Repeat("k", floodgate.MaxKeyBytes+1), ok, 1, floodgate.ErrKeyTooLong},
		{"adjust: delta beyond the maximum", "k", ok, floodgate.MaxAdjustment + 1, floodgate.ErrInvalidCost},
		{"adjust: zero rate", "k", floodgate.Limit{Algorithm: floodgate.TokenBucket, Period: time.Second}, -1, floodgate.ErrInvalidLimit},
		{"adjust: bad limit with delta 0", "k", ok.WithAlgorithm("gcra"), 0, floodgate.ErrInvalidLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := l.Adjust(ctx, tc.key, tc.limit, tc.delta); !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want one wrapping %v", err, tc.want)
			}
		})
	}
	if _, err := l.AllowN(ctx, strings.Repeat("k", floodgate.MaxKeyBytes), ok, 1); err != nil {
		t.Fatalf("a key of the maximum length: %v", err)
	}
	if _, err := redisstore.New(redisstore.Config{}); err == nil {
		t.Fatal("New without an address succeeded")
	}
}

// A server that lost its scripts (restart, SCRIPT FLUSH) gets them again.
func TestScriptsReloadAfterFlush(t *testing.T) {
	srv := testkit.StartServer(t)
	l := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}})
	limit := floodgate.PerMinute(3)
	l.AllowN(ctx, "k", limit, 1)
	srv.Do(t, "SCRIPT", "FLUSH")
	if d, err := l.AllowN(ctx, "k", limit, 1); err != nil || d.Remaining != 1 {
		t.Fatalf("after SCRIPT FLUSH: %+v, %v", d, err)
	}
}

func TestUnreachableStoreIsUnavailable(t *testing.T) {
	srv := testkit.StartServer(t)
	const timeout = 100 * time.Millisecond
	l := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}, Timeout: timeout})
	srv.Kill()
	probe := timing.StartProbe(t)
	start := time.Now()
	_, err := l.AllowN(ctx, "k", floodgate.PerSecond(1), 1)
	if !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("error %v, want one wrapping ErrStoreUnavailable", err)
	}
	if waited := time.Since(start); probe.Over(start, waited, timeout) > timing.Slack {
		t.Fatalf("waited %v with a %v timeout (the scheduler was late %v)", waited, timeout, probe.Measure(start, start.Add(waited)))
	}
	srv.Restart(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := l.AllowN(ctx, "k", floodgate.PerSecond(1), 1); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("still failing after the restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every call returns by its deadline, Timeout or its context's, from
// the caller's side, whatever the server does: here it is stopped
// (SIGSTOP) with a connection open, so nothing answers and every request
// after the first few queues behind calls in flight. Past the store's own
// timeout the error wraps ErrStoreUnavailable; at the caller's deadline it
// is the caller's context.DeadlineExceeded (unless the store failed
// before: a connection that a timed-out call broke fails the next ones at
// once).
func TestCallsReturnByTheirDeadline(t *testing.T) {
	srv := testkit.StartServer(t)
	const timeout, callersDeadline = 100 * time.Millisecond, 40 * time.Millisecond
	limit := floodgate.PerSecond(1_000_000)
	calls := []struct {
		name     string
		maxBatch int
		call     func(*redisstore.Limiter, context.Context, string) error
	}{
		{"AllowN", 0, func(l *redisstore.Limiter, ctx context.Context, key string) error {
			_, err := l.AllowN(ctx, key, limit, 1)
			return err
		}},
		{"AllowN unbatched", 1, func(l *redisstore.Limiter, ctx context.Context, key string) error {
			_, err := l.AllowN(ctx, key, limit, 1)
			return err
		}},
		{"AllowAll", 0, func(l *redisstore.Limiter, ctx context.Context, key string) error {
			_, err := l.AllowAll(ctx, []floodgate.Request{{Key: key, Limit: limit, Cost: 1}, {Key: key + ":b", Limit: limit, Cost: 1}})
			return err
		}},
		{"Adjust", 0, func(l *redisstore.Limiter, ctx context.Context, key string) error {
			return l.Adjust(ctx, key, limit, -1)
		}},
	}
	probe := timing.StartProbe(t)
	for _, c := range calls {
		for _, own := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/own timeout %v", c.name, own), func(t *testing.T) {
				l := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}, Timeout: timeout, MaxBatch: c.maxBatch})
				warmUp(t, func() error { return c.call(l, ctx, "warm") })
				srv.Pause(t)
				defer srv.Resume(t)
				var callers atomic.Int64 // errors that are the caller's deadline
				var wg sync.WaitGroup
				for g := range 16 {
					wg.Go(func() {
						cctx, bound := ctx, timeout
						if !own {
							var cancel context.CancelFunc
							cctx, cancel = context.WithTimeout(ctx, callersDeadline)
							defer cancel()
							bound = callersDeadline
						}
						start := time.Now()
						err := c.call(l, cctx, "k"+strconv.Itoa(g))
						took := time.Since(start)
						unavailable := errors.Is(err, floodgate.ErrStoreUnavailable)
						if !unavailable && (own || !errors.Is(err, context.DeadlineExceeded)) {
							t.Errorf("error %v; want one wrapping ErrStoreUnavailable, or the caller's context.DeadlineExceeded at its deadline", err)
						}
						if !unavailable {
							callers.Add(1)
						}
						if over := probe.Over(start, took, bound); over > timing.Slack {
							t.Errorf("took %v with a deadline %v away: %v over it and the scheduler's lateness then (%v)",
								took, bound, over, probe.Measure(start, start.Add(took)))
						}
					})
				}
				wg.Wait()
				if !own && callers.Load() == 0 {
					t.Errorf("no call ended with its caller's deadline")
				}
			})
		}
	}
}

// warmUp makes the first call of a test (connecting, loading scripts)
// until it succeeds: on a busy machine it may miss a short Timeout, and
// it is not what the test measures.
func warmUp(t *testing.T, call func() error) {
	t.Helper()
	for deadline := time.Now().Add(timing.Patience); ; time.Sleep(10 * time.Millisecond) {
		err := call()
		if err == nil {
			return
		}
		if !errors.Is(err, floodgate.ErrStoreUnavailable) || time.Now().After(deadline) {
			t.Fatalf("warming up: %v", err)
		}
	}
}

// A batch across cluster nodes that its caller's deadline cuts off (one
// node hangs) returns by that deadline, not by the store's much longer
// Timeout, and still gives back what it took on the other node: the
// refund has a timeout of its own.
func TestClusterBatchCutOffGivesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-master cluster")
	}
	// The hung node must not be failed over while the batch gives back what
	// it took: with Redis's default coverage rule the cluster would refuse
	// every key, the refund's too.
	c := testkit.StartCluster(t, 3, testkit.WithArgs("--cluster-node-timeout", "600000"))
	const storeTimeout = 2 * time.Second
	l := newLimiter(t, redisstore.Config{Addrs: c.Addrs(), Timeout: storeTimeout})
	limit := floodgate.PerMinute(10)
	ka, kb := "cut:a", ""
	for i := 0; kb == ""; i++ {
		if k := "cut:b" + strconv.Itoa(i); c.NodeForKey(t, k) != c.NodeForKey(t, ka) {
			kb = k
		}
	}
	for _, k := range []string{ka, kb} { // connected, scripts loaded
		warmUp(t, func() error { _, err := l.AllowN(ctx, k, limit, 0); return err })
	}
	hung := c.NodeForKey(t, kb)
	hung.Pause(t)
	defer hung.Resume(t)
	probe := timing.StartProbe(t)
	const callersDeadline = 100 * time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, callersDeadline)
	defer cancel()
	start := time.Now()
	_, err := l.AllowAll(cctx, []floodgate.Request{{Key: ka, Limit: limit, Cost: 1}, {Key: kb, Limit: limit, Cost: 1}})
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the caller's deadline", err)
	}
	// The call is one sample, and a single stall the probe cannot see (the
	// kernel, three paused or busy servers) would fail a tighter check; the
	// allowance is what tells the two outcomes apart: the caller's 100 ms
	// deadline against the store's 2 s Timeout.
	t.Logf("took %v with a deadline %v away; %v over it and the scheduler's lateness then (%v)",
		took, callersDeadline, probe.Over(start, took, callersDeadline), probe.Measure(start, start.Add(took)))
	if took >= storeTimeout {
		t.Errorf("took %v: the batch waited for the store's Timeout (%v), not its caller's deadline (%v)", took, storeTimeout, callersDeadline)
	}
	for deadline := time.Now().Add(timing.Patience); ; time.Sleep(10 * time.Millisecond) {
		d, err := l.AllowN(ctx, ka, limit, 0)
		if err == nil && d.Remaining == limit.Rate {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still has %d of %d left (%v): what the batch took was not given back", ka, d.Remaining, limit.Rate, err)
		}
	}
}

func TestReset(t *testing.T) {
	srv := testkit.StartServer(t)
	l := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}, KeyPrefix: "fg:"})
	limit := floodgate.PerMinute(1)
	l.AllowN(ctx, "k", limit, 1)
	if err := l.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if d, _ := l.AllowN(ctx, "k", limit, 1); !d.Allowed {
		t.Fatal("Reset did not forget the key")
	}
	if err := l.Reset(ctx, ""); !errors.Is(err, floodgate.ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
}
