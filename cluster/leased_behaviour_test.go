package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

var leasedTestLimit = floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1000, Period: time.Second}

// TestLeasedWaterFillingMovesIdleShareWithin2T: when all the demand moves
// from one node to another in the middle of a window, the node that turns
// busy is served in full within 2T: the idle node's next renewal gives its
// lease back, the busy node's next one takes it.
func TestLeasedWaterFillingMovesIdleShareWithin2T(t *testing.T) {
	for _, interval := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		t.Run(fmt.Sprintf("T=%s", interval), func(t *testing.T) {
			const step, shift = 10 * time.Millisecond, 140 // the shift is at 1.4s, mid-window
			s := leasedNewSim(t, leasedSimConfig{nodes: 2, limit: leasedTestLimit, interval: interval, step: step})
			s.run(300, func(st, i int) int64 {
				if (st < shift) == (i == 0) {
					return 5 // 500/s: half the budget, so every denial is undershoot
				}
				return 0
			})
			shiftAt := leasedEpoch.Add(shift * step)
			for _, at := range s.deniedAt[1] {
				if !at.Before(shiftAt.Add(2 * interval)) {
					t.Errorf("node 1 denied at %s, more than 2T after the shift at %s", at.Sub(leasedEpoch), shiftAt.Sub(leasedEpoch))
				}
			}
			if n := len(s.deniedAt[0]); n != 0 {
				t.Errorf("node 0 denied %d requests while it had all the demand", n)
			}
			s.checkNoOvershoot(t)
		})
	}
}

// TestLeasedUnusedQuotaReturns: quota a node holds but does not use goes
// back to the shared budget when the node stops needing it (its next Sync
// after an idle Interval), when it closes, and, for a node that vanished
// without a word, when the window ends.
func TestLeasedUnusedQuotaReturns(t *testing.T) {
	ctx := context.Background()
	lim := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 100, Period: time.Second}
	const interval = 100 * time.Millisecond
	setup := func(t *testing.T) (*floodgate.ManualClock, leaseMemory, *Leased, *Leased) {
		clock := floodgate.NewManualClock(leasedEpoch)
		mem := leaseNewMemory(clock)
		node := func(name string) *Leased {
			l, err := NewLeased(LeasedConfig{Coordinator: mem, Members: StaticMembers{Name: name, Nodes: 2}, Clock: clock, Interval: interval, WaitForRenewals: true})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		a, b := node("a"), node("b")
		t.Cleanup(b.Close)
		// a takes a lease by admitting 10 units, then falls silent.
		for range 10 {
			if d, err := a.AllowN(ctx, "k", lim, 1); err != nil || !d.Allowed {
				t.Fatalf("a's request: %+v, %v", d, err)
			}
		}
		if mem.Leased("k") <= 10 {
			t.Fatalf("a's lease holds %d units, want more than the 10 it used", mem.Leased("k"))
		}
		return clock, mem, a, b
	}
	drain := func(l *Leased) (admitted int64) {
		for range lim.Rate {
			if d, err := l.AllowN(ctx, "k", lim, 1); err == nil && d.Allowed {
				admitted++
			}
		}
		return admitted
	}
	cases := []struct {
		name   string
		giveUp func(clock *floodgate.ManualClock, a *Leased)
		wantB  int64 // what b admits afterwards in the same window, at most R minus a's 10
	}{
		{"idle: the Sync after an interval without requests", func(clock *floodgate.ManualClock, a *Leased) {
			for range 2 { // the first Sync still reports the last requests
				clock.Advance(interval)
				if err := a.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if keys, _ := a.snapshot(); len(keys) != 0 {
				t.Error("a still holds the idle key after two idle intervals")
			}
		}, 90},
		{"Close", func(_ *floodgate.ManualClock, a *Leased) { a.Close() }, 90},
		{"vanished: back only in the next window", func(clock *floodgate.ManualClock, _ *Leased) {
			clock.Advance(lim.Period)
		}, 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock, mem, a, b := setup(t)
			c.giveUp(clock, a)
			// b needs a few renewals (one per EarlyRenewal) to collect it all.
			var got int64
			for range 8 {
				got += drain(b)
				clock.Advance(interval / 4)
			}
			if got != c.wantB {
				t.Errorf("b admitted %d after a gave up, want %d", got, c.wantB)
			}
			if leased := mem.Leased("k"); leased > lim.Rate {
				t.Errorf("leases outstanding %d > R", leased)
			}
		})
	}
}

