package insight_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/insight"
)

// samplingBound is the package doc's sampling error for a key of x true
// units: with probability 1 − δ, its weighted sample is within
// √(2·N·c·x·ln(2/δ)) + (2/3)·N·c·ln(2/δ) of x (Bernstein), where N is the
// largest sampling period and c the largest cost. δ = 10⁻³.
func samplingBound(x, n, c int64) float64 {
	l := math.Log(2 / 1e-3)
	return math.Sqrt(2*float64(n*c*x)*l) + 2.0/3*float64(n*c)*l
}

// Under a Sampler that times one decision in N, the top consumers are
// built from the timed decisions, each weighing N: on Zipf traffic the
// true top 10 are still listed, and every listed count is within the
// Space-Saving error and the sampling bound of the true units.
func TestTopUnderSamplingOnZipfTraffic(t *testing.T) {
	for _, tc := range []struct {
		skew    float64
		keys    uint64
		maxCost int64
	}{
		{skew: 1.1, keys: 20_000, maxCost: 1},
		{skew: 1.5, keys: 20_000, maxCost: 5},
	} {
		t.Run(fmt.Sprintf("s=%v,keys=%d,cost≤%d", tc.skew, tc.keys, tc.maxCost), func(t *testing.T) {
			const perSecond, seconds, fullRate = 10_000, 30, 500 // N ≈ 20
			clock := floodgate.NewManualClock(start)
			in, err := insight.New(insight.Options{Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(19, uint64(tc.skew*100)))
			s, err := observe.NewSampler(observe.SamplerOptions{FullRate: fullRate, Clock: clock, Rand: r.Uint64N})
			if err != nil {
				t.Fatal(err)
			}
			var maxWeight int64
			weights := observe.Func(func(_ context.Context, e observe.Event) { maxWeight = max(maxWeight, e.Weight) })
			o := observe.Sample(observe.Multi(in, weights), s)
			z := rand.NewZipf(r, tc.skew, 1, tc.keys-1)
			exact := map[string]int64{}
			ds := []floodgate.Decision{{Allowed: true, Limit: 1 << 30, Remaining: 1 << 29}}
			name := func(int) string { return "per-user" }
			for range perSecond * seconds {
				key, cost := fmt.Sprint("user-", z.Uint64()), 1+r.Int64N(tc.maxCost)
				exact[key] += cost
				_, rep := observe.Start(context.Background(), o, observe.Decided{Policy: "api",
					Requests: []floodgate.Request{{Key: key, Cost: cost}}})
				rep.Decided()
				rep.Report(ds, nil, name)
				clock.Advance(time.Second / perSecond)
			}
			if maxWeight < 10 {
				t.Fatalf("largest weight %d: the Sampler did not sample (want N ≈ %d)", maxWeight, perSecond/fullRate)
			}
			list, err := in.Top("api", insight.ByAdmitted, 10)
			if err != nil {
				t.Fatal(err)
			}
			truth := slices.SortedFunc(func(yield func(string) bool) {
				for k := range exact {
					if !yield(k) {
						return
					}
				}
			}, func(a, b string) int { return cmp.Compare(exact[b], exact[a]) })
			tenth := exact[truth[9]]
			hits := 0
			for _, e := range list.Entries {
				x := exact[e.Key]
				if x >= tenth {
					hits++
				}
				b := samplingBound(x, maxWeight, tc.maxCost)
				if float64(x) < float64(e.Count-e.Error)-b || float64(x) > float64(e.Count)+b {
					t.Errorf("key %q: count %d, error %d, but its true %d units are not within [count−error, count] ± %.0f",
						e.Key, e.Count, e.Error, x, b)
				}
			}
			if recall := float64(hits) / 10; recall < 0.9 {
				t.Errorf("top-10 recall %.1f, want ≥ 0.9: listed %v, true top 10 %v", recall, list.Entries, truth[:10])
			}
			t.Logf("N up to %d, %d true units over %d keys, listed total %d, max error %d", maxWeight, sum(exact), len(exact), list.Total, list.MaxError)
		})
	}
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// On the system clock, untimed events are counted without the lock: each
// is in its policy's totals all the same.
func TestUntimedEventsAreCounted(t *testing.T) {
	in, err := insight.New(insight.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 1000 {
		e := observe.Event{Policy: "api", Limit: "per-user", Key: fmt.Sprint("user-", i%7), Cost: 1,
			Outcome: observe.Allowed, Untimed: i%10 != 0, Time: now,
			Decision: floodgate.Decision{Allowed: true, Limit: 100, Remaining: 90}}
		if i%4 == 0 {
			e.Outcome = observe.Denied
		}
		if !e.Untimed {
			e.Weight = 10
		}
		in.Observe(context.Background(), e)
	}
	stats := in.Stats()
	if len(stats.Policies) != 1 {
		t.Fatalf("stats %+v, want one policy", stats)
	}
	if got := stats.Policies[0].Totals; got["allowed"] != 750 || got["denied"] != 250 {
		t.Errorf("totals %v, want 750 allowed and 250 denied", got)
	}
}
