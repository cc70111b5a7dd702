// Package floodgate is a rate limiter for Go services and API gateways.
//
// A decision is a pure function of a limit, the key's state, the time and a
// cost; a [Limiter] decides where the state lives. [NewMemory] keeps it in
// this process: a sharded table that decides in about 100 ns without
// allocating (docs/benchmarks.md). The redisstore package keeps it in Redis so that a fleet
// shares one limit.
//
//	limiter := floodgate.NewMemory()
//	d, err := limiter.AllowN(ctx, "user:42", floodgate.PerSecond(10).WithBurst(20), 1)
//	if err == nil && !d.Allowed {
//		// answer 429 and ask the client to come back after d.RetryAfter
//	}
//
// Five algorithms are available; see [Algorithm] for what each guarantees
// and what the fields of its [Decision] mean.
package floodgate

import (
	"context"
	"errors"
	"time"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// Algorithm names how a limit counts.
type Algorithm string

// The algorithms. Each keeps the guarantee stated here over any sequence of
// requests, with time counted in whole microseconds.
const (
	// TokenBucket refills continuously at Rate per Period and holds at most
	// Burst units (GCRA form: one timestamp of state). Over any interval of
	// length t it admits at most Burst + Rate·t/Period units. Limit is Burst;
	// Remaining the units that could pass now; ResetAfter the time until the
	// bucket is full again.
	TokenBucket Algorithm = "token_bucket"
	// LeakyBucket shapes traffic: it admits a request with a Delay so that
	// requests leave spaced Period/Rate apart, and denies when the queue would
	// hold more than Burst units (the one leaving at once included; nginx's
	// limit_req burst=b is Burst b+1). Limit is Burst; Remaining the room left
	// in the queue; ResetAfter the time until the queue is empty.
	LeakyBucket Algorithm = "leaky_bucket"
	// FixedWindow admits at most Rate units per window; windows are aligned
	// to multiples of Period since the Unix epoch, so up to 2·Rate can pass
	// across a boundary. RetryAfter and ResetAfter point at the next window.
	FixedWindow Algorithm = "fixed_window"
	// SlidingLog is exact: at most Rate units in any interval of length
	// Period. It records every admitted request: memory O(Rate) per key.
	SlidingLog Algorithm = "sliding_log"
	// SlidingWindow estimates the last Period from two aligned windows,
	// previous·(1 − elapsed/Period) + current, and admits when the estimate
	// plus the cost stays within Rate (compared exactly, in integers).
	SlidingWindow Algorithm = "sliding_window"
)

// Algorithms lists every algorithm, in the order of the constants.
func Algorithms() []Algorithm {
	return []Algorithm{TokenBucket, LeakyBucket, FixedWindow, SlidingLog, SlidingWindow}
}

// Limit is a rate limit: Rate units per Period, counted by Algorithm.
type Limit struct {
	Algorithm Algorithm
	Rate      int64         // units admitted per Period
	Period    time.Duration // a whole number of microseconds
	Burst     int64         // bucket/queue capacity; 0 means Rate; ignored by window algorithms
}

// Decision is the answer to one request.
type Decision struct {
	// Allowed reports whether the request may pass; if so its cost was consumed.
	Allowed bool
	// Limit is Rate for window algorithms and Burst for buckets.
	Limit int64
	// Remaining is how many more unit requests would pass right now.
	Remaining int64
	// RetryAfter is, for a denied request, the wait after which the same
	// request would pass if nothing else arrived; negative when it can never
	// pass (its cost is above Burst, or above Rate for windows). 0 when allowed.
	RetryAfter time.Duration
	// ResetAfter is the time until the key is back to its full, unused state.
	ResetAfter time.Duration
	// Delay is, for LeakyBucket, how long to hold the request before passing it on.
	Delay time.Duration
}

// Limiter decides requests against limits.
type Limiter interface {
	// AllowN decides whether cost units may pass for key under limit and, if
	// so, consumes them, atomically. cost 0 only reads.
	AllowN(ctx context.Context, key string, limit Limit, cost int64) (Decision, error)
}

// Clock tells the time. Inject one with WithClock to run limits on virtual time.
type Clock interface{ Now() time.Time }

// The errors of bad input. Every error a Limiter returns for a bad limit,
// cost or key wraps one of them.
var (
	ErrInvalidLimit = algo.ErrInvalidLimit
	ErrInvalidCost  = errors.New("floodgate: invalid cost")
	ErrInvalidKey   = errors.New("floodgate: invalid key")
)

// ErrStoreUnavailable is wrapped by the errors of a store that could not
// answer in time (Redis down, a timeout): the caller's failure policy decides
// what to do with the request.
var ErrStoreUnavailable = errors.New("floodgate: store unavailable")
