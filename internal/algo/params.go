package algo

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kind names an algorithm.
type Kind uint8

// The algorithms. The zero Kind is invalid.
const (
	TokenBucket Kind = iota + 1
	LeakyBucket
	FixedWindow
	SlidingLog
	SlidingWindow
)

// String returns the name used in configuration and in the public API.
func (k Kind) String() string {
	switch k {
	case TokenBucket:
		return "token_bucket"
	case LeakyBucket:
		return "leaky_bucket"
	case FixedWindow:
		return "fixed_window"
	case SlidingLog:
		return "sliding_log"
	case SlidingWindow:
		return "sliding_window"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ParseKind maps an algorithm name to its Kind.
func ParseKind(name string) (Kind, bool) {
	for k := TokenBucket; k <= SlidingWindow; k++ {
		if k.String() == name {
			return k, true
		}
	}
	return 0, false
}

// IsBucket reports whether the algorithm is one of the two GCRA buckets,
// which honour Burst; the window algorithms ignore it.
func (k Kind) IsBucket() bool { return k == TokenBucket || k == LeakyBucket }

// maxUnits bounds every stored or computed quantity: 2^50 leaves room for the
// sums the algorithms form while staying below 2^53, the largest integer a
// Lua number holds exactly.
const maxUnits = 1 << 50

// MaxValue is the largest rate, burst, period (in microseconds) or bucket
// horizon (see [NewParams]) a limit may have.
const MaxValue = maxUnits

// ErrInvalidLimit is wrapped by every error NewParams returns.
var ErrInvalidLimit = errors.New("floodgate: invalid limit")

// Params is a validated limit with the constants its algorithm derives from
// it. Build it once with NewParams and reuse it: deriving costs a GCD.
type Params struct {
	Kind   Kind
	Rate   int64 // units per Period
	Period int64 // microseconds
	Burst  int64 // bucket capacity (Rate when the limit gave 0); 0 for windows

	// The buckets count time in ticks of 1/Scale µs, the finest grid on which
	// the emission interval Period/Rate is a whole number: Interval ticks.
	// Tolerance = Burst·Interval is the bucket's depth in ticks.
	Scale     int64
	Interval  int64
	Tolerance int64
	MaxAhead  int64 // µs: no admitted TAT lies further ahead of now than this

	perScale, perInterval, perPeriod divider
}

// NewParams validates a limit: rate > 0 units per period > 0 µs, burst ≥ 0
// (0 means rate), all at most MaxValue, and for the buckets a horizon
// Burst·Period/gcd(Rate, Period) of at most MaxValue ticks, which is what lets
// the bucket count exactly in integers.
func NewParams(kind Kind, rate, periodMicros, burst int64) (Params, error) {
	p := Params{Kind: kind, Rate: rate, Period: periodMicros}
	switch {
	case kind < TokenBucket || kind > SlidingWindow:
		return p, fmt.Errorf("%w: unknown algorithm %s", ErrInvalidLimit, kind)
	case rate <= 0:
		return p, fmt.Errorf("%w: rate must be positive, got %d", ErrInvalidLimit, rate)
	case rate > maxUnits:
		return p, fmt.Errorf("%w: rate %d exceeds the maximum %d", ErrInvalidLimit, rate, int64(maxUnits))
	case periodMicros <= 0:
		return p, fmt.Errorf("%w: period must be at least 1µs, got %dµs", ErrInvalidLimit, periodMicros)
	case periodMicros > maxUnits:
		return p, fmt.Errorf("%w: period %dµs exceeds the maximum %dµs", ErrInvalidLimit, periodMicros, int64(maxUnits))
	case burst < 0:
		return p, fmt.Errorf("%w: burst must not be negative, got %d", ErrInvalidLimit, burst)
	case burst > maxUnits:
		return p, fmt.Errorf("%w: burst %d exceeds the maximum %d", ErrInvalidLimit, burst, int64(maxUnits))
	}
	if !kind.IsBucket() {
		p.perPeriod = newDivider(periodMicros)
		return p, nil
	}
	if burst == 0 {
		burst = rate
	}
	g := gcd(periodMicros, rate)
	p.Burst = burst
	p.Scale = rate / g
	p.Interval = periodMicros / g
	if p.Interval > maxUnits/burst {
		return p, fmt.Errorf("%w: %s with rate %d per %dµs and burst %d cannot be counted exactly: "+
			"burst × period / gcd(rate, period) = %d × %d exceeds %d; use a rate that divides the period "+
			"more evenly, a smaller burst or a shorter period",
			ErrInvalidLimit, kind, rate, periodMicros, burst, burst, p.Interval, int64(maxUnits))
	}
	p.Tolerance = burst * p.Interval
	p.MaxAhead = p.Tolerance/p.Scale + 2
	p.perScale, p.perInterval = newDivider(p.Scale), newDivider(p.Interval)
	return p, nil
}

// Compile validates a limit as the public API states it (an algorithm name,
// a rate, a period that must be whole microseconds, a burst) and derives its
// Params.
func Compile(algorithm string, rate int64, period time.Duration, burst int64) (Params, error) {
	kind, ok := ParseKind(algorithm)
	if !ok {
		return Params{}, fmt.Errorf("%w: unknown algorithm %q (want one of %s)", ErrInvalidLimit, algorithm, kindNames())
	}
	if period%time.Microsecond != 0 {
		return Params{}, fmt.Errorf("%w: period %s is not a whole number of microseconds", ErrInvalidLimit, period)
	}
	return NewParams(kind, rate, int64(period/time.Microsecond), burst)
}

func kindNames() string {
	names := make([]string, 0, SlidingWindow)
	for k := TokenBucket; k <= SlidingWindow; k++ {
		names = append(names, k.String())
	}
	return strings.Join(names, ", ")
}

// Result is one decision. Durations are whole microseconds, rounded up.
type Result struct {
	Allowed    bool
	Limit      int64
	Remaining  int64
	RetryAfter int64 // 0 when allowed; Never when the cost exceeds what the limit can ever admit
	ResetAfter int64
	Delay      int64 // leaky bucket only
}

// Never is the RetryAfter of a request that can never pass.
const Never = -1

// State is the compact state of one key for every algorithm but the sliding
// log (see Log). Its zero value is a key that has never been used. The
// meaning of the fields depends on the algorithm:
//
//	buckets:        A = theoretical arrival time (µs), B = ticks past A (< C), C = Scale of B
//	fixed window:   A = start of the window (µs), B = units admitted in it
//	sliding window: A = start of the current window (µs), B = its count, C = previous window's count
type State struct{ A, B, C int64 }

// Decide applies one request of cost units at now (µs) to the state: it
// writes the decision to *r and, if the request was admitted, updates *s. A
// cost of 0 only reads. It must not be used for SlidingLog, whose state is a
// Log.
//
// Results go through a pointer because a six-field struct returned by value
// is copied with wide moves right after narrow stores, which stalls store
// forwarding: measured at a third of a decision's time.
func Decide(p *Params, s *State, now, cost int64, r *Result) {
	switch p.Kind {
	case TokenBucket, LeakyBucket:
		decideBucket(p, s, now, cost, r)
		return
	case FixedWindow:
		decideFixedWindow(p, s, now, cost, r)
		return
	case SlidingWindow:
		decideSlidingWindow(p, s, now, cost, r)
		return
	}
	panic("algo: Decide called for " + p.Kind.String())
}

// Limit is what a decision under p reports as its Limit: the Burst of a
// bucket, the Rate of a window.
func (p *Params) Limit() int64 {
	if p.Kind.IsBucket() {
		return p.Burst
	}
	return p.Rate
}
