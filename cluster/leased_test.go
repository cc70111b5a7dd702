package cluster

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
)

// leasedPattern gives node i's unit requests in step st of a run of steps.
type leasedPattern struct {
	name string
	// share returns node i's fraction of the total load at step st.
	share func(st, steps, i, nodes int) float64
}

var leasedPatterns = []leasedPattern{
	{"uniform", func(_, _, _, nodes int) float64 { return 1 / float64(nodes) }},
	{"skewed: node 0 gets 80%", leasedSkewedShare(0)},
	{"demand shift: 80% moves from node 0 to the last node halfway", func(st, steps, i, nodes int) float64 {
		if st < steps/2 {
			return leasedSkewedShare(0)(st, steps, i, nodes)
		}
		return leasedSkewedShare(nodes-1)(st, steps, i, nodes)
	}},
}

func leasedSkewedShare(hot int) func(st, steps, i, nodes int) float64 {
	return func(_, _, i, nodes int) float64 {
		if i == hot {
			return 0.8
		}
		return 0.2 / float64(nodes-1)
	}
}

// leasedSpread turns a rate of units per step (a fraction allowed) into
// whole requests, spread evenly over the steps.
func leasedSpread(rate float64, st int) int64 {
	return int64(math.Floor(float64(st+1)*rate) - math.Floor(float64(st)*rate))
}

// TestLeasedBoundsAcrossNodesAndIntervals is the strategy's contract in
// numbers: over a table of N, T, arrival patterns and loads, with node
// clocks skewed by whole seconds, every window of the coordinator's clock
// admits at most R (overshoot 0), and the units of min(R, offered) denied
// stay within the stated undershoot bound Σᵢ λᵢ·B·rᵢ,w: each denial falls
// within an EarlyRenewal B after one of the node's renewals.
func TestLeasedBoundsAcrossNodesAndIntervals(t *testing.T) {
	const (
		rate   = 1000
		period = time.Second
		step   = 10 * time.Millisecond
		steps  = 600 // six windows
	)
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: period}
	for _, nodes := range []int{2, 4, 8} {
		for _, interval := range []time.Duration{period / 4, period / 10} {
			for _, p := range leasedPatterns {
				for _, load := range []float64{0.8, 2} {
					name := fmt.Sprintf("N=%d/T=%s/%s/load=%.1fR", nodes, interval, p.name, load)
					t.Run(name, func(t *testing.T) {
						s := leasedNewSim(t, leasedSimConfig{nodes: nodes, limit: limit, interval: interval, step: step, skew: 3 * time.Second})
						perStep := load * rate * float64(step) / float64(period)
						arrivals := func(st, i int) int64 {
							return leasedSpread(perStep*p.share(st, steps, i, nodes), st)
						}
						s.run(steps, arrivals)
						s.checkNoOvershoot(t)
						s.checkUndershoot(t, arrivals, steps)
					})
				}
			}
		}
	}
}

// checkNoOvershoot checks the invariant: at most R admitted per window.
func (s *leasedSim) checkNoOvershoot(t *testing.T) {
	t.Helper()
	for _, w := range s.windows() {
		if s.admitted[w] > s.limit.Rate {
			t.Errorf("window %d admitted %d > R = %d (offered %d)", w, s.admitted[w], s.limit.Rate, s.offered[w])
		}
	}
}

// checkUndershoot checks min(R, offered) − admitted ≤ Σᵢ λᵢ·B·rᵢ,w per
// window, λᵢ·B taken as node i's most requests in the steps one B spans.
func (s *leasedSim) checkUndershoot(t *testing.T, arrivals func(st, i int) int64, steps int) {
	t.Helper()
	early := s.nodes[0].cfg.EarlyRenewal
	span := int(early/s.step) + 1 // a denial can fall in the renewal's own step
	perSpan := make([]int64, len(s.nodes))
	for i := range s.nodes {
		for st := 0; st+span <= steps; st++ {
			var sum int64
			for k := range span {
				sum += arrivals(st+k, i)
			}
			perSpan[i] = max(perSpan[i], sum)
		}
	}
	var worst int64
	for _, w := range s.windows() {
		under := min(s.limit.Rate, s.offered[w]) - s.admitted[w]
		var bound int64
		for i, name := range s.names {
			bound += perSpan[i] * int64(s.probe.renewals(name, w))
		}
		if under > bound {
			t.Errorf("window %d: undershoot %d > bound %d (admitted %d of %d offered)", w, under, bound, s.admitted[w], s.offered[w])
		}
		worst = max(worst, under)
	}
	t.Logf("worst undershoot %d units of R=%d; %d coordinator calls", worst, s.limit.Rate, s.probe.count())
}

