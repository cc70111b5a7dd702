// Package failover decides what a rate limiter does when its shared store
// (Redis) cannot answer. It wraps any floodgate.Limiter and, when the store
// is unavailable, lets a failure policy make the decision instead:
//
//   - FailOpen allows every request, so an outage of the store never becomes
//     an outage of the service; it still counts the requests in a local
//     Memory so that Remaining and metrics stay meaningful.
//   - FailClosed denies every request, for paths where abuse costs more than
//     unavailability (logins, payments).
//   - FailLocal enforces the limit divided by the number of nodes in a local
//     Memory: each of N nodes admits its share, so the fleet as a whole stays
//     close to the limit until the store is back.
//
// A circuit breaker keeps a dead store from adding its timeout to every
// request: after FailureThreshold consecutive store failures it opens and
// decisions go straight to the policy, in well under a microsecond of
// overhead. After CoolDown it lets one probe through; a probe that succeeds
// closes it, one that fails opens it for another CoolDown. Once the store
// answers again, decisions use it within CoolDown + 2·Timeout (a probe in
// flight then may still fail), plus the spacing of the next decision.
//
// A decision waits for the store at most Timeout, or its context's deadline
// if that is sooner, whatever the store does (hangs, ignores its context,
// dials, queues): it returns by then plus the time the machine takes to run
// it again and the policy's own decision, microseconds. The wait is the
// caller's own: a store that is DeadlineAware (the Redis store, which waits
// on the caller's timer) is called on the caller's goroutine; any other
// runs on a goroutine of its own, which ends when the store returns, and
// the decision goes on without it. A decision the store did not answer in
// time is the policy's (counted in Stats.Degraded, and noted in the
// decision's context for the surface that reports it, observe.NoteDegraded),
// but the store may still have counted it: an outage errs towards the
// shared count being high, never low.
//
// The Limiter New returns has its store's optional capabilities
// (floodgate.BatchLimiter, floodgate.Adjuster) and no others.
package failover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/breaker"
	"github.com/floodgate-io/floodgate/observe"
)

// Mode is a failure policy: what to decide when the store is unavailable.
type Mode string

// The failure policies.
const (
	// FailOpen allows, and counts the request against the whole limit in a
	// local Memory: Limit, Remaining and ResetAfter are that local count's.
	// It sees only this node's traffic, so Remaining is an upper bound of
	// what the fleet has left.
	FailOpen Mode = "fail_open"
	// FailClosed denies, with RetryAfter the time until the breaker's next
	// probe; when none is scheduled yet (the breaker is still closed, or a
	// probe is due or running) CoolDown, the breaker's own retry interval.
	FailClosed Mode = "fail_closed"
	// FailLocal decides in a local Memory under the limit divided by
	// N, Config.Fleet's count or Config.Nodes (rate and burst, rounded up),
	// until the store is back. The
	// local counts start afresh with each outage.
	FailLocal Mode = "fail_local"
)

// Modes lists the failure policies.
func Modes() []Mode { return []Mode{FailOpen, FailClosed, FailLocal} }

// ErrInvalidConfig is wrapped by every error New and ParseMode return for a
// bad configuration.
var ErrInvalidConfig = errors.New("failover: invalid config")

// ErrBreakerOpen is the Cause of a decision made without asking the store
// because the circuit breaker is open. It wraps floodgate.ErrStoreUnavailable.
var ErrBreakerOpen = fmt.Errorf("%w: circuit breaker open", floodgate.ErrStoreUnavailable)

// ParseMode reads a failure policy as configuration spells it.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes() {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("%w: unknown failure mode %q (want one of %s, %s, %s)",
		ErrInvalidConfig, s, FailOpen, FailClosed, FailLocal)
}

// The defaults of Config.
const (
	DefaultTimeout          = 50 * time.Millisecond
	DefaultFailureThreshold = 5
	// DefaultCoolDown is short so that, counting the probe's own round trip,
	// decisions use the store again within a second of it coming back.
	DefaultCoolDown = 250 * time.Millisecond
)

