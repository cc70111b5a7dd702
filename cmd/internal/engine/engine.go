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
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/internal/excerpt"
	"github.com/floodgate-io/floodgate/observe"
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
	Entries []policy.Entry
	// Hits overrides the request's Hits for this descriptor when > 0, or
	// when HitsSet: Envoy's per-descriptor hits_addend, where 0 reads the
	// limits, of both kinds, without counting.
	Hits    int64
	HitsSet bool
	// Refund gives the hits back instead of taking them (Envoy's
	// is_negative_hits): for a request that reserved more than it used.
	// The limits that count units get the hits back, those named in Costs
	// their cost, and those that count requests Requests (by default
	// none: the request still happened). The descriptor is then never
	// over the limit; its statuses tell what remains after the refund.
	Refund bool
	// Charge takes the hits whatever the limit says, past it if need be:
	// for a request that used more than it reserved (the work is done).
	// It moves the limits as Refund does, the other way; the descriptor is
	// never over the limit in the answer.
	Charge bool
	// Override, when set, replaces the limit the policy gives (Envoy's
	// per-descriptor limit override); it is counted under its own key.
	Override *floodgate.Limit
	// Costs gives the descriptor's limits costs of their own, by name, in
	// place of what they count (see costOf): each at least 0, and in a
	// Refund or Charge what that limit is moved by. Every name must be one
	// of the limits the policy has for the descriptor; the request is
	// refused (ErrBadRequest) otherwise.
	Costs map[string]int64
	// Requests is what a Refund or Charge moves the limits that count
	// requests by: 0 leaves them alone, as the correction of a request's
	// units should; 1 gives back or takes the request itself (one that was
	// admitted and then not served). Decisions count 1 per request, 0 for
	// a read, and refuse a Requests.
	Requests int64
}

// Request asks for a decision on one request.
type Request struct {
	Domain      string
	Descriptors []Descriptor
	// Hits is the cost of the request (0 means 1), which the limits that
	// count units take; those that count requests take 1 (see
	// policy.Counts). A descriptor's Hits or Costs change it for that
	// descriptor.
	Hits int64
	// Atomic makes the limits of all descriptors all or nothing: when one
	// denies, none is consumed. Without it each descriptor is decided on its
	// own, as Envoy's reference service does (a denied descriptor does not
	// stop the others from counting). The limits of one descriptor are
	// always all or nothing.
	Atomic bool
	// CountDenied charges the hits a limit denied to that limit anyway,
	// past it, as Envoy's reference service counts every hit it is asked
	// about (it increments before it compares): once a request has been
	// denied, a later smaller one in the same window is denied too. Only
	// stores that can adjust (floodgate.Adjuster: memory, Redis) count
	// them; the charge is best effort, after the decision, and a store
	// that cannot take it leaves the count as the decision left it.
	CountDenied bool
	// Client is the caller's address, when the surface knows it: reported
	// to the engine's Observer, not used to decide.
	Client string
	// Costs gives limits costs of their own by name, for every descriptor
	// that has a limit of that name; a descriptor's own Costs win. Unlike a
	// descriptor's, a name no limit of the request has is ignored: a route
	// names limits that only some of its requests reach.
	Costs map[string]int64
}

// LimitStatus is one limit's part in a decision.
type LimitStatus struct {
	Rule     policy.Rule
	Limit    floodgate.Limit // as enforced: the rule's or the override
	Key      string
	Decision floodgate.Decision
	// Cost is what the request asked of the limit: the units a decision
	// weighs (taken only when it passes), or what a Charge (positive) or a
	// Refund (negative) moved it by.
	Cost int64
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
	// Unlimited reports that the descriptor reached a descriptor whose
	// limits are all unlimited: known, and never limited. Envoy's service
	// answers it apart from a descriptor nothing applies to.
	Unlimited bool
}

// Response is the answer for a request.
type Response struct {
	Code        Code
	Descriptors []DescriptorStatus

	scratch *scratch // the memory Descriptors is in; nil once released
}