// TestLeasedNeverOvershootsOnRandomSchedules: whatever the nodes, limit,
// interval, clock skews, arrivals, costs and Sync rounds, and whatever
// requests run while a renewal is in flight, no window of the
// coordinator's clock admits more than R, and the leases outstanding never
// add up to more than R.
func TestLeasedNeverOvershootsOnRandomSchedules(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nodes := rapid.IntRange(1, 5).Draw(rt, "nodes")
		rate := rapid.Int64Range(1, 200).Draw(rt, "rate")
		period := time.Duration(rapid.IntRange(1, 20).Draw(rt, "period_ms")) * 50 * time.Millisecond
		interval := period / time.Duration(rapid.IntRange(1, 12).Draw(rt, "windows_per_interval_inverse"))
		limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: period}
		clock := floodgate.NewManualClock(leasedEpoch.Add(time.Duration(rapid.Int64Range(0, int64(period)).Draw(rt, "start"))))
		mem := leaseNewMemory(clock)
		probe := leasedNewProbe(mem, clock, period)
		var ls []*Leased
		for i := range nodes {
			skew := time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, "skew"))
			l, err := NewLeased(LeasedConfig{
				Coordinator: probe, Members: StaticMembers{Name: fmt.Sprintf("n%d", i), Nodes: nodes},
				Clock: leasedSkewedClock{base: clock, skew: skew}, Interval: interval,
				Timeout:         time.Duration(rapid.IntRange(1, 2000).Draw(rt, "timeout_ms")) * time.Millisecond,
				WaitForRenewals: true,
			})
			if err != nil {
				rt.Fatal(err)
			}
			ls = append(ls, l)
		}
		admitted := map[int64]int64{}
		ctx := context.Background()
		var failure error // set on Sync's goroutines too, where rt.Fatal may not run
		request := func(i int, cost int64) {
			d, err := ls[i].AllowN(ctx, "k", limit, cost)
			if err != nil {
				failure = fmt.Errorf("node %d AllowN: %w", i, err)
				return
			}
			if d.Allowed {
				admitted[leasedWindowOf(clock.Now(), period)] += cost
			}
		}
		// The requests that run while the next renewal is in flight are drawn
		// before each event: Sync renews on goroutines of its own.
		type leasedPlanned struct {
			node int
			cost int64
		}
		var inFlight []leasedPlanned
		probe.during = func(LeaseRequest) {
			planned := inFlight
			inFlight = nil // one level of interleaving is enough, and ends
			for _, p := range planned {
				request(p.node, p.cost)
			}
		}
		cost := rapid.Int64Range(1, 3)
		for range rapid.IntRange(1, 150).Draw(rt, "events") {
			inFlight = nil
			for range rapid.IntRange(0, 4).Draw(rt, "requests_in_flight") {
				inFlight = append(inFlight, leasedPlanned{rapid.IntRange(0, nodes-1).Draw(rt, "node_in_flight"), cost.Draw(rt, "cost")})
			}
			switch rapid.IntRange(0, 9).Draw(rt, "event") {
			case 0:
				_ = ls[rapid.IntRange(0, nodes-1).Draw(rt, "sync_node")].Sync(ctx)
			case 1:
				clock.Advance(time.Duration(rapid.Int64Range(0, int64(period)).Draw(rt, "advance")))
			case 2:
				_ = ls[rapid.IntRange(0, nodes-1).Draw(rt, "release_node")].Release(ctx)
			default:
				request(rapid.IntRange(0, nodes-1).Draw(rt, "node"), cost.Draw(rt, "cost"))
				clock.Advance(time.Duration(rapid.Int64Range(0, int64(period/10)).Draw(rt, "tick")))
			}
			if failure != nil {
				rt.Fatal(failure)
			}
			if leased := mem.Leased("k"); leased > rate {
				rt.Fatalf("leases outstanding %d > R = %d", leased, rate)
			}
		}
		for w, n := range admitted {
			if n > rate {
				rt.Fatalf("window %d admitted %d > R = %d", w, n, rate)
			}
		}
	})
}
