// Package observe is the one place every Floodgate surface reports its
// decisions to: floodgate serve, floodgate proxy, the httplimit middleware
// and the grpclimit interceptors all call the same Observer with the same
// Event, so that metrics, traces, decision logs and the heavy-hitter views
// built on it read the same on every surface.
//
// A surface reports one Event per limit it decided (a request under a
// per-client and a per-tenant limit gives two), after the decision. An
// Observer that also implements Spanner is told when a request's decision
// begins and ends as well, which is what tracing needs to put the store's
// calls inside the decision's span.
//
// Timing a decision costs two clock reads, more than the rest of the
// observers' work; so a surface times the decisions its Observer's
// Sampler picks (Sample; SampleByDefault, at DefaultFullRate, 10,000 a
// second, for an Observer given without one): every decision below that
// rate, one in N above it, each of those with Weight N. The others are
// reported all the same, marked Untimed, with no latency and no clock
// read: counters stay exact, and what measures or estimates (latency
// histograms, top consumers) uses the timed ones.
//
// Observers run on the request's goroutine, inside its latency: they must
// be quick and must not block (aggregate, or hand off to a buffer). They
// must be safe for concurrent use.
//
// A report allocates nothing when the surface decides with a limiter that
// says it never notes a decision degraded (Undegradable:
// floodgate.Memory, redisstore); with any other it allocates the
// decision's context, which carries the Notes that failover and
// serviceclient mark a degraded decision in.
//
// This package has no dependencies beyond the standard library and the
// floodgate package; the Prometheus and OpenTelemetry observers live in the
// telemetry module, the heavy hitters in observe/insight and the decision
// log in observe/decisionlog.
package observe

import (
	"context"
	"time"

	"github.com/floodgate-io/floodgate"
)

// Outcome is what a decision did with a request.
type Outcome uint8

// The outcomes.
const (
	// Allowed: the limit admitted the request.
	Allowed Outcome = iota + 1
	// Denied: the limit refused the request (429, OVER_LIMIT).
	Denied
	// ShadowDenied: the limit would have refused the request but is in
	// shadow (or quota) mode, so the request passed.
	ShadowDenied
	// Shed: the request was refused to protect the server or its backend
	// (503), not because its caller was over a quota.
	Shed
	// Error: no decision was made (the store failed and no failure policy
	// decided instead, or the request was malformed).
	Error
)

// String is the outcome's name as metrics and logs show it.
func (o Outcome) String() string {
	switch o {
	case Allowed:
		return "allowed"
	case Denied:
		return "denied"
	case ShadowDenied:
		return "shadow_denied"
	case Shed:
		return "shed"
	case Error:
		return "error"
	}
	return "unknown"
}

// Outcomes lists every outcome, in order.
func Outcomes() []Outcome { return []Outcome{Allowed, Denied, ShadowDenied, Shed, Error} }

// Surfaces name themselves in Event.Surface with these.
const (
	SurfaceServe = "serve"
	SurfaceProxy = "proxy"
	SurfaceHTTP  = "httplimit"
	SurfaceGRPC  = "grpclimit"
)

// Event is one limit's decision for one request.
type Event struct {
	// Surface is the component that decided: SurfaceServe, SurfaceProxy,
	// SurfaceHTTP, SurfaceGRPC, or a name of the caller's.
	Surface string
	// Policy groups the limits of one configuration: the domain for
	// floodgate serve, the route's policy for the proxy, Options.Name for
	// the middleware. Empty when the request named none (an explicit
	// limit).
	Policy string
	// Limit names the limit within Policy (a rule's name, a descriptor's
	// path). Observers that export it bound its cardinality.
	Limit string
	// Key is the key the limit counted, raw. An observer that writes it
	// anywhere an attacker's input should not go hashes it (KeyHash).
	Key string
	// Client is the caller's address when the surface knows it, else "".
	Client string
	// Outcome is what the limit did with the request.
	Outcome Outcome
	// Degraded says that the store did not answer and a failure policy
	// (failover) decided in its place.
	Degraded bool
	// Untimed says that the surface's Sampler did not time this decision
	// (observe.Sample): Latency and StoreTime are 0 and Time approximate.
	// Everything else is as for a timed event. Observers count it where
	// they count every decision (outcome counters) and skip it where they
	// measure or estimate (latency histograms, top consumers): the timed
	// events stand for it through their Weight.
	Untimed bool
	// Err is the error behind an Error outcome or a degraded decision.
	Err error
	// Cost is the units the request asked for.
	Cost int64
	// Decision is the limit's decision: Limit, Remaining, RetryAfter and
	// ResetAfter as the store answered them. Zero for an Error outcome.
	Decision floodgate.Decision
	// Latency is how long the surface took to decide the whole request
	// this limit belongs to.
	Latency time.Duration
	// StoreTime is the part of Latency spent waiting for the store, when
	// the surface measures it separately; else 0.
	StoreTime time.Duration
	// Time is when the request's decision ended, as the surface read its
	// clock to measure Latency; zero when the surface does not say. An
	// observer that needs the time of each event (observe/insight's
	// windows) takes it from here rather than reading the clock again: a
	// clock read costs as much as the rest of its work. For an Untimed
	// event it is approximate: the start of the latest timed decision
	// (under sampling, about 1/FullRate of a second before; after an idle
	// spell, up to N decisions old), read from no clock.
	Time time.Time
	// Weight is how many decisions a timed event stands for: N when the
	// Sampler timed one decision in N, so that sums weighted by it are
	// unbiased estimates of sums over every decision; 0 when Untimed. 0
	// on a timed event means 1 (an Event built by hand; see Weighed).
	Weight int64
}

