package bounds

import (
	"math"
	"time"

	"github.com/floodgate-io/floodgate"
)

// DefaultZ is the number of standard deviations sampled's bound allows
// when Params.Z is 0: the bound then holds with probability at least
// 1 − 1/(1+3²) = 90% for the sampling term.
const DefaultZ = 3

// maxNodes bounds Params.Nodes, as cluster bounds a lease request's.
const maxNodes = 1 << 16

// maxOneIn is cluster's largest SampledConfig.OneIn (p = 2⁻²⁰).
const maxOneIn = 1 << 20

// Params are the quantities the bounds are written in. The letters are
// those of cluster's doc comments.
type Params struct {
	// Nodes is N, the live nodes sharing the limit. At least 1.
	Nodes int
	// Interval is T, the sync interval (leased: lease renewal; synced:
	// push/pull round). Required by leased and synced; the other
	// strategies' bounds do not contain it.
	Interval time.Duration
	// Limit is the shared limit: R = Limit.Rate units per Limit.Period.
	// leased and gossip count fixed_window only, synced and sampled also
	// sliding_window; local and exact serve every algorithm.
	Limit floodgate.Limit
	// ArrivalRate is λ, the largest arrival rate of one node for the key,
	// in units per second. The bounds take every node at this rate, the
	// worst case of the "(every λ_j ≤ λ)" forms.
	ArrivalRate float64
	// Delay is D: for leased, synced and sampled the round trip of one
	// call to the shared store (send to reply); for gossip the network's
	// one-way delay, to which the rounds of broadcasting add: a count
	// reaches every other node within ⌈log₃(N−1)⌉·Interval + Delay.
	Delay time.Duration
	// OneIn is sampled's 1/p: a node pushes an admitted request to the
	// shared counter with probability p = 1/OneIn. Required by sampled,
	// in 1..2²⁰.
	OneIn int64
	// Z is sampled's z, the standard deviations of sampling error the
	// bound allows (0: DefaultZ).
	Z float64
	// Gap is sampled's g, the run of a node's own admissions between two
	// of its pushes that the bound allows for (0: the least g ≥ 1 with
	// N·(1−p)^g ≤ 1/(1+z²), so that the bound holds with probability at
	// least 1 − 2/(1+z²); see SampledConfidence).
	Gap int64
	// Poisson, when not 0, reads ArrivalRate as the mean of a Poisson
	// stream instead of a peak rate: each bound's "arrivals at the other
	// nodes during t", (N−1)·λ·t, becomes the count such a stream stays
	// under with probability Poisson (0.9999, say), per window. The docs
	// state the steady form (0). In [0, 1).
	Poisson float64
	// Asymmetry is ε, the error of a synced or sampled node's reading of
	// the store's clock (half the spread of a round trip's one-way delays):
	// admissions in the last ε of a window may be counted in the next one,
	// at most N·λ·ε per window on top of the staleness term. 0: symmetric
	// round trips.
	Asymmetry time.Duration
	// Skew is σ, the largest offset of a node's clock from the reference
	// clock windows are measured on. It moves local's window algorithms
	// and gossip's epochs (which need σ < Period); leased, synced and
	// sampled number windows on the shared store's clock and ignore it.
	Skew time.Duration
	// Drift is ρ, leased's difference of clock rates between a node and
	// the coordinator (0.001 is 0.1%): a slow node keeps a lease ρ·T too
	// long. In [0, 1).
	Drift float64
	// EarlyRenewal is leased's B, the least time between two renewals a
	// key's requests trigger (0: Interval/4, leased's default). At most
	// Interval.
	EarlyRenewal time.Duration
	// LeaseFraction is leased's SafeFraction: the share of R each node
	// admits per window while the coordinator is unreachable (0: 1/N). In
	// [0, 1]. Only OutageOvershoot uses it.
	LeaseFraction float64
}

// rate is R as a float.
func (p Params) rate() float64 { return float64(p.Limit.Rate) }

// period is the limit's Period in seconds.
func (p Params) period() float64 { return p.Limit.Period.Seconds() }

// others is N − 1, the nodes whose admissions one node may not have seen.
func (p Params) others() float64 { return float64(p.Nodes - 1) }

// z is Z or its default.
func (p Params) z() float64 {
	if p.Z == 0 {
		return DefaultZ
	}
	return p.Z
}

// earlyRenewal is B or its default, leased's Interval/4.
func (p Params) earlyRenewal() time.Duration {
	if p.EarlyRenewal == 0 {
		return p.Interval / 4
	}
	return p.EarlyRenewal
}

