package bounds

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
)

// drawParams draws a valid fleet for every strategy: a fixed window, T no
// shorter than a millisecond, sampled's p, leased's drift.
func drawParams(t *rapid.T) Params {
	return Params{
		Nodes:       rapid.IntRange(1, 200).Draw(t, "nodes"),
		Interval:    time.Duration(rapid.Int64Range(1, 10_000).Draw(t, "T_ms")) * time.Millisecond,
		Limit:       floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rapid.Int64Range(1, 1_000_000).Draw(t, "rate"), Period: time.Second},
		ArrivalRate: rapid.Float64Range(0, 1e6).Draw(t, "lambda"),
		Delay:       time.Duration(rapid.Int64Range(0, 1_000_000).Draw(t, "D_us")) * time.Microsecond,
		OneIn:       rapid.Int64Range(1, 1000).Draw(t, "oneIn"),
		Drift:       rapid.Float64Range(0, 0.1).Draw(t, "drift"),
	}
}

// TestOvershootGrowsWithTNAndDelay: waiting longer, adding nodes or
// slowing the network never makes a worst case smaller. (synced's T grows
// from D on: below it rounds come every T·⌈D/T⌉, which is not monotone.)
func TestOvershootGrowsWithTNAndDelay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.SampledFrom(Strategies()).Draw(t, "strategy")
		p := drawParams(t)
		if s == Synced {
			p.Interval = max(p.Interval, p.Delay)
		}
		grow := []struct {
			what string
			more func(Params) Params
		}{
			{"T", func(q Params) Params { q.Interval += time.Millisecond; return q }},
			{"N", func(q Params) Params { q.Nodes++; return q }},
			{"delay", func(q Params) Params { q.Delay += time.Millisecond; return q }},
		}
		before, err := Overshoot(s, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range grow {
			after, err := Overshoot(s, g.more(p))
			if err != nil {
				t.Fatal(err)
			}
			if after < before {
				t.Fatalf("%s: overshoot fell from %v to %v as %s grew", s, before, after, g.what)
			}
		}
	})
}

// TestLongestIntervalIsTheLastFit: the T found meets the tolerance and one
// step more does not; "any" fits at the longest T searched, "none" not even
// at the shortest.
func TestLongestIntervalIsTheLastFit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.SampledFrom(Strategies()).Draw(t, "strategy")
		p := drawParams(t)
		tol := rapid.Float64Range(0, 2).Draw(t, "tolerance")
		target := tol * float64(p.Limit.Rate)
		at := func(d time.Duration) float64 {
			q := p
			q.Interval = d
			o, err := Overshoot(s, q)
			if err != nil {
				t.Fatal(err)
			}
			return o
		}
		a, err := SearchInterval(s, p, tol)
		if err != nil {
			t.Fatal(err)
		}
		switch a.Verdict {
		case Bounded:
			if at(a.Interval) > target || at(a.Interval+Resolution) <= target {
				t.Fatalf("T = %s: %v, T+ε: %v, target %v", a.Interval, at(a.Interval), at(a.Interval+Resolution), target)
			}
		case AnyInterval:
			if at(MaxInterval) > target {
				t.Fatalf("any T, yet %v > %v at %s", at(MaxInterval), target, MaxInterval)
			}
		case NoInterval:
			if at(Resolution) <= target {
				t.Fatalf("no T, yet %v ≤ %v at %s", at(Resolution), target, Resolution)
			}
		}
	})
}

// TestLargestOneInIsTheLastFit is the same for sampled's p.
func TestLargestOneInIsTheLastFit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := drawParams(t)
		tol := rapid.Float64Range(0, 2).Draw(t, "tolerance")
		at := func(k int64) float64 {
			q := p
			q.OneIn = k
			o, err := Overshoot(Sampled, q)
			if err != nil {
				t.Fatal(err)
			}
			return o
		}
		k, ok, err := LargestOneIn(p, tol)
		if err != nil {
			t.Fatal(err)
		}
		target := tol * float64(p.Limit.Rate)
		switch {
		case !ok && at(1) <= target:
			t.Fatalf("no fit, yet OneIn 1 gives %v ≤ %v", at(1), target)
		case ok && at(k) > target:
			t.Fatalf("OneIn %d gives %v > %v", k, at(k), target)
		case ok && k < maxOneIn && at(k+1) <= target:
			t.Fatalf("OneIn %d fits, and so does %d", k, k+1)
		}
	})
}

// TestUndershootWithinTheLimit: a window cannot deny more than R of what
// it should have admitted.
func TestUndershootWithinTheLimit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.SampledFrom(Strategies()).Draw(t, "strategy")
		p := drawParams(t)
		u, err := Undershoot(s, p)
		if err != nil {
			t.Fatal(err)
		}
		if u < 0 || u > float64(p.Limit.Rate) {
			t.Fatalf("%s undershoot %v outside [0, %d]", s, u, p.Limit.Rate)
		}
	})
}
