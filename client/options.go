package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate"
)

// ErrInvalidOption is wrapped by the error of an Option built with a bad
// value. NewTransport has no error result, so a transport built with one
// sends nothing: every RoundTrip returns that error, which names the option
// and the value. Call Validate at start-up to find out before the first
// request.
var ErrInvalidOption = errors.New("client: invalid option")

// Option configures NewTransport.
type Option func(*config)

// Sleeper waits d, or until ctx is done, whichever comes first, and then
// returns ctx.Err() if ctx is done. Tests inject one that moves a manual
// clock instead of sleeping.
type Sleeper func(ctx context.Context, d time.Duration) error

type config struct {
	policy        Policy
	budget        *Budget   // nil: no budget
	throttle      *Throttle // nil: no throttle
	nonIdempotent bool
	clock         floodgate.Clock
	sleep         Sleeper
	random        func() float64
	logger        *slog.Logger
	err           error // the first invalid option's
}

func newConfig(opts []Option) config {
	budget, throttle := DefaultBudget, DefaultThrottle
	c := config{
		policy:   Policy{MaxRetries: DefaultMaxRetries, MaxWait: DefaultMaxWait, Backoff: DefaultBackoff},
		budget:   &budget,
		throttle: &throttle,
		clock:    systemClock{},
		sleep:    Sleep,
		random:   rand.Float64,
		logger:   slog.Default(),
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	c.fail(c.policy.validate())
	if c.budget != nil {
		c.fail(c.budget.validate())
	}
	if c.throttle != nil {
		c.fail(c.throttle.validate())
	}
	return c
}

// fail keeps the first error.
func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// Validate reports the first invalid option among opts, as NewTransport
// would meet it, wrapping ErrInvalidOption; nil when all are valid.
func Validate(opts ...Option) error { return newConfig(opts).err }

// Settings are what a list of Options resolves to, for transports other
// than NewTransport's built on this package's pieces: grpclimit's client
// interceptors take the same Options.
type Settings struct {
	Policy             Policy
	Budget             *Budget   // nil: WithoutBudget
	Throttle           *Throttle // nil: WithoutThrottle
	RetryNonIdempotent bool      // WithRetryNonIdempotent
	Clock              floodgate.Clock
	Sleep              Sleeper
	Random             func() float64 // uniform in [0, 1); safe for concurrent use
	Logger             *slog.Logger
}

// Resolve applies opts to the defaults of NewTransport. It reports the
// first invalid option as Validate does, with the settings so far.
func Resolve(opts ...Option) (Settings, error) {
	c := newConfig(opts)
	return Settings{
		Policy: c.policy, Budget: c.budget, Throttle: c.throttle, RetryNonIdempotent: c.nonIdempotent,
		Clock: c.clock, Sleep: c.sleep, Random: c.random, Logger: c.logger,
	}, c.err
}

// WithMaxRetries sets how many times a request is retried after its first
// attempt (default DefaultMaxRetries, 3); 0 turns retries off, keeping the
// throttle and the pre-emptive pause. n < 0 is invalid.
func WithMaxRetries(n int) Option { return func(c *config) { c.policy.MaxRetries = n } }

// WithMaxWait sets the longest wait a server may ask for (default
// DefaultMaxWait, 30 s). When a 429 or 503 asks for more, the transport
// does not wait: it returns that response to the caller at once. d ≤ 0 is
// invalid.
func WithMaxWait(d time.Duration) Option { return func(c *config) { c.policy.MaxWait = d } }

// WithBackoff sets the backoff used when the server asks for no wait and
// after a transport error (default DefaultBackoff: 100 ms doubling up to
// 10 s, full jitter).
func WithBackoff(b Backoff) Option { return func(c *config) { c.policy.Backoff = b } }

// WithRetryNonIdempotent retries requests of any method on 429 and 503 (a
// server that answers either has not acted on the request). Transport
// errors are still retried for idempotent requests only: a connection
// reset after the request was written may hide a request that was served.
func WithRetryNonIdempotent() Option { return func(c *config) { c.nonIdempotent = true } }

// WithBudget sets the retry budget, one per host (default DefaultBudget:
// 10% of requests plus one retry a second, at most 10 saved up).
func WithBudget(b Budget) Option { return func(c *config) { c.budget = &b } }

// WithoutBudget lets every retryable request use all its retries.
func WithoutBudget() Option { return func(c *config) { c.budget = nil } }

// WithThrottle turns on client-side adaptive throttling with multiplier k
// over DefaultThrottle's window of 2 minutes, one per host (on by default
// with k = 2). k must be finite and ≥ 1.
func WithThrottle(k float64) Option {
	return func(c *config) { c.throttle = &Throttle{K: k, Window: DefaultThrottle.Window} }
}

// WithThrottleWindow sets the throttle's window (default 2 minutes); it
// turns the throttle on with the default k if it was off.
func WithThrottleWindow(d time.Duration) Option {
	return func(c *config) {
		t := DefaultThrottle
		if c.throttle != nil {
			t = *c.throttle
		}
		t.Window = d
		c.throttle = &t
	}
}

// WithoutThrottle turns client-side adaptive throttling off.
func WithoutThrottle() Option { return func(c *config) { c.throttle = nil } }

// WithClock makes the transport read the time from clock and wait with
// sleep instead of the system's clock and timers; both are required. The
// context's deadline is compared with clock's time.
func WithClock(clock floodgate.Clock, sleep Sleeper) Option {
	return func(c *config) {
		if clock == nil || sleep == nil {
			c.fail(fmt.Errorf("%w: WithClock: a nil clock or sleeper", ErrInvalidOption))
			return
		}
		c.clock, c.sleep = clock, sleep
	}
}

// WithRand makes the transport draw its jitter and throttling decisions
// from r (for reproducible tests) instead of math/rand/v2's global source.
// The transport serialises its use of r.
func WithRand(r *rand.Rand) Option {
	return func(c *config) {
		if r == nil {
			c.fail(fmt.Errorf("%w: WithRand(nil)", ErrInvalidOption))
			return
		}
		var mu sync.Mutex
		c.random = func() float64 {
			mu.Lock()
			defer mu.Unlock()
			return r.Float64()
		}
	}
}

// WithLogger sets where retries, waits and malformed fields are logged, at
// debug level (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l == nil {
			c.fail(fmt.Errorf("%w: WithLogger(nil)", ErrInvalidOption))
			return
		}
		c.logger = l
	}
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Sleep is the system's Sleeper: a timer, cut short when ctx is done. A
// d ≤ 0 returns at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
