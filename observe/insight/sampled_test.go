package insight_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/insight"
)

// Under a Sampler that times one decision in N, the top consumers are
// built from the timed decisions, each weighing N: on Zipf traffic the
// true top 10 are still listed, every listed count is within its stated
// errors (the Space-Saving error and the sampling bound) of the true
// units, and the total is exact.
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
				if x < e.Count-e.Error || x > e.Count+e.ErrorAbove {
					t.Errorf("key %q: count %d, error %d, above %d, but its true %d units are not within [count−error, count+error_above]",
						e.Key, e.Count, e.Error, e.ErrorAbove, x)
				}
			}
			if list.Total != sum(exact) || list.SamplingPeriod != maxWeight {
				t.Errorf("total %d, sampling period %d; want the exact %d and the largest weight %d", list.Total, list.SamplingPeriod, sum(exact), maxWeight)
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

// Under sampling, each top list's Total is the exact units of every
// decision, timed or not, and every listed key's true units lie within
// its stated errors, [count − error, count + error_above]: on Insight's
// own clock (every event under the lock) and on the system clock (untimed
// events counted without it), with sampling periods that change over the
// stream as a Sampler's do, and costs of 1 or up to 8.
func TestSampledTopListsStateExactTotalsAndTheirErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		system  bool    // Insight on the system clock, events stamped
		periods []int64 // the sampling period of each successive quarter
		maxCost int64
	}{
		{"unsampled", false, []int64{1}, 1},
		{"unsampled,system", true, []int64{1}, 3},
		{"N=3", false, []int64{3}, 1},
		{"N=3,system", true, []int64{3}, 1},
		{"N=1..20,cost≤8", false, []int64{1, 20, 7, 2}, 8},
		{"N=1..20,cost≤8,system", true, []int64{2, 20, 1, 7}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const decisions, perSecond, limit = 120_000, 20_000, 600
			opts := insight.Options{Window: time.Hour} // a run on the system clock stays in it
			base := start
			var clock *floodgate.ManualClock
			if tc.system {
				base = time.Now().Add(-10 * time.Second)
			} else {
				clock = floodgate.NewManualClock(start)
				opts.Clock = clock
			}
			in, err := insight.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(7, uint64(len(tc.name))))
			z := rand.NewZipf(r, 1.1, 1, 20_000-1)
			exact := map[insight.By]map[string]int64{insight.ByAdmitted: {}, insight.ByDenied: {}}
			for i := range decisions {
				n := tc.periods[i*len(tc.periods)/decisions]
				key, cost := fmt.Sprint("user-", z.Uint64()), 1+r.Int64N(tc.maxCost)
				e := observe.Event{Policy: "api", Limit: "per-user", Key: key, Cost: cost, Outcome: observe.Allowed,
					Decision: floodgate.Decision{Allowed: true, Limit: 1 << 30, Remaining: 1 << 29}}
				by := insight.ByAdmitted
				if exact[insight.ByAdmitted][key] >= limit {
					e.Outcome, e.Decision.Allowed, by = observe.Denied, false, insight.ByDenied
				}
				exact[by][key] += cost
				if r.Int64N(n) == 0 {
					e.Weight = n
				} else {
					e.Untimed = true
				}
				at := base.Add(time.Duration(i) * time.Second / perSecond)
				if tc.system {
					e.Time = at
				} else {
					clock.Set(at)
				}
				in.Observe(context.Background(), e)
			}
			period := slices.Max(tc.periods)
			for by, truth := range exact {
				l, err := in.Top("api", by, 10)
				if err != nil {
					t.Fatal(err)
				}
				if want := sum(truth); l.Total != want {
					t.Errorf("by %s: total %d, want the exact %d (sampled %d)", by, l.Total, want, l.Sampled)
				}
				if l.SamplingPeriod != period {
					t.Errorf("by %s: sampling period %d, want %d", by, l.SamplingPeriod, period)
				}
				if len(l.Entries) != 10 {
					t.Fatalf("by %s: %d entries, want 10", by, len(l.Entries))
				}
				for _, e := range l.Entries {
					x := truth[e.Key]
					if x < e.Count-e.Error || x > e.Count+e.ErrorAbove {
						t.Errorf("by %s: key %q counted %d (error %d, above %d), but its true units are %d",
							by, e.Key, e.Count, e.Error, e.ErrorAbove, x)
					}
					if period == 1 && e.ErrorAbove != 0 {
						t.Errorf("by %s: key %q has error_above %d unsampled, want 0", by, e.Key, e.ErrorAbove)
					}
				}
				t.Logf("by %s: total %d, sampled %d, N %d, max error %d, first %+v", by, l.Total, l.Sampled, l.SamplingPeriod, l.MaxError, l.Entries[0])
			}
		})
	}
}