// TestLeasedCoordinatorDownFallsBackToSafeCapacity: with the coordinator
// cut off, each node serves its lease until it ends, then at most S per
// window in memory (overshoot ≤ N·S); once the coordinator answers again,
// the next Sync brings the leases back and windows admit at most R again.
func TestLeasedCoordinatorDownFallsBackToSafeCapacity(t *testing.T) {
	const nodes, step = 4, 10 * time.Millisecond
	cases := []struct {
		name     string
		fraction float64
		wantSafe int64 // S per node
	}{
		{"default S = R/N", 0, 250},
		{"SafeFraction 0.1", 0.1, 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := leasedNewSim(t, leasedSimConfig{
				nodes: nodes, limit: leasedTestLimit, interval: 100 * time.Millisecond, step: step,
				tweak: func(lc *LeasedConfig) { lc.SafeFraction = c.fraction },
			})
			perNode := make([]map[int64]int64, nodes)
			heavy := func(st, i int) int64 { return 10 } // 4000/s against R = 1000/s
			s.run(100, heavy)                            // window 0: leases
			s.probe.down.Store(true)
			downFrom := s.clock.Now()
			s.runCounting(300, heavy, perNode) // windows 1-3: cut off
			s.probe.down.Store(false)
			s.runCounting(200, heavy, perNode) // windows 4-5: back
			first := leasedWindowOf(downFrom, leasedTestLimit.Period)
			for _, w := range s.windows() {
				var bound int64
				switch {
				case w < first || w >= first+4: // before, and from the window after recovery
					bound = leasedTestLimit.Rate
				default:
					bound = leasedTestLimit.Rate + nodes*c.wantSafe
				}
				if s.admitted[w] > bound {
					t.Errorf("window %d admitted %d > %d", w, s.admitted[w], bound)
				}
			}
			// Windows 2 and 3 are wholly cut off: each node admits exactly S.
			for _, w := range []int64{first + 1, first + 2} {
				for i := range nodes {
					if got := perNode[i][w]; got != c.wantSafe {
						t.Errorf("window %d node %d admitted %d while cut off, want S = %d", w, i, got, c.wantSafe)
					}
				}
			}
			if got := s.admitted[first+4]; got != leasedTestLimit.Rate {
				t.Errorf("window %d after recovery admitted %d, want R = %d", first+4, got, leasedTestLimit.Rate)
			}
		})
	}
}

// runCounting is run that also counts each node's admissions per window.
func (s *leasedSim) runCounting(steps int, arrivals func(st, i int) int64, perNode []map[int64]int64) {
	s.tb.Helper()
	for i := range perNode {
		if perNode[i] == nil {
			perNode[i] = map[int64]int64{}
		}
	}
	for st := range steps {
		w := leasedWindowOf(s.clock.Now(), s.limit.Period)
		for i := range s.nodes {
			n := s.admitted[w]
			s.stepNode(st, i, arrivals)
			perNode[i][w] += s.admitted[w] - n
		}
		s.syncAndAdvance(st)
	}
}

// TestLeasedReportUnavailable: with ReportUnavailable, a request that finds
// no lease while the coordinator is cut off gets an error wrapping
// floodgate.ErrStoreUnavailable, for a failover policy to handle.
func TestLeasedReportUnavailable(t *testing.T) {
	s := leasedNewSim(t, leasedSimConfig{
		nodes: 1, limit: leasedTestLimit, interval: 100 * time.Millisecond, step: 10 * time.Millisecond,
		tweak: func(lc *LeasedConfig) { lc.ReportUnavailable = true },
	})
	ctx := context.Background()
	node := s.nodes[0]
	if d, err := node.AllowN(ctx, "k", leasedTestLimit, 1); err != nil || !d.Allowed {
		t.Fatalf("with the coordinator up: %+v, %v", d, err)
	}
	s.probe.down.Store(true)
	if d, err := node.AllowN(ctx, "k", leasedTestLimit, 1); err != nil || !d.Allowed {
		t.Fatalf("the lease still runs: %+v, %v", d, err)
	}
	s.clock.Advance(200 * time.Millisecond) // past the lease's end (1.5T)
	_, err := node.AllowN(ctx, "k", leasedTestLimit, 1)
	if !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("without a lease and the coordinator cut off: err = %v, want ErrStoreUnavailable", err)
	}
}

