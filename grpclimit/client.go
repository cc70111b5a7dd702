package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate-io/floodgate/client"
	"github.com/floodgate-io/floodgate/internal/headers"
)

// ClientOption configures UnaryClientInterceptor and
// StreamClientInterceptor.
type ClientOption func(*clientConfig)

type clientConfig struct {
	s    client.Settings
	safe func(fullMethod string) bool // nil: no method is retried
	err  error                        // the first invalid option's
}

// RetryMethods retries the methods for which safe returns true: the ones
// that may run twice (idempotent or read-only), by full name
// ("/pkg.Service/Method"). Without it or RetryAllMethods no call is
// retried: gRPC does not know which methods are idempotent, and a call
// refused with UNAVAILABLE may have reached a handler that did its work.
// safe must be safe for concurrent use; nil is invalid.
func RetryMethods(safe func(fullMethod string) bool) ClientOption {
	return func(c *clientConfig) {
		if safe == nil {
			c.fail(fmt.Errorf("%w: RetryMethods(nil)", client.ErrInvalidOption))
			return
		}
		c.safe = safe
	}
}

// RetryAllMethods retries calls of every method, as a gRPC retry policy
// that lists RESOURCE_EXHAUSTED and UNAVAILABLE does. Use it only when every
// method the connection calls may run twice.
func RetryAllMethods() ClientOption {
	return func(c *clientConfig) { c.safe = func(string) bool { return true } }
}

// RetryOptions applies the HTTP transport's options (package client) to the
// interceptor: client.WithMaxRetries, WithMaxWait, WithBackoff, WithBudget,
// WithoutBudget, WithThrottle, WithThrottleWindow, WithoutThrottle,
// WithClock, WithRand and WithLogger mean here what they mean there, with a
// target (grpc.ClientConn.Target) in place of a host.
// client.WithRetryNonIdempotent is RetryAllMethods.
func RetryOptions(opts ...client.Option) ClientOption {
	return func(c *clientConfig) {
		s, err := client.Resolve(opts...)
		c.fail(err)
		c.s = s
		if s.RetryNonIdempotent {
			RetryAllMethods()(c)
		}
	}
}

func (c *clientConfig) fail(err error) {
	if c.err == nil && err != nil {
		c.err = fmt.Errorf("grpclimit: %w", err)
	}
}

func newClientConfig(opts []ClientOption) clientConfig {
	var c clientConfig
	c.s, c.err = client.Resolve()
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// ValidateClient reports the first invalid option among opts, wrapping
// client.ErrInvalidOption; nil when all are valid. The interceptors have no
// error result: built with an invalid option, they fail every call (before
// sending it) with that error.
func ValidateClient(opts ...ClientOption) error { return newClientConfig(opts).err }

// UnaryClientInterceptor retries unary calls the server refused with
// RESOURCE_EXHAUSTED or UNAVAILABLE, after the wait the server asked for,
// for the methods RetryMethods or RetryAllMethods select; it keeps a retry
// budget, throttles and pauses per target. See the package documentation.
//
//	conn, err := grpc.NewClient(target,
//		grpc.WithUnaryInterceptor(grpclimit.UnaryClientInterceptor(
//			grpclimit.RetryMethods(readOnly))), ...)
func UnaryClientInterceptor(opts ...ClientOption) grpc.UnaryClientInterceptor {
	r := &retrier{clientConfig: newClientConfig(opts)}
	return r.unary
}

// StreamClientInterceptor does for streams what UnaryClientInterceptor does
// for unary calls, but retries a stream only when it fails to open with
// RESOURCE_EXHAUSTED or UNAVAILABLE (no connection to the server, say),
// before any message was sent or received. gRPC opens a stream without
// waiting for the server, so a refusal by the server's handler or
// interceptor reaches the caller at its first RecvMsg, when messages may
// already be sent: that stream is not retried, but what its status and
// metadata said still counts for the throttle and the pauses.
func StreamClientInterceptor(opts ...ClientOption) grpc.StreamClientInterceptor {
	r := &retrier{clientConfig: newClientConfig(opts)}
	return r.stream
}

// retrier is both interceptors' state.
type retrier struct {
	clientConfig
	targets targets
}

func (r *retrier) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r.err != nil {
		return r.err
	}
	t := r.targets.get(cc.Target(), &r.s)
	if err := r.open(ctx, method, t); err != nil {
		return err
	}
	c := getCall(opts)
	defer c.release()
	for n := 0; ; n++ {
		c.hdr, c.trl = nil, nil
		err := invoker(ctx, method, req, reply, cc, c.opts...)
		if err = r.retry(ctx, method, t, n, err, c.hdr, c.trl); err != errRetry {
			return err
		}
	}
}

