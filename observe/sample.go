package observe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate"
)

// DefaultFullRate is the rate of timed decisions per second a Sampler
// aims at when none is given: below it, every decision is timed.
const DefaultFullRate = 10_000

// The Sampler's estimation windows: the decision rate is estimated over
// windows of FullRate/10 timed decisions, no shorter than minWindow (a
// burst is not a rate) and no longer than maxWindow (a slower rate is
// seen within 100 ms).
const (
	minWindow = time.Millisecond
	maxWindow = 100 * time.Millisecond
	maxPeriod = 1 << 30 // the largest N: one decision in a billion
)

// ErrInvalidSampler is wrapped by NewSampler's error for options it
// cannot use.
var ErrInvalidSampler = errors.New("observe: invalid sampler options")

// SamplerOptions configure a Sampler.
type SamplerOptions struct {
	// FullRate is how many decisions per second are timed, at most: below
	// it every decision is; above it one in N is, N adapted so that about
	// FullRate per second are. 0 times every decision (exact, at the cost
	// of two clock reads and the observers' full work per decision);
	// negative is an error.
	FullRate int
	// Clock tells the time; nil is the system's monotonic clock. Tests
	// drive a Sampler with a floodgate.ManualClock.
	Clock floodgate.Clock
	// Rand returns a uniform random number in [0, n); nil is
	// math/rand/v2's Uint64N, which takes no lock. Tests inject a
	// deterministic one.
	Rand func(n uint64) uint64
}

// A Sampler decides which decisions are timed: fully observed, with a
// Latency and a Time read from the clock, and counted by the observers'
// costlier work (latency histograms, top consumers). The others, untimed,
// are still reported, with their outcome, key, cost and decision, but
// read no clock and carry no latency. Below FullRate decisions per second
// every decision is timed; above it (from 3/2 of it), each is timed with
// probability 1/N, and a timed event carries Weight N, so that sums weighted by it are
// unbiased estimates of the sums over every decision.
//
// Deciding costs one atomic load and, when sampling, one random draw
// (math/rand/v2's per-thread generator: no lock); only a timed decision
// writes shared memory, and N is re-estimated, under a mutex that is
// never waited for, on timed decisions alone, from the time since the
// last estimate and the timed decisions counted since.
//
// A Sampler is safe for concurrent use. Give one to the observers of a
// process with Sample, so that every surface shares its budget.
type Sampler struct {
	rate  float64 // FullRate; 0: every decision is timed
	batch int64   // timed decisions that end an estimation window early
	clock floodgate.Clock
	draw  func(n uint64) uint64
	base  time.Time // the clock at NewSampler; elapsed times are since it

	period    atomic.Int64 // N: one decision in N is timed
	timed     atomic.Int64 // timed decisions since the last estimate
	estimated atomic.Int64 // elapsed ns at the last estimate
	last      atomic.Int64 // elapsed ns of the latest timed decision's start
	mu        sync.Mutex   // serialises estimates; TryLock'ed, never waited for
}

// NewSampler returns a Sampler, or an error wrapping ErrInvalidSampler.
func NewSampler(opts SamplerOptions) (*Sampler, error) {
	if opts.FullRate < 0 {
		return nil, fmt.Errorf("%w: FullRate %d is negative: want timed decisions per second, or 0 to time every one", ErrInvalidSampler, opts.FullRate)
	}
	s := &Sampler{rate: float64(opts.FullRate), batch: max(1, int64(opts.FullRate)/10), clock: opts.Clock, draw: opts.Rand}
	if s.draw == nil {
		s.draw = rand.Uint64N
	}
	if s.clock == nil {
		s.base = time.Now()
	} else {
		s.base = s.clock.Now()
	}
	s.period.Store(1)
	return s, nil
}

// Period is N: one decision in N is timed now.
func (s *Sampler) Period() int64 { return s.period.Load() }

// elapsed is the time since base, from the monotonic clock alone when the
// clock is the system's.
func (s *Sampler) elapsed() time.Duration {
	if s.clock == nil {
		return time.Since(s.base)
	}
	return s.clock.Now().Sub(s.base)
}

// Since is the time from at, a time Start returned, to now: the
// decision's latency. A nil s reads the system's clock.
func (s *Sampler) Since(at time.Time) time.Duration {
	if s == nil || s.clock == nil {
		return time.Since(at) // at carries base's monotonic reading
	}
	return s.clock.Now().Sub(at)
}