// Config configures New. Zero values take the defaults, except Mode: the
// failure policy is a decision about abuse against availability, so it must
// be stated.
type Config struct {
	Mode Mode
	// Timeout bounds how long a decision waits for the store (default
	// 50ms): it returns by then, plus scheduling (see the package doc).
	Timeout time.Duration
	// Nodes is N for FailLocal: each node enforces the limit's rate and burst
	// divided by N, rounded up (default 1).
	Nodes int
	// Fleet, when set, is asked for N at each FailLocal decision instead of
	// Nodes: a fleet whose size changes (a membership's live count). A
	// count below 1 is one node.
	Fleet interface{ Count() int }
	// FailureThreshold is the number of consecutive store failures that
	// opens the breaker (default 5).
	FailureThreshold int
	// CoolDown is how long the breaker stays open before it lets a probe
	// through (default 250ms).
	CoolDown time.Duration
	// MaxLocalKeys bounds the keys the local Memory holds during an outage
	// (0: unbounded). Keys often come from clients (addresses, API keys), so
	// a bound keeps an outage from becoming a memory exhaustion.
	MaxLocalKeys int
	// Clock is read by the breaker and the local Memory; nil is the system
	// clock. Timeout is always measured on the system clock: it bounds real
	// waiting.
	Clock floodgate.Clock
	// Logger receives the breaker's state changes; nil is slog.Default().
	Logger *slog.Logger
	// Ping asks the store whether it answers, deciding nothing, for Probe.
	// nil: the store's own Ping method when it has one (a Pinger, such as
	// redisstore.Limiter). Set it when the store is a strategy over Redis
	// that has none: Redis's Ping then speaks for it.
	Ping func(context.Context) error
}

// Pinger is a store that can tell whether it answers without deciding
// anything.
type Pinger interface {
	Ping(ctx context.Context) error
}

