package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/httplimit"
	"github.com/floodgate-io/floodgate/internal/headers"
)

// admitted is a request let through by its route's limits: what it was
// decided with, for a route that reconciles its cost from the response.
type admitted struct {
	route *policy.Route // nil when no limit applied
	req   engine.Request
}

// admit decides r by its route (nil: none matched). It returns true when
// r may go upstream, with the RateLimit fields set on w; otherwise it has
// answered r.
func (p *Proxy) admit(w http.ResponseWriter, r *http.Request, route *policy.Route) (admitted, bool) {
	if route == nil || len(route.Descriptors) == 0 {
		return admitted{}, true
	}
	descs, cost, err := route.Request(r)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, err.Error())
		return admitted{}, false
	}
	if len(descs) == 0 {
		return admitted{}, true // every descriptor lacked a value and may be skipped
	}
	req := engine.Request{Domain: route.Domain, Descriptors: make([]engine.Descriptor, len(descs)), Hits: cost.Units, Costs: cost.Named, Atomic: true}
	for i, d := range descs {
		req.Descriptors[i] = engine.Descriptor{Entries: d.Entries}
	}
	resp, err := p.engine.Decide(r.Context(), req)
	if err != nil {
		p.decisionFailed(w, r, route, err)
		return admitted{}, false
	}
	v := verdictOf(resp)
	resp.Release() // the verdict copied what it keeps
	if !v.allowed {
		p.deny(w, v)
		return admitted{}, false
	}
	if v.combined.Delay > 0 {
		if p.hold(w, r, v) {
			return admitted{route, req}, true
		}
		p.release(r, req)
		return admitted{}, false
	}
	setQuotas(w.Header(), v.quotas)
	return admitted{route, req}, true
}

// The RateLimit field names in net/http's canonical form, so that setting
// them skips canonicalising on every request.
var (
	policyKey = http.CanonicalHeaderKey(headers.PolicyField)
	limitKey  = http.CanonicalHeaderKey(headers.LimitField)
)

// setQuotas sets the RateLimit-Policy and RateLimit fields, as headers.Set
// does, on the hot path of every admitted request.
func setQuotas(h http.Header, qs []headers.Quota) {
	if len(qs) == 0 {
		return
	}
	h[policyKey] = []string{headers.PolicyValue(qs)}
	h[limitKey] = []string{headers.LimitValue(qs)}
}

// decisionFailed answers a request the engine could not decide: 400 when
// the request is at fault (a value too long for a key, a cost too large),
// 503 when the store is.
func (p *Proxy) decisionFailed(w http.ResponseWriter, r *http.Request, route *policy.Route, err error) {
	switch {
	case r.Context().Err() != nil:
		return // the client left
	case errors.Is(err, engine.ErrBadRequest), errors.Is(err, floodgate.ErrInvalidKey), errors.Is(err, floodgate.ErrInvalidCost):
		writeProblem(w, http.StatusBadRequest, fmt.Sprintf("route %q: %v", route.Name, err))
	default:
		p.log.Warn("rate limit decision failed", "route", route.Name, "error", err)
		writeProblem(w, http.StatusServiceUnavailable, "the rate limiter could not decide; retry later")
	}
}

// hold keeps an admitted request for its leaky-bucket Delay, so that
// requests leave spaced as the limit says, or refuses it when the wait is
// longer than MaxDelay.
func (p *Proxy) hold(w http.ResponseWriter, r *http.Request, v verdict) bool {
	delay := v.combined.Delay
	if delay > p.maxDelay {
		// After the delay this request's place has left the queue: a retry
		// then is held less.
		v.retryAfter, v.violated = delay, v.names
		p.deny(w, v)
		return false
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return false // the client left: nothing to forward, nobody to answer
	}
	setQuotas(w.Header(), v.quotas)
	return true
}

// releaseTimeout bounds giving back the place of a request not served, or
// reconciling the cost of one that was.
const releaseTimeout = 2 * time.Second

// release gives back what an admitted request that will not go upstream
// took (its client left while held, or its wait was too long): its units,
// the costs of the limits its route names, and the request itself, so
// that its place in a leaky bucket's queue goes to the requests after it.
// It runs on a context the client's leaving does not cancel; a store that
// cannot give units back keeps them.
func (p *Proxy) release(r *http.Request, req engine.Request) {
	if err := p.adjust(r, req, -req.Hits, req.Costs, 1); err != nil {
		p.log.Warn("a request that was not served kept its place", "domain", req.Domain, "error", err)
	}
}

// reconcile corrects what an admitted request of a reconciling route was
// charged by what its response says it cost: the limits that count units
// and that the route does not name, for the others' costs were no
// estimate. A response without a usable amount keeps the estimate, and
// says so in the log.
func (p *Proxy) reconcile(r *http.Request, a admitted, resp *httplimit.Response) {
	actual, err := a.route.ActualCost(resp)
	if err == nil {
		var named map[string]int64
		if a.req.Costs != nil {
			named = make(map[string]int64, len(a.req.Costs))
			for name := range a.req.Costs {
				named[name] = 0
			}
		}
		err = p.adjust(r, a.req, actual-a.req.Hits, named, 0)
	}
	if err != nil {
		p.log.Warn("cost not reconciled; the estimate stays charged", "route", a.route.Name, "estimate", a.req.Hits, "error", err)
	}
}

// adjust charges (units > 0) or gives back (units < 0) |units| on the
// limits that count units of every descriptor req was decided with, and
// moves the named limits by costs and those that count requests by
// requests the same way, on a context the client's leaving does not
// cancel: the work is done, or the place is free, either way.
func (p *Proxy) adjust(r *http.Request, req engine.Request, units int64, costs map[string]int64, requests int64) error {
	if units == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), releaseTimeout)
	defer cancel()
	change := req
	change.Hits = max(units, -units)
	change.Costs = costs
	change.Descriptors = make([]engine.Descriptor, len(req.Descriptors))
	for i, d := range req.Descriptors {
		d.Refund, d.Charge, d.Requests = units < 0, units > 0, requests
		change.Descriptors[i] = d
	}
	_, err := p.engine.Decide(ctx, change)
	return err
}

// deny answers 429 with Retry-After (unless the request can never pass)
// and the RateLimit fields.
func (p *Proxy) deny(w http.ResponseWriter, v verdict) {
	h := w.Header()
	setQuotas(h, v.quotas)
	if !v.never {
		h.Set(headers.RetryAfterField, headers.RetryAfter(max(v.retryAfter, time.Second)))
	}
	p.bodies.write(w, v.violated)
}
