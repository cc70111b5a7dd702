package floodgate

import (
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// PerSecond returns a token bucket of n units per second with a burst of n.
func PerSecond(n int64) Limit { return Limit{Algorithm: TokenBucket, Rate: n, Period: time.Second} }

// PerMinute returns a token bucket of n units per minute with a burst of n.
func PerMinute(n int64) Limit { return Limit{Algorithm: TokenBucket, Rate: n, Period: time.Minute} }

// PerHour returns a token bucket of n units per hour with a burst of n.
func PerHour(n int64) Limit { return Limit{Algorithm: TokenBucket, Rate: n, Period: time.Hour} }

// WithBurst returns the limit with its bucket capacity set to b.
func (l Limit) WithBurst(b int64) Limit { l.Burst = b; return l }

// WithAlgorithm returns the limit counted by a.
func (l Limit) WithAlgorithm(a Algorithm) Limit { l.Algorithm = a; return l }

// Validate reports whether the limit can be enforced, with an error wrapping
// ErrInvalidLimit that names the problem when it cannot.
func (l Limit) Validate() error {
	_, err := l.params()
	return err
}

// String renders the limit as "token_bucket 10/1s burst 20".
func (l Limit) String() string {
	s := fmt.Sprintf("%s %d/%s", l.Algorithm, l.Rate, l.Period)
	if l.Burst != 0 {
		s += fmt.Sprintf(" burst %d", l.Burst)
	}
	return s
}

// params validates the limit and derives its algorithm's constants.
func (l Limit) params() (algo.Params, error) {
	return algo.Compile(string(l.Algorithm), l.Rate, l.Period, l.Burst)
}

// ValidateRequest returns the error every Limiter gives for an empty key,
// a key longer than MaxKeyBytes or a negative cost (wrapping ErrInvalidKey,
// ErrKeyTooLong or ErrInvalidCost), nil otherwise: for stores written
// outside this package.
func ValidateRequest(key string, cost int64) error {
	if key == "" {
		return fmt.Errorf("%w: key is empty", ErrInvalidKey)
	}
	if err := CheckLength("key", key, MaxKeyBytes); err != nil {
		return fmt.Errorf("floodgate: %w", err)
	}
	if cost < 0 {
		return fmt.Errorf("%w: cost must not be negative, got %d", ErrInvalidCost, cost)
	}
	return nil
}

// checkRequest is the inlinable fast path of ValidateRequest.
func checkRequest(key string, cost int64) error {
	if key == "" || len(key) > MaxKeyBytes || cost < 0 {
		return ValidateRequest(key, cost)
	}
	return nil
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// fill copies an algorithm's result into a Decision field by field (see
// algo.Decide for why not as a whole).
func fill(d *Decision, r *algo.Result) {
	d.Allowed = r.Allowed
	d.Limit = r.Limit
	d.Remaining = r.Remaining
	d.RetryAfter = micros(r.RetryAfter)
	d.ResetAfter = micros(r.ResetAfter)
	d.Delay = micros(r.Delay)
}
