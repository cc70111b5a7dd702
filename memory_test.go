package floodgate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

var ctx = context.Background()

func newVirtual(opts ...floodgate.MemoryOption) (*floodgate.Memory, *floodgate.ManualClock) {
	clk := floodgate.NewManualClock(epoch)
	return floodgate.NewMemory(append([]floodgate.MemoryOption{floodgate.WithClock(clk)}, opts...)...), clk
}

func TestBadInputIsAnError(t *testing.T) {
	ok := floodgate.PerSecond(10)
	tests := []struct {
		name  string
		key   string
		limit floodgate.Limit
		cost  int64
		want  error
	}{
		{"zero rate", "k", floodgate.Limit{Algorithm: floodgate.TokenBucket, Period: time.Second}, 1, floodgate.ErrInvalidLimit},
		{"negative rate", "k", floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: -1, Period: time.Second}, 1, floodgate.ErrInvalidLimit},
		{"zero period", "k", floodgate.Limit{Algorithm: floodgate.SlidingLog, Rate: 1}, 1, floodgate.ErrInvalidLimit},
		{"negative period", "k", floodgate.Limit{Algorithm: floodgate.SlidingWindow, Rate: 1, Period: -time.Second}, 1, floodgate.ErrInvalidLimit},
		{"sub-microsecond period", "k", floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 1, Period: 1500 * time.Nanosecond}, 1, floodgate.ErrInvalidLimit},
		{"negative burst", "k", ok.WithBurst(-1), 1, floodgate.ErrInvalidLimit},
		{"unknown algorithm", "k", ok.WithAlgorithm("token-bucket"), 1, floodgate.ErrInvalidLimit},
		{"empty algorithm", "k", ok.WithAlgorithm(""), 1, floodgate.ErrInvalidLimit},
		{"rate too large", "k", floodgate.PerSecond(1 << 51), 1, floodgate.ErrInvalidLimit},
		{"horizon not countable", "k", floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 99991, Period: 24 * time.Hour}, 1, floodgate.ErrInvalidLimit},
		{"negative cost", "k", ok, -1, floodgate.ErrInvalidCost},
		{"empty key", "", ok, 1, floodgate.ErrInvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newVirtual()
			_, err := m.AllowN(ctx, tt.key, tt.limit, tt.cost)
			if !errors.Is(err, tt.want) {
				t.Fatalf("AllowN: error %v, want one wrapping %v", err, tt.want)
			}
			_, err = m.AllowAll(ctx, []floodgate.Request{{Key: "other", Limit: ok, Cost: 1}, {Key: tt.key, Limit: tt.limit, Cost: tt.cost}})
			if !errors.Is(err, tt.want) {
				t.Fatalf("AllowAll: error %v, want one wrapping %v", err, tt.want)
			}
			if d, _ := m.AllowN(ctx, "other", ok, 0); d.Remaining != 10 {
				t.Fatalf("a rejected batch consumed from another key: remaining %d", d.Remaining)
			}
		})
	}
}

func TestValidLimitsAtTheEdges(t *testing.T) {
	for _, l := range []floodgate.Limit{
		floodgate.PerSecond(1_000_000_000),
		{Algorithm: floodgate.TokenBucket, Rate: 1_000_000, Period: 24 * time.Hour},
		{Algorithm: floodgate.TokenBucket, Rate: 7919, Period: 24 * time.Hour},
		{Algorithm: floodgate.LeakyBucket, Rate: 3, Period: time.Microsecond, Burst: 1 << 40},
		{Algorithm: floodgate.SlidingWindow, Rate: 1 << 50, Period: 1 << 50 * time.Microsecond},
		{Algorithm: floodgate.FixedWindow, Rate: 1, Period: time.Microsecond},
	} {
		if err := l.Validate(); err != nil {
			t.Errorf("%v: %v", l, err)
		}
		m, _ := newVirtual()
		if d, err := m.Allow(ctx, "k", l); err != nil || !d.Allowed {
			t.Errorf("%v: first request: %+v, %v", l, d, err)
		}
	}
}

