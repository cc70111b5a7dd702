// Package breaker is the circuit breaker that failover puts in front of a
// store and floodgate proxy in front of each route's upstream: closed until
// a threshold of consecutive failures, then open for a cool-down, then
// half-open while one probe call goes through; the probe's success closes
// it, its failure opens it for another cool-down.
//
// It counts and switches; what a failure is, and what a caller does while
// it is open, are its users' business. A call reads the state with one
// atomic load and allocates nothing unless it changes the state.
package breaker

import (
	"sync/atomic"
	"time"
)

// State is the state of a Breaker.
type State int32

// The states.
const (
	// Closed: calls go through.
	Closed State = iota
	// Open: calls are refused until the cool-down has passed.
	Open
	// HalfOpen: one probe call goes through; the others are refused.
	HalfOpen
)

// States lists every State, in the order of their values, for metrics
// that report each.
func States() []State { return []State{Closed, Open, HalfOpen} }

// String returns the state as metrics and logs name it: "closed", "open"
// or "half_open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return "unknown"
}

// Phase is one stretch of the breaker in one state. Phases are immutable
// apart from the failure count, and each transition installs a new one with
// a compare-and-swap, so a call reads the state with one atomic load, and a
// call that returns late (its phase long replaced) cannot move the breaker:
// its CAS names a phase that is gone.
type Phase struct {
	state    State
	probeAt  time.Time    // Open: when a probe may go
	failures atomic.Int32 // Closed: consecutive failures
}

// State is the state the phase is a stretch of.
func (p *Phase) State() State { return p.state }

// Breaker is a circuit breaker. The zero value is not usable: make it
// with New or Init. It is safe for concurrent use.
type Breaker struct {
	cur       atomic.Pointer[Phase]
	threshold int32
	coolDown  time.Duration
	now       func() time.Time
}

// New returns a closed Breaker that opens after threshold consecutive
// failures (at least 1) and stays open for coolDown, on the clock now.
func New(threshold int, coolDown time.Duration, now func() time.Time) *Breaker {
	b := new(Breaker)
	b.Init(threshold, coolDown, now)
	return b
}

// Init sets up a Breaker held by value, as New does.
func (b *Breaker) Init(threshold int, coolDown time.Duration, now func() time.Time) {
	b.threshold = int32(max(1, min(threshold, 1<<30)))
	b.coolDown = coolDown
	b.now = now
	b.cur.Store(&Phase{state: Closed})
}

// State is the breaker's current state.
func (b *Breaker) State() State { return b.cur.Load().state }

// Admit returns the phase a call runs under and whether it may go
// through. In Open, the first call after the cool-down wins the CAS to
// HalfOpen and is the probe; everyone else keeps being refused. A call
// admitted must end in exactly one of Succeeded, Failed or Abandon.
func (b *Breaker) Admit() (*Phase, bool) {
	p := b.cur.Load()
	switch p.state {
	case Closed:
		return p, true
	case HalfOpen:
		return p, false
	}
	if b.now().Before(p.probeAt) {
		return p, false
	}
	probe := &Phase{state: HalfOpen}
	if !b.cur.CompareAndSwap(p, probe) {
		return p, false
	}
	return probe, true
}

// Refuses reports, changing nothing, whether Admit would refuse a call
// now (open within the cool-down, or half-open with its probe out), and
// then how long the caller should wait (RetryAfter): a cheap check before
// work that should not be spent on a call that will be refused.
func (b *Breaker) Refuses() (time.Duration, bool) {
	p := b.cur.Load()
	if p.state == Closed || p.state == Open && !b.now().Before(p.probeAt) {
		return 0, false
	}
	return b.RetryAfter(), true
}

// Succeeded records a call that worked; it reports whether that closed
// the breaker.
func (b *Breaker) Succeeded(p *Phase) bool {
	switch p.state {
	case Closed:
		if p.failures.Load() != 0 { // a write on every success would bounce the cache line
			p.failures.Store(0)
		}
	case HalfOpen:
		return b.cur.CompareAndSwap(p, &Phase{state: Closed})
	}
	return false
}

// Failed records a failed call; it reports whether that opened the
// breaker. Exactly one of the concurrent failures that reach the threshold
// opens it.
func (b *Breaker) Failed(p *Phase) bool {
	switch p.state {
	case Closed:
		if p.failures.Add(1) < b.threshold {
			return false
		}
	case HalfOpen:
	default:
		return false
	}
	return b.cur.CompareAndSwap(p, &Phase{state: Open, probeAt: b.now().Add(b.coolDown)})
}

// Abandon ends a call that said nothing about the health of what it
// called (the caller gave up, or the request was bad). A probe that ends
// so hands the probe on at once instead of waiting out another cool-down.
func (b *Breaker) Abandon(p *Phase) {
	if p.state == HalfOpen {
		b.cur.CompareAndSwap(p, &Phase{state: Open, probeAt: b.now()})
	}
}

// RetryAfter is how long a refused caller should wait: the time until the
// next probe when one is scheduled. Otherwise (the breaker has not opened
// yet, or a probe is due or running) when the callee answers again is
// unknown, and the cool-down, the breaker's own retry interval, stands in.
func (b *Breaker) RetryAfter() time.Duration {
	p := b.cur.Load()
	if p.state == Open {
		if d := p.probeAt.Sub(b.now()); d > 0 {
			return d
		}
	}
	return b.coolDown
}
