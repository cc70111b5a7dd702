package bounds

import "math"

// Undershoot is strategy's worst-case undershoot per window: units of
// min(R, offered) denied, as its doc states it for p, never more than R:
//
//	exact    0
//	local    R − ⌊R/N⌋ (all traffic on one node; it does not depend on λ)
//	leased   N·λ·(B + D)·r, r = P/T + 1 + P/B renewals per window
//	synced   0 (unit costs)
//	sampled  z·σ, σ = √(R·(1−p)/p)
//	gossip   0
//
// The cap at R is not in the docs but in the definition: a window cannot
// deny more of min(R, offered) than R.
func Undershoot(strategy string, p Params) (float64, error) {
	if err := p.validate(strategy); err != nil {
		return 0, err
	}
	var u float64
	switch strategy {
	case Local:
		u = p.rate() - math.Floor(p.rate()/float64(p.Nodes))
	case Leased:
		u = leasedUndershoot(p)
	case Sampled:
		u = sampledSigmaTerm(p)
	}
	return math.Min(u, p.rate()), nil
}

// leasedUndershoot: a node denies only while a renewal is in flight (D) or
// within B after one, at most r times per window.
func leasedUndershoot(p Params) float64 {
	b := p.earlyRenewal().Seconds()
	renewals := p.period()/p.Interval.Seconds() + 1 + p.period()/b
	return float64(p.Nodes) * p.ArrivalRate * (b + p.Delay.Seconds()) * renewals
}
