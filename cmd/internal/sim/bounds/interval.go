package bounds

import (
	"fmt"
	"math"
	"time"
)

// MaxInterval is the longest T LongestInterval considers: a strategy that
// fits the tolerance at MaxInterval fits it at any T.
const MaxInterval = 24 * time.Hour

// Resolution is the step of LongestInterval's search: its T fits and
// T + Resolution does not. Shared state counts time in microseconds.
const Resolution = time.Microsecond

// Verdict says what LongestInterval found.
type Verdict string

const (
	// Bounded: there is a longest T within the tolerance.
	Bounded Verdict = "bounded"
	// AnyInterval: every T fits (the bound does not grow with T, or not
	// enough to matter up to MaxInterval).
	AnyInterval Verdict = "any"
	// NoInterval: no T fits.
	NoInterval Verdict = "none"
)

// IntervalAnswer is LongestInterval's answer with its reason.
type IntervalAnswer struct {
	Verdict Verdict
	// Interval is the longest T (Bounded only).
	Interval time.Duration
	// Reason says why, in words, with the figures that decided it.
	Reason string
}

// LongestInterval returns the longest T whose worst-case Overshoot is at
// most tolerance·R (tolerance 0.05 is 5% of the limit), searching T since
// not every bound is linear in it. ok is false when no T fits or when any
// T does; SearchInterval tells which, and why. p.Interval is ignored.
func LongestInterval(strategy string, p Params, tolerance float64) (time.Duration, bool, error) {
	a, err := SearchInterval(strategy, p, tolerance)
	return a.Interval, a.Verdict == Bounded, err
}

// SearchInterval is LongestInterval with the verdict and its reason.
func SearchInterval(strategy string, p Params, tolerance float64) (IntervalAnswer, error) {
	if err := checkTolerance(tolerance); err != nil {
		return IntervalAnswer{}, err
	}
	lo := max(Resolution, p.EarlyRenewal)
	if strategy == Synced {
		// Rounds cannot come faster than one per round trip (see
		// Overshoot): a T below D costs calls and buys nothing, and the
		// bound is not monotone there.
		lo = max(lo, p.Delay)
	}
	at := func(t time.Duration) (float64, error) {
		q := p
		q.Interval = t
		return Overshoot(strategy, q)
	}
	low, err := at(lo)
	if err != nil {
		return IntervalAnswer{}, err
	}
	high, err := at(MaxInterval)
	if err != nil {
		return IntervalAnswer{}, err
	}
	target := tolerance * p.rate()
	switch {
	case high <= target:
		return IntervalAnswer{Verdict: AnyInterval, Reason: anyReason(strategy, high, target)}, nil
	case low > target:
		return IntervalAnswer{Verdict: NoInterval, Reason: noneReason(strategy, p, low, high, target)}, nil
	}
	t, err := lastFit(lo, MaxInterval, target, at)
	return IntervalAnswer{Verdict: Bounded, Interval: t,
		Reason: fmt.Sprintf("overshoot grows with T and reaches %s at T = %s", units(target), t)}, err
}

// lastFit finds the last t in [lo, hi) with at(t) ≤ target, given
// at(lo) ≤ target < at(hi) and at non-decreasing.
func lastFit(lo, hi time.Duration, target float64, at func(time.Duration) (float64, error)) (time.Duration, error) {
	for hi-lo > Resolution {
		mid := lo + (hi-lo)/2/Resolution*Resolution
		o, err := at(mid)
		if err != nil {
			return 0, err
		}
		if o <= target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// anyReason explains why every T fits.
func anyReason(strategy string, worst, target float64) string {
	if worst == 0 {
		condition := "while the shared store answers"
		if strategy == Local {
			condition = "while the nodes agree on N and no clock is skewed"
		}
		return fmt.Sprintf("%s never overshoots %s, whatever T", strategy, condition)
	}
	return fmt.Sprintf("%s's overshoot is at most %s for any T, within %s", strategy, units(worst), units(target))
}

// noneReason explains why no T fits, naming the term that does not shrink
// with T.
func noneReason(strategy string, p Params, low, high, target float64) string {
	if low == high {
		why := ""
		switch strategy {
		case Sampled:
			why = fmt.Sprintf(": sampled has no T; its sampling term z·σ = %s and staleness (N−1)·(g + λ·D) depend on p, not T (lower OneIn)",
				units(sampledSigmaTerm(p)))
		case Gossip:
			why = ": gossip's bound (N−1)·λ·(rounds·T + D) is over it even as T → 0: the network delay D alone"
		case Local:
			why = ": local's windows move with clock skew, not with T"
		}
		return fmt.Sprintf("%s's overshoot is %s whatever T, above %s%s", strategy, units(low), units(target), why)
	}
	shortest := Resolution
	if strategy == Synced {
		shortest = max(Resolution, p.Delay)
	}
	return fmt.Sprintf("%s's overshoot is already %s at the shortest useful T = %s, above %s (the delay term alone is too large)",
		strategy, units(low), shortest, units(target))
}

// checkTolerance refuses a tolerance that is not a finite fraction ≥ 0.
func checkTolerance(tolerance float64) error {
	if math.IsNaN(tolerance) || math.IsInf(tolerance, 0) || tolerance < 0 {
		return fmt.Errorf("%w: tolerance must be a finite fraction of the limit ≥ 0 (0.05 is 5%%), got %v", ErrInvalidParams, tolerance)
	}
	return nil
}

// units prints a count of units with at most two decimals.
func units(x float64) string {
	return fmt.Sprintf("%.4g units", x)
}
