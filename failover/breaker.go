package failover

import (
	"sync/atomic"
	"time"
)

// BreakerState is the state of the circuit breaker.
type BreakerState int32

// The breaker's states.
const (
	// Closed: decisions ask the store.
	Closed BreakerState = iota
	// Open: decisions skip the store until the cool-down has passed.
	Open
	// HalfOpen: one probe asks the store; other decisions skip it.
	HalfOpen
)

// String returns the state as metrics and logs name it: "closed", "open"
// or "half_open".
func (s BreakerState) String() string {
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

// phase is one stretch of the breaker in one state. Phases are immutable
// apart from the failure count, and each transition installs a new one with
// a compare-and-swap, so a decision reads the state with one atomic load,
// and a store call that returns late (its phase long replaced) cannot move
// the breaker: its CAS names a phase that is gone.
type phase struct {
	state    BreakerState
	probeAt  time.Time    // Open: when a probe may go
	failures atomic.Int32 // Closed: consecutive store failures
}

type breaker struct {
	cur       atomic.Pointer[phase]
	threshold int32
	coolDown  time.Duration
	now       func() time.Time
}

func (b *breaker) init(threshold int, coolDown time.Duration, now func() time.Time) {
	b.threshold = int32(min(threshold, 1<<30))
	b.coolDown = coolDown
	b.now = now
	b.cur.Store(&phase{state: Closed})
}

func (b *breaker) state() BreakerState { return b.cur.Load().state }

// admit returns the phase a decision runs under and whether it may call the
// store. In Open, the first decision after the cool-down wins the CAS to
// HalfOpen and is the probe; everyone else keeps skipping the store.
func (b *breaker) admit() (*phase, bool) {
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
	probe := &phase{state: HalfOpen}
	if !b.cur.CompareAndSwap(p, probe) {
		return p, false
	}
	return probe, true
}

// succeeded records an answer from the store; it reports whether that closed
// the breaker.
func (b *breaker) succeeded(p *phase) bool {
	switch p.state {
	case Closed:
		if p.failures.Load() != 0 { // a write on every success would bounce the cache line
			p.failures.Store(0)
		}
	case HalfOpen:
		return b.cur.CompareAndSwap(p, &phase{state: Closed})
	}
	return false
}

// failed records a store failure; it reports whether that opened the
// breaker. Exactly one of the concurrent failures that reach the threshold
// opens it.
func (b *breaker) failed(p *phase) bool {
	switch p.state {
	case Closed:
		if p.failures.Add(1) < b.threshold {
			return false
		}
	case HalfOpen:
	default:
		return false
	}
	return b.cur.CompareAndSwap(p, &phase{state: Open, probeAt: b.now().Add(b.coolDown)})
}

// abandon ends a call that said nothing about the store's health (the
// caller gave up, or the request was bad). A probe that ends so hands the
// probe on at once instead of waiting out another cool-down.
func (b *breaker) abandon(p *phase) {
	if p.state == HalfOpen {
		b.cur.CompareAndSwap(p, &phase{state: Open, probeAt: b.now()})
	}
}

// retryAfter is how long a denied client should wait: the time until the
// next probe when one is scheduled. Otherwise (the breaker has not opened
// yet, or a probe is due or running) when the store answers again is
// unknown, and the cool-down, the breaker's own retry interval, stands in.
func (b *breaker) retryAfter() time.Duration {
	p := b.cur.Load()
	if p.state == Open {
		if d := p.probeAt.Sub(b.now()); d > 0 {
			return d
		}
	}
	return b.coolDown
}
