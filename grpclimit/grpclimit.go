// Package grpclimit limits the calls a gRPC server accepts with any
// floodgate.Limiter: a unary and a stream server interceptor that decide
// every call against a list of rules before the handler runs.
//
//	limiter := floodgate.NewMemory()
//	unary, err := grpclimit.UnaryServerInterceptor(limiter, grpclimit.Options{
//		Rules: []grpclimit.Rule{
//			{Name: "tenant", Limit: floodgate.PerSecond(100), Key: grpclimit.ByMetadata("x-tenant")},
//			{Name: "peer", Limit: floodgate.PerSecond(10), Key: grpclimit.ByPeer()},
//		},
//	})
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(unary))
//
// The rules of a call are decided all or nothing when the limiter is a
// floodgate.BatchLimiter, as Memory, redisstore and failover are: when one
// denies, none is charged. Another limiter decides them in order, stopping
// at the first denial (the rules before it stay charged). A leaky bucket's
// Delay holds the call before the handler runs. A denied call fails with codes.ResourceExhausted and the details
// google.rpc.RetryInfo (how long to wait before the same call would pass)
// and google.rpc.QuotaFailure (which rules denied it). Allowed or not, the
// response header carries "ratelimit-policy" and "ratelimit", the fields of
// draft-ietf-httpapi-ratelimit-headers-10 that the HTTP service sends. A
// store that cannot answer fails the call with codes.Unavailable: a limiter
// that should fail open instead is wrapped in the failover package.
//
// UnaryConcurrencyInterceptor and StreamConcurrencyInterceptor protect the
// server from itself rather than from its callers: they admit a call while
// fewer than an adaptive.Limiter's (learned) limit are in flight, shed the
// rest by priority class (metadata x-priority: critical, default,
// sheddable) with codes.Unavailable and gRPC's retry pushback, and tell the
// limiter how each admitted call ended.
//
// # The client side
//
// UnaryClientInterceptor and StreamClientInterceptor are the other half:
// they make a client wait the way a server refusing it asks, with the HTTP
// transport's policy (package client: client.Policy, Budget, Throttle,
// Pauses), kept per target (grpc.ClientConn.Target):
//
//   - RESOURCE_EXHAUSTED (a quota) and UNAVAILABLE (an overload, a
//     transient failure) are retried, up to 3 times
//     (client.WithMaxRetries, through RetryOptions), for the methods
//     RetryMethods marks safe to run twice, or every method with
//     RetryAllMethods. By default none is: gRPC does not know which
//     methods are idempotent, as gRPC's own retry policy retries only the
//     codes a service config lists.
//   - The wait is the first the server gives of: the grpc-retry-pushback-ms
//     trailer (RetryPushbackKey; a negative or malformed value means do not
//     retry, as gRFC A6 says), a google.rpc.RetryInfo detail's retry_delay,
//     the longest t of the policies at r=0 in the ratelimit metadata
//     (LimitKey, PolicyKey) that this package's server interceptors send;
//     otherwise backoff with full jitter (client.Backoff). A backoff draw
//     is added to a server's wait so that refused clients do not return
//     together. A wait above 30 s (client.WithMaxWait) is not waited: the
//     refusal goes back to the caller.
//   - A wait past the context's deadline is not started: the call fails at
//     once with codes.DeadlineExceeded and an error wrapping
//     context.DeadlineExceeded and client.ErrPastDeadline that says what
//     the server asked.
//   - Retries are kept within a retry budget (client.DefaultBudget), calls
//     go through Google SRE's adaptive throttle (client.DefaultThrottle; a
//     call it rejects fails unsent with codes.Unavailable, wrapping
//     client.ErrThrottled), and ratelimit metadata at r=0 on any answer
//     holds the next calls to that target until the policy's t.
//   - A stream is retried only when it fails to open, before any message
//     was sent or received (see StreamClientInterceptor).
//
// gRPC's own retry policy (a service config's retryPolicy with
// retryableStatusCodes, and retryThrottling) is the other way: it is
// transparent, honours retry pushback, can retry on another backend, and
// retries streams while their messages fit its buffer; but it must be
// configured per service in the service config, does not read RetryInfo or
// the ratelimit metadata, keeps no pause and has no SRE throttle (its
// retryThrottling is a token bucket much like client.Budget). Use it for
// transient failures of services whose config you control; use these
// interceptors against rate-limited servers, where the caller knows which
// methods are safe to repeat. Do not enable both for the same codes: each
// of the interceptor's attempts would be retried by gRPC's policy, and the
// retries multiply (4 × 4 = up to 16 calls for one with 3 retries each).
package grpclimit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/client"
	"github.com/floodgate-io/floodgate/internal/headers"
	"github.com/floodgate-io/floodgate/observe"
)

