package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster/internal/shared"
)

// leasedEpoch is where the simulations' clocks start: a window boundary of
// every period they use.
var leasedEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// leasedSkewedClock is a node's clock: the true (coordinator's) time plus a
// fixed skew, to show that skew between clocks moves no window.
type leasedSkewedClock struct {
	base *floodgate.ManualClock
	skew time.Duration
}

func (c leasedSkewedClock) Now() time.Time { return c.base.Now().Add(c.skew) }

// leasedProbe wraps a Coordinator: it counts renewals per node and per
// window of the true clock, can play a coordinator that cannot be reached,
// and can run a hook while a renewal is in flight (before it reaches the
// coordinator), as a network delay would let other requests do.
type leasedProbe struct {
	inner  Coordinator
	clock  *floodgate.ManualClock
	period time.Duration
	down   atomic.Bool
	during func(LeaseRequest)

	mu    sync.Mutex
	calls map[string]map[int64]int // node → window → renewals
	total int
}

func leasedNewProbe(inner Coordinator, clock *floodgate.ManualClock, period time.Duration) *leasedProbe {
	return &leasedProbe{inner: inner, clock: clock, period: period, calls: map[string]map[int64]int{}}
}

func (p *leasedProbe) Renew(ctx context.Context, req LeaseRequest) (LeaseGrant, error) {
	p.mu.Lock()
	p.total++
	w := leasedWindowOf(p.clock.Now(), p.period)
	if p.calls[req.Node] == nil {
		p.calls[req.Node] = map[int64]int{}
	}
	p.calls[req.Node][w]++
	p.mu.Unlock()
	if p.down.Load() {
		return LeaseGrant{}, fmt.Errorf("probe: coordinator cut off: %w", floodgate.ErrStoreUnavailable)
	}
	if p.during != nil {
		p.during(req)
	}
	return p.inner.Renew(ctx, req)
}

func (p *leasedProbe) renewals(node string, window int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[node][window]
}

func (p *leasedProbe) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

func leasedWindowOf(t time.Time, period time.Duration) int64 {
	return shared.WindowOf(t.UnixMicro(), int64(period/time.Microsecond))
}

// leaseMemory is clustertest.Coordinator for the tests inside this package,
// which cannot import clustertest (it imports cluster): the same in-memory
// coordinator, its requests and grants converted to this package's types.
type leaseMemory struct{ *shared.Coordinator }

func leaseNewMemory(clock floodgate.Clock) leaseMemory {
	return leaseMemory{shared.NewCoordinator(clock)}
}

// Renew implements Coordinator.
func (m leaseMemory) Renew(ctx context.Context, req LeaseRequest) (LeaseGrant, error) {
	g, err := m.Coordinator.Renew(ctx, shared.LeaseRequest(req))
	return LeaseGrant(g), err
}

// leasedSim runs N leased nodes sharing one coordinator on one ManualClock.
// Time moves in steps; in each step every node receives the unit requests
// its arrival pattern gives it, then the nodes whose turn it is run Sync
// (their phases are spread over the interval).
type leasedSim struct {
	tb       testing.TB
	clock    *floodgate.ManualClock
	probe    *leasedProbe
	nodes    []*Leased
	names    []string
	limit    floodgate.Limit
	interval time.Duration
	step     time.Duration
	key      string

	admitted map[int64]int64 // per window of the coordinator's clock
	offered  map[int64]int64
	// deniedAt[i] lists the times node i denied a request.
	deniedAt [][]time.Time
}

type leasedSimConfig struct {
	nodes    int
	limit    floodgate.Limit
	interval time.Duration
	step     time.Duration
	skew     time.Duration // node i's clock is skewed by (i - nodes/2)·skew
	coord    func(clock *floodgate.ManualClock) Coordinator
	tweak    func(*LeasedConfig)
}

func leasedNewSim(tb testing.TB, cfg leasedSimConfig) *leasedSim {
	tb.Helper()
	clock := floodgate.NewManualClock(leasedEpoch)
	var inner Coordinator
	if cfg.coord != nil {
		inner = cfg.coord(clock)
	} else {
		inner = leaseNewMemory(clock)
	}
	s := &leasedSim{
		tb: tb, clock: clock, probe: leasedNewProbe(inner, clock, cfg.limit.Period),
		limit: cfg.limit, interval: cfg.interval, step: cfg.step, key: "tenant:acme",
		admitted: map[int64]int64{}, offered: map[int64]int64{},
		deniedAt: make([][]time.Time, cfg.nodes),
	}
	for i := range cfg.nodes {
		name := fmt.Sprintf("node-%d", i)
		lc := LeasedConfig{
			Coordinator: s.probe,
			Members:     StaticMembers{Name: name, Nodes: cfg.nodes},
			Clock:       leasedSkewedClock{base: clock, skew: time.Duration(i-cfg.nodes/2) * cfg.skew},
			Interval:    cfg.interval,
			// On the manual clock, a renewal's outcome must not depend on
			// how soon the scheduler runs it.
			WaitForRenewals: true,
		}
		if cfg.tweak != nil {
			cfg.tweak(&lc)
		}
		l, err := NewLeased(lc)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(l.Close)
		s.nodes, s.names = append(s.nodes, l), append(s.names, name)
	}
	return s
}

// run plays steps steps; arrivals(step, node) is how many unit requests
// the node gets in that step.
func (s *leasedSim) run(steps int, arrivals func(step, node int) int64) {
	s.tb.Helper()
	for st := range steps {
		for i := range s.nodes {
			s.stepNode(st, i, arrivals)
		}
		s.syncAndAdvance(st)
	}
}

// stepNode sends node i its requests of step st.
func (s *leasedSim) stepNode(st, i int, arrivals func(step, node int) int64) {
	s.tb.Helper()
	w := leasedWindowOf(s.clock.Now(), s.limit.Period)
	for range arrivals(st, i) {
		d, err := s.nodes[i].AllowN(context.Background(), s.key, s.limit, 1)
		if err != nil {
			s.tb.Fatalf("step %d node %d: %v", st, i, err)
		}
		s.offered[w]++
		if d.Allowed {
			s.admitted[w]++
		} else {
			s.deniedAt[i] = append(s.deniedAt[i], s.clock.Now())
		}
	}
}

// syncAndAdvance runs Sync on the nodes whose turn it is in step st, then
// moves the clock to the next step.
func (s *leasedSim) syncAndAdvance(st int) {
	perInterval := max(1, int(s.interval/s.step))
	for i, node := range s.nodes {
		if st%perInterval == i*perInterval/len(s.nodes) {
			_ = node.Sync(context.Background()) // a failure shows in the decisions, which the tests check
		}
	}
	s.clock.Advance(s.step)
}

// windows lists the windows the run covered, in order.
func (s *leasedSim) windows() []int64 {
	first := leasedWindowOf(leasedEpoch, s.limit.Period)
	last := leasedWindowOf(s.clock.Now().Add(-time.Microsecond), s.limit.Period)
	var ws []int64
	for w := first; w <= last; w++ {
		ws = append(ws, w)
	}
	return ws
}
