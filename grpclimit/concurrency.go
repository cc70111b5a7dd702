package grpclimit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/adaptive"
	"github.com/floodgate-io/floodgate/observe"
)

// DefaultPriorityKey is the incoming metadata key the concurrency
// interceptors read a call's class from when ConcurrencyOptions.PriorityKey
// is empty.
const DefaultPriorityKey = "x-priority"

// RetryPushbackKey is the trailer of gRPC's retry pushback (gRFC A6): a
// client whose retry policy retries the code waits this many milliseconds
// before it does.
const RetryPushbackKey = "grpc-retry-pushback-ms"

// ConcurrencyLimit is the observe.Event.Limit of the calls the concurrency
// interceptors shed; the Event's Key is the call's class.
const ConcurrencyLimit = "concurrency"

// ErrInvalidOptions is wrapped by the errors of the concurrency
// interceptors' constructors for options they cannot use.
var ErrInvalidOptions = errors.New("grpclimit: invalid options")

// ConcurrencyOptions configures the concurrency interceptors
// (UnaryConcurrencyInterceptor, StreamConcurrencyInterceptor).
type ConcurrencyOptions struct {
	// PriorityKey is the incoming metadata key that carries the call's
	// class: critical, default or sheddable, in any case. A missing key,
	// or a value that is none of the three, is Default: a caller that
	// sends a class this server does not know is served as ordinary
	// traffic, not refused. "" is DefaultPriorityKey. Trust it only when a
	// component you control sets it.
	PriorityKey string
	// Priority, when set, gives the call's class instead of the metadata.
	// A value that is not one of adaptive's classes fails the call with
	// codes.Internal naming it: a bug in the function, not the caller's.
	Priority func(ctx context.Context, fullMethod string) adaptive.Priority
	// Methods selects the methods to limit by full name; nil limits all.
	Methods func(fullMethod string) bool
	// Timeout, when positive, is the handler time past which a call counts
	// as dropped (overload) for the limiter, whatever its status. The
	// interceptor does not stop the handler; the call's deadline does.
	// 0 means no timeout.
	Timeout time.Duration
	// Clock times the handler for Timeout and the wait of a shed call for
	// the Observer; nil is the system clock. Give it the Limiter's.
	Clock floodgate.Clock
	// Name is the policy shed calls are reported under
	// (observe.Event.Policy); "" is "grpc", as for the rate limits.
	Name string
	// Observer, when set, is told of every shed call (observe.ReportShed):
	// Limit ConcurrencyLimit, Key the call's class, Client the peer's
	// host. Admitted calls are not reported (the Limiter's Stats count
	// them).
	Observer observe.Observer
}

// gate is the validated configuration both concurrency interceptors share.
type gate struct {
	l       *adaptive.Limiter
	key     string
	pick    func(context.Context, string) adaptive.Priority
	methods func(string) bool
	timeout time.Duration
	now     func() time.Time
	name    string
	obs     observe.Observer
}

func newGate(l *adaptive.Limiter, opts ConcurrencyOptions) (*gate, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: nil adaptive.Limiter", ErrInvalidOptions)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("%w: negative Timeout %s", ErrInvalidOptions, opts.Timeout)
	}
	key := strings.ToLower(cmp.Or(opts.PriorityKey, DefaultPriorityKey))
	if strings.HasPrefix(key, "grpc-") || strings.HasSuffix(key, "-bin") || strings.ContainsFunc(key, notKeyRune) {
		return nil, fmt.Errorf("%w: PriorityKey %q is not a metadata key a caller can send as text", ErrInvalidOptions, key)
	}
	g := &gate{l: l, key: key, pick: opts.Priority, methods: opts.Methods, timeout: opts.Timeout,
		now: time.Now, name: cmp.Or(opts.Name, "grpc"), obs: opts.Observer}
	if opts.Clock != nil {
		g.now = opts.Clock.Now
	}
	return g, nil
}

// notKeyRune says that r may not appear in a (lowercased) metadata key.
func notKeyRune(r rune) bool {
	return !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.')
}

// UnaryConcurrencyInterceptor admits unary calls through l by their class
// and sheds the rest, with the same rules as http's concurrency middleware:
//
//   - a shed call fails with codes.Unavailable, a google.rpc.RetryInfo
//     detail and the RetryPushbackKey trailer, both adaptive.RetryAfter
//     rounded up to a millisecond. Unavailable and not ResourceExhausted,
//     which the rate limits of this package answer: the server is
//     overloaded, the caller is not over its quota, and gRPC's retry
//     policies retry Unavailable (on another backend, after the pushback);
//   - an admitted call's token is released by the handler's status:
//     Dropped past Timeout, or for Unavailable, DeadlineExceeded and
//     ResourceExhausted (the backend's signs of overload); Ignore for
//     Canceled (the caller went away) and for Internal, Unknown and
//     DataLoss (a bug says nothing about load), or when the handler
//     panics; Success otherwise;
//   - a call whose caller left while it waited in the queue fails with
//     Canceled or DeadlineExceeded, and is not reported as shed.
//
// Put it after the rate-limit interceptor in the chain, so that a caller
// over its quota is refused before it takes a slot. It fails on options it
// cannot use, with an error wrapping ErrInvalidOptions.
func UnaryConcurrencyInterceptor(l *adaptive.Limiter, opts ConcurrencyOptions) (grpc.UnaryServerInterceptor, error) {
	g, err := newGate(l, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if g.methods != nil && !g.methods(info.FullMethod) {
			return handler(ctx, req)
		}
		tok, err := g.admit(ctx, info.FullMethod, func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) })
		if err != nil {
			return nil, err
		}
		defer tok.Ignore() // a no-op once released; releases it on a panic
		start := g.now()
		resp, err := handler(ctx, req)
		g.release(tok, err, g.now().Sub(start))
		return resp, err
	}, nil
}

