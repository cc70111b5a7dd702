package adaptive

import (
	"fmt"
	"math"
	"time"
)

// VegasOptions configure a Vegas limit. Zero fields take the defaults
// given with them.
type VegasOptions struct {
	// InitialLimit is the limit before any sample (default 20), within
	// [MinLimit, MaxLimit].
	InitialLimit int
	// MinLimit and MaxLimit bound the limit (defaults 1 and 1000).
	MinLimit, MaxLimit int
	// Alpha and Beta are the queue sizes, in multiples of log10(limit)
	// (at least 1: below a limit of 10 the band is Alpha to Beta requests),
	// below which the limit grows and above which it shrinks (defaults 3
	// and 6); Alpha < Beta.
	Alpha, Beta float64
	// Utilisation is the share of the limit that must have been in flight
	// for a sample to grow it (default 0.8), in (0, 1].
	Utilisation float64
	// ProbeInterval, ProbeSamples and ProbeRatio set the probes of the
	// unloaded RTT (defaults 30s, 50 and 0.5), as for Gradient2Options.
	ProbeInterval time.Duration
	ProbeSamples  int
	ProbeRatio    float64
}

// DefaultVegasAlpha and DefaultVegasBeta are the defaults of VegasOptions.
const (
	DefaultVegasAlpha = 3
	DefaultVegasBeta  = 6
)

// Vegas is TCP Vegas applied to a concurrency limit: from the unloaded
// RTT (rttNoLoad) and a sample's RTT it estimates how many requests wait
// in the backend's queue,
//
//	queue = limit·(1 − rttNoLoad/rtt)
//
// and keeps that between Alpha·log10(limit) and Beta·log10(limit): it
// grows the limit by log10(limit) per round trip when the queue is
// shorter, shrinks it as much when the queue is longer or a request is
// dropped. rttNoLoad is the lowest RTT of the last probe (see
// ProbeInterval) or seen since; the probe lowers the limit so that the
// queue drains, because under sustained load the lowest RTT seen includes
// a queue, and a baseline taken then would drift up with it. The RTT is
// one sample's and rttNoLoad a minimum, so the backend's own jitter reads
// as a queue of up to limit·jitter: the band absorbs a moderate jitter
// (±10% at 40 workers in the simulation); a noisier backend wants a
// wider one.
//
// What keeps it from oscillating: the band between Alpha and Beta in
// which the limit holds still, changes of log10(limit) per round trip
// (log10(limit)/limit per sample, as TCP Vegas adjusts once per round
// trip), growth only when the limit is used (Utilisation), and MinLimit
// and MaxLimit. One Update moves the limit by at most
// max(1, log10(limit))/limit (plus one for the rounding down of Limit),
// never out of [MinLimit, MaxLimit]; the exception is a probe, whose start
// lowers the limit to ProbeRatio of itself and whose end restores it.
type Vegas struct {
	opts  VegasOptions
	b     bounds
	limit float64
	probe prober
}

// NewVegas returns a Vegas limit, or an error wrapping ErrInvalidOptions
// that names the option it cannot use.
func NewVegas(o VegasOptions) (*Vegas, error) {
	const name = "VegasOptions"
	b, err := newBounds(name, &o.InitialLimit, &o.MinLimit, &o.MaxLimit)
	if err != nil {
		return nil, err
	}
	if o.Alpha == 0 {
		o.Alpha = DefaultVegasAlpha
	}
	if o.Beta == 0 {
		o.Beta = DefaultVegasBeta
	}
	if !(o.Alpha > 0 && o.Alpha < o.Beta && !math.IsInf(o.Beta, 0)) {
		return nil, fmt.Errorf("%w: %s.Alpha %g and Beta %g: want 0 < Alpha < Beta, finite (0 for the defaults, %d and %d)", ErrInvalidOptions, name, o.Alpha, o.Beta, DefaultVegasAlpha, DefaultVegasBeta)
	}
	if err := ratioOption(name, "Utilisation", &o.Utilisation, DefaultUtilisation, 1, false); err != nil {
		return nil, err
	}
	probe, err := newProber(name, &o.ProbeInterval, &o.ProbeSamples, &o.ProbeRatio, float64(o.InitialLimit), b)
	if err != nil {
		return nil, err
	}
	return &Vegas{opts: o, b: b, limit: float64(o.InitialLimit), probe: probe}, nil
}

// Limit is the current limit.
func (v *Vegas) Limit() int {
	if v.probe.probing {
		return v.probe.limit
	}
	return int(v.limit)
}

// Update compares the queue the sample's RTT implies with the band and
// returns the new limit.
func (v *Vegas) Update(s Sample) int {
	if v.probe.consume(s, v.limit, v.b) || s.RTT <= 0 {
		return v.Limit()
	}
	lg := math.Max(1, math.Log10(v.limit))
	queue := v.limit * (1 - float64(v.probe.min)/float64(s.RTT))
	switch {
	case s.Dropped || queue > v.opts.Beta*lg:
		v.limit = v.b.clamp(v.limit - lg/v.limit)
	case queue < v.opts.Alpha*lg && utilised(s.InFlight, v.limit, v.opts.Utilisation):
		v.limit = v.b.clamp(v.limit + lg/v.limit)
	}
	return v.Limit()
}
