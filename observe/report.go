package observe

import (
	"context"
	"time"

	"github.com/floodgate-io/floodgate"
)

// Decided is one request's decision, as a surface that decides a request's
// limits together (floodgate.BatchLimiter, or one by one) reports it with
// Report.
type Decided struct {
	Surface, Policy, Client string
	// Requests are the limits' requests to the store, in order.
	Requests []floodgate.Request
	// Decisions are their decisions: as many as Requests, or fewer when
	// the surface stopped at the first denial (the rest are not
	// reported); nil when Err is set.
	Decisions []floodgate.Decision
	// Err is the error that left the request undecided.
	Err error
	// Latency, StoreTime, Time, Untimed and Weight are as in Event.
	Latency, StoreTime time.Duration
	Time               time.Time
	Untimed            bool
	Weight             int64
	// Limiter is the limiter the surface decides with, for Start: when
	// it is Undegradable and says so, Start decides with the caller's
	// context as it is, rather than allocate one to carry Notes. nil (or
	// any other Limiter) gets the Notes. Report ignores it.
	Limiter floodgate.Limiter
}

// Undegradable is implemented by a floodgate.Limiter that can say it
// never notes a decision degraded: neither it nor any limiter under it
// calls NoteDegraded (failover and serviceclient do; floodgate.Memory and
// redisstore do not). When it does, a surface's Start decides with the
// caller's context as it is, and the report costs no allocation: Notes
// exist only so that such a note can travel up. A limiter that wraps
// another answers for both: it forwards the question, or answers false.
// A Limiter that does not implement it is taken to note (safe).
type Undegradable interface {
	// NeverDegrades reports whether no decision is ever noted degraded.
	NeverDegrades() bool
}

// neverDegrades reports whether l says it never notes a decision
// degraded.
func neverDegrades(l floodgate.Limiter) bool {
	u, ok := l.(Undegradable)
	return ok && u.NeverDegrades()
}

// Report tells o of a decided request: one Event per limit, the ith named
// name(i), then End with the request's Summary. Notes in ctx (WithNotes)
// mark the events as degraded.
//
// A limit's Outcome is its own verdict: Denied when its decision is one
// that denied the request (floodgate.Violated), Allowed otherwise, even
// when another limit denied the request and so nothing was consumed (as
// envoyproxy/ratelimit reports each descriptor). A nil o reports nothing.
func Report(ctx context.Context, o Observer, d Decided, name func(i int) string) {
	if o == nil {
		return
	}
	sp, _ := o.(Spanner)
	report(ctx, o, sp, &d, NotesFrom(ctx), name)
}

// report is Report with the request's Notes (n, or nil) found, and d
// given by reference: it is the one path of every report, where a copy of
// Decided costs as much as an observer's work.
// sp is o when it is a Spanner, else nil.
func report(ctx context.Context, o Observer, sp Spanner, d *Decided, n *Notes, name func(i int) string) {
	e := Event{Surface: d.Surface, Policy: d.Policy, Client: d.Client, Err: d.Err, Latency: d.Latency, StoreTime: d.StoreTime,
		Time: d.Time, Untimed: d.Untimed, Weight: d.Weight}
	if n != nil {
		if degraded, cause := n.Degraded(); degraded {
			e.Degraded = true
			if e.Err == nil {
				e.Err = cause
			}
		}
	}
	sum := Summary{Outcome: Allowed, Policy: d.Policy, Degraded: e.Degraded, Err: d.Err, Latency: d.Latency, StoreTime: d.StoreTime,
		Untimed: d.Untimed, Weight: d.Weight}
	if d.Err != nil {
		sum.Outcome = Error
	}
	var one [1]Observer
	list := observers(o, &one)
	for i, rq := range d.Requests {
		e.Limit, e.Key, e.Cost = name(i), rq.Key, rq.Cost
		switch {
		case d.Err != nil:
			e.Outcome = Error
		case i >= len(d.Decisions):
			continue
		default:
			e.Decision, e.Outcome = d.Decisions[i], Allowed
			if floodgate.Violated(e.Decision, d.Decisions) {
				e.Outcome, sum.Outcome = Denied, Denied
			}
		}
		sum.Limits++
		for _, ob := range list {
			ob.Observe(ctx, e)
		}
	}
	if sp != nil {
		sp.End(ctx, sum)
	}
}

// observers is what o tells in turn: a Multi's list, or o alone in one,
// so that report passes each Event to each observer once (an Event is
// copied with every call: a Multi in between would copy it once more).
func observers(o Observer, one *[1]Observer) []Observer {
	switch m := o.(type) {
	case multi:
		return m
	case *spanningMulti:
		return m.multi
	}
	one[0] = o
	return one[:]
}

