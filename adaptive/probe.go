package adaptive

import (
	"fmt"
	"math"
	"time"
)

// DefaultProbeInterval, DefaultProbeSamples and DefaultProbeRatio are
// the defaults of the options of the same names (Gradient2, Vegas).
const (
	DefaultProbeInterval = 30 * time.Second
	DefaultProbeSamples  = 50
	DefaultProbeRatio    = 0.5
)

// prober measures the backend's round-trip time without a queue, the way
// Envoy's adaptive concurrency filter samples its minimum RTT: under
// sustained load every request waits behind others, so the unloaded RTT
// is not seen unless the limit is lowered for a moment. A probe holds the
// limit at ratio times what it was and takes the RTTs of samples requests
// admitted with at most that many in flight (earlier ones waited in the
// queue the probe is draining); after samples of them it ends, the limit
// goes back to where it was, and the next probe starts interval later by
// Sample.At (samples without At never re-probe). The first probe starts
// at once: there is no baseline before it.
type prober struct {
	interval time.Duration
	samples  int
	ratio    float64

	probing bool
	limit   int       // the limit while probing
	next    time.Time // when the next probe starts
	n       int
	sum     time.Duration
	low     time.Duration

	mean time.Duration // mean RTT of the last probe
	min  time.Duration // lowest RTT since the last probe began
}

func newProber(name string, interval *time.Duration, samples *int, ratio *float64, start float64, b bounds) (prober, error) {
	if *interval < 0 {
		return prober{}, fmt.Errorf("%w: %s.ProbeInterval %v: want a positive duration (0 for the default, %v)", ErrInvalidOptions, name, *interval, DefaultProbeInterval)
	}
	if *interval == 0 {
		*interval = DefaultProbeInterval
	}
	if *samples < 0 {
		return prober{}, fmt.Errorf("%w: %s.ProbeSamples %d: want at least 1 (0 for the default, %d)", ErrInvalidOptions, name, *samples, DefaultProbeSamples)
	}
	if *samples == 0 {
		*samples = DefaultProbeSamples
	}
	if err := ratioOption(name, "ProbeRatio", ratio, DefaultProbeRatio, 1, false); err != nil {
		return prober{}, err
	}
	p := prober{interval: *interval, samples: *samples, ratio: *ratio}
	p.start(start, b)
	return p, nil
}

func (p *prober) start(limit float64, b bounds) {
	p.probing = true
	p.limit = int(b.clamp(math.Floor(limit * p.ratio)))
	p.n, p.sum, p.low = 0, 0, time.Duration(math.MaxInt64)
}

// consume takes s into account and reports whether it belongs to a probe,
// in which case the algorithm leaves its limit alone.
func (p *prober) consume(s Sample, limit float64, b bounds) bool {
	if !p.probing {
		if s.At.IsZero() || s.At.Before(p.next) {
			p.min = min(p.min, s.RTT)
			return false
		}
		p.start(limit, b)
	}
	if s.InFlight <= p.limit {
		p.n++
		p.sum += s.RTT
		p.low = min(p.low, s.RTT)
		if p.n == p.samples {
			p.probing = false
			p.mean, p.min = p.sum/time.Duration(p.n), p.low
			p.next = s.At.Add(p.interval)
		}
	}
	return true
}
