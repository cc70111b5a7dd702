package floodgate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
)

// sleeper is Wait's time on a manual clock for one waiter: each sleep
// moves the clock by exactly its length at once and is recorded, so a test
// sees every wait Wait took without anyone sleeping.
type sleeper struct {
	clock *floodgate.ManualClock
	slept []time.Duration
}

func (s *sleeper) after(d time.Duration) <-chan time.Time {
	s.slept = append(s.slept, d)
	s.clock.Advance(d)
	ch := make(chan time.Time, 1)
	ch <- s.clock.Now()
	return ch
}

// limiterFunc is a Limiter that answers as told: a store that fails, or
// one that does not say when to come back.
type limiterFunc func(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error)

func (f limiterFunc) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	return f(ctx, key, limit, cost)
}

// deniedTimes is a store that denies n times with RetryAfter 0, then admits.
func deniedTimes(n int) floodgate.Limiter {
	calls := 0
	return limiterFunc(func(context.Context, string, floodgate.Limit, int64) (floodgate.Decision, error) {
		calls++
		return floodgate.Decision{Allowed: calls > n}, nil
	})
}

func TestWaitOnVirtualTime(t *testing.T) {
	tb := floodgate.PerSecond(2).WithBurst(1) // one unit every 500ms
	leaky := floodgate.Limit{Algorithm: floodgate.LeakyBucket, Rate: 10, Period: time.Second, Burst: 5}
	slow := floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 1, Period: 2 * time.Hour}
	storeDown := limiterFunc(func(context.Context, string, floodgate.Limit, int64) (floodgate.Decision, error) {
		return floodgate.Decision{}, fmt.Errorf("%w: redis timed out", floodgate.ErrStoreUnavailable)
	})
	for _, tc := range []struct {
		name     string
		limiter  floodgate.Limiter // nil: a Memory on the test's clock
		limit    floodgate.Limit
		used     int64         // units taken before Wait
		cost     int64         // Wait's cost
		deadline time.Duration // from the start; 0: none
		want     error         // errors.Is; nil: admitted
		slept    []time.Duration
	}{
		{name: "room now: no wait", limit: tb, cost: 1},
		{name: "denied: waits exactly RetryAfter", limit: tb, used: 1, cost: 1, slept: []time.Duration{500 * time.Millisecond}},
		{name: "a cost of 2 in a 1/500ms bucket that is empty", limit: tb.WithBurst(2), used: 2, cost: 2, slept: []time.Duration{time.Second}},
		{name: "deadline after the wait: waits", limit: slow, used: 1, cost: 1, deadline: 3 * time.Hour, slept: []time.Duration{2 * time.Hour}},
		{name: "deadline exactly at the end of the wait: waits", limit: slow, used: 1, cost: 1, deadline: 2 * time.Hour, slept: []time.Duration{2 * time.Hour}},
		{name: "deadline before the wait ends: fails at once", limit: slow, used: 1, cost: 1, deadline: time.Hour, want: context.DeadlineExceeded},
		{name: "cost above the burst never passes", limit: tb.WithBurst(3), cost: 4, want: floodgate.ErrNeverPasses},
		{name: "cost above a window's rate never passes", limit: tb.WithAlgorithm(floodgate.FixedWindow), cost: 3, want: floodgate.ErrNeverPasses},
		{name: "leaky bucket: holds for the Delay", limit: leaky, used: 3, cost: 1, slept: []time.Duration{300 * time.Millisecond}},
		{name: "leaky bucket: Delay past the deadline fails at once", limit: leaky, used: 3, cost: 1, deadline: 200 * time.Millisecond, want: context.DeadlineExceeded},
		{name: "store error", limiter: storeDown, limit: tb, cost: 1, want: floodgate.ErrStoreUnavailable},
		{name: "bad limit", limit: floodgate.Limit{Algorithm: "gcra", Rate: 1, Period: time.Second}, cost: 1, want: floodgate.ErrInvalidLimit},
		{name: "negative cost", limit: tb, cost: -1, want: floodgate.ErrInvalidCost},
		{name: "store that says RetryAfter 0: backs off 10ms, doubling", limiter: deniedTimes(4), limit: tb, cost: 1,
			slept: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}},
		{name: "backoff stops doubling at 1s", limiter: deniedTimes(9), limit: tb, cost: 1,
			slept: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond,
				160 * time.Millisecond, 320 * time.Millisecond, 640 * time.Millisecond, time.Second, time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The clock starts at the real time so that a context deadline,
			// which real timers also watch, lies in the real future.
			start := time.Now()
			s := &sleeper{clock: floodgate.NewManualClock(start)}
			mem := floodgate.NewMemory(floodgate.WithClock(s.clock))
			l := tc.limiter
			if l == nil {
				l = mem
			}
			ctx := t.Context()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, start.Add(tc.deadline))
				defer cancel()
			}
			if tc.used > 0 {
				if d, err := mem.AllowN(ctx, "k", tc.limit, tc.used); err != nil || !d.Allowed {
					t.Fatalf("taking %d units first: %+v, %v", tc.used, d, err)
				}
			}
			d, err := floodgate.WaitOn(s.clock, s.after)(ctx, l, "k", tc.limit, tc.cost)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Wait: error %v, want one wrapping %v", err, tc.want)
			}
			if tc.want == nil && !d.Allowed {
				t.Fatalf("Wait returned without error but not admitted: %+v", d)
			}
			if !slices.Equal(s.slept, tc.slept) {
				t.Fatalf("Wait slept %v, want %v", s.slept, tc.slept)
			}
			if got, want := s.clock.Now().Sub(start), sum(tc.slept); got != want {
				t.Fatalf("Wait took %s of virtual time, want %s", got, want)
			}
		})
	}
}

