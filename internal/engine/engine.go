// Package engine answers "may this request pass?" for policy lookups: it
// matches a request's descriptors against the loaded policies, turns every
// limit that applies into a keyed, costed request to a store, and folds the
// decisions into one answer per descriptor and one for the request. The
// surfaces (Envoy's gRPC service, the HTTP API) translate to and from it.
package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/config"
)

// Bounds on a request, so that no caller can make one decision arbitrarily
// expensive.
const (
	MaxDescriptors = 64
	MaxEntries     = 32
	MaxHits        = 1 << 32
)

// ErrBadRequest is wrapped by every error about a malformed request.
var ErrBadRequest = errors.New("bad request")

// ErrUnsupported is wrapped by the error of a well-formed request that the
// configured stores cannot serve (a refund on a store that cannot refund).
var ErrUnsupported = errors.New("unsupported")

// Code is the answer for a descriptor or a request.
type Code int

const (
	OK        Code = 1 // Envoy's OK
	OverLimit Code = 2 // Envoy's OVER_LIMIT
)

func (c Code) String() string {
	if c == OverLimit {
		return "OVER_LIMIT"
	}
	return "OK"
}

// Descriptor is one descriptor of a request.
type Descriptor struct {
	Entries []config.Entry
	// Hits overrides the request's Hits for this descriptor when > 0, or
	// when HitsSet: Envoy's per-descriptor hits_addend, where 0 reads the
	// limits without counting.
	Hits    int64
	HitsSet bool
	// Refund gives the hits back instead of taking them (Envoy's
	// is_negative_hits): for a request that reserved more than it used.
	// The descriptor is then never over the limit; its statuses tell what
	// remains after the refund.
	Refund bool
	// Charge takes the hits whatever the limit says, past it if need be:
	// for a request that used more than it reserved (the work is done). As
	// with Refund, the descriptor is never over the limit in the answer.
	Charge bool
	// Override, when set, replaces the limit the policy gives (Envoy's
	// per-descriptor limit override); it is counted under its own key.
	Override *floodgate.Limit
}

// Request asks for a decision on one request.
type Request struct {
	Domain      string
	Descriptors []Descriptor
	// Hits is the cost of the request (0 means 1).
	Hits int64
	// Atomic makes the limits of all descriptors all or nothing: when one
	// denies, none is consumed. Without it each descriptor is decided on its
	// own, as Envoy's reference service does (a denied descriptor does not
	// stop the others from counting). The limits of one descriptor are
	// always all or nothing.
	Atomic bool
}

// LimitStatus is one limit's part in a decision.
type LimitStatus struct {
	Rule     config.Rule
	Limit    floodgate.Limit // as enforced: the rule's or the override
	Key      string
	Decision floodgate.Decision
}

// DescriptorStatus is the answer for one descriptor.
type DescriptorStatus struct {
	Code Code
	// Limits are the limits that applied, in policy order; empty when none
	// did (the descriptor is not limited).
	Limits []LimitStatus
	// Tightest indexes the limit with the least remaining, the one to report
	// as current_limit; -1 when none.
	Tightest int
	// ShadowDenied reports that a shadow-mode limit would have denied.
	ShadowDenied bool
}

// Response is the answer for a request.
type Response struct {
	Code        Code
	Descriptors []DescriptorStatus
}

// Engine decides policy lookups. It is safe for concurrent use; Reload
// swaps the policies atomically and the stores keep their counts.
type Engine struct {
	policies atomic.Pointer[config.Set]
	stores   Stores
}

// Stores picks the store a rule counts in (by failure mode, strategy).
type Stores interface {
	For(rule config.Rule) floodgate.Limiter
}

// OneStore counts every rule in one Limiter.
type OneStore struct{ floodgate.Limiter }

// For implements Stores.
func (s OneStore) For(config.Rule) floodgate.Limiter { return s.Limiter }

// New returns an engine over the policies and stores.
func New(policies *config.Set, stores Stores) *Engine {
	e := &Engine{stores: stores}
	e.policies.Store(policies)
	return e
}

// Policies returns the policies in force.
func (e *Engine) Policies() *config.Set { return e.policies.Load() }

// Reload puts new policies in force for every later decision.
func (e *Engine) Reload(policies *config.Set) { e.policies.Store(policies) }

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, args...)...)
}

func validate(req Request) error {
	switch {
	case req.Domain == "":
		return badRequest("domain is empty")
	case len(req.Descriptors) == 0:
		return badRequest("no descriptors")
	case len(req.Descriptors) > MaxDescriptors:
		return badRequest("%d descriptors, at most %d", len(req.Descriptors), MaxDescriptors)
	case req.Hits < 0 || req.Hits > MaxHits:
		return badRequest("hits %d outside [0, %d]", req.Hits, int64(MaxHits))
	}
	for i, d := range req.Descriptors {
		switch {
		case len(d.Entries) == 0:
			return badRequest("descriptor %d has no entries", i)
		case len(d.Entries) > MaxEntries:
			return badRequest("descriptor %d has %d entries, at most %d", i, len(d.Entries), MaxEntries)
		case d.Hits < 0 || d.Hits > MaxHits:
			return badRequest("descriptor %d: hits %d outside [0, %d]", i, d.Hits, int64(MaxHits))
		case d.Refund && d.Charge:
			return badRequest("descriptor %d both refunds and charges its hits", i)
		}
		for j, e := range d.Entries {
			if e.Key == "" {
				return badRequest("descriptor %d entry %d has an empty key", i, j)
			}
		}
		if d.Override != nil {
			if err := d.Override.Validate(); err != nil {
				return badRequest("descriptor %d: limit override: %v", i, err)
			}
		}
	}
	return nil
}

// Decide answers one request.
func (e *Engine) Decide(ctx context.Context, req Request) (Response, error) {
	if err := validate(req); err != nil {
		return Response{}, err
	}
	descs := make([]config.Descriptor, len(req.Descriptors))
	for i, d := range req.Descriptors {
		descs[i] = config.Descriptor{Entries: d.Entries}
	}
	set := e.policies.Load()
	p := newPlan(req, descs, set, set.MatchAll(req.Domain, descs))
	if err := p.run(ctx, e.stores); err != nil {
		return Response{}, err
	}
	return p.response(), nil
}