// TestLeasedRequestsDuringRenewalUsePinnedUnitsOnly: while a renewal is in
// flight the node admits at most the units it pinned in the request, and
// the grant that comes back covers them.
func TestLeasedRequestsDuringRenewalUsePinnedUnitsOnly(t *testing.T) {
	ctx := context.Background()
	s := leasedNewSim(t, leasedSimConfig{
		nodes: 1, limit: leasedTestLimit, interval: 100 * time.Millisecond, step: 10 * time.Millisecond,
		tweak: func(lc *LeasedConfig) { lc.Timeout = 10 * time.Millisecond },
	})
	node := s.nodes[0]
	for range 50 { // a demand of 50 per 10ms: 500 per T, so 50 are pinned for a 10ms flight
		if d, _ := node.AllowN(ctx, "k", leasedTestLimit, 1); !d.Allowed {
			t.Fatal("the first requests must pass")
		}
	}
	s.clock.Advance(10 * time.Millisecond)
	var pinned, inFlight int64
	s.probe.during = func(req LeaseRequest) {
		pinned = req.Pinned
		for range 200 {
			if d, _ := node.AllowN(ctx, "k", leasedTestLimit, 1); d.Allowed {
				inFlight++
			}
		}
	}
	if err := node.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if pinned == 0 || inFlight != pinned {
		t.Errorf("admitted %d during the renewal, pinned %d: want all pinned units and no more", inFlight, pinned)
	}
	v, _ := node.entries.Load("k")
	e := v.(*leasedEntry)
	if e.used > e.granted {
		t.Errorf("after the renewal used %d > granted %d", e.used, e.granted)
	}
}

// TestLeasedRequestEdgeCases: cost 0 reads without consuming or calling the
// coordinator; a cost above the whole budget can never pass; bad requests
// name the problem.
func TestLeasedRequestEdgeCases(t *testing.T) {
	ctx := context.Background()
	s := leasedNewSim(t, leasedSimConfig{nodes: 1, limit: leasedTestLimit, interval: 100 * time.Millisecond, step: time.Millisecond})
	node := s.nodes[0]
	if d, err := node.AllowN(ctx, "k", leasedTestLimit, 0); err != nil || d.Remaining != 0 || s.probe.count() != 0 {
		t.Errorf("cost 0 before any lease: %+v, %v, %d calls; want 0 remaining and no call", d, err, s.probe.count())
	}
	if d, _ := node.AllowN(ctx, "k", leasedTestLimit, 1); !d.Allowed || d.Remaining == 0 {
		t.Fatalf("first request: %+v", d)
	}
	before, _ := node.AllowN(ctx, "k", leasedTestLimit, 0)
	after, _ := node.AllowN(ctx, "k", leasedTestLimit, 0)
	if before.Remaining != after.Remaining {
		t.Errorf("cost 0 consumed: remaining %d then %d", before.Remaining, after.Remaining)
	}
	if d, err := node.AllowN(ctx, "k", leasedTestLimit, leasedTestLimit.Rate+1); err != nil || d.Allowed || d.RetryAfter >= 0 {
		t.Errorf("cost above R: %+v, %v; want denied with a negative RetryAfter", d, err)
	}
	bad := []struct {
		key  string
		cost int64
		want error
	}{
		{"", 1, floodgate.ErrInvalidKey},
		{"k", -1, floodgate.ErrInvalidCost},
	}
	for _, b := range bad {
		if _, err := node.AllowN(ctx, b.key, leasedTestLimit, b.cost); !errors.Is(err, b.want) {
			t.Errorf("AllowN(%q, %d) err = %v, want %v", b.key, b.cost, err, b.want)
		}
	}
}

// TestLeasedRefusesLimitsItCannotServe: only fixed windows have a budget per
// window to lease; the error says so.
func TestLeasedRefusesLimitsItCannotServe(t *testing.T) {
	s := leasedNewSim(t, leasedSimConfig{nodes: 1, limit: leasedTestLimit, interval: 100 * time.Millisecond, step: time.Millisecond})
	cases := []struct {
		limit floodgate.Limit
		want  string
	}{
		{floodgate.PerSecond(10), "serves fixed_window only"},
		{floodgate.PerSecond(10).WithAlgorithm(floodgate.LeakyBucket), "serves fixed_window only"},
		{floodgate.PerSecond(10).WithAlgorithm(floodgate.SlidingLog), "serves fixed_window only"},
		{floodgate.PerSecond(10).WithAlgorithm(floodgate.SlidingWindow), "serves fixed_window only"},
		{floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 0, Period: time.Second}, "rate"},
		{floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: MaxLeasedRate + 1, Period: time.Second}, "rates up to"},
		{floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: 400 * 24 * time.Hour}, "periods up to"},
	}
	for _, c := range cases {
		_, err := s.nodes[0].AllowN(context.Background(), "k", c.limit, 1)
		if !errors.Is(err, floodgate.ErrInvalidLimit) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrInvalidLimit saying %q", c.limit, err, c.want)
		}
	}
}

