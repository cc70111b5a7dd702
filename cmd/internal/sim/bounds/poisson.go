package bounds

import "math"

// othersArrivals is the bound's "what the other nodes admitted meanwhile",
// given its mean (N−1)·λ·t: the mean itself for the doc's steady arrivals
// (λ a peak rate), or for Poisson arrivals (λ a mean rate, Params.Poisson)
// the count a Poisson stream of that mean stays under with probability
// Params.Poisson. A steady rate's product hides the bursts of a random
// stream: at N = 10, λ = 200/s, D = 5ms gossip's (N−1)·λ·D is 9 units and
// a Poisson run of 30 windows measured 10.
func othersArrivals(p Params, mean float64) float64 {
	if p.Poisson == 0 {
		return mean
	}
	return poissonQuantile(mean, p.Poisson)
}

// poissonQuantile is the least k with P(X ≤ k) ≥ level for X ~
// Poisson(mean). The sum runs in log space so that a large mean neither
// underflows e^−mean nor overflows mean^k; beyond a mean of 10⁶ the normal
// approximation (with its continuity correction) is exact enough.
func poissonQuantile(mean, level float64) float64 {
	if mean <= 0 {
		return 0
	}
	if mean > 1e6 {
		return math.Ceil(mean + normalQuantile(level)*math.Sqrt(mean) - 0.5)
	}
	logPMF := -mean // log P(X = 0)
	cdf := math.Exp(logPMF)
	k := 0.0
	for cdf < level && k < mean+60*math.Sqrt(mean)+100 {
		k++
		logPMF += math.Log(mean) - math.Log(k)
		cdf += math.Exp(logPMF)
	}
	return k
}

// normalQuantile is the standard normal's quantile, by bisection on Erf
// (called rarely; exactness beats speed).
func normalQuantile(level float64) float64 {
	lo, hi := -40.0, 40.0
	for range 200 {
		mid := (lo + hi) / 2
		if 0.5*math.Erfc(-mid/math.Sqrt2) < level {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}
