package adaptive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/monotime"
)

// RateLimiter is a floodgate.Limiter that scales every limit it is asked
// about by a factor f in [Floor, 1] that follows the backend's health, and
// asks the inner Limiter with the scaled limit: Rate and Burst times f
// (never below 1 unit), Period as it is, on any algorithm and any store.
//
// # The control loop
//
// Once per Interval (not per request: the first request after the
// Interval evaluates; the others do not wait for it) it reads the Health
// window, and:
//
//   - when p99 > TargetLatency or the error ratio > MaxErrorRatio, and the
//     last decrease is at least CoolDown old, f = max(Floor, f·Decrease);
//   - when p99 ≤ Hysteresis·TargetLatency and the error ratio ≤
//     Hysteresis·MaxErrorRatio, f = min(1, f+Increase);
//   - between the two, or with fewer than MinCalls outcomes in the window
//     (no evidence either way), f stays.
//
// Why it is stable: additive increase, multiplicative decrease is the
// loop TCP congestion control runs. Around the factor c at which the
// backend keeps up it settles into a bounded sawtooth: up by Increase per
// Interval until it passes c, then down by Decrease, and by Decrease once
// more, a cool-down later, if the backlog the overshoot left is still
// draining; so within [c·Decrease², c + 2·Increase] (the simulation in
// rate_test.go: c = 0.4 gives [0.22, 0.48], mean 0.34). A fleet of such
// loops converges to a fair share because each decrease takes more from
// the larger factor. A loop oscillates when
// it acts again before the effect of its last action shows; here the
// cool-down (by default the health window, so that the verdict after it
// is made only on outcomes recorded after the decrease) and the
// once-per-Interval evaluation keep the loop slower than the backend's
// response. The band between the two thresholds keeps it from flapping on
// noise at the target, and the Floor keeps it from starving the backend
// of the very traffic whose outcomes tell the loop it has recovered.
//
// # What the stores do when the scaled limit changes
//
// The factor is quantised to 1/FactorSteps, so a limit has at most
// FactorSteps scaled forms: the stores' caches of compiled limits (one per
// distinct Limit, memory and Redis alike) do not grow with time, and a key
// keeps its state (floodgate.Memory and the Redis scripts read the old
// state under the new limit when only the numbers change):
//
//   - token and leaky bucket: the debt, a time (TAT − now), carries over;
//     Burst scaled with Rate keeps the bucket's depth in time, so the
//     bucket is as full, as a fraction, as before. Over any interval of
//     length t after the change, at most Burst' + Rate'·t/Period pass;
//   - fixed and sliding window: the counts carry over; a decrease denies
//     until they fall under the new Rate, an increase gives the room at
//     once; the window of the change admits at most the larger of the two
//     rates (sliding window: its usual estimate, against that rate);
//   - sliding log: the entries carry over; after a decrease it denies until
//     the last Period holds less than the new Rate, then holds it exactly.
//
// In the steady state between changes each algorithm keeps its guarantee
// with Rate' = ⌊Rate·f⌋.
type RateLimiter struct {
	inner  floodgate.Limiter
	health *Health
	opts   RateOptions
	clock  floodgate.Clock // nil: mono
	mono   monotime.Micros // half the cost of time.Now on every request
	log    *slog.Logger

	steps atomic.Uint32 // the factor applied, in 1/FactorSteps
	next  atomic.Int64  // µs since the Unix epoch of the next evaluation

	mu         sync.Mutex // held by the one evaluating; never waited for
	own        float64    // this node's factor, before quantising and sharing
	decreased  time.Time  // the last decrease; zero: none yet
	shared     float64    // the fleet's minimum, last read
	sharedRead time.Time  // when it was read; zero: never
}

