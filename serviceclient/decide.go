package serviceclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/observe"
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
	// fallback did (it wraps floodgate.ErrStoreUnavailable).
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
// service does not answer within Options.Timeout, the Fallback decides
// (Result.Degraded, and observe.NoteDegraded on ctx), or the error is
// returned, wrapping floodgate.ErrStoreUnavailable.
func (c *Client) Decide(ctx context.Context, domain string, descs []Descriptor, cost int64) (Result, error) {
	if err := c.checkDecide(domain, descs, cost); err != nil {
		return Result{}, err
	}
	if r, ok := c.cache.policy(domain, descs, cost); ok {
		return r, nil
	}
	var r Result
	var err error
	if c.rls != nil {
		r, err = c.decideGRPC(ctx, domain, descs, cost)
	} else {
		r, err = c.decideHTTP(ctx, domain, descs, cost)
	}
	switch {
	case err == nil:
		c.cache.denyPolicy(domain, descs, cost, r)
		return r, nil
	case errors.Is(err, floodgate.ErrStoreUnavailable) && ctx.Err() == nil:
		return c.fallback(ctx, len(descs), err)
	}
	return Result{}, err
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

// fallback is the policy decision of Options.Fallback when the service
// did not answer, because of cause.
func (c *Client) fallback(ctx context.Context, n int, cause error) (Result, error) {
	var allowed bool
	var retry time.Duration
	switch c.opts.Fallback.Mode {
	case failover.FailOpen:
		allowed = true
	case failover.FailClosed:
		retry = c.closedRetry()
	default: // none, or FailLocal: no local limit for a policy the service holds
		return Result{}, cause
	}
	observe.NoteDegraded(ctx, cause)
	r := Result{Allowed: allowed, Degraded: cause, Descriptors: make([]DescriptorResult, n)}
	for i := range r.Descriptors {
		r.Descriptors[i] = DescriptorResult{Allowed: allowed, RetryAfter: retry}
	}
	return r, nil
}

// closedRetry is FailClosed's RetryAfter for a policy decision: the
// fallback's cool-down, the interval at which the explicit path's breaker
// tries the service again.
func (c *Client) closedRetry() time.Duration {
	if cd := c.opts.Fallback.CoolDown; cd > 0 {
		return cd
	}
	return failover.DefaultCoolDown
}
