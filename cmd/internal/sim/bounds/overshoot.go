package bounds

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/floodgate-io/floodgate"
)

// Overshoot is strategy's worst-case overshoot per window, admitted − R in
// units, while the shared store (or gossip network) answers, as the
// strategy's constructor doc states it for p:
//
//	exact    0
//	local    0; R when Skew ≠ 0 and the limit is a window algorithm (each
//	         node may admit its share of two of its own windows in one
//	         window of the reference clock)
//	leased   N·λ·ρ·T (0 with equal clock rates)
//	synced   min((N−1)·λ·(2T' + D), (N−1)·R), T' = T when T ≥ D, else T·⌈D/T⌉
//	sampled  z·σ + (N−1)·(g + λ·D), σ = √(R·(1−p)/p), with the probability
//	         SampledConfidence gives
//	gossip   o = min((N−1)·λ·D, (N−1)·R); R + 2·o when Skew ≠ 0 (a window
//	         of the reference clock overlaps two epochs of a skewed node)
//
// synced's T' is not in its doc, which assumes a push every T: a round
// holds Sync's lock for its round trip and the loop's ticker drops the
// ticks that find it busy, so with T < D the rounds come every T·⌈D/T⌉
// (the simulator measured 27 units against the doc's 10 at T = 277µs,
// D = 5ms, N = 10, λ = 200/s; T' gives 27.9).
//
// With Params.Poisson set, each (N−1)·λ·t term (the other nodes' arrivals
// while a node's view is stale) is that Poisson quantile instead.
func Overshoot(strategy string, p Params) (float64, error) {
	if err := p.validate(strategy); err != nil {
		return 0, err
	}
	switch strategy {
	case Local:
		return localOvershoot(p), nil
	case Leased:
		return float64(p.Nodes) * p.ArrivalRate * p.Drift * p.Interval.Seconds(), nil
	case Synced:
		return math.Min(othersArrivals(p, p.others()*p.ArrivalRate*(2*syncedRoundGap(p)+p.Delay).Seconds()), p.others()*p.rate()) + BoundaryOvershoot(strategy, p), nil
	case Sampled:
		return sampledOvershoot(p) + BoundaryOvershoot(strategy, p), nil
	case Gossip:
		return gossipOvershoot(p), nil
	}
	return 0, nil // exact
}

// BoundaryOvershoot is the part of Overshoot that synced and sampled may
// count in the wrong window: the fleet's admissions in the last ε =
// Asymmetry before a boundary, ⌈N·λ·ε⌉ (whole requests); 0 for the other
// strategies, which do not read the store's clock through an offset.
func BoundaryOvershoot(strategy string, p Params) float64 {
	if p.Asymmetry <= 0 || strategy != Synced && strategy != Sampled {
		return 0
	}
	return math.Ceil(othersArrivals(p, float64(p.Nodes)*p.ArrivalRate*p.Asymmetry.Seconds())) // whole requests
}

// syncedRoundGap is the time between two of a node's synced rounds: T,
// or the first tick after a round trip that outlasts T.
func syncedRoundGap(p Params) time.Duration {
	if p.Interval >= p.Delay {
		return p.Interval
	}
	ticks := (p.Delay + p.Interval - 1) / p.Interval
	return ticks * p.Interval
}

// localOvershoot: local's only overshoot with a fixed N comes from skewed
// windows; buckets and the sliding log measure intervals on each node's
// own clock and do not care.
func localOvershoot(p Params) float64 {
	windowed := p.Limit.Algorithm == floodgate.FixedWindow || p.Limit.Algorithm == floodgate.SlidingWindow
	if p.Skew != 0 && windowed {
		return p.rate()
	}
	return 0
}

// sampledOvershoot is the sampling term plus the staleness term.
func sampledOvershoot(p Params) float64 {
	return sampledSigmaTerm(p) + othersArrivals(p, p.others()*(float64(sampledGap(p))+p.ArrivalRate*p.Delay.Seconds()))
}

// sampledSigmaTerm is z·σ, the sampling error allowed for.
func sampledSigmaTerm(p Params) float64 {
	prob := 1 / float64(p.OneIn)
	return p.z() * math.Sqrt(p.rate()*(1-prob)/prob)
}

// gossipOvershoot is the per-epoch bound, or the reference-clock one when
// the nodes' clocks are skewed.
func gossipOvershoot(p Params) float64 {
	o := math.Min(othersArrivals(p, p.others()*p.ArrivalRate*gossipDelay(p).Seconds()), p.others()*p.rate())
	if p.Skew != 0 {
		return p.rate() + 2*o
	}
	return o
}

// gossipFanout is how many random members memberlist sends each round's
// broadcasts to (its GossipNodes, 3 by default).
const gossipFanout = 3

// gossipDelay is gossip's D: a node's count goes out with the next round of
// broadcasts, every Interval (serve sets memberlist's gossip interval to
// the strategy's interval), and reaches every other node after
// ⌈log₃(N−1)⌉ rounds of fan-out 3, each a network trip (Delay).
func gossipDelay(p Params) time.Duration {
	rounds := 1
	for reach := gossipFanout; reach < p.Nodes-1; reach *= gossipFanout {
		rounds++
	}
	return time.Duration(rounds)*p.Interval + p.Delay
}

// ErrNoOutageBound is wrapped by OutageOvershoot's error for a strategy
// whose doc states no bound while the shared store is unreachable (the
// failover policy decides what it admits).
var ErrNoOutageBound = errors.New("bounds: no stated bound while the store is unreachable")

// OutageOvershoot is strategy's worst-case overshoot per window while the
// shared store is unreachable, as its doc states it: leased N·S with
// S = ⌊LeaseFraction·R⌋ (default R/N) once leases have run out (with
// ReportUnavailable, as floodgate serve runs it, the failover policy
// decides instead); synced and sampled (N−1)·R while nodes decide alone,
// before they hand over to the failover policy; local and gossip 0 (they
// use no store; a gossip partition into k groups admits up to k·R). exact
// hands over at once and has no bound of its own.
func OutageOvershoot(strategy string, p Params) (float64, error) {
	if err := p.validate(strategy); err != nil {
		return 0, err
	}
	switch strategy {
	case Leased:
		return float64(p.Nodes) * math.Floor(p.safeFraction()*p.rate()), nil
	case Synced, Sampled:
		return p.others() * p.rate(), nil
	case Exact:
		return 0, fmt.Errorf("%w: %s fails over to the failover policy", ErrNoOutageBound, strategy)
	}
	return 0, nil
}
