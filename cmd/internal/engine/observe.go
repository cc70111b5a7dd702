package engine

import (
	"context"
	"errors"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/observe"
)

// UnknownDomain is the Event.Policy of a request whose domain no policy
// defines: callers name any domain they like, and reports must not grow
// with them.
const UnknownDomain = "_unknown"

// Observe makes e report every decision to o (observe.Event per limit,
// observe.Spanner's Begin and End around it) as surface. Call it before e
// decides anything. The events' Policy is the request's domain (or
// UnknownDomain), their Limit policy.Rule.MetricLabel, and their Client
// Request.Client.
//
// The decisions are timed as o's Sampler says (observe.Sample), or, when
// o has none, by one at observe.DefaultFullRate (observe.SampleByDefault);
// an untimed decision reads no clock and is reported Untimed.
func (e *Engine) Observe(surface string, o observe.Observer) *Engine {
	e.obs, e.surface = observe.SampleByDefault(o), surface
	return e
}

// decideObserved is Decide with its report.
func (e *Engine) decideObserved(ctx context.Context, req Request) (Response, error) {
	obs, sampler := observe.Unwrap(e.obs)
	start, weight := sampler.Start()
	domain := e.domainLabel(req.Domain)
	nc := &observe.NotesContext{Context: observe.Begin(ctx, obs, e.surface, domain)}
	resp, err := e.decide(nc, req)
	base := observe.Event{Surface: e.surface, Policy: domain, Client: req.Client, Time: start, Untimed: weight == 0, Weight: weight}
	if !base.Untimed {
		base.Latency = sampler.Since(start) // the monotonic clock alone; observers take Time rather than read the clock again
		base.Time = start.Add(base.Latency)
		base.StoreTime = base.Latency // the store's calls are all the engine waits for
	}
	base.Degraded, base.Err = nc.Notes.Degraded()
	sum := e.report(nc, obs, base, req, resp, err)
	observe.End(nc, obs, sum)
	return resp, err
}

func (e *Engine) domainLabel(domain string) string {
	if set := e.policies.Load(); set != nil {
		if _, ok := set.Policy(domain); ok {
			return domain
		}
	}
	return UnknownDomain
}

// report tells the Observer of each limit's part in resp, or of err, and
// returns the request's summary. A request no limit applied to gives one
// Allowed event with no Limit; a request that could not be decided one
// Error event with no Limit, unless it was malformed (its fault, not a
// decision: the summary alone says Error).
func (e *Engine) report(ctx context.Context, obs observe.Observer, base observe.Event, req Request, resp Response, err error) observe.Summary {
	sum := observe.Summary{Outcome: observe.Allowed, Policy: base.Policy, Degraded: base.Degraded, Latency: base.Latency, StoreTime: base.StoreTime,
		Untimed: base.Untimed, Weight: base.Weight}
	if err != nil {
		sum.Outcome, sum.Err = observe.Error, err
		if !IsBadInput(err) {
			base.Outcome, base.Err = observe.Error, err
			obs.Observe(ctx, base)
		}
		return sum
	}
	for i, ds := range resp.Descriptors {
		desc := policy.Descriptor{Entries: req.Descriptors[i].Entries}
		for _, ls := range ds.Limits {
			ev := base
			ev.Limit, _ = ls.Rule.MetricLabel(desc)
			ev.Key, ev.Cost, ev.Decision = ls.Key, ls.Cost, ls.Decision
			ev.Outcome = outcomeOf(ls)
			sum.Limits++
			if ev.Outcome == observe.Denied || ev.Outcome == observe.ShadowDenied && sum.Outcome == observe.Allowed {
				sum.Outcome = ev.Outcome
			}
			obs.Observe(ctx, ev)
		}
	}
	if sum.Limits == 0 {
		base.Outcome = observe.Allowed
		obs.Observe(ctx, base)
	}
	return sum
}

// outcomeOf is a limit's own verdict, as the response counts it (blamed).
func outcomeOf(ls LimitStatus) observe.Outcome {
	switch {
	case !blamed(ls.Decision):
		return observe.Allowed
	case ls.Rule.ShadowMode || ls.Rule.QuotaMode:
		return observe.ShadowDenied
	}
	return observe.Denied
}

// blamed reports whether d denied its request: in a denied batch, only the
// limits that denied have a RetryAfter.
func blamed(d floodgate.Decision) bool { return !d.Allowed && d.RetryAfter != 0 }

// IsBadInput reports whether err is about the request, not the stores.
func IsBadInput(err error) bool {
	return errors.Is(err, ErrBadRequest) || errors.Is(err, floodgate.ErrInvalidLimit) ||
		errors.Is(err, floodgate.ErrInvalidCost) || errors.Is(err, floodgate.ErrInvalidKey)
}