// TestNewLeasedRefusesBadConfig: each mistake is named.
func TestNewLeasedRefusesBadConfig(t *testing.T) {
	clock := floodgate.NewManualClock(leasedEpoch)
	mem := leaseNewMemory(clock)
	good := LeasedConfig{Coordinator: mem, Members: StaticMembers{Name: "a", Nodes: 2}, Clock: clock, Interval: time.Second}
	cases := []struct {
		name   string
		change func(*LeasedConfig)
		want   string
	}{
		{"no coordinator", func(c *LeasedConfig) { c.Coordinator = nil }, "Coordinator is nil"},
		{"no members", func(c *LeasedConfig) { c.Members = nil }, "Members is nil"},
		{"nameless node", func(c *LeasedConfig) { c.Members = StaticMembers{Nodes: 2} }, "unique name"},
		{"no interval", func(c *LeasedConfig) { c.Interval = 0 }, "Interval must be positive"},
		{"early renewal above the interval", func(c *LeasedConfig) { c.EarlyRenewal = 2 * time.Second }, "EarlyRenewal"},
		{"negative timeout", func(c *LeasedConfig) { c.Timeout = -1 }, "Timeout"},
		{"negative outage-after", func(c *LeasedConfig) { c.OutageAfter = -1 }, "OutageAfter must not be negative"},
		{"outage-after below the timeout", func(c *LeasedConfig) { c.Timeout, c.OutageAfter = time.Second, time.Millisecond }, "must be at least Timeout"},
		{"safe fraction above 1", func(c *LeasedConfig) { c.SafeFraction = 1.5 }, "SafeFraction"},
		{"negative safe fraction", func(c *LeasedConfig) { c.SafeFraction = -0.1 }, "SafeFraction"},
		{"negative max keys", func(c *LeasedConfig) { c.MaxKeys = -1 }, "MaxKeys"},
	}
	for _, c := range cases {
		cfg := good
		c.change(&cfg)
		_, err := NewLeased(cfg)
		if !errors.Is(err, ErrInvalidLeasedConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrInvalidLeasedConfig saying %q", c.name, err, c.want)
		}
	}
	if _, err := NewLeased(good); err != nil {
		t.Errorf("good config: %v", err)
	}
}

// TestLeasedSharedCallsPerDecisionFallAsOneOverRateT: coordinator calls per
// decision, under steady load within the budget, stay within 2/(λ·T) for a
// node's arrival rate λ: about one renewal per T, plus one at each window's
// start and a few early ones while the grants adapt.
func TestLeasedSharedCallsPerDecisionFallAsOneOverRateT(t *testing.T) {
	const nodes, step, steps = 4, time.Millisecond, 4000 // four windows
	for _, perNode := range []int64{1, 4} {              // units per ms per node: 1000/s and 4000/s
		for _, interval := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond} {
			lim := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 20000, Period: time.Second}
			s := leasedNewSim(t, leasedSimConfig{nodes: nodes, limit: lim, interval: interval, step: step})
			s.run(steps, func(int, int) int64 { return perNode })
			decisions := float64(nodes * steps * int(perNode))
			perDecision := float64(s.probe.count()) / decisions
			lambdaT := float64(perNode) * float64(interval/step)
			bound := 2 / lambdaT
			t.Logf("λ=%d/s per node, T=%s: λ·T=%.0f, %d calls for %.0f decisions = %.5f per decision (1/(λT) = %.5f, bound %.5f)",
				perNode*1000, interval, lambdaT, s.probe.count(), decisions, perDecision, 1/lambdaT, bound)
			if perDecision > bound {
				t.Errorf("λ=%d/ms T=%s: %.5f calls per decision > bound %.5f", perNode, interval, perDecision, bound)
			}
		}
	}
}

// TestLeasedStartRunsSyncOnATicker: the optional background loop calls
// Sync every Interval on a real ticker, and Close stops it.
func TestLeasedStartRunsSyncOnATicker(t *testing.T) {
	mem := leaseNewMemory(floodgate.NewManualClock(leasedEpoch))
	probe := leasedNewProbe(mem, floodgate.NewManualClock(leasedEpoch), time.Second)
	l, err := NewLeased(LeasedConfig{Coordinator: probe, Members: StaticMembers{Name: "a", Nodes: 1}, Interval: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start: err = %v, want ErrStarted", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for probe.count() < 3 && time.Now().Before(deadline) {
		// Keep the key busy so that each round renews it instead of dropping it.
		_, _ = l.AllowN(context.Background(), "k", leasedTestLimit, 1)
		time.Sleep(time.Millisecond)
	}
	l.Close()
	got := probe.count()
	if got < 3 {
		t.Fatalf("%d coordinator calls in 5s with a 2ms interval", got)
	}
	time.Sleep(10 * time.Millisecond)
	if after := probe.count(); after != got {
		t.Errorf("calls went on after Close: %d, then %d", got, after)
	}
}