// Reporting is one request's report in progress, for a surface that
// decides with floodgate.Request values: Start it before the decision,
// call Decided when the store has answered and Report once the outcome is
// final. It is a value that the surface keeps in a local variable, so that
// reporting costs no allocation beyond the decision's context. The zero
// Reporting (no Observer) does nothing and reads no clock.
type Reporting struct {
	o  Observer
	sp Spanner  // o when it is one, found once for Begin and End
	s  *Sampler // nil: every decision timed, on the system clock
	// ctx is the decision's context: a NotesContext, unless the limiter
	// is Undegradable. The NotesContext is the report's one allocation:
	// the limiter may hand it to a goroutine that outlives the decision
	// (failover's timed store calls do), so it can be neither on the
	// surface's stack nor reused.
	ctx   context.Context
	notes *Notes  // ctx's, or nil
	d     Decided // d.Time is the decision's start until Decided
}

// Start begins the report of a request to o (observe.Begin) and returns the
// context to decide it with, which carries the request's Notes. d gives
// the request's Surface, Policy, Client, Requests and Limiter; when
// d.Limiter is Undegradable the context carries no Notes and costs no
// allocation. With a nil o it returns ctx and the zero Reporting, without
// reading the clock.
//
// When o was wrapped by Sample, its Sampler decides whether the decision
// is timed: an untimed one reads no clock, here or in Decided, and is
// reported with Untimed set. Any other o times every decision.
func Start(ctx context.Context, o Observer, d Decided) (context.Context, Reporting) {
	if o == nil {
		return ctx, Reporting{}
	}
	r := Reporting{d: d} // Start is inlined: r is the surface's variable
	return r.start(ctx, o), r
}

// Start is observe.Start into r: the surfaces declare their Reporting
// and start it in place, where observe.Start's result (some 250 bytes)
// is copied on its way to the surface's variable, a copy that costs a
// tenth of the observers' work on a sampled decision.
func (r *Reporting) Start(ctx context.Context, o Observer, d Decided) context.Context {
	if o == nil {
		*r = Reporting{}
		return ctx
	}
	*r = Reporting{d: d}
	return r.start(ctx, o)
}

func (r *Reporting) start(ctx context.Context, o Observer) context.Context {
	r.o, r.s = Unwrap(o)
	r.d.Time, r.d.Weight = r.s.Start()
	r.d.Untimed = r.d.Weight == 0
	r.sp, _ = r.o.(Spanner)
	if r.sp != nil {
		ctx = r.sp.Begin(ctx, r.d.Surface, r.d.Policy)
	}
	if neverDegrades(r.d.Limiter) {
		r.ctx = ctx
		return ctx
	}
	nc := &NotesContext{Context: ctx}
	r.ctx, r.notes = nc, &nc.Notes
	return nc
}

// Decided marks the end of the decision: the Latency reported is from
// Start to here, and the events' Time is now, derived from Start's reading
// and the monotonic clock's (one read here, none in the observers).
// Between Start and Decided a surface does nothing but call its limiter,
// so the StoreTime reported is the Latency, as the engine reports it:
// every surface then has the same metrics
// (floodgate_store_duration_seconds too). An untimed decision reads no
// clock: its Latency stays 0 and its Time the Sampler's latest reading.
func (r *Reporting) Decided() {
	if r.o == nil || r.d.Untimed {
		return
	}
	r.d.Latency = r.s.Since(r.d.Time) // the monotonic clock alone
	r.d.Time = r.d.Time.Add(r.d.Latency)
	r.d.StoreTime = r.d.Latency
}

// Report reports the request's decisions ds, or its error, with Report.
func (r *Reporting) Report(ds []floodgate.Decision, err error, name func(i int) string) {
	if r.o == nil {
		return
	}
	r.d.Decisions, r.d.Err = ds, err
	report(r.ctx, r.o, r.sp, &r.d, r.notes, name)
}

// Malformed ends the report of a request that was refused before any limit
// was decided because it was malformed (the caller's fault, not a
// decision): no Event, only End with an Error summary.
func (r *Reporting) Malformed(err error) {
	if r.o == nil {
		return
	}
	End(r.ctx, r.o, Summary{Outcome: Error, Err: err, Policy: r.d.Policy, Latency: r.d.Latency, Untimed: r.d.Untimed, Weight: r.d.Weight})
}