func (r *retrier) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if r.err != nil {
		return nil, r.err
	}
	t := r.targets.get(cc.Target(), &r.s)
	if err := r.open(ctx, method, t); err != nil {
		return nil, err
	}
	for n := 0; ; n++ {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err == nil {
			return &observedStream{ClientStream: cs, r: r, t: t}, nil
		}
		if err = r.retry(ctx, method, t, n, err, nil, nil); err != errRetry {
			return nil, err
		}
	}
}

// errRetry is retry's answer when the call is to be sent again.
var errRetry = errors.New("grpclimit: retry")

// open holds a call while its target is paused and passes it through the
// throttle and the budget's deposit.
func (r *retrier) open(ctx context.Context, method string, t *target) error {
	if err := r.pause(ctx, method, t); err != nil {
		return err
	}
	now := r.s.Clock.Now()
	if t.throttle != nil {
		if ok, p := t.throttle.Admit(now, r.s.Random); !ok {
			return callError(codes.Unavailable, fmt.Sprintf("grpclimit: %s to %s not sent: the server refused most recent calls, so it was rejected locally with probability %.2f",
				method, t.name, p), client.ErrThrottled)
		}
	}
	if t.budget != nil {
		t.budget.Deposit(now)
	}
	return nil
}

// pause holds a call while the ratelimit metadata said r=0 for one of its
// target's policies.
func (r *retrier) pause(ctx context.Context, method string, t *target) error {
	if !t.Active() {
		return nil
	}
	now := r.s.Clock.Now()
	d := t.Left(now)
	left := timeLeft(ctx, now)
	wait, err := r.s.Policy.Pause(d, left, r.s.Random())
	if err != nil {
		return callError(codes.DeadlineExceeded, fmt.Sprintf("grpclimit: %s to %s: the %s metadata said r=0 for the next %v, beyond the context's deadline in %v",
			method, t.name, LimitKey, d, left), err, context.DeadlineExceeded)
	}
	if wait == 0 {
		return nil
	}
	return r.sleep(ctx, method, t, wait, "a pause for r=0")
}

// retry records an attempt's outcome and returns errRetry when the call is
// to be sent again (after waiting), or the error to return: err itself,
// or why waiting is not possible.
func (r *retrier) retry(ctx context.Context, method string, t *target, n int, err error, hdr, trl metadata.MD) error {
	quotas, refused := r.observe(ctx, t, err, hdr, trl)
	if !refused || ctx.Err() != nil || r.safe == nil || !r.safe(method) {
		return err
	}
	now := r.s.Clock.Now()
	asked, source, ok := r.serverWait(ctx, err, trl, quotas)
	if !ok {
		return err
	}
	d, werr := r.decide(ctx, method, t, n, asked, source, now, err)
	if errors.Is(werr, client.ErrPastDeadline) {
		return werr
	}
	if werr != nil {
		return err // the server's answer, as it is
	}
	r.s.Logger.LogAttrs(ctx, slog.LevelDebug, "grpclimit: retrying",
		slog.String("method", method), slog.String("target", t.name), slog.Int("retry", n+1),
		slog.Duration("wait", d), slog.String("asked_by", source), slog.Any("error", err))
	if err := r.sleep(ctx, method, t, d, fmt.Sprintf("before retry %d", n+1)); err != nil {
		return err
	}
	return errRetry
}