// withDefaults validates cfg and fills in its zero values.
func (cfg Config) withDefaults() (Config, error) {
	if _, err := ParseMode(string(cfg.Mode)); err != nil {
		return cfg, err
	}
	switch {
	case cfg.Timeout < 0:
		return cfg, fmt.Errorf("%w: timeout must not be negative, got %s", ErrInvalidConfig, cfg.Timeout)
	case cfg.CoolDown < 0:
		return cfg, fmt.Errorf("%w: cool-down must not be negative, got %s", ErrInvalidConfig, cfg.CoolDown)
	case cfg.Nodes < 0:
		return cfg, fmt.Errorf("%w: nodes must not be negative, got %d", ErrInvalidConfig, cfg.Nodes)
	case cfg.FailureThreshold < 0:
		return cfg, fmt.Errorf("%w: failure threshold must not be negative, got %d", ErrInvalidConfig, cfg.FailureThreshold)
	case cfg.MaxLocalKeys < 0:
		return cfg, fmt.Errorf("%w: max local keys must not be negative, got %d", ErrInvalidConfig, cfg.MaxLocalKeys)
	}
	cfg.Timeout = orDefault(cfg.Timeout, DefaultTimeout)
	cfg.CoolDown = orDefault(cfg.CoolDown, DefaultCoolDown)
	cfg.Nodes = orDefault(cfg.Nodes, 1)
	cfg.FailureThreshold = orDefault(cfg.FailureThreshold, DefaultFailureThreshold)
	return cfg, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Limiter is a store behind a failure policy: a floodgate.Limiter that
// decides through the store while it answers and by the policy while it
// does not, with the circuit breaker's state. It is safe for concurrent use.
//
// The Limiter New returns is also a floodgate.BatchLimiter when its store is
// one, and a floodgate.Adjuster when its store is one, each under the same
// policy and breaker; never otherwise. Ask it with a type assertion, as for
// any Limiter: a capability it offers is one its store has, so no call it
// offers answers errors.ErrUnsupported.
type Limiter interface {
	floodgate.Limiter
	// State returns the circuit breaker's state.
	State() BreakerState
	// Stats returns the counters so far.
	Stats() Stats
	// Probe reports whether the store answers, sending the breaker's probe
	// as a ping when one is due (see Config.Ping): readiness checks call it.
	Probe(ctx context.Context) error
	// Close releases the local state of the policy (see New).
	Close()
}

// core applies a failure policy to a store: every Limiter New returns is
// one of the capability sets below around a core.
type core struct {
	store    floodgate.Limiter
	batch    floodgate.BatchLimiter // nil when the store decides one request at a time
	adjuster floodgate.Adjuster     // nil when the store cannot adjust
	cfg      Config
	local    *floodgate.Memory // nil under FailClosed
	breaker  breaker.Breaker
	stats    counters
	direct   bool // the store honours its context's deadline (DeadlineAware)
	// selfTimed: the store bounds its calls by Timeout or sooner on its
	// own (SelfTimed), so its calls need no context of the policy's
	selfTimed bool
}

// DeadlineAware is implemented by stores that return by their context's
// deadline whatever their backend does, by waiting on the caller's side
// (the Redis store does: its callers wait on their own timers, never on
// the client library). Their calls run on the caller's goroutine; other
// stores run on one of their own, so that a store that ignores its context
// still cannot hold the caller past Timeout.
type DeadlineAware interface {
	HonorsDeadline() bool
}

// SelfTimed is implemented by stores that bound every call (AllowN,
// AllowAll, Adjust, Ping) by a timeout of their own, CallTimeout, and by
// their context's deadline and cancellation when those come sooner, waiting
// on timers of their own (the Redis store does). A failure policy whose
// Timeout is no shorter than CallTimeout calls such a store on the
// caller's goroutine with the caller's context as it is: the bound holds
// without a context and a timer of the policy's own for every decision,
// which on a busy gRPC server cost about a tenth of its CPU (the timer, and
// registering with the request's cancellable context).
type SelfTimed interface {
	CallTimeout() time.Duration
}

// New wraps store with the failure policy of cfg. The Limiter has the
// store's capabilities (floodgate.BatchLimiter, floodgate.Adjuster) and no
// others. The caller keeps ownership of store: Close does not close it.
func New(store floodgate.Limiter, cfg Config) (Limiter, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: store is nil", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &core{store: store, cfg: cfg}
	if da, ok := store.(DeadlineAware); ok {
		l.direct = da.HonorsDeadline()
	}
	if st, ok := store.(SelfTimed); ok {
		t := st.CallTimeout()
		l.selfTimed = t > 0 && t <= cfg.Timeout
	}
	l.batch, _ = store.(floodgate.BatchLimiter)
	l.adjuster, _ = store.(floodgate.Adjuster)
	if cfg.Mode != FailClosed {
		l.local = newLocal(cfg)
	}
	l.breaker.Init(cfg.FailureThreshold, cfg.CoolDown, nowFunc(cfg.Clock))
	switch {
	case l.batch != nil && l.adjuster != nil:
		return batchingAdjusting{l}, nil
	case l.batch != nil:
		return batching{l}, nil
	case l.adjuster != nil:
		return adjusting{l}, nil
	}
	return l, nil
}

// The capability sets: a store's optional interfaces, each method applying
// the policy as AllowN does.
type (
	batching          struct{ *core }
	adjusting         struct{ *core }
	batchingAdjusting struct{ *core }
)

// AllowAll implements floodgate.BatchLimiter: the store's batch, all or
// nothing, or the policy's decision on the whole batch when the store is
// unavailable.
func (b batching) AllowAll(ctx context.Context, reqs []floodgate.Request) ([]floodgate.Decision, error) {
	r, err := b.decideAll(ctx, reqs)
	return r.decisions, err
}

// AllowAll implements floodgate.BatchLimiter, as batching.AllowAll does.
func (b batchingAdjusting) AllowAll(ctx context.Context, reqs []floodgate.Request) ([]floodgate.Decision, error) {
	return batching(b).AllowAll(ctx, reqs)
}

// Adjust implements floodgate.Adjuster (see core.adjust).
func (a adjusting) Adjust(ctx context.Context, key string, limit floodgate.Limit, delta int64) error {
	return a.adjust(ctx, key, limit, delta)
}

// Adjust implements floodgate.Adjuster (see core.adjust).
func (a batchingAdjusting) Adjust(ctx context.Context, key string, limit floodgate.Limit, delta int64) error {
	return a.adjust(ctx, key, limit, delta)
}

// nodes is N for FailLocal.
func (l *core) nodes() int {
	if l.cfg.Fleet != nil {
		return max(1, l.cfg.Fleet.Count())
	}
	return l.cfg.Nodes
}

func newLocal(cfg Config) *floodgate.Memory {
	var opts []floodgate.MemoryOption
	if cfg.Clock != nil {
		opts = append(opts, floodgate.WithClock(cfg.Clock))
	}
	if cfg.MaxLocalKeys > 0 {
		opts = append(opts, floodgate.WithMaxKeys(cfg.MaxLocalKeys))
	}
	return floodgate.NewMemory(opts...)
}

func nowFunc(c floodgate.Clock) func() time.Time {
	if c == nil {
		return time.Now
	}
	return c.Now
}

// result is a decision and whether the failure policy made it: cause, when
// not nil, is why the store could not answer (it wraps
// floodgate.ErrStoreUnavailable).
type result struct {
	floodgate.Decision
	cause error
}

// batchResult is the outcome of a batch and why the policy decided it.
type batchResult struct {
	decisions []floodgate.Decision
	cause     error
}

// AllowN implements floodgate.Limiter: the store's decision, or the policy's
// when the store is unavailable. Errors are the caller's (a cancelled
// context) or bad input, never the store's unavailability.
func (l *core) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	r, err := l.decide(ctx, key, limit, cost)
	return r.Decision, err
}