// The response metadata keys, lowercase as HTTP/2 requires.
const (
	PolicyKey = "ratelimit-policy"
	LimitKey  = "ratelimit"
)

// Rule is one limit on calls.
type Rule struct {
	// Name identifies the rule in limiter keys, in the metadata fields and
	// in QuotaFailure. Names are unique within Options and contain no ':'.
	Name string
	// Limit is what each key of the rule may spend.
	Limit floodgate.Limit
	// Key picks the key a call is counted under, or skips the rule for it.
	// The limiter key is Name + ":" + the value, so rules never share state.
	Key KeyFunc
	// Cost is what a call spends; nil means 1. A stream is decided once,
	// when it opens, and Cost is then called with a nil req. An error fails
	// the call with codes.InvalidArgument, or with its own code if it is a
	// gRPC status error; a negative cost fails it with InvalidArgument.
	Cost func(ctx context.Context, fullMethod string, req any) (int64, error)
}

// Options configures an interceptor.
type Options struct {
	// Rules are decided together on every call they apply to.
	Rules []Rule
	// Methods selects the methods to limit by full name; nil limits all.
	// Calls to other methods pass untouched, without metadata.
	Methods func(fullMethod string) bool
	// Name is the policy name the interceptor reports its decisions under
	// (observe.Event.Policy); "" is "grpc".
	Name string
	// Observer, when set, is told of every rule's decision
	// (observe.Report; observe.Multi combines several). The event's Client
	// is the peer's address (its host, without the port). Above
	// observe.DefaultFullRate decisions a second, most are reported
	// untimed (observe.SampleByDefault); wrap the Observer with
	// observe.Sample to choose.
	Observer observe.Observer
}

// limiter is a validated configuration, shared by both interceptors.
type limiter struct {
	l       floodgate.Limiter
	batch   floodgate.BatchLimiter // l's, or nil
	rules   []Rule
	methods func(string) bool
	name    string
	obs     observe.Observer
}

func newLimiter(l floodgate.Limiter, opts Options) (*limiter, error) {
	if l == nil {
		return nil, errors.New("grpclimit: nil Limiter")
	}
	if len(opts.Rules) == 0 {
		// An interceptor without rules limits nothing: surely a mistake.
		return nil, errors.New("grpclimit: no rules")
	}
	seen := make(map[string]bool, len(opts.Rules))
	for i, r := range opts.Rules {
		switch {
		case r.Name == "":
			return nil, fmt.Errorf("grpclimit: rule %d has no name", i)
		case strings.Contains(r.Name, ":"):
			// ':' ends the name in limiter keys; allowing it would let
			// rule "a:b" and rule "a" share keys.
			return nil, fmt.Errorf("grpclimit: rule %q: name contains ':'", r.Name)
		case seen[r.Name]:
			return nil, fmt.Errorf("grpclimit: rule %q is defined twice", r.Name)
		case r.Key == nil:
			return nil, fmt.Errorf("grpclimit: rule %q has no Key", r.Name)
		}
		if err := r.Limit.Validate(); err != nil {
			return nil, fmt.Errorf("grpclimit: rule %q: %w", r.Name, err)
		}
		seen[r.Name] = true
	}
	lim := &limiter{
		l:       l,
		rules:   append([]Rule(nil), opts.Rules...),
		methods: opts.Methods,
		name:    cmp.Or(opts.Name, "grpc"),
		obs:     observe.SampleByDefault(opts.Observer),
	}
	lim.batch, _ = l.(floodgate.BatchLimiter)
	return lim, nil
}

