package adaptive

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate"
)

// Order is the order in which a Limiter's queue serves the waiters of one
// class.
type Order int

const (
	// FIFO serves the longest waiting first: fair while the backend keeps
	// up.
	FIFO Order = iota
	// LIFO serves the newest first, as adaptive LIFO recommends under
	// overload: the newest waiter is the one most likely still to have a
	// caller, while the oldest ones have likely given up already.
	LIFO
)

// String is the order's name as flags spell it.
func (o Order) String() string {
	switch o {
	case FIFO:
		return "fifo"
	case LIFO:
		return "lifo"
	}
	return "unknown"
}

// ParseOrder reads an order's name (fifo or lifo, case insensitive), as a
// flag or a configuration file spells it.
func ParseOrder(s string) (Order, bool) {
	for _, o := range []Order{FIFO, LIFO} {
		if strings.EqualFold(s, o.String()) {
			return o, true
		}
	}
	return FIFO, false
}

// The shares of the limit that the lower classes may fill when
// LimiterOptions.Shares is left zero. Critical may always fill all of it.
const (
	DefaultShareSheddable = 0.7
	DefaultShareDefault   = 0.9
)

// Shares reserve part of the limit for the higher classes: a class is
// admitted only while in-flight < max(1, ⌊limit × its share⌋), so that at
// the limit sheddable requests are turned away first, then default ones,
// and critical ones only when the limit itself is full. Both shares are in
// (0, 1] and Sheddable ≤ Default. The zero value means DefaultShareSheddable
// and DefaultShareDefault (70% and 90%).
type Shares struct {
	Sheddable float64
	Default   float64
}

// CoDel bounds the wait while the queue is standing, after Facebook's use
// of CoDel for server queues. The queue is standing when, for a whole
// Interval, it was never empty and no request left it for a slot having
// waited Target or less. While it is standing, a waiter is shed as soon as
// it has waited Target, instead of after MaxWait; the first
// request admitted from the queue after waiting Target or less (or an
// empty queue) ends it. So a waiter never waits longer than MaxWait, and,
// once the queue has stood for Interval, no longer than Target: under
// overload the queue stops adding delay, and under a burst it still
// absorbs it. With LIFO the newest waiters keep being served within Target,
// which ends the standing queue, so the oldest ones wait out MaxWait: LIFO
// bounds their wait by MaxWait alone. The zero value turns CoDel off.
type CoDel struct {
	Target   time.Duration // a wait the backend can live with, e.g. 5ms
	Interval time.Duration // how long a standing queue is tolerated, e.g. 100ms; > Target
}

// LimiterOptions configure NewLimiter.
type LimiterOptions struct {
	// Algorithm learns the limit; required.
	Algorithm Algorithm
	// Clock tells the time of samples and waits; nil is the system clock.
	// With a clock that moves only when told, call Expire after moving it.
	Clock floodgate.Clock
	// MaxQueue is how many Acquire calls may wait for a slot at once; 0
	// means that Acquire never waits and fails at once at the limit.
	MaxQueue int
	// Order serves the waiters of one class: FIFO (the zero value) or LIFO.
	// A higher class is always served before a lower one.
	Order Order
	// MaxWait is the longest an Acquire waits in the queue; required (> 0)
	// with a queue, and must be 0 without one.
	MaxWait time.Duration
	// CoDel, when set, sheds waiters early while the queue is standing.
	// Needs a queue.
	CoDel CoDel
	// Shares reserve part of the limit for higher classes; zero means the
	// defaults (sheddable 70%, default 90%, critical 100%).
	Shares Shares
}

// ErrShed is what every refusal of a Limiter wraps; errors.As on a
// *ShedError tells why and when to come back (see RetryAfter).
var ErrShed = errors.New("adaptive: request shed")

// ErrUnknownPriority says that a Priority is none of the classes.
var ErrUnknownPriority = errors.New("adaptive: unknown priority")

// ShedReason says why a request was shed.
type ShedReason int

// The reasons, as Stats counts them.
const (
	ShedAtLimit       ShedReason = iota // no slot free for its class, and no queue (or TryAcquire)
	ShedQueueFull                       // the queue was full of requests of its class or higher
	ShedWaitedTooLong                   // it waited MaxWait
	ShedStandingQueue                   // CoDel: it waited Target while the queue stood
	ShedDisplaced                       // a higher class took its place in a full queue
	numReasons
)

