package adaptive

import (
	"fmt"
	"math"
	"time"
)

// AIMDOptions configure an AIMD limit. Zero fields take the defaults
// given with them.
type AIMDOptions struct {
	// InitialLimit is the limit before any sample (default 20), within
	// [MinLimit, MaxLimit].
	InitialLimit int
	// MinLimit and MaxLimit bound the limit (defaults 1 and 1000).
	MinLimit, MaxLimit int
	// Step is how much the limit grows per round trip without overload
	// (default 1): each successful sample adds Step/limit.
	Step float64
	// BackoffRatio multiplies the limit on overload (default 0.9), in
	// (0, 1).
	BackoffRatio float64
	// Timeout is the RTT above which a sample counts as overload, as if it
	// had been dropped (default 5s).
	Timeout time.Duration
	// Utilisation is the share of the limit that must have been in flight
	// for a successful sample to grow it (default 0.8), in (0, 1].
	Utilisation float64
}

// DefaultAIMDBackoff and DefaultAIMDTimeout are the defaults of
// AIMDOptions.BackoffRatio and Timeout.
const (
	DefaultAIMDBackoff = 0.9
	DefaultAIMDTimeout = 5 * time.Second
)

// AIMD is TCP's congestion avoidance applied to a concurrency limit:
// additive increase while requests succeed, multiplicative decrease when
// one is dropped or takes longer than a timeout. It sees overload only
// through drops and the timeout, so it settles where requests start to
// fail: keep Timeout a little above the RTT the backend should keep.
//
// What keeps it from oscillating:
//   - the increase is Step per round trip (Step/limit per sample), not per
//     sample, so a limit of 100 does not double within one round trip;
//   - a cool-down: a burst of drops decreases the limit once. A dropped
//     request that was admitted (Sample.At minus RTT) before the last
//     decrease was admitted under the old limit, and its drop is part of
//     the burst already answered; only drops of requests admitted since
//     decrease again. Samples without At skip the cool-down;
//   - the limit grows only when it is used (Utilisation), so a quiet
//     period does not leave a limit nobody tested;
//   - MinLimit and MaxLimit.
//
// One Update moves the limit up by at most Step/limit and down by at most
// (1−BackoffRatio)·limit (plus one for the rounding down of Limit), and
// never out of [MinLimit, MaxLimit].
type AIMD struct {
	opts         AIMDOptions
	b            bounds
	limit        float64
	lastDecrease time.Time
}

// NewAIMD returns an AIMD limit, or an error wrapping ErrInvalidOptions
// that names the option it cannot use.
func NewAIMD(o AIMDOptions) (*AIMD, error) {
	b, err := newBounds("AIMDOptions", &o.InitialLimit, &o.MinLimit, &o.MaxLimit)
	if err != nil {
		return nil, err
	}
	if o.Step == 0 {
		o.Step = 1
	}
	if math.IsNaN(o.Step) || math.IsInf(o.Step, 0) || o.Step < 0 {
		return nil, fmt.Errorf("%w: AIMDOptions.Step %g: want a positive number (0 for the default, 1)", ErrInvalidOptions, o.Step)
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("%w: AIMDOptions.Timeout %v: want a positive duration (0 for the default, %v)", ErrInvalidOptions, o.Timeout, DefaultAIMDTimeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultAIMDTimeout
	}
	if err := ratioOption("AIMDOptions", "BackoffRatio", &o.BackoffRatio, DefaultAIMDBackoff, 1, true); err != nil {
		return nil, err
	}
	if err := ratioOption("AIMDOptions", "Utilisation", &o.Utilisation, DefaultUtilisation, 1, false); err != nil {
		return nil, err
	}
	return &AIMD{opts: o, b: b, limit: float64(o.InitialLimit)}, nil
}

// Limit is the current limit.
func (a *AIMD) Limit() int { return int(a.limit) }

// Update grows the limit after a success that used it, shrinks it after
// an overload outside the cool-down, and returns it.
func (a *AIMD) Update(s Sample) int {
	switch {
	case s.Dropped || s.RTT > a.opts.Timeout:
		if !s.At.IsZero() && s.At.Add(-s.RTT).Before(a.lastDecrease) {
			break // same burst: answered already
		}
		a.limit = a.b.clamp(a.limit * a.opts.BackoffRatio)
		a.lastDecrease = s.At
	case utilised(s.InFlight, a.limit, a.opts.Utilisation):
		a.limit = a.b.clamp(a.limit + a.opts.Step/a.limit)
	}
	return a.Limit()
}
