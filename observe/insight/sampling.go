package insight

import "math"

// samplingDelta is δ, the probability with which one key's sampling
// error may exceed the bound that widen adds to its entry.
const samplingDelta = 1e-6

// samplingBound turns the Space-Saving bounds of a key's sampled units X̂
// into bounds on its true units X. Each of the key's decisions, of cost
// cᵢ ≤ c, is timed with probability 1/Nᵢ (Nᵢ ≤ N) and then counts Nᵢ·cᵢ,
// so X̂ − X is a sum of independent terms of mean 0, each at most N·c
// away from it, with variance at most N·c·X in all; by Bernstein's
// inequality, with probability 1 − δ,
//
//	|X̂ − X| ≤ √(2aX) + (2/3)a,  a = N·c·ln(2/δ).
//
// Solved for X, with X̂ ≤ count and X̂ ≥ count − error:
//
//	√X ≤ (√(2a) + √(2a + 4(count + 2a/3))) / 2
//	√X ≥ (√(2a + 4(count − error − 2a/3)) − √(2a)) / 2, or X ≥ 0.
type samplingBound struct{ a float64 }

// newSamplingBound is the bound for a window whose largest sampling
// period is n and largest cost c; n ≤ 1 (nothing sampled) adds nothing.
func newSamplingBound(n, c int64) samplingBound {
	if n <= 1 || c <= 0 {
		return samplingBound{}
	}
	return samplingBound{float64(n) * float64(c) * math.Log(2/samplingDelta)}
}

// widen adds the sampling error to e: below to Error, above to
// ErrorAbove, each rounded up.
func (b samplingBound) widen(e *TopEntry) {
	if b.a == 0 {
		return
	}
	r := math.Sqrt(2 * b.a)
	hi := (r + math.Sqrt(2*b.a+4*(float64(e.Count)+2*b.a/3))) / 2
	lo := 0.0
	if d := 2*b.a + 4*(float64(e.Count-e.Error)-2*b.a/3); d > 2*b.a {
		lo = (math.Sqrt(d) - r) / 2
	}
	e.ErrorAbove = int64(math.Ceil(hi*hi)) - e.Count
	e.Error = e.Count - int64(math.Floor(lo*lo))
}
