package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/conformance"
	"github.com/floodgate-io/floodgate/internal/testkit"
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
		{"key over 1 KiB", strings.Repeat("k", 1025), ok, 1, floodgate.ErrInvalidKey},
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
		{"adjust: key over 1 KiB", strings.Repeat("k", 1025), ok, 1, floodgate.ErrInvalidKey},
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
	if _, err := l.AllowN(ctx, strings.Repeat("k", 1024), ok, 1); err != nil {
		t.Fatalf("a 1 KiB key: %v", err)
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
	l := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}, Timeout: 100 * time.Millisecond})
	srv.Kill()
	start := time.Now()
	_, err := l.AllowN(ctx, "k", floodgate.PerSecond(1), 1)
	if !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("error %v, want one wrapping ErrStoreUnavailable", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("waited %v with a 100ms timeout", waited)
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

func TestCallerCancellationIsNotUnavailability(t *testing.T) {
	srv := testkit.StartServer(t)
	l := newLimiter(t, redisstore.Config{Addrs: []string{srv.Addr()}})
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := l.AllowN(cancelled, "k", floodgate.PerSecond(1), 1)
	if !errors.Is(err, context.Canceled) || errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("error %v", err)
	}
}

// Across cluster slots a batch is taken in order and refunded on denial;
// with a common hash tag it is one atomic script.
func TestClusterBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-master cluster")
	}
	c := testkit.StartCluster(t, 3)
	clock := floodgate.NewManualClock(time.Now())
	l := newLimiter(t, redisstore.Config{Addrs: c.Addrs(), Clock: clock, Timeout: 5 * time.Second})
	for _, tc := range []struct{ name, a, b string }{
		{"different slots", "tenant:1", "user:1"},
		{"one hash tag", "{t1}:tenant", "{t1}:user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, a := range floodgate.Algorithms() {
				tenant := floodgate.Limit{Algorithm: a, Rate: 10, Period: time.Minute}
				user := floodgate.Limit{Algorithm: a, Rate: 2, Period: time.Minute}
				ka, kb := tc.a+string(a), tc.b+string(a)
				batch := []floodgate.Request{{Key: ka, Limit: tenant, Cost: 1}, {Key: kb, Limit: user, Cost: 1}}
				for i := 0; i < 2; i++ {
					if ds, err := l.AllowAll(ctx, batch); err != nil || !floodgate.Allowed(ds) {
						t.Fatalf("%s call %d: %+v, %v", a, i, ds, err)
					}
				}
				ds, err := l.AllowAll(ctx, batch)
				if err != nil || floodgate.Allowed(ds) || ds[0].RetryAfter != 0 || ds[1].RetryAfter <= 0 {
					t.Fatalf("%s: third call should be denied by the user limit alone: %+v, %v", a, ds, err)
				}
				if d, _ := l.AllowN(ctx, ka, tenant, 0); d.Remaining != 8 {
					t.Fatalf("%s: tenant remaining %d after a denied batch, want 8 (refunded)", a, d.Remaining)
				}
			}
		})
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