// decide is AllowN that also says why the policy decided, for tests.
func (l *core) decide(ctx context.Context, key string, limit floodgate.Limit, cost int64) (result, error) {
	ph, cause, err := l.admit(ctx)
	if err != nil {
		return result{}, err
	}
	var d floodgate.Decision
	if cause == nil {
		if l.selfTimed {
			// Called as callWithTimeout would, without guard: its
			// closure escapes (a store without a bound of its own is
			// called on a goroutine), a heap allocation on every
			// decision. Adjust and probes are rare and keep guard.
			var callErr error
			d, callErr = l.store.AllowN(ctx, key, limit, cost)
			cause, err = l.settle(ctx, ph, callErr)
		} else {
			d, cause, err = guard(l, ctx, ph, func(ctx context.Context) (floodgate.Decision, error) {
				return l.store.AllowN(ctx, key, limit, cost)
			})
		}
		if err != nil {
			return result{}, err
		}
	}
	if cause != nil {
		if d, err = l.degrade(ctx, key, limit, cost); err != nil {
			return result{}, err
		}
		observe.NoteDegraded(ctx, cause)
	}
	l.stats.decided(1, cause != nil)
	return result{Decision: d, cause: cause}, nil
}

// decideAll is the batch of a store that has batches, under the policy:
// when the store is unavailable the policy decides the whole batch.
func (l *core) decideAll(ctx context.Context, reqs []floodgate.Request) (batchResult, error) {
	ph, cause, err := l.admit(ctx)
	if err != nil {
		return batchResult{}, err
	}
	var ds []floodgate.Decision
	if cause == nil {
		ds, cause, err = guard(l, ctx, ph, func(ctx context.Context) ([]floodgate.Decision, error) {
			return l.batch.AllowAll(ctx, reqs)
		})
		if err != nil {
			return batchResult{}, err
		}
	}
	if cause != nil {
		if ds, err = l.degradeAll(ctx, reqs); err != nil {
			return batchResult{}, err
		}
		observe.NoteDegraded(ctx, cause)
	}
	l.stats.decided(len(reqs), cause != nil)
	return batchResult{decisions: ds, cause: cause}, nil
}

// State implements Limiter.
func (l *core) State() BreakerState { return l.breaker.State() }

// Stats implements Limiter.
func (l *core) Stats() Stats { return l.stats.snapshot() }

// Close releases the local Memory. The Limiter starts no goroutine of its
// own: the only ones it runs are store calls, each of which ends when the
// store's call returns, so there is nothing else to stop. Close does not
// close the store; decisions after Close still work, from empty local state.
func (l *core) Close() {
	if l.local != nil {
		l.local.Close()
	}
}

// Stats are monotonic counters for metrics.
type Stats struct {
	// Decisions counts the decisions returned; a batch counts one per request.
	Decisions uint64
	// Degraded counts the decisions the failure policy made.
	Degraded uint64
	// StoreErrors counts store calls that failed as unavailable, timeouts
	// included; calls the open breaker skipped are not store errors.
	StoreErrors uint64
	// BreakerOpens counts transitions to open: from closed when the store
	// starts failing, and from half-open when a probe fails.
	BreakerOpens uint64
}

type counters struct {
	decisions, degraded, storeErrors, breakerOpens atomic.Uint64
}

func (c *counters) decided(n int, degraded bool) {
	c.decisions.Add(uint64(n))
	if degraded {
		c.degraded.Add(uint64(n))
	}
}

func (c *counters) snapshot() Stats {
	return Stats{
		Decisions:    c.decisions.Load(),
		Degraded:     c.degraded.Load(),
		StoreErrors:  c.storeErrors.Load(),
		BreakerOpens: c.breakerOpens.Load(),
	}
}

func (l *core) logger() *slog.Logger {
	if l.cfg.Logger != nil {
		return l.cfg.Logger
	}
	return slog.Default()
}