var reasonNames = [numReasons]string{"at_limit", "queue_full", "waited_too_long", "standing_queue", "displaced"}

var reasonText = [numReasons]string{
	"at its class's share of the limit",
	"queue full",
	"waited the longest wait allowed",
	"waited too long in a standing queue",
	"displaced from the queue by a higher class",
}

// String is the reason as metrics label it.
func (r ShedReason) String() string {
	if r < 0 || r >= numReasons {
		return "unknown"
	}
	return reasonNames[r]
}

// ShedError is the error of a shed request. It wraps ErrShed.
type ShedError struct {
	Priority   Priority
	Reason     ShedReason
	RetryAfter time.Duration // see RetryAfter
}

func (e *ShedError) Error() string {
	why := "for an unknown reason"
	if e.Reason >= 0 && e.Reason < numReasons {
		why = reasonText[e.Reason]
	}
	return fmt.Sprintf("adaptive: %s request shed: %s (retry after %s)", e.Priority, why, e.RetryAfter)
}

// Unwrap makes errors.Is(err, ErrShed) hold.
func (e *ShedError) Unwrap() error { return ErrShed }

// RetryAfter is how long a shed request should wait before it comes back,
// or 0 when err is not a shed. It is the time a slot is likely to take to
// free for it: the smoothed round-trip time of successful requests × (1 +
// the requests queued ahead of it) ÷ the limit, since the limit's requests
// finish about once per RTT÷limit; one second before any request has
// succeeded; at least a millisecond.
func RetryAfter(err error) time.Duration {
	var se *ShedError
	if errors.As(err, &se) {
		return se.RetryAfter
	}
	return 0
}

const (
	numClasses         = int(Critical) + 1
	fallbackRetryAfter = time.Second
	rttSmoothing       = 8 // the RTT estimate moves 1/8 of the way to each sample
)

// Stats is a snapshot of a Limiter for metrics. Arrays are indexed by
// Priority and ShedReason.
type Stats struct {
	Limit    int
	InFlight int
	Queued   int
	RTT      time.Duration // smoothed RTT of successful requests; 0 before the first
	Admitted [numClasses]uint64
	Shed     [numClasses][numReasons]uint64
}

// A Limiter admits requests while fewer than its Algorithm's limit are in
// flight, queues or sheds the others by priority, and feeds the outcome of
// each admitted request back to the Algorithm. It is safe for concurrent
// use: admission and release each take one short lock and allocate nothing
// (the Algorithm's Update runs under that lock, which is what serialises
// it). Acquire allocates only the error of a refusal, and a waiter when it
// has to wait and its pool is empty.
type Limiter struct {
	alg     Algorithm
	clock   floodgate.Clock
	opts    LimiterOptions
	waiters sync.Pool // of *waiter; the blocking path's only allocation

	mu       sync.Mutex
	limit    int
	caps     [numClasses]int // in-flight below which a class is admitted
	inflight int
	rtt      time.Duration
	free     []*record // released tokens' records, for reuse
	q        queue

	// Mirrors for Stats, written under mu, read without it.
	stLimit, stInFlight, stQueued, stRTT atomic.Int64
	admitted                             [numClasses]atomic.Uint64
	shed                                 [numClasses][numReasons]atomic.Uint64

	onQueued func(context.Context) // test hook: the Acquire of ctx has just been queued
}

// NewLimiter checks opts and returns a Limiter starting at the
// Algorithm's current limit.
func NewLimiter(opts LimiterOptions) (*Limiter, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if opts.Shares == (Shares{}) {
		opts.Shares = Shares{Sheddable: DefaultShareSheddable, Default: DefaultShareDefault}
	}
	l := &Limiter{alg: opts.Algorithm, clock: opts.Clock, opts: opts}
	if l.clock == nil {
		l.clock = systemClock{}
	}
	l.q.order = opts.Order
	l.waiters.New = newWaiter
	l.setLimit(l.alg.Limit())
	return l, nil
}