// Release gives the response's memory back to the engine, for a later
// decision to use. Nothing of the response (its Descriptors and their
// Limits) may be read after; the strings in it (keys, names) stay valid.
// Releasing is optional: a response never released is collected as usual.
func (r *Response) Release() {
	if r.scratch != nil {
		r.scratch.pool.put(r.scratch)
		*r = Response{}
	}
}

// Engine decides policy lookups. It is safe for concurrent use; Reload
// swaps the policies atomically and the stores keep their counts.
type Engine struct {
	policies atomic.Pointer[policy.Set]
	stores   Stores
	obs      observe.Observer // nil: no reports
	surface  string           // the Event.Surface of the reports
	scratch  scratchPool
}

// Stores picks the store a rule counts in (by failure mode, strategy).
type Stores interface {
	For(rule policy.Rule) floodgate.Limiter
}

// OneStore counts every rule in one Limiter.
type OneStore struct{ floodgate.Limiter }

// For implements Stores.
func (s OneStore) For(policy.Rule) floodgate.Limiter { return s.Limiter }

// New returns an engine over the policies and stores.
func New(policies *policy.Set, stores Stores) *Engine {
	e := &Engine{stores: stores}
	e.policies.Store(policies)
	return e
}

// Policies returns the policies in force.
func (e *Engine) Policies() *policy.Set { return e.policies.Load() }

// Reload puts new policies in force for every later decision.
func (e *Engine) Reload(policies *policy.Set) { e.policies.Store(policies) }

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, args...)...)
}

func validate(req Request) error {
	switch {
	case req.Domain == "":
		return badRequest("domain is empty")
	case len(req.Domain) > floodgate.MaxValueBytes:
		return fmt.Errorf("%w: %w", ErrBadRequest, floodgate.CheckLength("domain", req.Domain, floodgate.MaxValueBytes))
	case len(req.Descriptors) == 0:
		return badRequest("no descriptors")
	case len(req.Descriptors) > MaxDescriptors:
		return badRequest("%d descriptors, at most %d", len(req.Descriptors), MaxDescriptors)
	case req.Hits < 0 || req.Hits > MaxHits:
		return badRequest("hits %d outside [0, %d]", req.Hits, int64(MaxHits))
	}
	if len(req.Costs) > 0 {
		if err := validateCosts("costs", req.Costs); err != nil {
			return err
		}
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
		case d.Requests < 0 || d.Requests > MaxHits:
			return badRequest("descriptor %d: requests %d outside [0, %d]", i, d.Requests, int64(MaxHits))
		case d.Requests != 0 && !d.Refund && !d.Charge:
			return badRequest("descriptor %d: requests %d: only a refund or a charge moves requests limits by a number; a decision counts 1 per request", i, d.Requests)
		}
		if len(d.Costs) > 0 {
			if err := validateCosts(fmt.Sprintf("descriptor %d: costs", i), d.Costs); err != nil {
				return err
			}
		}
		for j, e := range d.Entries {
			if e.Key == "" {
				return badRequest("descriptor %d entry %d has an empty key", i, j)
			}
			if err := CheckEntry(e); err != nil {
				return fmt.Errorf("%w: descriptor %d entry %d: %w", ErrBadRequest, i, j, err)
			}
		}
		if d.Override != nil && d.Override.Rate != 0 { // 0 denies outright, as requests_per_unit 0 does
			if err := d.Override.Validate(); err != nil {
				return badRequest("descriptor %d: limit override: %v", i, err)
			}
		}
	}
	return nil
}

// CheckEntry holds a descriptor entry to the key-size policy: its key and
// value are each at most floodgate.MaxValueBytes. The error wraps
// floodgate.ErrKeyTooLong and quotes only the start of what was too long;
// Decide applies it, and a surface may too, to name the entry its own way.
func CheckEntry(e policy.Entry) error {
	if err := floodgate.CheckLength("key", e.Key, floodgate.MaxValueBytes); err != nil {
		return err
	}
	return floodgate.CheckLength("value", e.Value, floodgate.MaxValueBytes)
}

