package sim

import (
	"context"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cluster/clustertest"
)

// The wrappers below put the simulated network between a node and the real
// in-memory shared state. Each runs the real call at the store's side with
// a context of the run, not the caller's: the caller's deadline is on the
// real clock, which must not decide anything in a virtual run.

// delayedCounter is a cluster.Counter behind the simulated network.
type delayedCounter struct {
	sim   *simulation
	inner *clustertest.Counter
}

// Add implements cluster.Counter.
func (d delayedCounter) Add(ctx context.Context, adds []cluster.CounterAdd) ([]cluster.CounterRead, error) {
	var reads []cluster.CounterRead
	var err error
	if cerr := call(ctx, "counter add", func() { reads, err = d.inner.Add(d.sim.ctx, adds) }); cerr != nil {
		return nil, cerr
	}
	return reads, err
}

// delayedCoordinator is a cluster.Coordinator behind the simulated network.
// A renewal waits for its answer up to the node's OutageAfter, not the
// Timeout: a leased node takes only silence that long for an outage. (A
// real node denies the request that triggered a slow renewal at the
// Timeout and applies the answer later; the simulated one holds that
// request until the answer, which admits the same units a little later.)
type delayedCoordinator struct {
	sim         *simulation
	inner       *clustertest.Coordinator
	outageAfter time.Duration
}

// Renew implements cluster.Coordinator.
func (d delayedCoordinator) Renew(ctx context.Context, req cluster.LeaseRequest) (cluster.LeaseGrant, error) {
	var grant cluster.LeaseGrant
	var err error
	if cerr := callWithin(ctx, "lease renewal", d.outageAfter, func() { grant, err = d.inner.Renew(d.sim.ctx, req) }); cerr != nil {
		return cluster.LeaseGrant{}, cerr
	}
	return grant, err
}

// remoteMemory is the exact strategy: every decision is a round trip to one
// shared floodgate.Memory, decided there, at the store's time.
type remoteMemory struct {
	sim   *simulation
	inner *floodgate.Memory
}

// AllowN implements floodgate.Limiter.
func (r remoteMemory) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	var d floodgate.Decision
	var err error
	exec := func() {
		d, err = r.inner.AllowN(r.sim.ctx, key, limit, cost)
		if p, ok := processOf(ctx); ok {
			p.decidedAt, p.hasDecide = r.sim.eng.now, true
		}
	}
	if cerr := call(ctx, "exact decision", exec); cerr != nil {
		return floodgate.Decision{}, cerr
	}
	return d, err
}