// UnaryServerInterceptor limits unary calls. It fails when the options are
// invalid: no rules, a rule without a name or Key, a duplicate or malformed
// name, or an invalid Limit.
func UnaryServerInterceptor(l floodgate.Limiter, opts Options) (grpc.UnaryServerInterceptor, error) {
	lim, err := newLimiter(l, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if lim.methods != nil && !lim.methods(info.FullMethod) {
			return handler(ctx, req)
		}
		err := lim.decide(ctx, info.FullMethod, req, false, func(md metadata.MD) {
			// Only fails outside a server call (a handler invoked by hand):
			// the fields are advice, so the call goes on without them.
			_ = grpc.SetHeader(ctx, md)
		})
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}, nil
}

// StreamServerInterceptor limits streams: a stream is decided once, when it
// opens, and its messages are not counted. It fails on the same invalid
// options as UnaryServerInterceptor.
func StreamServerInterceptor(l floodgate.Limiter, opts Options) (grpc.StreamServerInterceptor, error) {
	lim, err := newLimiter(l, opts)
	if err != nil {
		return nil, err
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if lim.methods != nil && !lim.methods(info.FullMethod) {
			return handler(srv, ss)
		}
		err := lim.decide(ss.Context(), info.FullMethod, nil, true, func(md metadata.MD) {
			_ = ss.SetHeader(md) // fails only once headers are sent: not yet
		})
		if err != nil {
			return err
		}
		return handler(srv, ss)
	}, nil
}

// decide charges the call to every rule that applies, sends the metadata
// fields through setHeader and returns the status error that must end the
// call, or nil to let it through (after any Delay a leaky bucket asked for).
func (lim *limiter) decide(ctx context.Context, method string, req any, stream bool, setHeader func(metadata.MD)) error {
	reqs := make([]floodgate.Request, 0, len(lim.rules))
	rules := make([]*Rule, 0, len(lim.rules))
	for i := range lim.rules {
		r := &lim.rules[i]
		v, ok := r.Key(ctx, method)
		if !ok {
			continue
		}
		cost, err := costOf(ctx, r, method, req, stream)
		if err != nil {
			return err
		}
		key := r.Name + ":" + v
		if err := floodgate.CheckLength("key", key, floodgate.MaxKeyBytes); err != nil {
			// The caller's metadata made the key: its fault, answered
			// before any store is asked, whatever the store.
			return status.Errorf(codes.InvalidArgument, "rule %q: %v", r.Name, err)
		}
		reqs = append(reqs, floodgate.Request{Key: key, Limit: r.Limit, Cost: cost})
		rules = append(rules, r)
	}
	if len(reqs) == 0 {
		return nil
	}
	dctx, rep := lim.observe(ctx, reqs)
	name := func(i int) string { return rules[i].Name }
	ds, err := lim.allow(dctx, reqs)
	rep.Decided()
	rep.Report(ds, err, name)
	if err != nil {
		return statusOfError(ctx, err)
	}
	setHeader(fields(rules, ds))
	c := floodgate.Combine(ds)
	if !c.Allowed {
		return denied(rules, ds, c)
	}
	if c.Delay > 0 {
		// A leaky bucket admitted the call on condition that it leaves
		// later: holding it here is what spaces calls out.
		if err := client.Sleep(ctx, c.Delay); err != nil {
			return status.FromContextError(err).Err()
		}
	}
	return nil
}

// observe starts the report of a call's decision when there is an Observer.
func (lim *limiter) observe(ctx context.Context, reqs []floodgate.Request) (context.Context, observe.Reporting) {
	if lim.obs == nil {
		return ctx, observe.Reporting{}
	}
	client := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		client = host(p.Addr)
	}
	return observe.Start(ctx, lim.obs, observe.Decided{
		Surface: observe.SurfaceGRPC, Policy: lim.name, Client: client, Requests: reqs, Limiter: lim.l})
}