// decide is the wait before retry n, or why there is none; it spends a
// token of the budget only when it will retry. Past the deadline, the
// error wraps cause, the refusal.
func (r *retrier) decide(ctx context.Context, method string, t *target, n int, asked time.Duration, source string, now time.Time, cause error) (time.Duration, error) {
	left := timeLeft(ctx, now)
	d, err := r.s.Policy.Wait(n, asked, asked >= 0, left, r.s.Random())
	switch {
	case errors.Is(err, client.ErrPastDeadline) && asked >= 0:
		return 0, callError(codes.DeadlineExceeded, fmt.Sprintf("grpclimit: %s to %s: the server asked to wait %v (%s), beyond the context's deadline in %v",
			method, t.name, asked, source, left), client.ErrPastDeadline, context.DeadlineExceeded, cause)
	case errors.Is(err, client.ErrPastDeadline):
		return 0, callError(codes.DeadlineExceeded, fmt.Sprintf("grpclimit: %s to %s: retry %d's backoff (up to %v) ends after the context's deadline in %v",
			method, t.name, n+1, r.s.Policy.Backoff.Window(n), left), client.ErrPastDeadline, context.DeadlineExceeded, cause)
	case err != nil:
		return 0, err
	case t.budget != nil && !t.budget.Withdraw(now):
		return 0, errBudgetExhausted
	}
	return d, nil
}

var errBudgetExhausted = errors.New("grpclimit: retry budget exhausted")

func (r *retrier) sleep(ctx context.Context, method string, t *target, d time.Duration, why string) error {
	if err := r.s.Sleep(ctx, d); err != nil {
		return callError(status.FromContextError(err).Code(), fmt.Sprintf("grpclimit: %s to %s: waiting %v %s", method, t.name, d, why), err)
	}
	return nil
}

// observe records an answer: an accept for the throttle unless the server
// refused the call (RESOURCE_EXHAUSTED, UNAVAILABLE) or the caller gave up,
// and the pauses of the ratelimit metadata, which it returns.
func (r *retrier) observe(ctx context.Context, t *target, err error, hdr, trl metadata.MD) (quotas []headers.Quota, refused bool) {
	now := r.s.Clock.Now()
	code := status.Code(err)
	refused = code == codes.ResourceExhausted || code == codes.Unavailable
	if !refused && ctx.Err() == nil && t.throttle != nil {
		t.throttle.Accept(now)
	}
	quotas = r.quotas(hdr, trl, t, refused)
	for _, q := range quotas {
		t.Note(q.Name, q.Remaining, q.Reset, now)
	}
	return quotas, refused
}

// serverWait is the wait a refusal asks for, from the first of: the retry
// pushback trailer, a google.rpc.RetryInfo detail, the t of the policies at
// r=0 in the ratelimit metadata; -1 when none says anything. ok is false
// when the pushback says not to retry (a negative or malformed value, as
// gRFC A6 has it).
func (r *retrier) serverWait(ctx context.Context, err error, trl metadata.MD, quotas []headers.Quota) (asked time.Duration, source string, ok bool) {
	if v := trl[RetryPushbackKey]; len(v) > 0 {
		ms, perr := strconv.ParseInt(v[0], 10, 64)
		if perr != nil || ms < 0 {
			r.s.Logger.DebugContext(ctx, "grpclimit: the server's retry pushback says not to retry", "pushback", v[0])
			return 0, "", false
		}
		return time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond, RetryPushbackKey, true
	}
	for _, d := range status.Convert(err).Details() {
		if ri, isRI := d.(*errdetails.RetryInfo); isRI && ri.GetRetryDelay().IsValid() && ri.GetRetryDelay().AsDuration() >= 0 {
			return ri.GetRetryDelay().AsDuration(), "RetryInfo", true
		}
	}
	asked = -1
	for _, q := range quotas {
		if q.Remaining == 0 && q.Reset > asked {
			asked, source = q.Reset, fmt.Sprintf("%s %q t", LimitKey, q.Name)
		}
	}
	return asked, source, true
}

