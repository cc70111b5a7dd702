package adaptive

import (
	"fmt"
	"math"
	"time"
)

// Gradient2Options configure a Gradient2 limit. Zero fields take the
// defaults given with them.
type Gradient2Options struct {
	// InitialLimit is the limit before any sample (default 20), within
	// [MinLimit, MaxLimit].
	InitialLimit int
	// MinLimit and MaxLimit bound the limit (defaults 1 and 1000).
	MinLimit, MaxLimit int
	// ShortWindow and LongWindow are the numbers of samples the short- and
	// long-term RTT averages span (defaults 10 and 600).
	ShortWindow, LongWindow int
	// Smoothing is how far the limit moves towards its target in one round
	// trip (default 0.2), in (0, 1]: each sample moves it Smoothing/limit
	// of the way.
	Smoothing float64
	// QueueSize is the headroom added to limit·gradient: how many requests
	// may queue at the backend (default math.Sqrt of the limit). It must
	// return a finite number, at least 0.
	QueueSize func(limit float64) float64
	// Utilisation is the share of the limit that must have been in flight
	// for a sample to grow it (default 0.8), in (0, 1].
	Utilisation float64
	// ProbeInterval, ProbeSamples and ProbeRatio set the baseline probes
	// (defaults 30s, 50 and 0.5): every ProbeInterval the limit is held at
	// ProbeRatio of itself until ProbeSamples requests admitted under it
	// have finished.
	ProbeInterval time.Duration
	ProbeSamples  int
	ProbeRatio    float64
}

// The defaults of Gradient2Options.
const (
	DefaultGradient2ShortWindow = 10
	DefaultGradient2LongWindow  = 600
	DefaultGradient2Smoothing   = 0.2
)

// Gradient2 is Netflix concurrency-limits' gradient limit: it compares a
// short-term average RTT with a long-term one, and when the short one is
// higher (a queue is building) it shrinks the limit in proportion:
//
//	gradient = clamp(long/short, 0.5, 1)
//	target   = limit·gradient + QueueSize(limit)
//	limit   += (Smoothing/limit)·(target − limit)   per sample
//
// Netflix applies Smoothing per sample; a limit of L gets L samples per
// round trip, and the samples of one round trip still show the queue of
// the last, so a per-sample step overshoots and the limit swings by a
// third of itself (measured in the simulation). Here Smoothing is per
// round trip.
// The drift it is criticised for: under sustained overload every RTT
// includes queueing, so the long-term average, which is only a slower
// average of the same RTTs, climbs to meet the short one within about
// LongWindow samples; the gradient goes back to 1 and the limit grows by
// QueueSize again while latency stays high. The backend has got slower,
// the baseline has followed it, and the limit stops shrinking. Gradient2
// here anchors the long-term RTT: it never counts for more than the mean
// RTT measured by the last probe (see ProbeInterval), when the limit was
// held low enough for the queue to drain, so sustained queueing keeps
// showing as a gradient below 1. When the backend itself gets slower (not
// its queue) the limit shrinks until the next probe measures the new
// baseline. Netflix's own later tweak is kept as well: when the long-term
// RTT is twice the short one or more (latency back to normal after a long
// overload) it decays by 5% a sample instead of waiting for the average.
//
// What keeps it from oscillating: the short average over ShortWindow
// samples, Smoothing, the gradient's floor of 0.5, growth only when the
// limit is used (Utilisation), and MinLimit and MaxLimit. One Update
// moves the limit up by at most Smoothing·QueueSize(limit)/limit and down
// by at most Smoothing/2 (plus one for the rounding down of Limit), never
// out of [MinLimit, MaxLimit]; the exception is a probe, whose start
// lowers the limit to ProbeRatio of itself and whose end restores it.
type Gradient2 struct {
	opts        Gradient2Options
	b           bounds
	limit       float64
	short, long ema
	probe       prober
	// unanchored turns the anchor off, for the test that shows the drift.
	unanchored bool
}

// NewGradient2 returns a Gradient2 limit, or an error wrapping
// ErrInvalidOptions that names the option it cannot use.
func NewGradient2(o Gradient2Options) (*Gradient2, error) {
	const name = "Gradient2Options"
	b, err := newBounds(name, &o.InitialLimit, &o.MinLimit, &o.MaxLimit)
	if err != nil {
		return nil, err
	}
	for _, w := range []struct {
		field string
		v     *int
		def   int
	}{{"ShortWindow", &o.ShortWindow, DefaultGradient2ShortWindow}, {"LongWindow", &o.LongWindow, DefaultGradient2LongWindow}} {
		if *w.v < 0 {
			return nil, fmt.Errorf("%w: %s.%s %d: want at least 1 sample (0 for the default, %d)", ErrInvalidOptions, name, w.field, *w.v, w.def)
		}
		if *w.v == 0 {
			*w.v = w.def
		}
	}
	if o.ShortWindow > o.LongWindow {
		return nil, fmt.Errorf("%w: %s.ShortWindow %d is longer than LongWindow %d", ErrInvalidOptions, name, o.ShortWindow, o.LongWindow)
	}
	if err := ratioOption(name, "Smoothing", &o.Smoothing, DefaultGradient2Smoothing, 1, false); err != nil {
		return nil, err
	}
	if err := ratioOption(name, "Utilisation", &o.Utilisation, DefaultUtilisation, 1, false); err != nil {
		return nil, err
	}
	if o.QueueSize == nil {
		o.QueueSize = math.Sqrt
	}
	probe, err := newProber(name, &o.ProbeInterval, &o.ProbeSamples, &o.ProbeRatio, float64(o.InitialLimit), b)
	if err != nil {
		return nil, err
	}
	return &Gradient2{
		opts: o, b: b, limit: float64(o.InitialLimit), probe: probe,
		short: ema{window: o.ShortWindow}, long: ema{window: o.LongWindow},
	}, nil
}

// Limit is the current limit.
func (g *Gradient2) Limit() int {
	if g.probe.probing {
		return g.probe.limit
	}
	return int(g.limit)
}

// Update moves the limit by the gradient of the sample's RTT and returns
// it.
func (g *Gradient2) Update(s Sample) int {
	if g.probe.consume(s, g.limit, g.b) {
		return g.Limit()
	}
	rtt := float64(s.RTT)
	short := g.short.add(rtt)
	long := g.long.add(rtt)
	if long >= 2*short {
		g.long.value *= 0.95
	}
	if !g.unanchored {
		long = math.Min(long, float64(g.probe.mean))
	}
	gradient := math.Max(0.5, math.Min(1, long/short))
	if short == 0 {
		gradient = 1
	}
	q := g.opts.QueueSize(g.limit)
	if math.IsNaN(q) || q < 0 {
		q = 0
	}
	target := g.limit*gradient + math.Min(q, g.b.max)
	next := g.b.clamp(g.limit + g.opts.Smoothing/g.limit*(target-g.limit))
	if next < g.limit || utilised(s.InFlight, g.limit, g.opts.Utilisation) {
		g.limit = next
	}
	return g.Limit()
}