func costOf(ctx context.Context, r *Rule, method string, req any, stream bool) (int64, error) {
	if r.Cost == nil {
		return 1, nil
	}
	if stream {
		req = nil // no message has arrived when the stream is decided
	}
	cost, err := r.Cost(ctx, method, req)
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return 0, err // the Cost function chose its code
		}
		return 0, status.Errorf(codes.InvalidArgument, "rule %q: cost: %v", r.Name, err)
	}
	if cost < 0 {
		return 0, status.Errorf(codes.InvalidArgument, "rule %q: negative cost %d", r.Name, cost)
	}
	return cost, nil
}

// allow decides reqs all or nothing when the limiter can. A limiter that
// cannot decides them in order and stops at the first denial; what the
// rules before it consumed stays consumed, so for such limiters several
// rules on one call can over-count a denied call.
func (lim *limiter) allow(ctx context.Context, reqs []floodgate.Request) ([]floodgate.Decision, error) {
	if lim.batch != nil && len(reqs) > 1 {
		return lim.batch.AllowAll(ctx, reqs)
	}
	ds := make([]floodgate.Decision, 0, len(reqs))
	for _, rq := range reqs {
		d, err := lim.l.AllowN(ctx, rq.Key, rq.Limit, rq.Cost)
		if err != nil {
			return nil, err
		}
		ds = append(ds, d)
		if !d.Allowed {
			break
		}
	}
	return ds, nil
}

// statusOfError maps a limiter error to the call's status. The call's own
// context comes first: a caller that gave up is told so, whereas a store's
// internal timeout (a context error too) is the store being unavailable.
// Store errors are not quoted: they may name internal addresses.
func statusOfError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case errors.Is(err, floodgate.ErrInvalidCost) || errors.Is(err, floodgate.ErrInvalidKey):
		return status.Errorf(codes.InvalidArgument, "rate limit: %v", err)
	case errors.Is(err, floodgate.ErrInvalidLimit):
		// Validated at construction, so the store disagrees with this
		// package about a limit: the server's fault, not the caller's.
		return status.Error(codes.Internal, "rate limit: the store rejected a limit")
	}
	return status.Error(codes.Unavailable, "rate limit: store unavailable")
}

// denied builds the ResourceExhausted status of a denied call.
func denied(rules []*Rule, ds []floodgate.Decision, c floodgate.Decision) error {
	var names []string
	qf := &errdetails.QuotaFailure{}
	for i, d := range ds {
		if floodgate.Violated(d, ds) {
			names = append(names, rules[i].Name)
			desc := fmt.Sprintf("limit %s exceeded", rules[i].Limit)
			if d.RetryAfter < 0 {
				desc += "; the call costs more than the limit ever admits"
			}
			qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{Subject: rules[i].Name, Description: desc})
		}
	}
	st := status.New(codes.ResourceExhausted, "rate limit exceeded: "+strings.Join(names, ", "))
	var details []protoadapt.MessageV1
	if c.RetryAfter >= 0 {
		// A negative RetryAfter means waiting will never help: no RetryInfo
		// rather than a delay that would make clients retry in vain.
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(ceilMS(c.RetryAfter))})
	}
	details = append(details, qf)
	if withDetails, err := st.WithDetails(details...); err == nil {
		st = withDetails
	}
	return st.Err()
}

// ceilMS rounds d up to a whole millisecond, so that a client that waits
// the delay is never early; 0 for d ≤ 0.
func ceilMS(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	if r := d % time.Millisecond; r != 0 {
		if d > math.MaxInt64-time.Millisecond {
			return d - r
		}
		d += time.Millisecond - r
	}
	return d
}

// fields is the response metadata for the decided rules.
func fields(rules []*Rule, ds []floodgate.Decision) metadata.MD {
	qs := make([]headers.Quota, len(ds))
	for i, d := range ds {
		qs[i] = headers.QuotaOf(rules[i].Name, rules[i].Limit, d)
	}
	return metadata.Pairs(PolicyKey, headers.PolicyValue(qs), LimitKey, headers.LimitValue(qs))
}