// Start decides whether a decision starting now is timed. A timed one gets
// the time now and its weight N; an untimed one weight 0 and the time the
// latest timed decision started, without reading the clock. A nil s times
// every decision, with weight 1. Start and Since are for a surface that
// reports without observe.Start (the engine); the others use Start.
func (s *Sampler) Start() (at time.Time, weight int64) {
	if s == nil {
		return time.Now(), 1
	}
	n := s.period.Load()
	if n > 1 && s.draw(uint64(n)) != 0 {
		return s.base.Add(time.Duration(s.last.Load())), 0
	}
	e := s.elapsed()
	s.last.Store(int64(e))
	if s.rate > 0 {
		s.count(int64(e))
	}
	return s.base.Add(e), n
}

// count counts a timed decision started at elapsed e and re-estimates N
// when an estimation window ends.
func (s *Sampler) count(e int64) {
	c := s.timed.Add(1)
	w := e - s.estimated.Load()
	if (c < s.batch || w < int64(minWindow)) && w < int64(maxWindow) {
		return
	}
	if !s.mu.TryLock() {
		return // another decision is estimating
	}
	defer s.mu.Unlock()
	w = e - s.estimated.Load()
	if w <= 0 {
		return // estimated since this decision started
	}
	c = s.timed.Swap(0)
	s.estimated.Store(e)
	s.period.Store(nextPeriod(c, s.period.Load(), time.Duration(w), s.rate))
}

// nextPeriod is the N that would have timed rate decisions per second
// from c timed in w, one in n of them: the decisions numbered about c·n,
// so N = c·n / (rate·w), rounded, at least 1. Rounding rather than
// rounding up keeps a rate that hovers at FullRate fully observed: the
// timed decisions per second stay between 2/3 and 3/2 of FullRate once
// sampling.
func nextPeriod(c, n int64, w time.Duration, rate float64) int64 {
	perSecond := float64(c) * float64(n) / w.Seconds()
	return int64(min(max(1, math.Round(perSecond/rate)), maxPeriod))
}

// sampled is an Observer whose decisions a Sampler samples; Start unwraps
// it.
type sampled struct {
	Observer
	s *Sampler // nil: every decision timed
}

// Sample returns o with its decisions sampled by s, for the surfaces to
// share: Start times the decisions s picks and marks the others untimed.
// A nil s times every decision (exact, as without sampling; the surfaces
// then leave it so rather than sample by default). A nil o is nil.
func Sample(o Observer, s *Sampler) Observer {
	switch w := o.(type) {
	case nil:
		return nil
	case *sampled:
		return &sampled{Observer: w.Observer, s: s}
	case *spanningSampled:
		return &spanningSampled{sampled{Observer: w.Observer, s: s}}
	}
	if _, ok := o.(Spanner); ok {
		return &spanningSampled{sampled{Observer: o, s: s}}
	}
	return &sampled{Observer: o, s: s}
}

// spanningSampled is sampled around a Spanner, so that it stays one.
type spanningSampled struct{ sampled }

func (w *spanningSampled) Begin(ctx context.Context, surface, policy string) context.Context {
	return w.Observer.(Spanner).Begin(ctx, surface, policy)
}

func (w *spanningSampled) End(ctx context.Context, s Summary) { w.Observer.(Spanner).End(ctx, s) }

// SampleByDefault is what a surface does with the Observer it is given:
// one that Sample already wrapped (or nil) is kept; any other is sampled
// by a new Sampler at DefaultFullRate. To share one Sampler among several
// surfaces, or to time every decision, wrap the Observer with Sample
// before giving it.
func SampleByDefault(o Observer) Observer {
	switch o.(type) {
	case nil, *sampled, *spanningSampled:
		return o
	}
	s, _ := NewSampler(SamplerOptions{FullRate: DefaultFullRate}) // a valid rate: no error
	return Sample(o, s)
}

// Unwrap returns the Observer that Sample wrapped in o and its Sampler;
// any other o as is, with a nil Sampler (every decision timed).
func Unwrap(o Observer) (Observer, *Sampler) {
	switch w := o.(type) {
	case *sampled:
		return w.Observer, w.s
	case *spanningSampled:
		return w.Observer, w.s
	}
	return o, nil
}