// validateCosts checks costs by name, in name order so that the error is
// always the same one.
func validateCosts(where string, costs map[string]int64) error {
	for _, name := range slices.Sorted(maps.Keys(costs)) {
		switch c := costs[name]; {
		case name == "":
			return badRequest("%s: a limit name is empty", where)
		case c < 0 || c > MaxHits:
			return badRequest("%s: %s: cost %d outside [0, %d]", where, excerpt.Quote(name), c, int64(MaxHits))
		}
	}
	return nil
}

// maxQuoted is the most names of the request an error quotes.
const maxQuoted = 5

// checkCostNames refuses a descriptor's costs for limits it does not have.
func checkCostNames(set *policy.Set, req Request, descs []policy.Descriptor) error {
	for i, d := range req.Descriptors {
		if len(d.Costs) == 0 {
			continue
		}
		var rules []policy.Rule
		if d.Override == nil { // an override is the descriptor's one limit, without a name
			rules, _ = set.Match(req.Domain, descs[i])
		}
		var unknown []string
		for name := range d.Costs {
			if !slices.ContainsFunc(rules, func(r policy.Rule) bool { return r.Name == name }) {
				unknown = append(unknown, excerpt.Quote(name))
			}
		}
		if len(unknown) == 0 {
			continue
		}
		slices.Sort(unknown)
		if n := len(unknown); n > maxQuoted { // a refusal stays short however many names came
			unknown = append(unknown[:maxQuoted], fmt.Sprintf("and %d more", n-maxQuoted))
		}
		var names []string
		for _, r := range rules {
			if r.Name != "" {
				names = append(names, r.Name)
			}
		}
		has := "it has no named limit"
		if len(names) > 0 {
			has = "its limits: " + strings.Join(names, ", ")
		}
		return badRequest("descriptor %d: costs: no limit named %s applies to it (%s)", i, strings.Join(unknown, ", "), has)
	}
	return nil
}

// Decide answers one request, and reports it to the engine's Observer.
func (e *Engine) Decide(ctx context.Context, req Request) (Response, error) {
	if e.obs == nil {
		return e.decide(ctx, req)
	}
	return e.decideObserved(ctx, req)
}

func (e *Engine) decide(ctx context.Context, req Request) (Response, error) {
	if err := validate(req); err != nil {
		return Response{}, err
	}
	sc := e.scratch.get()
	resp, err := e.decideIn(ctx, req, sc)
	if err != nil {
		e.scratch.put(sc)
	}
	return resp, err
}

// withoutOverridden is descs with the descriptors that carry a limit
// override left empty, for matching: as in Envoy's service, the configured
// limit of such a descriptor is not applied, so neither does it replace
// (replaces) other descriptors' limits. descs itself when none does.
func withoutOverridden(req Request, descs []policy.Descriptor) []policy.Descriptor {
	var out []policy.Descriptor
	for i := range req.Descriptors {
		if req.Descriptors[i].Override == nil {
			continue
		}
		if out == nil {
			out = slices.Clone(descs)
		}
		out[i] = policy.Descriptor{}
	}
	if out == nil {
		return descs
	}
	return out
}

// decideIn decides req in sc's memory.
func (e *Engine) decideIn(ctx context.Context, req Request, sc *scratch) (Response, error) {
	descs := sc.descsFor(len(req.Descriptors))
	for i, d := range req.Descriptors {
		descs[i] = policy.Descriptor{Entries: d.Entries}
	}
	set := e.policies.Load()
	if err := checkCostNames(set, req, descs); err != nil {
		return Response{}, err
	}
	p := newPlan(req, descs, set, sc.matchesOf(set, req.Domain, withoutOverridden(req, descs)), sc)
	if err := p.checkKeys(); err != nil {
		return Response{}, err
	}
	if err := p.run(ctx, e.stores); err != nil {
		return Response{}, err
	}
	return p.response(sc), nil
}