// With time frozen, exactly the capacity passes however many goroutines
// race on one key: no update is lost, none is counted twice.
func TestConcurrentCallersOnOneKeyLoseNoUpdate(t *testing.T) {
	for _, alg := range floodgate.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			m, _ := newVirtual()
			limit := floodgate.Limit{Algorithm: alg, Rate: 500, Period: time.Second}
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for g := 0; g < 8; g++ {
				wg.Go(func() {
					for i := 0; i < 200; i++ {
						if d, err := m.Allow(ctx, "hot", limit); err != nil {
							t.Error(err)
							return
						} else if d.Allowed {
							allowed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if got := allowed.Load(); got != 500 {
				t.Fatalf("%d admitted at one instant, want exactly 500", got)
			}
		})
	}
}

// While a driver moves the clock, goroutines race on one key: the total
// admitted never exceeds what the algorithm allows over the elapsed time.
func TestConcurrentCallersStayWithinTheBound(t *testing.T) {
	for _, alg := range floodgate.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			m, clk := newVirtual()
			limit := floodgate.Limit{Algorithm: alg, Rate: 100, Period: 10 * time.Millisecond, Burst: 20}
			const steps, stepSize = 200, 100 * time.Microsecond
			var allowed atomic.Int64
			stop := make(chan struct{})
			var wg, started sync.WaitGroup
			for g := 0; g < 6; g++ {
				started.Add(1)
				wg.Go(func() {
					for first := true; ; first = false {
						if d, _ := m.Allow(ctx, "hot", limit); d.Allowed {
							allowed.Add(1)
						}
						if first {
							started.Done()
						}
						select {
						case <-stop:
							return
						default:
						}
					}
				})
			}
			// Every caller has asked once before the clock moves, so the run
			// has callers however late the scheduler starts them.
			started.Wait()
			for i := 0; i < steps; i++ {
				clk.Advance(stepSize)
				time.Sleep(20 * time.Microsecond) // let the callers run at this instant
			}
			close(stop)
			wg.Wait()
			elapsed := int64(steps * stepSize / time.Microsecond)
			p := int64(limit.Period / time.Microsecond)
			var bound int64
			switch alg {
			case floodgate.TokenBucket, floodgate.LeakyBucket:
				bound = limit.Burst + limit.Rate*elapsed/p
			default: // at most Rate per aligned window, and the run spans at most elapsed/p + 1 windows
				bound = limit.Rate * (elapsed/p + 1)
			}
			if got := allowed.Load(); got > bound || got == 0 {
				t.Fatalf("admitted %d over %dµs, bound %d", got, elapsed, bound)
			}
		})
	}
}