// StreamConcurrencyInterceptor is UnaryConcurrencyInterceptor for streams:
// a stream holds its slot from when it opens until its handler returns,
// and its whole life is the sample the Algorithm learns from. A learning
// Algorithm reads a long-lived stream as a slow call: put such streams
// under a Limiter of their own (adaptive.NewFixed), or leave them out
// with Methods.
func StreamConcurrencyInterceptor(l *adaptive.Limiter, opts ConcurrencyOptions) (grpc.StreamServerInterceptor, error) {
	g, err := newGate(l, opts)
	if err != nil {
		return nil, err
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if g.methods != nil && !g.methods(info.FullMethod) {
			return handler(srv, ss)
		}
		tok, err := g.admit(ss.Context(), info.FullMethod, ss.SetTrailer)
		if err != nil {
			return err
		}
		defer tok.Ignore()
		start := g.now()
		err = handler(srv, ss)
		g.release(tok, err, g.now().Sub(start))
		return err
	}, nil
}

// priority is the call's class: Options.Priority's, or its metadata's
// (Default when missing or unknown).
func (g *gate) priority(ctx context.Context, method string) adaptive.Priority {
	if g.pick != nil {
		return g.pick(ctx, method)
	}
	vs := metadata.ValueFromIncomingContext(ctx, g.key)
	if len(vs) == 0 {
		return adaptive.Default
	}
	p, _ := adaptive.ParsePriority(vs[0]) // Default when unknown
	return p
}

// admit acquires a slot for the call, or returns the status error that
// ends it, with the pushback trailer set through setTrailer when it was
// shed.
func (g *gate) admit(ctx context.Context, method string, setTrailer func(metadata.MD)) (adaptive.Token, error) {
	p := g.priority(ctx, method)
	start := g.now()
	tok, err := g.l.Acquire(ctx, p)
	switch {
	case err == nil:
		return tok, nil
	case errors.Is(err, adaptive.ErrShed):
		g.report(ctx, p, g.now().Sub(start))
		return tok, shed(err, setTrailer)
	case ctx.Err() != nil:
		return tok, status.FromContextError(ctx.Err()).Err()
	}
	return tok, status.Errorf(codes.Internal, "concurrency limit: %v", err)
}

// shed is the Unavailable status of a shed call; it sets the pushback
// trailer.
func shed(err error, setTrailer func(metadata.MD)) error {
	wait := ceilMS(max(adaptive.RetryAfter(err), time.Millisecond))
	setTrailer(metadata.Pairs(RetryPushbackKey, strconv.FormatInt(wait.Milliseconds(), 10)))
	st := status.New(codes.Unavailable, "server overloaded: "+strings.TrimPrefix(err.Error(), "adaptive: "))
	if withDetails, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); derr == nil {
		st = withDetails
	}
	return st.Err()
}

// release tells the limiter how the admitted call ended (see
// UnaryConcurrencyInterceptor).
func (g *gate) release(tok adaptive.Token, err error, took time.Duration) {
	if g.timeout > 0 && took > g.timeout {
		tok.Dropped()
		return
	}
	switch codeOf(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
		tok.Dropped()
	case codes.Canceled, codes.Internal, codes.Unknown, codes.DataLoss:
		tok.Ignore()
	default:
		tok.Success()
	}
}

// codeOf is the code a handler's error ends its call with, context errors
// included (gRPC sends those as Canceled and DeadlineExceeded too).
func codeOf(err error) codes.Code {
	switch {
	case err == nil:
		return codes.OK
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	}
	return status.Code(err)
}

// report tells the Observer of a shed call.
func (g *gate) report(ctx context.Context, p adaptive.Priority, waited time.Duration) {
	if g.obs == nil {
		return
	}
	client := ""
	if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
		client = host(pr.Addr)
	}
	observe.ReportShed(ctx, g.obs, observe.Event{
		Surface: observe.SurfaceGRPC, Policy: g.name, Limit: ConcurrencyLimit, Key: p.String(),
		Client: client, Cost: 1, Latency: waited,
	})
}