func sum(ds []time.Duration) (total time.Duration) {
	for _, d := range ds {
		total += d
	}
	return total
}

// A leaky bucket admits at once and Wait holds for the Delay: when the
// deadline cuts that hold short, or ctx is cancelled during it, the units
// go back to the key, since a Memory is an Adjuster.
func TestWaitGivesBackAnAdmissionItDoesNotHoldFor(t *testing.T) {
	leaky := floodgate.Limit{Algorithm: floodgate.LeakyBucket, Rate: 10, Period: time.Second, Burst: 5}
	for _, tc := range []struct {
		name string
		want error
		wait func(ctx context.Context, s *sleeper, cancel context.CancelFunc, l floodgate.Limiter) error
	}{
		{"deadline too near", context.DeadlineExceeded, func(ctx context.Context, s *sleeper, _ context.CancelFunc, l floodgate.Limiter) error {
			ctx, cancel := context.WithDeadline(ctx, s.clock.Now().Add(100*time.Millisecond))
			defer cancel()
			_, err := floodgate.WaitOn(s.clock, s.after)(ctx, l, "k", leaky, 1)
			return err
		}},
		{"cancelled while holding", context.Canceled, func(ctx context.Context, s *sleeper, cancel context.CancelFunc, l floodgate.Limiter) error {
			neverFires := func(time.Duration) <-chan time.Time { cancel(); return nil }
			_, err := floodgate.WaitOn(s.clock, neverFires)(ctx, l, "k", leaky, 1)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &sleeper{clock: floodgate.NewManualClock(time.Now())}
			mem := floodgate.NewMemory(floodgate.WithClock(s.clock))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if _, err := mem.AllowN(ctx, "k", leaky, 3); err != nil {
				t.Fatal(err)
			}
			before, _ := mem.AllowN(ctx, "k", leaky, 0)
			err := tc.wait(ctx, s, cancel, mem)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Wait: error %v, want one wrapping %v", err, tc.want)
			}
			after, _ := mem.AllowN(context.Background(), "k", leaky, 0)
			if after.Remaining != before.Remaining {
				t.Fatalf("Remaining %d before Wait, %d after a Wait that did not hold (%v)", before.Remaining, after.Remaining, err)
			}
		})
	}
}

func TestWaitStopsWhenTheContextIsDone(t *testing.T) {
	limit := floodgate.PerSecond(2).WithBurst(1)
	for _, tc := range []struct {
		name  string
		after func(cancel context.CancelFunc, s *sleeper) func(time.Duration) <-chan time.Time
		calls int // AllowN calls Wait made
	}{
		{"cancelled before Wait: the store is not asked", nil, 0},
		{"cancelled during the wait", func(cancel context.CancelFunc, s *sleeper) func(time.Duration) <-chan time.Time {
			return func(time.Duration) <-chan time.Time { cancel(); return nil }
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &sleeper{clock: floodgate.NewManualClock(time.Now())}
			mem := floodgate.NewMemory(floodgate.WithClock(s.clock))
			ctx, cancel := context.WithCancel(t.Context())
			calls := 0
			counting := limiterFunc(func(ctx context.Context, key string, l floodgate.Limit, cost int64) (floodgate.Decision, error) {
				calls++
				return mem.AllowN(ctx, key, l, cost)
			})
			if _, err := mem.AllowN(ctx, "k", limit, 1); err != nil {
				t.Fatal(err)
			}
			after := s.after
			if tc.after == nil {
				cancel()
			} else {
				after = tc.after(cancel, s)
			}
			_, err := floodgate.WaitOn(s.clock, after)(ctx, counting, "k", limit, 1)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait: error %v, want one wrapping context.Canceled", err)
			}
			if calls != tc.calls {
				t.Fatalf("Wait asked the store %d times, want %d", calls, tc.calls)
			}
		})
	}
}

