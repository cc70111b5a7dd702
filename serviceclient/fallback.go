package serviceclient

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
)

// A policy decision goes through the same failover.Limiter as an explicit
// one, so that one circuit breaker, one timeout and one local Memory serve
// both. failover knows only floodgate's requests (key, limit, cost), so a
// policy decision is put to it as a batch of stand-ins: one request per
// limit of each descriptor, which failover's FailLocal enforces locally,
// divided by Nodes, when the service does not answer. The decision itself
// (domain, descriptors) travels to serviceStore.AllowAll in the context,
// as a policyCall, and its answer comes back in it.

// policyCall is one policy decision on its way through failover.
type policyCall struct {
	domain string
	descs  []Descriptor
	cost   int64

	// Set by ask on the caller's goroutine (serviceStore is
	// DeadlineAware), read once failover has returned.
	result   Result
	answered bool
	err      error // the service's failure, failover's cause
}

type callKey struct{}

// AllowAll puts the policyCall in ctx to the service; reqs are its
// stand-ins, for failover's fallback only. Its decisions are in the call.
func (s serviceStore) AllowAll(ctx context.Context, _ []floodgate.Request) ([]floodgate.Decision, error) {
	call, ok := ctx.Value(callKey{}).(*policyCall)
	if !ok {
		return nil, errors.New("serviceclient: a policy decision without its call (AllowAll is the client's own)")
	}
	call.err = s.c.ask(ctx, call)
	return nil, call.err
}

// standIns are the local requests of a policy decision under FailLocal:
// descriptor i's limits are reqs[from[i]:from[i+1]], and unknown[i] says
// it has none known.
type standIns struct {
	reqs       []floodgate.Request
	from       []int
	unknown    []bool
	anyUnknown bool
}

// decideGuarded is Decide through the fallback.
func (c *Client) decideGuarded(ctx context.Context, call *policyCall) (Result, error) {
	var st standIns
	if c.opts.Fallback.Mode == failover.FailLocal {
		st = c.standIns(call)
	}
	ds, err := c.policies.AllowAll(context.WithValue(ctx, callKey{}, call), st.reqs)
	switch {
	case err != nil:
		return Result{}, err
	case call.answered:
		return call.result, nil
	}
	cause := call.err // the service failed; or it was not asked: the breaker is open
	if cause == nil {
		cause = failover.ErrBreakerOpen
	}
	return c.degraded(call, st, ds, cause)
}

// standIns finds the limits of call's descriptors: given by
// Options.PolicyLimits, else learned. When one is unknown and
// UnknownLimit is not FailOpen, the decision will be denied or an error
// if the service does not answer, so nothing is to be taken locally: no
// stand-ins.
func (c *Client) standIns(call *policyCall) standIns {
	st := standIns{from: make([]int, len(call.descs)+1), unknown: make([]bool, len(call.descs))}
	for i, d := range call.descs {
		st.from[i] = len(st.reqs)
		key := policyKey(call.domain, d)
		limits, ok := c.limitsOf(call.domain, d, key)
		if !ok {
			st.unknown[i], st.anyUnknown = true, true
			continue
		}
		for j, l := range limits {
			st.reqs = append(st.reqs, floodgate.Request{Key: limitKey(key, j), Limit: l, Cost: call.cost})
		}
	}
	st.from[len(call.descs)] = len(st.reqs)
	if st.anyUnknown && c.opts.UnknownLimit != failover.FailOpen {
		st.reqs = nil
	}
	return st
}

// limitsOf is the limits of descriptor d of domain (key is its
// policyKey): the caller's, else the learned ones.
func (c *Client) limitsOf(domain string, d Descriptor, key string) ([]floodgate.Limit, bool) {
	if c.opts.PolicyLimits != nil {
		if limits, ok := c.opts.PolicyLimits(domain, d); ok {
			return limits, true
		}
	}
	return c.learned.get(key)
}

// degraded is the fallback's policy decision when the service did not
// answer because of cause: ds are failover's decisions on the stand-ins.
func (c *Client) degraded(call *policyCall, st standIns, ds []floodgate.Decision, cause error) (Result, error) {
	r := Result{Allowed: true, Degraded: cause, Descriptors: make([]DescriptorResult, len(call.descs))}
	for i := range call.descs {
		var dr DescriptorResult
		switch mode := c.opts.Fallback.Mode; {
		case mode == failover.FailOpen:
			dr.Allowed = true
		case mode == failover.FailClosed:
			dr.RetryAfter = c.closedRetry()
		case st.anyUnknown && c.opts.UnknownLimit == "":
			i := firstUnknown(st.unknown)
			return Result{}, fmt.Errorf("%w: descriptors[%d] of domain %q: the service did not answer, and its limits were neither given (Options.PolicyLimits) nor learned: %w",
				ErrNoLocalLimit, i, call.domain, cause)
		case st.anyUnknown && c.opts.UnknownLimit == failover.FailClosed:
			dr.RetryAfter = c.closedRetry()
		case st.unknown[i]: // UnknownLimit FailOpen
			dr.Allowed = true
		default:
			dr = localResult(ds[st.from[i]:st.from[i+1]])
		}
		r.Descriptors[i] = dr
		r.Allowed = r.Allowed && dr.Allowed
	}
	return r, nil
}

// localResult is a descriptor's decision from its limits' local ones.
func localResult(ds []floodgate.Decision) DescriptorResult {
	d := floodgate.Combine(ds)
	return DescriptorResult{Allowed: d.Allowed, Limited: len(ds) > 0, Limit: d.Limit, Remaining: d.Remaining,
		RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter}
}

// limitKey names limit j of the descriptor of policyKey key in the local
// Memory: key itself for the first, key#j for the others ('#' cannot
// start a part of a policyKey, so no two descriptors' names meet).
func limitKey(key string, j int) string {
	if j == 0 {
		return key
	}
	return key + "#" + strconv.Itoa(j)
}

func firstUnknown(unknown []bool) int {
	for i, u := range unknown {
		if u {
			return i
		}
	}
	return -1
}