func (o LimiterOptions) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: limiter: "+format, append([]any{ErrInvalidOptions}, args...)...)
	}
	switch {
	case o.Algorithm == nil:
		return bad("no Algorithm")
	case o.MaxQueue < 0:
		return bad("MaxQueue %d is negative", o.MaxQueue)
	case o.Order != FIFO && o.Order != LIFO:
		return bad("Order %d is neither FIFO nor LIFO", o.Order)
	case o.MaxWait < 0:
		return bad("MaxWait %s is negative", o.MaxWait)
	case o.MaxQueue > 0 && o.MaxWait == 0:
		return bad("a queue (MaxQueue %d) needs a MaxWait", o.MaxQueue)
	case o.MaxQueue == 0 && o.MaxWait != 0:
		return bad("MaxWait %s without a queue (MaxQueue 0)", o.MaxWait)
	}
	if err := o.CoDel.check(o.MaxQueue); err != nil {
		return bad("%w", err)
	}
	if err := o.Shares.check(); err != nil {
		return bad("%w", err)
	}
	return nil
}

func (c CoDel) check(maxQueue int) error {
	switch {
	case c == CoDel{}:
		return nil
	case maxQueue == 0:
		return errors.New("CoDel without a queue (MaxQueue 0)")
	case c.Target <= 0 || c.Interval <= 0:
		return fmt.Errorf("CoDel Target %s and Interval %s must both be positive", c.Target, c.Interval)
	case c.Target >= c.Interval:
		return fmt.Errorf("CoDel Target %s must be shorter than its Interval %s", c.Target, c.Interval)
	}
	return nil
}

