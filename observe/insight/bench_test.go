package insight_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/insight"
)

// events is a set of decisions over a few policies and tracked keys, some
// near their limit.
func events(policies, keys int) []observe.Event {
	var out []observe.Event
	outcomes := []observe.Outcome{observe.Allowed, observe.Allowed, observe.Allowed, observe.Denied}
	for p := range policies {
		for k := range keys {
			out = append(out, observe.Event{Policy: fmt.Sprint("policy-", p), Limit: "per-user", Key: fmt.Sprint("user-", k),
				Outcome: outcomes[k%len(outcomes)], Cost: 1,
				Decision: floodgate.Decision{Limit: 100, Remaining: int64(k % 30), ResetAfter: time.Hour}})
		}
	}
	return out
}

func TestObserveAllocatesNothingForTrackedKeys(t *testing.T) {
	f := newFixture(t, insight.Options{})
	evs := events(3, 50) // fewer keys than counters: every key tracked
	ctx := context.Background()
	for _, e := range evs {
		f.in.Observe(ctx, e)
	}
	i := 0
	allocs := testing.AllocsPerRun(10_000, func() {
		f.in.Observe(ctx, evs[i%len(evs)])
		i++
		if i%1000 == 0 {
			f.clock.Advance(time.Second) // seconds and sub-intervals close too
		}
	})
	if allocs != 0 {
		t.Fatalf("Observe allocates %v times per decision, want 0", allocs)
	}
}

// BenchmarkObserve is one goroutine deciding for tracked keys.
func BenchmarkObserve(b *testing.B) {
	in, _ := insight.New(insight.Options{})
	evs := events(4, 100)
	ctx := context.Background()
	for _, e := range evs {
		in.Observe(ctx, e)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		in.Observe(ctx, evs[i%len(evs)])
		i++
	}
}

// BenchmarkObserveParallel is every CPU deciding at once, over 1 policy
// (all contend on its lock) or 16.
func BenchmarkObserveParallel(b *testing.B) {
	for _, policies := range []int{1, 16} {
		b.Run(fmt.Sprint("policies=", policies), func(b *testing.B) {
			in, _ := insight.New(insight.Options{})
			evs := events(policies, 100)
			ctx := context.Background()
			for _, e := range evs {
				in.Observe(ctx, e)
			}
			var seed atomic.Uint64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				r := rand.New(rand.NewPCG(seed.Add(1), 0))
				for pb.Next() {
					in.Observe(ctx, evs[r.IntN(len(evs))])
				}
			})
		})
	}
}

// BenchmarkObserveZipf is one policy under Zipf traffic over a million
// keys: most are new to their sub-interval's summary and replace its
// smallest counter.
func BenchmarkObserveZipf(b *testing.B) {
	in, _ := insight.New(insight.Options{})
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.1, 1, 1_000_000)
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = fmt.Sprint("user-", z.Uint64())
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		in.Observe(ctx, observe.Event{Policy: "api", Limit: "per-user", Key: keys[i%len(keys)], Outcome: observe.Allowed, Cost: 1,
			Decision: floodgate.Decision{Limit: 100, Remaining: 50, ResetAfter: time.Second}})
		i++
	}
}

// BenchmarkObserveStamped is BenchmarkObserve with events that carry
// their Time, as the surfaces' do: Insight, on the system clock, reads no
// clock of its own. Time moves 1µs per event, so seconds close too.
func BenchmarkObserveStamped(b *testing.B) {
	in, _ := insight.New(insight.Options{})
	evs := events(4, 100)
	ctx := context.Background()
	at := time.Now()
	for _, e := range evs {
		e.Time = at
		in.Observe(ctx, e)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e := evs[i%len(evs)]
		e.Time = at.Add(time.Duration(i) * time.Microsecond)
		in.Observe(ctx, e)
		i++
	}
}

// BenchmarkObserveUntimed is every CPU reporting untimed decisions, as a
// Sampler's are above its FullRate, stamped and below the near-limit
// ratio: the path that takes no lock.
func BenchmarkObserveUntimed(b *testing.B) {
	in, _ := insight.New(insight.Options{})
	evs := events(1, 100)
	ctx := context.Background()
	at := time.Now()
	for i := range evs {
		evs[i].Time, evs[i].Decision.Remaining = at, 90
		in.Observe(ctx, evs[i]) // timed: the cost is known
		evs[i].Untimed = true
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			in.Observe(ctx, evs[i%len(evs)])
			i++
		}
	})
}