func TestAllowAllIsAllOrNothing(t *testing.T) {
	m, clk := newVirtual()
	tenant := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 100, Period: time.Minute}
	user := floodgate.PerSecond(2)
	tokens := floodgate.Limit{Algorithm: floodgate.SlidingWindow, Rate: 1000, Period: time.Minute}
	call := func(user string, cost int64) []floodgate.Decision {
		t.Helper()
		ds, err := m.AllowAll(ctx, []floodgate.Request{
			{Key: "tenant:acme", Limit: tenant, Cost: 1},
			{Key: "user:" + user, Limit: floodgate.PerSecond(2), Cost: 1},
			{Key: "tpm:acme", Limit: tokens, Cost: cost},
		})
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	_ = user
	if ds := call("ann", 400); !floodgate.Allowed(ds) {
		t.Fatalf("first call denied: %+v", ds)
	}
	// The token limit denies 700 more tokens: nothing may be consumed.
	ds := call("ann", 700)
	if floodgate.Allowed(ds) || ds[0].RetryAfter != 0 || ds[1].RetryAfter != 0 || ds[2].RetryAfter <= 0 {
		t.Fatalf("want a denied batch with only the token limit to blame: %+v", ds)
	}
	if ds[0].Remaining != 99 || ds[1].Remaining != 1 || ds[2].Remaining != 600 {
		t.Fatalf("a denied batch consumed: remaining %d %d %d, want 99 1 600", ds[0].Remaining, ds[1].Remaining, ds[2].Remaining)
	}
	if c := floodgate.Combine(ds); c.Allowed || c.RetryAfter != ds[2].RetryAfter || c.Remaining != 1 {
		t.Fatalf("combined decision %+v", c)
	}
	call("ann", 1)
	// Ann's user limit now denies; the tenant and token limits keep their counts.
	ds = call("ann", 1)
	if ds[1].RetryAfter <= 0 || ds[0].RetryAfter != 0 || ds[0].Remaining != 98 || ds[2].Remaining != 599 {
		t.Fatalf("user limit should deny alone: %+v", ds)
	}
	clk.Advance(time.Second)
	if ds := call("ann", 1); !floodgate.Allowed(ds) {
		t.Fatalf("after a second the batch should pass: %+v", ds)
	}
}

func TestAllowAllTakesTheSameKeyTwiceInOrder(t *testing.T) {
	m, _ := newVirtual()
	l := floodgate.Limit{Algorithm: floodgate.SlidingLog, Rate: 5, Period: time.Second}
	req := func(cost int64) floodgate.Request { return floodgate.Request{Key: "k", Limit: l, Cost: cost} }
	if ds, _ := m.AllowAll(ctx, []floodgate.Request{req(2), req(3)}); !floodgate.Allowed(ds) || ds[1].Remaining != 0 {
		t.Fatalf("2+3 of 5 should pass and leave 0: %+v", ds)
	}
	m.Reset(ctx, "k")
	if ds, _ := m.AllowAll(ctx, []floodgate.Request{req(2), req(4)}); floodgate.Allowed(ds) || ds[1].RetryAfter <= 0 {
		t.Fatalf("2+4 of 5 should be denied, the second taking the blame: %+v", ds)
	}
	if d, _ := m.AllowN(ctx, "k", l, 0); d.Remaining != 5 {
		t.Fatalf("a denied batch left %d of 5", d.Remaining)
	}
}

// Under WithMaxKeys, keys back to full are evicted before any key in use,
// and then the least recently used goes first.
func TestMaxKeysEvictsFullKeysFirstThenLeastRecentlyUsed(t *testing.T) {
	m, _ := newVirtual(floodgate.WithMaxKeys(1)) // small bounds have one shard: order is observable
	short := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1, Period: time.Second}
	long := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1, Period: time.Hour}
	m.Allow(ctx, "a", long)
	if d, _ := m.Allow(ctx, "a", long); d.Allowed {
		t.Fatal("a should be exhausted")
	}
	m.Allow(ctx, "b", long) // evicts a: the least recently used
	if d, _ := m.Allow(ctx, "a", long); !d.Allowed {
		t.Fatal("a was not evicted")
	}
	if m.Len() != 1 {
		t.Fatalf("holding %d keys, bound 1", m.Len())
	}

	m.Close()
	m, clk := newVirtual(floodgate.WithMaxKeys(3))
	m.Allow(ctx, "oldest", long)
	m.Allow(ctx, "short", short)
	m.Allow(ctx, "newest", long)
	clk.Advance(2 * time.Second) // "short" is full again; the others are in use
	m.Allow(ctx, "new", long)
	for _, k := range []string{"oldest", "newest", "new"} {
		if d, _ := m.Allow(ctx, k, long); d.Allowed {
			t.Fatalf("%q in use was evicted although a full key was there", k)
		}
	}
}