// Weighed is e's Weight as a count: 0 for an untimed event, else at
// least 1.
func (e *Event) Weighed() int64 {
	if e.Untimed {
		return 0
	}
	return max(e.Weight, 1)
}

// Used is the share of the limit that the key has used after the decision:
// (Limit − Remaining) / Limit, between 0 and 1; 0 when the limit is
// unknown (0).
func (e *Event) Used() float64 {
	l := e.Decision.Limit
	if l <= 0 {
		return 0
	}
	r := min(max(e.Decision.Remaining, 0), l)
	return float64(l-r) / float64(l)
}

// An Observer is told of every limit's decision.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// Func adapts a function to an Observer.
type Func func(ctx context.Context, e Event)

// Observe calls f.
func (f Func) Observe(ctx context.Context, e Event) { f(ctx, e) }

// Summary is a whole request's decision, reported to a Spanner when the
// request's decision ends.
type Summary struct {
	// Policy is the policy the request was decided under, as given to
	// Begin: what an observer that is not told Begin's context (metrics)
	// needs to label the request's latency.
	Policy string
	// Outcome is the request's: Denied when any limit denied it, Shed when
	// it was shed, Error when it could not be decided, ShadowDenied when
	// only shadow limits would have denied it, else Allowed.
	Outcome Outcome
	// Degraded is true when a failure policy decided any of its limits.
	Degraded bool
	// Limits is how many limits applied.
	Limits int
	// Err is the error behind an Error outcome.
	Err error
	// Latency, StoreTime, Untimed and Weight are as in Event: a Spanner
	// that measures (metrics' latency histograms) skips an Untimed
	// request.
	Latency, StoreTime time.Duration
	Untimed            bool
	Weight             int64
}

// A Spanner is an Observer that also sees each request's decision begin
// and end: tracing, which wraps the decision (and the store calls made with
// the context Begin returns) in a span.
type Spanner interface {
	Observer
	// Begin is called before the request is decided; the surface decides
	// with the context it returns and passes that context to Observe and
	// End.
	Begin(ctx context.Context, surface, policy string) context.Context
	// End is called once the request is decided, after its Events.
	End(ctx context.Context, s Summary)
}

// Begin calls o.Begin when o is a Spanner and returns ctx otherwise. A nil
// o is allowed.
func Begin(ctx context.Context, o Observer, surface, policy string) context.Context {
	if sp, ok := o.(Spanner); ok {
		return sp.Begin(ctx, surface, policy)
	}
	return ctx
}

// End calls o.End when o is a Spanner. A nil o is allowed.
func End(ctx context.Context, o Observer, s Summary) {
	if sp, ok := o.(Spanner); ok {
		sp.End(ctx, s)
	}
}

// Multi returns an Observer that tells each of obs in turn, in order; nil
// entries are skipped. It is a Spanner when any of them is. It returns nil
// when none is left, so that a surface can skip its reporting altogether.
func Multi(obs ...Observer) Observer {
	var list []Observer
	for _, o := range obs {
		switch o := o.(type) {
		case nil:
		case multi:
			list = append(list, o...)
		case *spanningMulti:
			list = append(list, o.multi...)
		default:
			list = append(list, o)
		}
	}
	var spanners []Spanner
	for _, o := range list {
		if sp, ok := o.(Spanner); ok {
			spanners = append(spanners, sp)
		}
	}
	switch {
	case len(list) == 0:
		return nil
	case len(list) == 1:
		return list[0]
	case len(spanners) > 0:
		return &spanningMulti{multi: list, spanners: spanners}
	}
	return multi(list)
}

type multi []Observer

func (m multi) Observe(ctx context.Context, e Event) {
	for _, o := range m {
		o.Observe(ctx, e)
	}
}

// spanningMulti is a multi with a Spanner among its observers; it is a
// separate type so that a multi without one is not mistaken for a Spanner
// by a surface's type assertion. It finds its Spanners once, when it is
// made, so that Begin and End, called for every request, assert no types.
type spanningMulti struct {
	multi
	spanners []Spanner // those of multi that are Spanners, in order
}

func (m *spanningMulti) Begin(ctx context.Context, surface, policy string) context.Context {
	for _, sp := range m.spanners {
		ctx = sp.Begin(ctx, surface, policy)
	}
	return ctx
}

func (m *spanningMulti) End(ctx context.Context, s Summary) {
	for i := len(m.spanners) - 1; i >= 0; i-- { // nested spans end inside out
		m.spanners[i].End(ctx, s)
	}
}
