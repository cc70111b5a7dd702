package bounds

import (
	"fmt"
	"math"
)

// StoreCallsPerSecond is what strategy costs the shared store for p, in
// calls per second over the fleet, for keys keys each limited by p.Limit
// and each arriving at p.ArrivalRate on every node:
//
//	exact    N·λ per key: a script call per decision
//	local    0
//	leased   at most N·(1/T + 1/B) per key: a renewal per T, plus an
//	         early one at most every B for a key whose lease runs out
//	synced   N/T per key: one script call per key per round (the keys of
//	         a round share one pipelined round trip: N/T round trips)
//	sampled  p·min(N·λ, R/Period) per key: a push per sampled admission
//	gossip   0: no shared store (peers exchange broadcasts instead)
//
// leased's figure is its ceiling, reached under overload; with demand
// inside the lease it is N/T per key.
func StoreCallsPerSecond(strategy string, p Params, keys int) (float64, error) {
	if keys < 1 {
		return 0, fmt.Errorf("%w: keys must be at least 1, got %d", ErrInvalidParams, keys)
	}
	if err := p.validate(strategy); err != nil {
		return 0, err
	}
	n, k := float64(p.Nodes), float64(keys)
	switch strategy {
	case Exact:
		return k * n * p.ArrivalRate, nil
	case Leased:
		return k * n * (1/p.Interval.Seconds() + 1/p.earlyRenewal().Seconds()), nil
	case Synced:
		return k * n / p.Interval.Seconds(), nil
	case Sampled:
		admitted := math.Min(n*p.ArrivalRate, p.rate()/p.period())
		return k * admitted / float64(p.OneIn), nil
	}
	return 0, nil // local, gossip
}
