package sim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// WorkloadParams tunes the named workloads; a zero field takes the default
// given next to it.
type WorkloadParams struct {
	// ZipfS is the zipf workload's exponent (> 1; default 1.5): the load
	// balancer sends node k (0-based) a share ∝ (1+k)^−s.
	ZipfS float64
	// Heavy is the number of heavy clients of the sticky workload (default
	// 3), each pinned to one node, sending HeavyShare of all requests
	// together (default 0.6); the other clients spread over all nodes.
	Heavy      int
	HeavyShare float64
	// ShiftAt is when the shift workload moves all traffic from the first
	// half of the nodes to the second half (default Duration/2).
	ShiftAt time.Duration
	// BurstEvery, BurstLength and BurstFactor shape the bursts workload:
	// every BurstEvery (default 4 Periods) the rate rises BurstFactor times
	// (default 5) for BurstLength (default Period/2), starting 3/4 into a
	// window so that bursts straddle window boundaries. The rate between
	// bursts is lowered so that the mean rate stays Load.
	BurstEvery, BurstLength time.Duration
	BurstFactor             float64
	// DieAt is when the churn workload's first node dies (default
	// Duration/3); JoinAt when an extra node joins (default 2·Duration/3).
	DieAt, JoinAt time.Duration
}

// withDefaults fills the zero fields.
func (p WorkloadParams) withDefaults(c Config) WorkloadParams {
	or := func(v, def time.Duration) time.Duration {
		if v == 0 {
			return def
		}
		return v
	}
	if p.ZipfS == 0 {
		p.ZipfS = 1.5
	}
	if p.Heavy == 0 {
		p.Heavy = 3
	}
	if p.HeavyShare == 0 {
		p.HeavyShare = 0.6
	}
	if p.BurstFactor == 0 {
		p.BurstFactor = 5
	}
	p.ShiftAt = or(p.ShiftAt, c.Duration/2)
	p.BurstEvery = or(p.BurstEvery, 4*c.Limit.Period)
	p.BurstLength = or(p.BurstLength, c.Limit.Period/2)
	p.DieAt = or(p.DieAt, c.Duration/3)
	p.JoinAt = or(p.JoinAt, 2*c.Duration/3)
	return p
}

// validate checks the parameters the chosen workload uses.
func (p WorkloadParams) validate(c Config) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: workload %s: "+format, append([]any{ErrInvalidConfig, c.Workload}, args...)...)
	}
	switch c.Workload {
	case "zipf":
		if !(p.ZipfS > 1) {
			return bad("zipf exponent must be above 1, got %v", p.ZipfS)
		}
	case "sticky":
		if p.Heavy < 1 || p.Heavy >= c.Clients || !(p.HeavyShare > 0 && p.HeavyShare < 1) {
			return bad("needs 1 ≤ heavy clients (%d) < clients (%d) and a heavy share in (0, 1), got %v", p.Heavy, c.Clients, p.HeavyShare)
		}
	case "shift":
		if c.Nodes < 2 || p.ShiftAt <= 0 || p.ShiftAt >= c.Duration {
			return bad("needs at least 2 nodes and a shift time inside the run, got %d nodes and %s of %s", c.Nodes, p.ShiftAt, c.Duration)
		}
	case "bursts":
		b := float64(p.BurstLength) / float64(p.BurstEvery)
		if p.BurstLength <= 0 || p.BurstEvery <= p.BurstLength || !(p.BurstFactor > 1) || p.BurstFactor*b >= 1 {
			return bad("needs 0 < length (%s) < every (%s) and 1 < factor (%v) < every/length", p.BurstLength, p.BurstEvery, p.BurstFactor)
		}
	case "skew":
		if c.Skew <= 0 {
			return bad("needs a clock skew above 0 (--skew)")
		}
	case "churn":
		if c.Nodes < 2 || p.DieAt <= 0 || p.JoinAt <= p.DieAt || p.JoinAt >= c.Duration {
			return bad("needs at least 2 nodes and 0 < die (%s) < join (%s) < duration (%s)", p.DieAt, p.JoinAt, c.Duration)
		}
	}
	return nil
}

// workload routes arrivals: it scales the base rate over time and picks,
// for each arrival, the node it lands on and the client that sent it.
type workload struct {
	// factor is the rate at t µs after the start, relative to the mean.
	factor func(t int64) float64
	// peak bounds factor, for thinning.
	peak float64
	// route picks a live node (index into live) and a client.
	route func(t int64, r *rand.Rand, live []*node) (*node, int)
}

// newWorkload builds the named workload for c (validated). zipfRand is the
// arrivals' generator, which the Zipf sampler draws from.
func newWorkload(c Config, zipfRand *rand.Rand) workload {
	p := c.Params
	uniform := func(_ int64, r *rand.Rand, live []*node) (*node, int) {
		return live[r.IntN(len(live))], r.IntN(c.Clients)
	}
	w := workload{factor: func(int64) float64 { return 1 }, peak: 1, route: uniform}
	switch c.Workload {
	case "zipf":
		z := rand.NewZipf(zipfRand, p.ZipfS, 1, uint64(c.Nodes-1))
		w.route = func(_ int64, r *rand.Rand, live []*node) (*node, int) {
			return live[int(z.Uint64())%len(live)], r.IntN(c.Clients)
		}
	case "sticky":
		w.route = func(_ int64, r *rand.Rand, live []*node) (*node, int) {
			if r.Float64() < p.HeavyShare {
				h := r.IntN(p.Heavy)
				return live[h%len(live)], h
			}
			return live[r.IntN(len(live))], p.Heavy + r.IntN(c.Clients-p.Heavy)
		}
	case "shift":
		at := p.ShiftAt.Microseconds()
		w.route = func(t int64, r *rand.Rand, live []*node) (*node, int) {
			half := len(live) / 2
			if t < at {
				return live[r.IntN(half)], r.IntN(c.Clients)
			}
			return live[half+r.IntN(len(live)-half)], r.IntN(c.Clients)
		}
	case "bursts":
		every, length := p.BurstEvery.Microseconds(), p.BurstLength.Microseconds()
		offset := c.Limit.Period.Microseconds() * 3 / 4
		b := float64(length) / float64(every)
		low := (1 - p.BurstFactor*b) / (1 - b)
		w.peak = p.BurstFactor
		w.factor = func(t int64) float64 {
			if (t-offset)%every < length && t >= offset {
				return p.BurstFactor
			}
			return low
		}
	}
	return w
}