// RateOptions configures NewRate. Only TargetLatency is required.
type RateOptions struct {
	// TargetLatency is the p99 latency above which the backend is
	// struggling.
	TargetLatency time.Duration
	// MaxErrorRatio is the share of failed calls above which the backend
	// is struggling, in (0, 1) (default 0.05).
	MaxErrorRatio float64
	// Hysteresis sets the healthy band: the factor grows only when p99 ≤
	// Hysteresis·TargetLatency and the error ratio ≤
	// Hysteresis·MaxErrorRatio; in (0, 1] (default 0.8).
	Hysteresis float64
	// Floor is the smallest factor, in (0, 1] (default 0.1). The scaled
	// rate is never below 1 unit per Period either.
	Floor float64
	// Decrease multiplies the factor on each decrease, in (0, 1) (default
	// 0.7).
	Decrease float64
	// Increase is added to the factor per healthy Interval, in (0, 1]
	// (default 0.05).
	Increase float64
	// Interval is how often the factor is evaluated, at least 10ms
	// (default 1s).
	Interval time.Duration
	// CoolDown is the least time between two decreases, at least Interval
	// (default: the health window).
	CoolDown time.Duration
	// MinCalls is the fewest outcomes in the health window that the loop
	// acts on (default 20).
	MinCalls int
	// Health is where outcomes are recorded (nil: a new Health with a
	// window of 3 Intervals on Clock). Share one between RateLimiters that
	// protect the same backend.
	Health *Health
	// Clock times evaluations (nil: the system clock).
	Clock floodgate.Clock
	// Shared, when set, makes the factor applied the minimum of the live
	// nodes' factors, so that a fleet sharing one limit shrinks it
	// together: without it, a node whose view of the backend is healthy
	// keeps admitting its full share while another struggles. The price:
	// one node that alone sees a slow backend (a bad link, a sick host)
	// shrinks the whole fleet. Each evaluation publishes this node's own
	// factor and reads the minimum: one round trip per Interval.
	Shared SharedFactor
	// Node names this node in Shared (required with it).
	Node string
	// SharedTTL is how long a published factor counts once its node stops
	// publishing (default 3 Intervals; at least Interval).
	SharedTTL time.Duration
	// Logger receives factor changes and Shared's errors (nil:
	// slog.Default()).
	Logger *slog.Logger
}

// FactorSteps is the resolution of the factor applied: 1/64.
const FactorSteps = 64

// The defaults of RateOptions.
const (
	DefaultMaxErrorRatio = 0.05
	DefaultHysteresis    = 0.8
	DefaultFloor         = 0.1
	DefaultDecrease      = 0.7
	DefaultIncrease      = 0.05
	DefaultInterval      = time.Second
	DefaultMinCalls      = 20
)

// NewRate returns a RateLimiter over inner, with a factor of 1, or an
// error wrapping ErrInvalidOptions that names the option at fault.
func NewRate(inner floodgate.Limiter, opts RateOptions) (*RateLimiter, error) {
	if inner == nil {
		return nil, fmt.Errorf("%w: the inner Limiter is nil", ErrInvalidOptions)
	}
	clock := opts.Clock
	if err := opts.fill(); err != nil {
		return nil, err
	}
	r := &RateLimiter{inner: inner, health: opts.Health, opts: opts, clock: clock, log: opts.Logger, own: 1, shared: 1}
	if clock == nil {
		r.mono = monotime.New()
	}
	r.steps.Store(FactorSteps)
	r.next.Store(r.now() + opts.Interval.Microseconds())
	return r, nil
}