func (s Shares) check() error {
	switch {
	case s == Shares{}:
		return nil
	case !(s.Sheddable > 0 && s.Sheddable <= 1) || !(s.Default > 0 && s.Default <= 1):
		return fmt.Errorf("Shares %v and %v must be in (0, 1]", s.Sheddable, s.Default)
	case s.Sheddable > s.Default:
		return fmt.Errorf("Shares: Sheddable %v above Default %v", s.Sheddable, s.Default)
	}
	return nil
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// TryAcquire admits a request of class p if a slot is free for its class,
// without waiting. It returns false at the limit, and for an unknown
// class. The Token must be released exactly once.
func (l *Limiter) TryAcquire(p Priority) (Token, bool) {
	if !p.known() {
		return Token{}, false
	}
	now := l.clock.Now()
	l.mu.Lock()
	l.expire(now)
	t, ok := l.admit(p, now)
	l.mu.Unlock()
	if !ok {
		l.shed[p][ShedAtLimit].Add(1)
	}
	return t, ok
}

// Acquire admits a request of class p, waiting in the queue for a slot
// when none is free for its class. It fails with an error wrapping ErrShed
// (a *ShedError) when there is no queue, when the queue is full of
// requests of its class or higher, when it waited MaxWait (or too long in a
// standing queue, see CoDel) or when a higher class displaced it; with
// ctx's error when ctx ends first; and with ErrUnknownPriority. On success
// the Token must be released exactly once.
func (l *Limiter) Acquire(ctx context.Context, p Priority) (Token, error) {
	if !p.known() {
		return Token{}, fmt.Errorf("%w: %d", ErrUnknownPriority, int(p))
	}
	if err := ctx.Err(); err != nil {
		return Token{}, fmt.Errorf("adaptive: acquire: %w", err)
	}
	now := l.clock.Now()
	l.mu.Lock()
	l.expire(now)
	if t, ok := l.admit(p, now); ok {
		l.mu.Unlock()
		return t, nil
	}
	if l.opts.MaxQueue == 0 {
		return Token{}, l.refuseLocked(p, ShedAtLimit)
	}
	if l.q.len() >= l.opts.MaxQueue && !l.displace(p) {
		return Token{}, l.refuseLocked(p, ShedQueueFull)
	}
	w := l.waiters.Get().(*waiter)
	w.prio, w.enq = p, now
	l.q.push(w, now)
	l.stQueued.Store(int64(l.q.len()))
	deadline := l.deadline(w)
	l.mu.Unlock()
	if l.onQueued != nil {
		l.onQueued(ctx)
	}
	return l.wait(ctx, w, deadline)
}

// refuseLocked counts a refusal, unlocks and returns its error.
func (l *Limiter) refuseLocked(p Priority, r ShedReason) error {
	err := &ShedError{Priority: p, Reason: r, RetryAfter: l.retryAfter()}
	l.mu.Unlock()
	l.shed[p][r].Add(1)
	return err
}

// admit takes a slot for class p if one is free for it. Called with mu.
func (l *Limiter) admit(p Priority, now time.Time) (Token, bool) {
	if l.inflight >= l.caps[p] {
		return Token{}, false
	}
	l.inflight++
	l.stInFlight.Store(int64(l.inflight))
	l.admitted[p].Add(1)
	var r *record
	if n := len(l.free); n > 0 {
		r, l.free = l.free[n-1], l.free[:n-1]
	} else {
		r = &record{l: l}
	}
	r.start, r.inflight = now, l.inflight
	return Token{r: r, gen: r.gen.Load()}, true
}

// retryAfter is RetryAfter's estimate. Called with mu.
func (l *Limiter) retryAfter() time.Duration {
	if l.rtt == 0 {
		return fallbackRetryAfter
	}
	d := l.rtt * time.Duration(l.q.len()+1) / time.Duration(l.limit)
	return max(d, time.Millisecond)
}

// setLimit takes a new limit and the classes' shares of it. Called with
// mu (or before the Limiter is shared).
func (l *Limiter) setLimit(n int) {
	n = max(n, 1)
	l.limit = n
	l.caps[Critical] = n
	l.caps[Default] = max(1, int(float64(n)*l.opts.Shares.Default))
	l.caps[Sheddable] = max(1, int(float64(n)*l.opts.Shares.Sheddable))
	l.stLimit.Store(int64(n))
}

// Limit is the current limit.
func (l *Limiter) Limit() int { return int(l.stLimit.Load()) }

// Stats is a snapshot of the limiter's state and counters. Its fields are
// read one by one, without a lock, so they may be a few updates apart.
func (l *Limiter) Stats() Stats {
	s := Stats{
		Limit:    int(l.stLimit.Load()),
		InFlight: int(l.stInFlight.Load()),
		Queued:   int(l.stQueued.Load()),
		RTT:      time.Duration(l.stRTT.Load()),
	}
	for p := range numClasses {
		s.Admitted[p] = l.admitted[p].Load()
		for r := range numReasons {
			s.Shed[p][r] = l.shed[p][r].Load()
		}
	}
	return s
}

func (p Priority) known() bool { return p >= Sheddable && p <= Critical }

// A Token is one admitted request's slot. Release it exactly once, with
// Success, Dropped or Ignore, whatever happens to the request (defer it,
// so that a panic releases it too): a Token never released is a leak that
// holds a slot for good, and enough of them leave the limiter refusing
// everything. Calls after the first are no-ops, on the Token and on its
// copies. The zero Token's methods do nothing.
type Token struct {
	r   *record
	gen uint64
}

// record is a Token's state; records are reused, and gen tells a live
// Token from a stale copy.
type record struct {
	l        *Limiter
	gen      atomic.Uint64
	start    time.Time
	inflight int
}

type outcome int

const (
	success outcome = iota
	dropped
	ignored
)

// Success releases the slot of a request that finished normally: its RTT
// is a sample for the Algorithm.
func (t Token) Success() { t.release(success) }

// Dropped releases the slot of a request that failed in a way that signals
// overload (a timeout, a 503 or 429 from the backend): a dropped sample.
func (t Token) Dropped() { t.release(dropped) }

// Ignore releases the slot of a request whose end says nothing about the
// backend (the client went away, the request was invalid): no sample.
func (t Token) Ignore() { t.release(ignored) }

func (t Token) release(o outcome) {
	if t.r == nil || !t.r.gen.CompareAndSwap(t.gen, t.gen+1) {
		return
	}
	t.r.l.release(t.r, o)
}

func (l *Limiter) release(r *record, o outcome) {
	now := l.clock.Now()
	l.mu.Lock()
	l.inflight--
	if o != ignored {
		s := Sample{RTT: now.Sub(r.start), InFlight: r.inflight, Dropped: o == dropped, At: now}
		if o == success {
			l.observeRTT(s.RTT)
		}
		l.setLimit(l.alg.Update(s))
	}
	l.free = append(l.free, r)
	l.expire(now)
	l.dispatch(now)
	l.stInFlight.Store(int64(l.inflight))
	l.mu.Unlock()
}

// observeRTT moves the RTT estimate towards a successful request's RTT.
// Called with mu.
func (l *Limiter) observeRTT(rtt time.Duration) {
	if l.rtt == 0 {
		l.rtt = rtt
	} else {
		l.rtt += (rtt - l.rtt) / rttSmoothing
	}
	l.stRTT.Store(int64(l.rtt))
}
