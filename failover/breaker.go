package failover

import "github.com/floodgate-io/floodgate/internal/breaker"

// BreakerState is the state of the circuit breaker. It names "closed",
// "open" or "half_open" in metrics and logs.
type BreakerState = breaker.State

// The breaker's states.
const (
	// Closed: decisions ask the store.
	Closed = breaker.Closed
	// Open: decisions skip the store until the cool-down has passed.
	Open = breaker.Open
	// HalfOpen: one probe asks the store; other decisions skip it.
	HalfOpen = breaker.HalfOpen
)