func TestWaitOnANilLimiterIsAnError(t *testing.T) {
	_, err := floodgate.Wait(t.Context(), nil, "k", floodgate.PerSecond(1), 1)
	if err == nil || !strings.Contains(err.Error(), "nil") {
		t.Fatalf("Wait on a nil Limiter: %v, want an error saying so", err)
	}
}

// virtualTimers runs many waiters on one manual clock: a sleep registers a
// timer, and once every waiter is asleep or done, run moves the clock to
// the earliest timer and fires every timer due then. Nothing sleeps for
// real and no waiter sees the clock move while it runs.
type virtualTimers struct {
	clock  *floodgate.ManualClock
	mu     sync.Mutex
	idle   sync.Cond
	timers []virtualTimer
	awake  int // waiters neither asleep nor done
}

type virtualTimer struct {
	at time.Time
	ch chan time.Time
}

func newVirtualTimers(clock *floodgate.ManualClock, waiters int) *virtualTimers {
	v := &virtualTimers{clock: clock, awake: waiters}
	v.idle.L = &v.mu
	return v
}

func (v *virtualTimers) after(d time.Duration) <-chan time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	ch := make(chan time.Time, 1)
	v.timers = append(v.timers, virtualTimer{at: v.clock.Now().Add(d), ch: ch})
	v.awake--
	v.idle.Broadcast()
	return ch
}

// done tells run that a waiter has finished.
func (v *virtualTimers) done() {
	v.mu.Lock()
	v.awake--
	v.idle.Broadcast()
	v.mu.Unlock()
}

// run moves the clock until every waiter is done.
func (v *virtualTimers) run() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for {
		for v.awake > 0 {
			v.idle.Wait()
		}
		if len(v.timers) == 0 {
			return
		}
		next := slices.MinFunc(v.timers, func(a, b virtualTimer) int { return a.at.Compare(b.at) }).at
		v.clock.Set(next)
		v.timers = slices.DeleteFunc(v.timers, func(t virtualTimer) bool {
			if t.at.After(next) {
				return false
			}
			t.ch <- next
			v.awake++
			return true
		})
	}
}

// However many callers wait on one key, and whenever they arrive, what Wait
// lets through keeps the limit's guarantee (checkBound: the same check as
// the decisions' own), and every caller whose cost can pass gets through.
func TestWaitKeepsTheLimitUnderConcurrentWaiters(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		alg := rapid.SampledFrom(floodgate.Algorithms()).Draw(t, "algorithm")
		limit := genLimit(t, alg)
		n := rapid.IntRange(1, 16).Draw(t, "waiters")
		clock := floodgate.NewManualClock(epoch)
		mem := floodgate.NewMemory(floodgate.WithClock(clock))
		v := newVirtualTimers(clock, n)
		wait := floodgate.WaitOn(clock, v.after)
		// The admissions, in the order the Memory made them.
		var mu sync.Mutex
		var adm []admitted
		recording := limiterFunc(func(ctx context.Context, key string, l floodgate.Limit, cost int64) (floodgate.Decision, error) {
			mu.Lock()
			defer mu.Unlock()
			d, err := mem.AllowN(ctx, key, l, cost)
			if err == nil && d.Allowed {
				adm = append(adm, admitted{at: clock.Now().UnixMicro(), cost: cost, delay: us(d.Delay)})
			}
			return d, err
		})
		type result struct {
			d    floodgate.Decision
			err  error
			cost int64
		}
		results := make([]result, n)
		var wg sync.WaitGroup
		for i := range results {
			arrive := time.Duration(rapid.Int64Range(0, 2*periodMicros(limit)).Draw(t, "arrival")) * time.Microsecond
			cost := rapid.Int64Range(1, capacity(limit)).Draw(t, "cost")
			wg.Go(func() {
				defer v.done()
				<-v.after(arrive)
				d, err := wait(context.Background(), recording, "k", limit, cost)
				results[i] = result{d: d, err: err, cost: cost}
			})
		}
		v.run()
		wg.Wait()
		for _, r := range results {
			if r.err != nil || !r.d.Allowed {
				t.Fatalf("a waiter of cost %d under %v: %+v, %v", r.cost, limit, r.d, r.err)
			}
		}
		checkBound(t, limit, adm)
	})
}

// Wait on a request that passes at once costs one AllowN and allocates
// nothing.
func BenchmarkWaitAdmitted(b *testing.B) {
	m := floodgate.NewMemory()
	limit := floodgate.PerSecond(1 << 40).WithBurst(1 << 40)
	limit.Period = 1 << 40 * time.Microsecond // 1 unit per µs, a burst of 2^40
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := floodgate.Wait(ctx, m, "k", limit, 1); err != nil {
			b.Fatal(err)
		}
	}
}