// quotas reads the ratelimit metadata of an answer (the header, or the
// trailer of a trailers-only answer): always on a refusal, otherwise only
// when some policy may be at r=0 or some pause may end, so that an ordinary
// answer costs no parsing.
func (r *retrier) quotas(hdr, trl metadata.MD, t *target, refused bool) []headers.Quota {
	md := hdr
	if len(md[LimitKey]) == 0 {
		md = trl
	}
	limit := strings.Join(md[LimitKey], ", ")
	if limit == "" || !refused && !strings.Contains(limit, "r=0") && !t.Active() {
		return nil
	}
	qs, err := headers.ParseQuotas(limit, strings.Join(md[PolicyKey], ", "))
	if err != nil {
		r.s.Logger.Debug("grpclimit: ignoring malformed ratelimit metadata", "error", err)
	}
	return qs
}

// timeLeft is the time until ctx's deadline on clock time now.
func timeLeft(ctx context.Context, now time.Time) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return d.Sub(now)
	}
	return math.MaxInt64
}

// callErr is an error of the interceptor's own: a gRPC status for the
// caller that also wraps the reasons (client.ErrPastDeadline,
// context.DeadlineExceeded...) for errors.Is.
type callErr struct {
	st   *status.Status
	errs []error
}

func callError(code codes.Code, msg string, errs ...error) error {
	return &callErr{st: status.New(code, msg), errs: errs}
}

func (e *callErr) Error() string {
	var b strings.Builder
	b.WriteString(e.st.Err().Error())
	for i, err := range e.errs {
		sep := "; "
		if i == 0 {
			sep = " ("
		}
		b.WriteString(sep)
		b.WriteString(err.Error())
	}
	if len(e.errs) > 0 {
		b.WriteByte(')')
	}
	return b.String()
}
func (e *callErr) Unwrap() []error            { return e.errs }
func (e *callErr) GRPCStatus() *status.Status { return e.st }

// callState is one unary call's header and trailer, with the call options that
// fill them; pooled, so that a call allocates none of it.
type callState struct {
	hdr, trl metadata.MD
	opts     []grpc.CallOption
}

var calls = sync.Pool{New: func() any { return new(callState) }}

func getCall(opts []grpc.CallOption) *callState {
	c := calls.Get().(*callState)
	c.opts = append(append(c.opts[:0], opts...), grpc.Header(&c.hdr), grpc.Trailer(&c.trl))
	return c
}

func (c *callState) release() {
	clear(c.opts)
	c.hdr, c.trl, c.opts = nil, nil, c.opts[:0]
	calls.Put(c)
}

// observedStream records, at its first answer, what the server said of an
// open stream: an accept for the throttle, the ratelimit metadata for the
// pauses.
type observedStream struct {
	grpc.ClientStream
	r    *retrier
	t    *target
	seen atomic.Bool
}

func (s *observedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if s.seen.CompareAndSwap(false, true) {
		// The answer's headers have arrived (or it was trailers-only): neither
		// call blocks.
		hdr, _ := s.Header()
		var trl metadata.MD
		if err != nil {
			trl = s.Trailer()
		}
		_, _ = s.r.observe(s.Context(), s.t, err, hdr, trl)
	}
	return err
}

// target is what the interceptor knows of one server.
type target struct {
	name     string
	budget   *client.BudgetState   // nil without a budget
	throttle *client.ThrottleState // nil without a throttle
	client.Pauses
}

// targets maps ClientConn targets to their state. An interceptor usually
// serves one ClientConn, so the last target found is kept for a lookup
// without a lock.
type targets struct {
	last atomic.Pointer[target]
	mu   sync.Mutex
	m    map[string]*target
}

func (ts *targets) get(name string, s *client.Settings) *target {
	if t := ts.last.Load(); t != nil && t.name == name {
		return t
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.m[name]
	if !ok {
		t = &target{name: name}
		// The settings were validated, so neither fails.
		if s.Budget != nil {
			t.budget, _ = s.Budget.NewState(s.Clock.Now())
		}
		if s.Throttle != nil {
			t.throttle, _ = s.Throttle.NewState()
		}
		if ts.m == nil {
			ts.m = make(map[string]*target)
		}
		ts.m[name] = t
	}
	ts.last.Store(t)
	return t
}
