package bounds

import "math"

// sampledGap is g: Params.Gap, or the least g ≥ 1 whose gap probability
// N·(1−p)^g is at most the sampling term's 1/(1+z²), so that neither term
// dominates the chance of failure.
func sampledGap(p Params) int64 {
	if p.Gap > 0 {
		return p.Gap
	}
	prob := 1 / float64(p.OneIn)
	if prob == 1 {
		return 1 // every admission is pushed: a node is blind for one
	}
	z := p.z()
	target := 1 / (1 + z*z) / float64(p.Nodes)
	g := math.Ceil(math.Log(target) / math.Log1p(-prob))
	return max(1, int64(g))
}

// SampledConfidence is the probability, at least, with which sampled's
// Overshoot and Undershoot hold for p: 1 − 1/(1+z²) − N·(1−p)^g
// (Cantelli's inequality for the counter, a union bound for the gaps). It
// is 0 when that expression is negative: the bound then says nothing.
func SampledConfidence(p Params) (float64, error) {
	if err := p.validate(Sampled); err != nil {
		return 0, err
	}
	z := p.z()
	prob := 1 / float64(p.OneIn)
	gaps := float64(p.Nodes) * math.Pow(1-prob, float64(sampledGap(p)))
	return max(0, 1-1/(1+z*z)-gaps), nil
}

// LargestOneIn is sampled's counterpart of LongestInterval: sampled has no
// T, and its knob is p. It returns the largest OneIn (the fewest shared
// calls) whose Overshoot stays within tolerance·R, and false when even
// OneIn = 1 (every admission pushed) does not, which happens when the
// staleness term (N−1)·(1 + λ·D) alone exceeds the tolerance. p.OneIn is
// ignored.
func LargestOneIn(p Params, tolerance float64) (int64, bool, error) {
	if err := checkTolerance(tolerance); err != nil {
		return 0, false, err
	}
	p.OneIn = 1
	if err := p.validate(Sampled); err != nil {
		return 0, false, err
	}
	target := tolerance * p.rate()
	fits := func(oneIn int64) bool {
		q := p
		q.OneIn = oneIn
		return sampledOvershoot(q) <= target
	}
	if !fits(1) {
		return 0, false, nil
	}
	// The overshoot grows with OneIn (both σ and g do): find the last fit.
	lo, hi := int64(1), int64(maxOneIn)
	if fits(hi) {
		return hi, true, nil
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, true, nil
}
