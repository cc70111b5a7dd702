// Package adaptive protects a backend whose capacity nobody wrote down:
// limits that follow the backend's health instead of a number in a file.
//
//   - A concurrency limit admits a request while fewer than Limit requests
//     are in flight, and learns Limit from the round-trip times and
//     outcomes of the requests that finish (Algorithm: AIMD, Gradient2,
//     Vegas), between a floor and a ceiling, without oscillating.
//   - When the limit is reached, requests wait in a bounded queue (FIFO,
//     or LIFO as adaptive LIFO recommends under overload) for at most a
//     bounded time, and lower priority classes are shed first: sheddable,
//     then default; critical only when nothing else is left.
//   - An adaptive rate limit scales a floodgate.Limit's rate between a
//     floor and its configured value by the backend's health (its p99
//     latency against a target, its error ratio), so that a fleet sharing
//     one limit through a store shrinks it together.
//
// A rate limit protects a backend against its callers; these protect it
// against itself: a slow database, a deploy, a noisy neighbour.
package adaptive

import (
	"strings"
	"time"
)

// Sample is what a finished request tells an Algorithm.
type Sample struct {
	// RTT is how long the request took, from its admission to its end.
	RTT time.Duration
	// InFlight is how many requests were in flight when it was admitted,
	// itself included.
	InFlight int
	// Dropped says that it failed in a way that signals overload: a
	// timeout, a 503 or 429 from the backend, a queue that was full.
	Dropped bool
	// At is when it finished, by the limiter's clock.
	At time.Time
}

// An Algorithm learns a concurrency limit from samples. Implementations
// are not safe for concurrent use: the Limiter serialises its calls.
type Algorithm interface {
	// Limit is the current limit, at least 1.
	Limit() int
	// Update takes one finished request into account and returns the new
	// limit.
	Update(s Sample) int
}

// Priority is a request's class: lower classes are shed first.
type Priority int

// The classes, from the first shed to the last.
const (
	Sheddable Priority = iota // batch jobs, prefetches, retries: shed first
	Default                   // ordinary traffic
	Critical                  // what users wait for: shed only when nothing else is left
)

// String is the class's name as headers and metrics spell it.
func (p Priority) String() string {
	switch p {
	case Sheddable:
		return "sheddable"
	case Default:
		return "default"
	case Critical:
		return "critical"
	}
	return "unknown"
}

// ParsePriority reads a class name (critical, default, sheddable; case
// insensitive, as the X-Priority header may send it).
func ParsePriority(s string) (Priority, bool) {
	for _, p := range []Priority{Sheddable, Default, Critical} {
		if strings.EqualFold(s, p.String()) {
			return p, true
		}
	}
	return Default, false
}