// fill sets the defaults and validates.
func (o *RateOptions) fill() error {
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	setDefault(&o.MaxErrorRatio, DefaultMaxErrorRatio)
	setDefault(&o.Hysteresis, DefaultHysteresis)
	setDefault(&o.Floor, DefaultFloor)
	setDefault(&o.Decrease, DefaultDecrease)
	setDefault(&o.Increase, DefaultIncrease)
	setDefault(&o.Interval, DefaultInterval)
	setDefault(&o.MinCalls, DefaultMinCalls)
	setDefault(&o.SharedTTL, 3*o.Interval)
	if err := o.check(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if o.Health == nil {
		h, err := NewHealth(HealthOptions{Window: 3 * o.Interval, Clock: o.Clock})
		if err != nil {
			return err
		}
		o.Health = h
	}
	setDefault(&o.CoolDown, o.Health.Window())
	if o.CoolDown < o.Interval {
		return fmt.Errorf("%w: CoolDown %s is shorter than Interval %s: a decrease must be seen before the next",
			ErrInvalidOptions, o.CoolDown, o.Interval)
	}
	return nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// check names the first option out of its range.
func (o *RateOptions) check() error {
	for _, c := range []struct {
		bad  bool
		name string
		v    any
		want string
	}{
		{o.TargetLatency <= 0, "TargetLatency", o.TargetLatency, "a positive duration"},
		{!(o.MaxErrorRatio > 0 && o.MaxErrorRatio < 1), "MaxErrorRatio", o.MaxErrorRatio, "in (0, 1)"},
		{!(o.Hysteresis > 0 && o.Hysteresis <= 1), "Hysteresis", o.Hysteresis, "in (0, 1]"},
		{!(o.Floor > 0 && o.Floor <= 1), "Floor", o.Floor, "in (0, 1]"},
		{!(o.Decrease > 0 && o.Decrease < 1), "Decrease", o.Decrease, "in (0, 1)"},
		{!(o.Increase > 0 && o.Increase <= 1), "Increase", o.Increase, "in (0, 1]"},
		{o.Interval < 10*time.Millisecond, "Interval", o.Interval, "at least 10ms"},
		{o.CoolDown < 0, "CoolDown", o.CoolDown, "not negative"},
		{o.MinCalls < 1, "MinCalls", o.MinCalls, "at least 1"},
		{o.SharedTTL < o.Interval, "SharedTTL", o.SharedTTL, "at least Interval"},
		{o.Shared != nil && o.Node == "", "Node", o.Node, "a name with Shared"},
	} {
		if c.bad {
			return fmt.Errorf("%s must be %s, got %v", c.name, c.want, c.v)
		}
	}
	return nil
}

// AllowN implements floodgate.Limiter: it asks the inner Limiter with
// limit scaled by Factor. The request that finds the Interval over
// evaluates the factor first (with Shared, a round trip to it).
func (r *RateLimiter) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	if now := r.now(); now >= r.next.Load() {
		r.evaluate(ctx, now)
	}
	scaled := scale(limit, r.steps.Load())
	d, err := r.inner.AllowN(ctx, key, scaled, cost)
	if err != nil && scaled != limit && errors.Is(err, floodgate.ErrInvalidLimit) {
		return r.allowCountable(ctx, key, limit, scaled, cost, err)
	}
	return d, err
}

// now is the time in µs since the Unix epoch.
func (r *RateLimiter) now() int64 {
	if r.clock != nil {
		return r.clock.Now().UnixMicro()
	}
	return r.mono.Now()
}

// Factor is the factor applied now, in [Floor, 1], a multiple of
// 1/FactorSteps.
func (r *RateLimiter) Factor() float64 { return float64(r.steps.Load()) / FactorSteps }

// Health is where the RateLimiter reads the backend's health.
func (r *RateLimiter) Health() *Health { return r.health }

// Observe records one call to the backend: how long it took and its error
// (nil: it succeeded). Feed it every call, or use Health().Transport.
func (r *RateLimiter) Observe(latency time.Duration, err error) {
	r.health.Record(latency, err != nil)
}

// scale returns l with Rate and Burst times steps/FactorSteps, rounded
// down, at least 1. A limit the stores would reject anyway goes as it is,
// so that their error names it.
func scale(l floodgate.Limit, steps uint32) floodgate.Limit {
	const most = math.MaxInt64 / FactorSteps
	if steps >= FactorSteps || l.Rate <= 0 || l.Rate > most || l.Burst < 0 || l.Burst > most {
		return l
	}
	l.Rate = max(1, l.Rate*int64(steps)/FactorSteps)
	if l.Burst > 0 {
		l.Burst = max(1, l.Burst*int64(steps)/FactorSteps)
	}
	return l
}

// allowCountable retries a bucket whose scaled rate the stores cannot
// count exactly (its horizon Burst·Period/gcd(Rate, Period) is too long,
// which a rate sharing few factors with a long Period gives) with the rate
// rounded down to a multiple of gcd(Rate, Period): the horizon is then no
// longer than the configured limit's.
func (r *RateLimiter) allowCountable(ctx context.Context, key string, limit, scaled floodgate.Limit, cost int64, cause error) (floodgate.Decision, error) {
	if limit.Validate() != nil {
		return floodgate.Decision{}, cause // the configured limit's own error
	}
	g := gcd(limit.Rate, limit.Period.Microseconds())
	if scaled.Rate = scaled.Rate / g * g; scaled.Rate == 0 {
		return floodgate.Decision{}, fmt.Errorf("adaptive: limit %s scaled by %v: %w", limit, r.Factor(), cause)
	}
	return r.inner.AllowN(ctx, key, scaled, cost)
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// evaluate runs the control loop once, unless another request is running
// it: requests never wait for it.
func (r *RateLimiter) evaluate(ctx context.Context, nowUS int64) {
	if !r.mu.TryLock() {
		return
	}
	defer r.mu.Unlock()
	if nowUS < r.next.Load() {
		return // evaluated while this request read the clock
	}
	r.next.Store(nowUS + r.opts.Interval.Microseconds())
	now := time.UnixMicro(nowUS)
	r.step(now, r.health.Snapshot())
	f := r.own
	if r.opts.Shared != nil {
		f = min(f, r.fleet(ctx, now))
	}
	r.steps.Store(quantise(f, r.opts.Floor))
}

// step moves the node's own factor by one verdict on the health window.
func (r *RateLimiter) step(now time.Time, s HealthSnapshot) {
	o := &r.opts
	switch {
	case s.Calls < int64(o.MinCalls):
	case s.P99 > o.TargetLatency || s.ErrorRatio > o.MaxErrorRatio:
		if !r.decreased.IsZero() && now.Sub(r.decreased) < o.CoolDown {
			return
		}
		r.decreased = now
		r.own = max(o.Floor, r.own*o.Decrease)
		r.log.Info("adaptive rate: backend struggling, factor decreased",
			"factor", r.own, "p99", s.P99, "error_ratio", s.ErrorRatio, "calls", s.Calls)
	case s.P99 <= time.Duration(o.Hysteresis*float64(o.TargetLatency)) && s.ErrorRatio <= o.Hysteresis*o.MaxErrorRatio:
		if r.own < 1 {
			r.own = min(1, r.own+o.Increase)
			r.log.Debug("adaptive rate: backend healthy, factor increased", "factor", r.own, "p99", s.P99)
		}
	}
}

// fleet publishes the node's own factor and returns the fleet's minimum;
// when Shared fails it keeps the last minimum read until SharedTTL has
// passed, then goes by the node's own factor alone.
func (r *RateLimiter) fleet(ctx context.Context, now time.Time) float64 {
	o := &r.opts
	err := o.Shared.Publish(ctx, o.Node, r.own, o.SharedTTL)
	if err == nil {
		var m float64
		if m, err = o.Shared.Min(ctx); err == nil {
			r.shared, r.sharedRead = m, now
			return m
		}
	}
	r.log.Warn("adaptive rate: shared factor unavailable", "node", o.Node, "error", err)
	if !r.sharedRead.IsZero() && now.Sub(r.sharedRead) < o.SharedTTL {
		return r.shared
	}
	return 1
}

// quantise rounds f down to a multiple of 1/FactorSteps within
// [floor, 1], floor itself rounded up.
func quantise(f, floor float64) uint32 {
	const eps = 1e-9 // 0.7·0.5 and friends land a hair below their step
	lo := max(1, uint32(math.Ceil(floor*FactorSteps-eps)))
	s := uint32(math.Max(0, math.Floor(f*FactorSteps+eps)))
	return min(max(s, lo), FactorSteps)
}