// safeFraction is LeaseFraction or its default 1/N.
func (p Params) safeFraction() float64 {
	if p.LeaseFraction == 0 {
		return 1 / float64(p.Nodes)
	}
	return p.LeaseFraction
}

// algorithms lists what each strategy counts; nil: every algorithm.
var algorithms = map[string][]floodgate.Algorithm{
	Leased:  {floodgate.FixedWindow},
	Gossip:  {floodgate.FixedWindow},
	Synced:  {floodgate.FixedWindow, floodgate.SlidingWindow},
	Sampled: {floodgate.FixedWindow, floodgate.SlidingWindow},
}

// validate names the first field of p that strategy's bounds cannot use.
func (p Params) validate(strategy string) error {
	if err := checkStrategy(strategy); err != nil {
		return err
	}
	if err := p.validateCommon(); err != nil {
		return err
	}
	return p.validateFor(strategy)
}

// validateCommon checks the fields every strategy reads or that can never
// be right.
func (p Params) validateCommon() error {
	switch {
	case p.Nodes < 1 || p.Nodes > maxNodes:
		return invalid("Nodes must be in 1..%d, got %d", maxNodes, p.Nodes)
	case p.Limit.Algorithm == "":
		return invalid("Limit.Algorithm is empty (want %s, %s, ...)", floodgate.FixedWindow, floodgate.SlidingWindow)
	case p.Limit.Rate <= 0:
		return invalid("Limit.Rate must be positive, got %d", p.Limit.Rate)
	case p.Limit.Period <= 0:
		return invalid("Limit.Period must be positive, got %s", p.Limit.Period)
	case !finiteAtLeast(p.ArrivalRate, 0):
		return invalid("ArrivalRate must be a finite number ≥ 0 (units per second per node), got %v", p.ArrivalRate)
	case p.Interval < 0:
		return invalid("Interval must not be negative, got %s", p.Interval)
	case p.Delay < 0:
		return invalid("Delay must not be negative, got %s", p.Delay)
	case p.OneIn < 0 || p.OneIn > maxOneIn:
		return invalid("OneIn must be in 1..%d (or 0 when not sampled), got %d", maxOneIn, p.OneIn)
	case !finiteAtLeast(p.Z, 0):
		return invalid("Z must be a finite number ≥ 0 (0: %d), got %v", DefaultZ, p.Z)
	case !finiteAtLeast(p.Poisson, 0) || p.Poisson >= 1:
		return invalid("Poisson must be a probability in [0, 1) (0: steady arrivals), got %v", p.Poisson)
	case p.Gap < 0:
		return invalid("Gap must not be negative, got %d", p.Gap)
	case !finiteAtLeast(p.Drift, 0) || p.Drift >= 1:
		return invalid("Drift must be in [0, 1), got %v", p.Drift)
	case p.EarlyRenewal < 0:
		return invalid("EarlyRenewal must not be negative, got %s", p.EarlyRenewal)
	case !finiteAtLeast(p.LeaseFraction, 0) || p.LeaseFraction > 1:
		return invalid("LeaseFraction must be in [0, 1], got %v", p.LeaseFraction)
	}
	if err := p.Limit.Validate(); err != nil {
		return invalid("Limit: %w", err)
	}
	return nil
}

// validateFor checks what one strategy needs on top of validateCommon.
func (p Params) validateFor(strategy string) error {
	if allowed, ok := algorithms[strategy]; ok && !containsAlgorithm(allowed, p.Limit.Algorithm) {
		return invalid("%s counts %v only, got Limit.Algorithm %s", strategy, allowed, p.Limit.Algorithm)
	}
	switch strategy {
	case Leased, Synced:
		if p.Interval <= 0 {
			return invalid("%s needs Interval (T) > 0, got %s", strategy, p.Interval)
		}
	}
	switch {
	case strategy == Leased && p.EarlyRenewal > p.Interval:
		return invalid("leased EarlyRenewal must be at most Interval (%s), got %s", p.Interval, p.EarlyRenewal)
	case strategy == Sampled && p.OneIn < 1:
		return invalid("sampled needs OneIn (1/p) in 1..%d, got %d", maxOneIn, p.OneIn)
	case strategy == Gossip && abs(p.Skew) >= p.Limit.Period:
		return invalid("gossip's bound needs |Skew| < Limit.Period (%s), got %s", p.Limit.Period, p.Skew)
	}
	return nil
}

func containsAlgorithm(list []floodgate.Algorithm, a floodgate.Algorithm) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

func finiteAtLeast(x, least float64) bool {
	return !math.IsNaN(x) && !math.IsInf(x, 0) && x >= least
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
