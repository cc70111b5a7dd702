package serviceclient

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
)

// Entry is one key and value of a descriptor, as in the service's policy.
type Entry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Descriptor is what a policy decision asks about: entries the service
// looks up in its policy.
type Descriptor struct {
	Entries []Entry
	// Costs gives the descriptor's named limits costs of their own (HTTP
	// only: Envoy's API has no room for them, and a gRPC client refuses
	// them rather than drop them).
	Costs map[string]int64
}

// Result is a policy decision.
type Result struct {
	// Allowed: the request may pass (over HTTP, every descriptor was within
	// its limits; over gRPC, the service's overall code was OK).
	Allowed bool
	// Descriptors are the descriptors' own results, in the order asked.
	Descriptors []DescriptorResult
	// Cached: answered from the over-limit cache, without a call.
	Cached bool
	// Degraded, when not nil, is why the service did not decide: the
	// fallback did (it wraps floodgate.ErrStoreUnavailable;
	// failover.ErrBreakerOpen when the breaker skipped the call). The
	// Descriptors are then the fallback's: under FailLocal a known
	// descriptor's Limit, Remaining, RetryAfter and ResetAfter are its
	// local share's (no Name); otherwise only Allowed and RetryAfter.
	Degraded error
}

// DescriptorResult is one descriptor's decision.
type DescriptorResult struct {
	Allowed bool
	// Limited: a limit applies; Name, Limit and Remaining are then the
	// tightest one's (the one with the least remaining).
	Limited   bool
	Name      string
	Limit     int64
	Remaining int64
	// RetryAfter is, when denied, the longest wait among the denied limits
	// (negative: the cost can never pass). Over gRPC it is 0: Envoy's
	// answer does not carry it.
	RetryAfter time.Duration
	// ResetAfter is the time until the descriptor's limits are back to
	// full (gRPC: duration_until_reset).
	ResetAfter time.Duration
}

// Decide asks the service's policy whether a request with descs in domain
// may pass, taking cost units from each limit that counts units (1 from
// those that count requests; 0 reads). Over HTTP the descriptors are
// decided all or nothing; over gRPC as the service is configured (each on
// its own unless --atomic). When every descriptor is held by the cache as
// over its limit for at least this cost, the answer is local. When the
// service does not answer within Options.Timeout, or the fallback's
// circuit breaker is open, the Fallback decides (Result.Degraded, and
// observe.NoteDegraded on ctx), or the error is returned, wrapping
// floodgate.ErrStoreUnavailable.
func (c *Client) Decide(ctx context.Context, domain string, descs []Descriptor, cost int64) (Result, error) {
	if err := c.checkDecide(domain, descs, cost); err != nil {
		return Result{}, err
	}
	if r, ok := c.cache.policy(domain, descs, cost); ok {
		return r, nil
	}
	call := &policyCall{domain: domain, descs: descs, cost: cost}
	if c.policies != nil {
		return c.decideGuarded(ctx, call)
	}
	if err := c.ask(ctx, call); err != nil {
		return Result{}, err
	}
	return call.result, nil
}

// ask puts call to the service and, when it answers, caches its denials,
// learns its limits and sets call.result.
func (c *Client) ask(ctx context.Context, call *policyCall) error {
	var r Result
	var err error
	if c.rls != nil {
		r, err = c.decideGRPC(ctx, call.domain, call.descs, call.cost)
	} else {
		r, err = c.decideHTTP(ctx, call.domain, call.descs, call.cost)
	}
	if err != nil {
		return err
	}
	c.cache.denyPolicy(call.domain, call.descs, call.cost, r)
	call.result, call.answered = r, true
	return nil
}

// checkDecide refuses what the service would, before a call.
func (c *Client) checkDecide(domain string, descs []Descriptor, cost int64) error {
	switch {
	case domain == "":
		return fmt.Errorf("%w: domain is empty", ErrRejected)
	case len(descs) == 0:
		return fmt.Errorf("%w: descriptors is empty: give at least one", ErrRejected)
	case len(descs) > MaxBatchDescriptors:
		return fmt.Errorf("%w: %d descriptors, at most %d", ErrRejected, len(descs), MaxBatchDescriptors)
	case cost < 0:
		return fmt.Errorf("%w: cost must not be negative, got %d", floodgate.ErrInvalidCost, cost)
	}
	for i, d := range descs {
		switch {
		case len(d.Entries) == 0:
			return fmt.Errorf("%w: descriptors[%d] has no entries", ErrRejected, i)
		case len(d.Costs) > 0 && c.rls != nil:
			return fmt.Errorf("%w: descriptors[%d]: costs per limit go over HTTP only (Envoy's API has no room for them)", ErrRejected, i)
		}
		for j, e := range d.Entries {
			if e.Key == "" {
				return fmt.Errorf("%w: descriptors[%d].entries[%d]: key is empty", ErrRejected, i, j)
			}
		}
	}
	return nil
}

// closedRetry is the RetryAfter of a policy decision that the fallback
// denies without a local count (FailClosed, or an unknown limit under
// FailLocal): the breaker's cool-down, the interval at which it tries the
// service again.
func (c *Client) closedRetry() time.Duration {
	if cd := c.opts.Fallback.CoolDown; cd > 0 {
		return cd
	}
	return failover.DefaultCoolDown
}
