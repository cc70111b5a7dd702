package sim_test

import (
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/cmd/internal/sim"
	"github.com/floodgate-io/floodgate/cmd/internal/sim/bounds"
)

// poissonRate is a rate λ' such that a Poisson stream of rate λ puts at
// most λ'·x arrivals in a span x, but for a tail of about 4 standard
// deviations: the stated bounds are written in rates, the simulation
// offers Poisson counts.
func poissonRate(lambda float64, x time.Duration) float64 {
	mean := lambda * x.Seconds()
	if mean == 0 {
		return lambda
	}
	return (mean + 4*math.Sqrt(mean) + 4) / x.Seconds()
}

// boundFor is the strategy's stated overshoot for c (uniform workload),
// from package bounds, with λ raised by poissonRate over the span the
// strategy is blind for.
func boundFor(t *testing.T, strategy string, c sim.Config) float64 {
	t.Helper()
	lambda := c.Load * float64(c.Limit.Rate) / c.Limit.Period.Seconds() / float64(c.Nodes)
	oneWay := c.Delay/2 + c.Jitter
	roundTrip := c.Delay + 2*c.Jitter
	p := bounds.Params{Nodes: c.Nodes, Interval: c.Interval, Limit: c.Limit, OneIn: c.OneIn, Delay: roundTrip}
	switch strategy {
	case "synced":
		p.ArrivalRate = poissonRate(lambda, 2*c.Interval+roundTrip)
	case "sampled":
		p.ArrivalRate = poissonRate(lambda, roundTrip)
	case "gossip":
		p.Delay, p.ArrivalRate = oneWay, poissonRate(lambda, oneWay)
	default:
		p.ArrivalRate = lambda
	}
	b, err := bounds.Overshoot(strategy, p)
	if err != nil {
		t.Fatalf("bounds.Overshoot(%s): %v", strategy, err)
	}
	return b + boundaryTerm(strategy, c, lambda)
}

// boundaryTerm is bounds.BoundaryOvershoot with ε = Jitter/2 (half the
// spread of the one-way delays: the error of a node's reading of the
// store's clock) and λ raised by poissonRate over ε, the span it covers,
// rather than over the staleness span ArrivalRate was raised for above.
func boundaryTerm(strategy string, c sim.Config, lambda float64) float64 {
	eps := c.Jitter / 2
	return bounds.BoundaryOvershoot(strategy, bounds.Params{Nodes: c.Nodes, ArrivalRate: poissonRate(lambda, eps), Asymmetry: eps})
}

// sweep is the grid of the bound test: short by default, wider with
// SIM_SWEEP=1.
func sweep() (nodes []int, intervals []time.Duration, loads []float64) {
	if os.Getenv("SIM_SWEEP") != "" {
		return []int{1, 2, 3, 5, 8, 13, 20}, []time.Duration{
			2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
			50 * time.Millisecond, 100 * time.Millisecond}, []float64{0.5, 1, 2, 5}
	}
	return []int{2, 5, 10}, []time.Duration{5 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond}, []float64{2}
}

// TestStatedOvershootHolds runs every strategy over a grid of N, T and load
// and checks the worst window against the bound its constructor states
// (computed by package bounds). sampled runs with p = 1, where its bound is
// deterministic; TestSampledBoundHoldsMostWindows covers p < 1.
func TestStatedOvershootHolds(t *testing.T) {
	nodes, intervals, loads := sweep()
	for _, strategy := range sim.Strategies {
		for _, n := range nodes {
			for _, interval := range intervals {
				for _, load := range loads {
					name := fmt.Sprintf("%s/N=%d/T=%s/load=%v", strategy, n, interval, load)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						c := small(strategy, "uniform")
						c.Nodes, c.Interval, c.Load, c.OneIn = n, interval, load, 1
						r := run(t, c)
						if bound := boundFor(t, strategy, c); float64(r.OvershootMax) > bound {
							t.Errorf("overshoot %d in the worst window, above the stated bound %.1f", r.OvershootMax, bound)
						}
					})
				}
			}
		}
	}
}

// TestSampledBoundHoldsMostWindows: with p < 1 sampled's bound holds per
// window with probability at least SampledConfidence, so over many
// windows the share above it stays within the complement (with room for
// the count's own noise).
func TestSampledBoundHoldsMostWindows(t *testing.T) {
	for _, oneIn := range []int64{4, 10} {
		t.Run(fmt.Sprintf("1/p=%d", oneIn), func(t *testing.T) {
			c := small("sampled", "uniform")
			c.OneIn, c.Duration = oneIn, 5*time.Second
			r := run(t, c)
			bound := boundFor(t, "sampled", c)
			lambda := c.Load * float64(c.Limit.Rate) / c.Limit.Period.Seconds() / float64(c.Nodes)
			confidence, err := bounds.SampledConfidence(bounds.Params{Nodes: c.Nodes, Limit: c.Limit,
				OneIn: oneIn, ArrivalRate: lambda, Delay: c.Delay})
			if err != nil {
				t.Fatal(err)
			}
			over := 0
			for _, w := range r.Windows {
				if float64(w.Overshoot) > bound {
					over++
				}
			}
			if share := float64(over) / float64(len(r.Windows)); share > (1-confidence)+0.1 {
				t.Errorf("%d of %d windows above the bound %.1f: more than the 1 − %.2f the bound allows",
					over, len(r.Windows), bound, confidence)
			}
		})
	}
}

// TestWhatTheBoundsDoNotPromise: the sweep above could pass with a
// simulator that never overshoots. Here the strategies that trade
// accuracy for traffic do overshoot, and leased, whose overshoot is 0,
// does not, even when every window is contended.
func TestWhatTheBoundsDoNotPromise(t *testing.T) {
	tests := []struct {
		strategy  string
		overshoot bool
	}{
		{"exact", false}, {"local", false}, {"leased", false},
		{"synced", true}, {"sampled", true}, {"gossip", true},
	}
	for _, tt := range tests {
		t.Run(tt.strategy, func(t *testing.T) {
			c := small(tt.strategy, "uniform")
			c.Interval, c.Delay, c.Load = 50*time.Millisecond, 10*time.Millisecond, 4
			r := run(t, c)
			if got := r.OvershootMax > 0; got != tt.overshoot {
				t.Errorf("overshoot %d (want some: %v); result %+v", r.OvershootMax, tt.overshoot, r.Windows[:3])
			}
		})
	}
}

// TestLossyStoreStaysWithinOutageBound: with a fifth of the messages lost,
// leased, synced and sampled fall back to deciding alone now and then; their
// overshoot must stay within what their docs state for a store that does
// not answer at all (package bounds' OutageOvershoot).
func TestLossyStoreStaysWithinOutageBound(t *testing.T) {
	for _, strategy := range []string{"leased", "synced", "sampled"} {
		for _, n := range []int{2, 5, 10} {
			t.Run(fmt.Sprintf("%s/N=%d", strategy, n), func(t *testing.T) {
				t.Parallel()
				c := small(strategy, "uniform")
				c.Nodes, c.Loss, c.OneIn = n, 0.2, sim.DefaultOneIn
				r := run(t, c)
				bound, err := bounds.OutageOvershoot(strategy, bounds.Params{Nodes: n, Interval: c.Interval,
					Limit: c.Limit, Delay: c.Delay, OneIn: c.OneIn})
				if err != nil {
					t.Fatal(err)
				}
				if float64(r.OvershootMax) > bound {
					t.Errorf("overshoot %d with 20%% loss, above the outage bound %.1f", r.OvershootMax, bound)
				}
			})
		}
	}
}
