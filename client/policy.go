package client

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Backoff is exponential backoff with full jitter, the wait before a retry
// when the server did not say how long to wait: retry n (0 for the first)
// waits a uniform random time in [0, min(Cap, Base·2^n)).
//
// Full jitter rather than equal jitter (half fixed, half random) or none:
// AWS's measurements ("Exponential Backoff And Jitter", 2015) show that
// clients refused together and retrying on the same schedule stay together
// and are refused together again, while drawing the whole wait at random
// spreads them evenly over the window, which took the fewest calls and
// about the least time of the variants measured; decorrelated jitter did
// about as well with a state per client.
type Backoff struct {
	Base time.Duration // the window of the first retry; > 0
	Cap  time.Duration // the largest window; ≥ Base
}

// DefaultBackoff is the backoff of a transport built without WithBackoff.
var DefaultBackoff = Backoff{Base: 100 * time.Millisecond, Cap: 10 * time.Second}

// Window is min(Cap, Base·2^n), the range retry n draws its wait from.
func (b Backoff) Window(n int) time.Duration {
	if n < 0 {
		n = 0
	}
	if n >= 62 || b.Base > b.Cap>>min(n, 62) {
		return b.Cap
	}
	return b.Base << n
}

// Delay is retry n's wait for u, a uniform random number in [0, 1).
func (b Backoff) Delay(n int, u float64) time.Duration {
	return time.Duration(u * float64(b.Window(n)))
}

func (b Backoff) validate() error {
	if b.Base <= 0 || b.Cap < b.Base {
		return fmt.Errorf("%w: WithBackoff(Base %v, Cap %v): want 0 < Base ≤ Cap", ErrInvalidOption, b.Base, b.Cap)
	}
	return nil
}

// Policy decides how long to wait before a retry, from what the server
// asked, the retry's number and the caller's deadline. It is transport
// neutral: the HTTP transport reads the server's wait from Retry-After and
// the RateLimit fields, a gRPC interceptor from retry pushback.
type Policy struct {
	MaxRetries int           // retries after the first attempt; ≥ 0
	MaxWait    time.Duration // the longest wait the server may ask for; > 0
	Backoff    Backoff       // the wait when the server asks for none
}

// Defaults of a transport built without options.
const (
	DefaultMaxRetries = 3
	DefaultMaxWait    = 30 * time.Second
)

// The reasons Policy.Wait gives for not retrying.
var (
	// ErrRetriesExhausted: the policy's MaxRetries were all used.
	ErrRetriesExhausted = errors.New("client: no retries left")
	// ErrWaitTooLong: the server asked for a wait above MaxWait.
	ErrWaitTooLong = errors.New("client: the server asked for a wait above the maximum")
	// ErrPastDeadline: the wait would end after the caller's deadline; it is
	// always returned together with context.DeadlineExceeded.
	ErrPastDeadline = errors.New("client: the wait would pass the deadline")
)

// Wait is how long to wait before retry n (0 for the first) given what the
// server asked (asked, when told is true) and the time left before the
// caller's deadline (left; math.MaxInt64 for none), with u a uniform random
// number in [0, 1).
//
// When the server named a wait, the retry waits at least that long, never
// earlier, plus a backoff draw (clipped at the deadline), so that clients
// told the same Retry-After do not all come back at the same instant. When
// it did not, the wait is the backoff draw alone.
//
// It returns, in this order of precedence, ErrRetriesExhausted when
// n ≥ MaxRetries, ErrPastDeadline when the wait (asked, or the backoff draw
// when the server asked for none) would not end before the deadline, and
// ErrWaitTooLong when asked > MaxWait.
func (p Policy) Wait(n int, asked time.Duration, told bool, left time.Duration, u float64) (time.Duration, error) {
	if n >= p.MaxRetries {
		return 0, ErrRetriesExhausted
	}
	if !told {
		asked = 0
	}
	d, err := p.after(n, asked, told, left, u)
	if err == nil && asked > p.MaxWait {
		return 0, ErrWaitTooLong
	}
	return d, err
}

// Pause is how long to hold a request that a pre-emptive pause of d (the
// time left until a policy reported at r=0 resets) applies to: d plus a
// first retry's backoff draw, so that the held requests do not all leave at
// the same instant, clipped to end before the deadline. It is 0 when d ≤ 0
// and when d > MaxWait: a pause that long is not kept, the request goes and
// the server's answer goes to the caller. It returns ErrPastDeadline when d
// does not end before the deadline (left; math.MaxInt64 for none).
func (p Policy) Pause(d, left time.Duration, u float64) (time.Duration, error) {
	if d <= 0 || d > p.MaxWait {
		return 0, nil
	}
	return p.after(0, d, true, left, u)
}

// after is the wait asked plus retry n's backoff draw, clipped to end
// before the deadline; ErrPastDeadline when asked (or, when the server
// asked for nothing, the draw) does not end before it.
func (p Policy) after(n int, asked time.Duration, told bool, left time.Duration, u float64) (time.Duration, error) {
	jitter := p.Backoff.Delay(n, u)
	if asked >= left || (!told && jitter >= left) {
		return 0, ErrPastDeadline
	}
	return asked + min(jitter, left-asked-1), nil
}

func (p Policy) validate() error {
	if p.MaxRetries < 0 {
		return fmt.Errorf("%w: WithMaxRetries(%d): want ≥ 0", ErrInvalidOption, p.MaxRetries)
	}
	if p.MaxWait <= 0 {
		return fmt.Errorf("%w: WithMaxWait(%v): want > 0", ErrInvalidOption, p.MaxWait)
	}
	return p.Backoff.validate()
}

// noDeadline is the time left when the caller set no deadline.
const noDeadline = time.Duration(math.MaxInt64)