func TestMemoryDropsKeysBackToFull(t *testing.T) {
	m, clk := newVirtual()
	l := floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 1, Period: time.Millisecond}
	m.Allow(ctx, "live", floodgate.PerHour(1)) // in use for the whole run (1000 s)
	for i := range 100_000 {
		m.Allow(ctx, fmt.Sprintf("k%d", i), l)
		clk.Advance(10 * time.Millisecond)
	}
	// Each key is full a millisecond after its request. The table sweeps as
	// it grows and drops keys full for over a minute, so it holds about the
	// keys of the last minute or two (6000 to 12000 requests), not all.
	if n := m.Len(); n > 30_000 {
		t.Fatalf("holding %d keys, most of them long back to full", n)
	}
	if d, _ := m.Allow(ctx, "live", floodgate.PerHour(1)); d.Allowed {
		t.Fatal("a key still in use was dropped")
	}
}

func TestKeysThatStayFullTakeNoMemory(t *testing.T) {
	m, _ := newVirtual()
	for i := range 100 {
		m.AllowN(ctx, fmt.Sprintf("read%d", i), floodgate.PerSecond(5), 0)
		m.AllowN(ctx, fmt.Sprintf("huge%d", i), floodgate.PerSecond(5), 6)
	}
	if n := m.Len(); n != 0 {
		t.Fatalf("reads and impossible costs created %d keys", n)
	}
}

func TestChangingALimitKeepsTheState(t *testing.T) {
	m, _ := newVirtual()
	l := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: time.Minute}
	m.AllowN(ctx, "k", l, 8)
	l.Rate = 20
	if d, _ := m.AllowN(ctx, "k", l, 0); d.Remaining != 12 {
		t.Fatalf("raising the rate to 20 after 8 used: remaining %d, want 12", d.Remaining)
	}
	// Another algorithm on the same key starts fresh.
	if d, _ := m.AllowN(ctx, "k", l.WithAlgorithm(floodgate.SlidingLog), 0); d.Remaining != 20 {
		t.Fatalf("switching algorithm: remaining %d, want 20", d.Remaining)
	}
}

func TestResetAndClose(t *testing.T) {
	m, _ := newVirtual()
	l := floodgate.PerMinute(1)
	m.Allow(ctx, "k", l)
	if err := m.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if d, _ := m.Allow(ctx, "k", l); !d.Allowed {
		t.Fatal("Reset did not forget the key")
	}
	m.Close()
	if m.Len() != 0 {
		t.Fatal("Close kept keys")
	}
	if d, _ := m.Allow(ctx, "k", l); !d.Allowed {
		t.Fatal("a closed Memory should start empty")
	}
	if err := m.Reset(ctx, ""); !errors.Is(err, floodgate.ErrInvalidKey) {
		t.Fatalf("Reset of an empty key: %v", err)
	}
}

// Without WithClock a Memory reads the system's clock: between two
// decisions it sees as much time pass as the test measures around them,
// at least the sleep between them and at most the whole interval. (A token
// bucket of one per hour: the second request's RetryAfter is the hour less
// the time the limiter saw pass.) The bounds hold however late the test
// runs.
func TestSystemClockIsUsedByDefault(t *testing.T) {
	m := floodgate.NewMemory()
	l := floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 1, Period: time.Hour}
	const pause = 20 * time.Millisecond
	before := time.Now()
	if d, _ := m.Allow(ctx, "k", l); !d.Allowed {
		t.Fatal("first request denied")
	}
	time.Sleep(pause)
	d, _ := m.Allow(ctx, "k", l)
	around := time.Since(before)
	if d.Allowed {
		t.Fatalf("second request within the hour allowed: %+v", d)
	}
	// The limiter counts whole microseconds: allow one either way.
	if saw := l.Period - d.RetryAfter; saw < pause-time.Microsecond || saw > around+time.Microsecond {
		t.Fatalf("the limiter saw %v pass between two requests %v apart (%v around them), want the system clock's", saw, pause, around)
	}
}
