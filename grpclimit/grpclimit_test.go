package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// service is a tiny TestService: unary calls answer at once, and
// StreamingOutputCall sends one message.
type service struct {
	testpb.UnimplementedTestServiceServer
	calls atomic.Int64 // handler invocations
}

func (s *service) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	s.calls.Add(1)
	return &testpb.Empty{}, nil
}

func (s *service) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.calls.Add(1)
	return &testpb.SimpleResponse{}, nil
}

func (s *service) StreamingOutputCall(_ *testpb.StreamingOutputCallRequest, ss testpb.TestService_StreamingOutputCallServer) error {
	s.calls.Add(1)
	return ss.Send(&testpb.StreamingOutputCallResponse{})
}

const (
	emptyCall  = "/grpc.testing.TestService/EmptyCall"
	unaryCall  = "/grpc.testing.TestService/UnaryCall"
	streamCall = "/grpc.testing.TestService/StreamingOutputCall"
)

// serve starts a real server on 127.0.0.1:0 with both interceptors over l
// and returns a client of it.
func serve(t *testing.T, l floodgate.Limiter, opts Options) (testpb.TestServiceClient, *service) {
	t.Helper()
	unary, err := UnaryServerInterceptor(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := StreamServerInterceptor(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &service{}
	srv := grpc.NewServer(grpc.UnaryInterceptor(unary), grpc.StreamInterceptor(stream))
	testpb.RegisterTestServiceServer(srv, svc)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc), svc
}

// ctxT bounds a test's calls: only a hang reaches it.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
	t.Cleanup(cancel)
	return ctx
}

func withMD(ctx context.Context, kv ...string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// call makes one EmptyCall and returns its header and error.
func call(ctx context.Context, c testpb.TestServiceClient) (metadata.MD, error) {
	var h metadata.MD
	_, err := c.EmptyCall(ctx, &testpb.Empty{}, grpc.Header(&h))
	return h, err
}

func one(md metadata.MD, key string) string {
	if vs := md.Get(key); len(vs) == 1 {
		return vs[0]
	}
	return fmt.Sprintf("<%d values: %q>", len(md.Get(key)), md.Get(key))
}

func wantCode(t *testing.T, err error, want codes.Code) *status.Status {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != want {
		t.Fatalf("code %v (%v), want %v", st.Code(), err, want)
	}
	return st
}

func retryInfo(st *status.Status) *errdetails.RetryInfo {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri
		}
	}
	return nil
}

func violations(st *status.Status) []string {
	var out []string
	for _, d := range st.Details() {
		if qf, ok := d.(*errdetails.QuotaFailure); ok {
			for _, v := range qf.GetViolations() {
				out = append(out, v.GetSubject())
			}
		}
	}
	return out
}

func manual() (*floodgate.ManualClock, *floodgate.Memory) {
	clk := floodgate.NewManualClock(time.Unix(1_700_000_000, 0))
	return clk, floodgate.NewMemory(floodgate.WithClock(clk))
}

// The N+1th call is denied with an honest RetryInfo: a millisecond before
// the delay it is still denied, at the delay it passes.
func TestDenyRetryInfoHonest(t *testing.T) {
	clk, mem := manual()
	rule := Rule{Name: "rps", Limit: floodgate.PerSecond(2), Key: Constant("all")}
	c, svc := serve(t, mem, Options{Rules: []Rule{rule}})
	ctx := ctxT(t)

	for i := range 2 {
		h, err := call(ctx, c)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got := one(h, PolicyKey); got != `"rps";q=2;w=1` {
			t.Errorf("call %d: %s = %s", i, PolicyKey, got)
		}
		if got, want := one(h, LimitKey), fmt.Sprintf(`"rps";r=%d;t=1`, 1-i); got != want {
			t.Errorf("call %d: %s = %s, want %s", i, LimitKey, got, want)
		}
	}
	h, err := call(ctx, c)
	st := wantCode(t, err, codes.ResourceExhausted)
	ri := retryInfo(st)
	if ri == nil {
		t.Fatalf("no RetryInfo in %v", st.Details())
	}
	delay := ri.GetRetryDelay().AsDuration()
	if delay != 500*time.Millisecond {
		t.Fatalf("retry delay %v, want 500ms", delay)
	}
	if got := violations(st); len(got) != 1 || got[0] != "rps" {
		t.Errorf("violations %v", got)
	}
	if !strings.Contains(st.Message(), "rps") {
		t.Errorf("message %q does not name the rule", st.Message())
	}
	if got := one(h, LimitKey); got != `"rps";r=0;t=1` {
		t.Errorf("denied: %s = %s", LimitKey, got)
	}
	if got := one(h, PolicyKey); got != `"rps";q=2;w=1` {
		t.Errorf("denied: %s = %s", PolicyKey, got)
	}
	if svc.calls.Load() != 2 {
		t.Errorf("handler ran %d times, want 2", svc.calls.Load())
	}

	clk.Advance(delay - time.Millisecond)
	_, err = call(ctx, c)
	wantCode(t, err, codes.ResourceExhausted)
	clk.Advance(time.Millisecond)
	if _, err := call(ctx, c); err != nil {
		t.Fatalf("after the retry delay: %v", err)
	}
}

// RetryInfo rounds up to whole milliseconds: 1/3 s becomes 334 ms.
func TestRetryDelayRoundsUp(t *testing.T) {
	clk, mem := manual()
	c, _ := serve(t, mem, Options{Rules: []Rule{{Name: "r", Limit: floodgate.PerSecond(3), Key: Constant("k")}}})
	ctx := ctxT(t)
	for range 3 {
		if _, err := call(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	_, err := call(ctx, c)
	delay := retryInfo(wantCode(t, err, codes.ResourceExhausted)).GetRetryDelay().AsDuration()
	if delay != 334*time.Millisecond {
		t.Fatalf("delay %v, want 334ms", delay)
	}
	clk.Advance(delay)
	if _, err := call(ctx, c); err != nil {
		t.Fatalf("after %v: %v", delay, err)
	}
}

// A call that costs more than the limit ever admits gets no RetryInfo.
func TestNeverPassesHasNoRetryInfo(t *testing.T) {
	_, mem := manual()
	rule := Rule{
		Name: "cost", Limit: floodgate.PerSecond(5), Key: Constant("k"),
		Cost: func(_ context.Context, _ string, req any) (int64, error) {
			return int64(req.(*testpb.SimpleRequest).GetResponseSize()), nil
		},
	}
	c, _ := serve(t, mem, Options{Rules: []Rule{rule}, Methods: func(m string) bool { return m == unaryCall }})
	ctx := ctxT(t)
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 6})
	st := wantCode(t, err, codes.ResourceExhausted)
	if ri := retryInfo(st); ri != nil {
		t.Errorf("RetryInfo %v for a call that can never pass", ri)
	}
	if got := violations(st); len(got) != 1 || got[0] != "cost" {
		t.Errorf("violations %v", got)
	}
	// The cost was not taken: the whole burst is still there.
	if _, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 5}); err != nil {
		t.Fatal(err)
	}
}

// Two rules are decided all or nothing: a call denied by one charges neither.
func TestAllOrNothing(t *testing.T) {
	_, mem := manual()
	rules := []Rule{
		{Name: "global", Limit: floodgate.PerSecond(5), Key: Constant("all")},
		{Name: "user", Limit: floodgate.PerSecond(1), Key: ByMetadata("user")},
	}
	c, _ := serve(t, mem, Options{Rules: rules})
	ctx := ctxT(t)

	h, err := call(withMD(ctx, "user", "x"), c)
	if err != nil {
		t.Fatal(err)
	}
	if got := one(h, PolicyKey); got != `"global";q=5;w=1, "user";q=1;w=1` {
		t.Errorf("%s = %s", PolicyKey, got)
	}
	if got := one(h, LimitKey); got != `"global";r=4;t=1, "user";r=0;t=1` {
		t.Errorf("%s = %s", LimitKey, got)
	}
	for range 3 {
		_, err = call(withMD(ctx, "user", "x"), c)
		st := wantCode(t, err, codes.ResourceExhausted)
		if got := violations(st); len(got) != 1 || got[0] != "user" {
			t.Errorf("violations %v, want [user]", got)
		}
	}
	// global was charged once (by the allowed call), not by the denials.
	h, err = call(withMD(ctx, "user", "y"), c)
	if err != nil {
		t.Fatal(err)
	}
	if got := one(h, LimitKey); got != `"global";r=3;t=1, "user";r=0;t=1` {
		t.Errorf("%s = %s", LimitKey, got)
	}
}

// Without a BatchLimiter, the rules are decided in order and a denial stops
// there.
func TestSequentialFallback(t *testing.T) {
	_, mem := manual()
	rules := []Rule{
		{Name: "a", Limit: floodgate.PerSecond(1), Key: Constant("k")},
		{Name: "b", Limit: floodgate.PerSecond(5), Key: Constant("k")},
	}
	c, _ := serve(t, onlyAllowN{mem}, Options{Rules: rules})
	ctx := ctxT(t)
	if _, err := call(ctx, c); err != nil {
		t.Fatal(err)
	}
	h, err := call(ctx, c)
	st := wantCode(t, err, codes.ResourceExhausted)
	if got := violations(st); len(got) != 1 || got[0] != "a" {
		t.Errorf("violations %v", got)
	}
	if retryInfo(st) == nil {
		t.Error("no RetryInfo")
	}
	if got := one(h, LimitKey); got != `"a";r=0;t=1` { // b was not decided
		t.Errorf("%s = %s", LimitKey, got)
	}
	d, _ := mem.AllowN(ctx, "b:k", rules[1].Limit, 0)
	if d.Remaining != 4 {
		t.Errorf("b remaining %d, want 4: b was charged for a denied call", d.Remaining)
	}
}

// onlyAllowN hides Memory's AllowAll.
type onlyAllowN struct{ l floodgate.Limiter }

func (o onlyAllowN) AllowN(ctx context.Context, key string, l floodgate.Limit, cost int64) (floodgate.Decision, error) {
	return o.l.AllowN(ctx, key, l, cost)
}

func TestByPeer(t *testing.T) {
	_, mem := manual()
	rule := Rule{Name: "peer", Limit: floodgate.PerSecond(1), Key: ByPeer()}
	c, _ := serve(t, mem, Options{Rules: []Rule{rule}})
	ctx := ctxT(t)
	if _, err := call(ctx, c); err != nil {
		t.Fatal(err)
	}
	_, err := call(ctx, c)
	wantCode(t, err, codes.ResourceExhausted)
	// The key is the address without its port.
	d, err := mem.AllowN(ctx, "peer:127.0.0.1", rule.Limit, 0)
	if err != nil || d.Remaining != 0 {
		t.Errorf("peer:127.0.0.1 remaining %d (%v), want 0", d.Remaining, err)
	}
}

type pathAddr string

func (a pathAddr) Network() string { return "unix" }
func (a pathAddr) String() string  { return string(a) }

func TestByPeerAddresses(t *testing.T) {
	k := ByPeer()
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.3"), Port: 5000}, "192.0.2.3"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.3"), Port: 5000}, "192.0.2.3"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 5000}, "2001:db8::1"},
		{pathAddr("[2001:db8::2]:80"), "2001:db8::2"},
		{pathAddr("/run/app.sock"), "/run/app.sock"},
	} {
		got, ok := k(peer.NewContext(context.Background(), &peer.Peer{Addr: tc.addr}), "")
		if !ok || got != tc.want {
			t.Errorf("%v: %q %v, want %q", tc.addr, got, ok, tc.want)
		}
	}
	if _, ok := k(context.Background(), ""); ok {
		t.Error("no peer: ok")
	}
}

func TestByMetadata(t *testing.T) {
	_, mem := manual()
	rule := Rule{Name: "key", Limit: floodgate.PerSecond(1), Key: ByMetadata("X-Api-Key")}
	c, svc := serve(t, mem, Options{Rules: []Rule{rule}})
	ctx := ctxT(t)
	if _, err := call(withMD(ctx, "x-api-key", "a"), c); err != nil {
		t.Fatal(err)
	}
	_, err := call(withMD(ctx, "x-api-key", "a"), c)
	wantCode(t, err, codes.ResourceExhausted)
	if _, err := call(withMD(ctx, "x-api-key", "b"), c); err != nil {
		t.Fatalf("another key: %v", err)
	}
	// Without the key the rule is skipped: no limit and no fields.
	for range 3 {
		h, err := call(ctx, c)
		if err != nil {
			t.Fatalf("no key: %v", err)
		}
		if len(h.Get(PolicyKey))+len(h.Get(LimitKey)) != 0 {
			t.Errorf("no key: fields %v", h)
		}
	}
	if svc.calls.Load() != 5 {
		t.Errorf("handler ran %d times, want 5", svc.calls.Load())
	}
}

func TestMethodsFilter(t *testing.T) {
	_, mem := manual()
	rule := Rule{Name: "m", Limit: floodgate.PerSecond(1), Key: ByMethod()}
	c, _ := serve(t, mem, Options{Rules: []Rule{rule}, Methods: func(m string) bool { return m == unaryCall }})
	ctx := ctxT(t)
	for range 3 {
		h, err := call(ctx, c)
		if err != nil {
			t.Fatalf("unfiltered method: %v", err)
		}
		if len(h.Get(LimitKey)) != 0 {
			t.Errorf("unfiltered method has fields %v", h)
		}
	}
	var h metadata.MD
	if _, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}, grpc.Header(&h)); err != nil {
		t.Fatal(err)
	}
	if got := one(h, LimitKey); got != `"m";r=0;t=1` {
		t.Errorf("%s = %s", LimitKey, got)
	}
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{})
	wantCode(t, err, codes.ResourceExhausted)
	d, _ := mem.AllowN(ctx, "m:"+unaryCall, rule.Limit, 0)
	if d.Remaining != 0 {
		t.Errorf("key by method: remaining %d", d.Remaining)
	}
}

// A stream is decided once when it opens; Cost sees a nil request.
func TestStream(t *testing.T) {
	_, mem := manual()
	var sawReq atomic.Value
	rule := Rule{
		Name: "streams", Limit: floodgate.PerSecond(2), Key: ByMethod(),
		Cost: func(_ context.Context, m string, req any) (int64, error) {
			sawReq.Store(fmt.Sprintf("%s %v", m, req))
			return 2, nil
		},
	}
	c, svc := serve(t, mem, Options{Rules: []Rule{rule}, Methods: func(m string) bool { return m == streamCall }})
	ctx := ctxT(t)

	s, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	h, err := s.Header()
	if err != nil {
		t.Fatal(err)
	}
	if got := one(h, LimitKey); got != `"streams";r=0;t=1` {
		t.Errorf("%s = %s", LimitKey, got)
	}
	if got := sawReq.Load(); got != streamCall+" <nil>" {
		t.Errorf("Cost saw %v", got)
	}

	s, err = c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	st := wantCode(t, err, codes.ResourceExhausted)
	if ri := retryInfo(st); ri == nil || ri.GetRetryDelay().AsDuration() != time.Second {
		t.Errorf("RetryInfo %v, want 1s", ri)
	}
	if h, _ := s.Header(); one(h, PolicyKey) != `"streams";q=2;w=1` {
		t.Errorf("denied stream header %v", h)
	}
	if svc.calls.Load() != 1 {
		t.Errorf("handler ran %d times, want 1", svc.calls.Load())
	}
}

// failing is a store that cannot answer.
type failing struct{ err error }

func (f failing) AllowN(context.Context, string, floodgate.Limit, int64) (floodgate.Decision, error) {
	return floodgate.Decision{}, f.err
}

func (f failing) AllowAll(context.Context, []floodgate.Request) ([]floodgate.Decision, error) {
	return nil, f.err
}

func TestStoreErrors(t *testing.T) {
	rules := []Rule{
		{Name: "a", Limit: floodgate.PerSecond(1), Key: Constant("k")},
		{Name: "b", Limit: floodgate.PerSecond(1), Key: Constant("k")},
	}
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{fmt.Errorf("%w: redis 127.0.0.7:6379: i/o timeout", floodgate.ErrStoreUnavailable), codes.Unavailable},
		{errors.New("redis 127.0.0.7:6379: connection refused"), codes.Unavailable},
		{fmt.Errorf("%w: too long", floodgate.ErrInvalidKey), codes.InvalidArgument},
		{fmt.Errorf("%w: odd", floodgate.ErrInvalidLimit), codes.Internal},
		{context.DeadlineExceeded, codes.Unavailable}, // the store's own timeout, not the caller's
	} {
		for _, n := range []int{1, 2} { // AllowN and AllowAll
			c, svc := serve(t, failing{tc.err}, Options{Rules: rules[:n]})
			h, err := call(ctxT(t), c)
			st := wantCode(t, err, tc.want)
			if strings.Contains(st.Message(), "127.0.0.7") {
				t.Errorf("%v: message leaks the store: %q", tc.err, st.Message())
			}
			if svc.calls.Load() != 0 || len(h.Get(LimitKey)) != 0 {
				t.Errorf("%v: handler ran or fields sent", tc.err)
			}
		}
	}
}

// blocking is a store that answers only when the call's context ends.
type blocking struct{}

func (blocking) AllowN(ctx context.Context, _ string, _ floodgate.Limit, _ int64) (floodgate.Decision, error) {
	<-ctx.Done()
	return floodgate.Decision{}, fmt.Errorf("%w: %w", floodgate.ErrStoreUnavailable, ctx.Err())
}

// A caller whose deadline passes while the store is asked gets
// DeadlineExceeded, not Unavailable.
func TestCallerDeadline(t *testing.T) {
	c, _ := serve(t, blocking{}, Options{Rules: []Rule{{Name: "a", Limit: floodgate.PerSecond(1), Key: Constant("k")}}})
	ctx, cancel := context.WithTimeout(ctxT(t), 20*time.Millisecond)
	defer cancel()
	_, err := call(ctx, c)
	wantCode(t, err, codes.DeadlineExceeded)
}

func TestCostErrors(t *testing.T) {
	_, mem := manual()
	cost := func(n int64, err error) Rule {
		return Rule{Name: "c", Limit: floodgate.PerSecond(10), Key: Constant("k"),
			Cost: func(context.Context, string, any) (int64, error) { return n, err }}
	}
	for _, tc := range []struct {
		rule Rule
		want codes.Code
	}{
		{cost(-1, nil), codes.InvalidArgument},
		{cost(0, errors.New("no size")), codes.InvalidArgument},
		{cost(0, status.Error(codes.PermissionDenied, "who")), codes.PermissionDenied},
	} {
		c, svc := serve(t, mem, Options{Rules: []Rule{tc.rule}})
		_, err := call(ctxT(t), c)
		wantCode(t, err, tc.want)
		if svc.calls.Load() != 0 {
			t.Error("handler ran")
		}
	}
}

// A leaky bucket's Delay holds the call; a deadline shorter than it ends it.
func TestLeakyBucketDelay(t *testing.T) {
	_, mem := manual()
	limit := floodgate.Limit{Algorithm: floodgate.LeakyBucket, Rate: 1, Period: 50 * time.Millisecond, Burst: 5}
	c, _ := serve(t, mem, Options{Rules: []Rule{{Name: "shape", Limit: limit, Key: Constant("k")}}})
	ctx := ctxT(t)
	if _, err := call(ctx, c); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := call(ctx, c); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Errorf("second call took %v, want at least the 50ms delay", el)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, err := call(short, c)
	wantCode(t, err, codes.DeadlineExceeded)
}

func TestOptionValidation(t *testing.T) {
	ok := Rule{Name: "ok", Limit: floodgate.PerSecond(1), Key: Constant("k")}
	with := func(f func(*Rule)) Rule { r := ok; f(&r); return r }
	for _, tc := range []struct {
		name string
		l    floodgate.Limiter
		opts Options
		want string
	}{
		{"nil limiter", nil, Options{Rules: []Rule{ok}}, "nil Limiter"},
		{"no rules", floodgate.NewMemory(), Options{}, "no rules"},
		{"no name", floodgate.NewMemory(), Options{Rules: []Rule{with(func(r *Rule) { r.Name = "" })}}, "no name"},
		{"colon", floodgate.NewMemory(), Options{Rules: []Rule{with(func(r *Rule) { r.Name = "a:b" })}}, "':'"},
		{"duplicate", floodgate.NewMemory(), Options{Rules: []Rule{ok, ok}}, "twice"},
		{"no key", floodgate.NewMemory(), Options{Rules: []Rule{with(func(r *Rule) { r.Key = nil })}}, "no Key"},
		{"bad limit", floodgate.NewMemory(), Options{Rules: []Rule{with(func(r *Rule) { r.Limit.Rate = 0 })}}, "invalid limit"},
	} {
		u, err := UnaryServerInterceptor(tc.l, tc.opts)
		if err == nil || u != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: unary: %v, want an error with %q", tc.name, err, tc.want)
		}
		s, err := StreamServerInterceptor(tc.l, tc.opts)
		if err == nil || s != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: stream: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	bad := with(func(r *Rule) { r.Limit.Rate = 0 })
	if _, err := UnaryServerInterceptor(floodgate.NewMemory(), Options{Rules: []Rule{bad}}); !errors.Is(err, floodgate.ErrInvalidLimit) {
		t.Errorf("bad limit: %v does not wrap ErrInvalidLimit", err)
	}
}

func TestCombine(t *testing.T) {
	ctx := withIncoming(context.Background(), "a", "x|y", "b", `z\`)
	k := Combine(ByMetadata("a"), ByMetadata("b"), ByMethod())
	got, ok := k(ctx, "/s/M")
	if want := `x\|y|z\\|/s/M`; !ok || got != want {
		t.Errorf("Combine = %q %v, want %q", got, ok, want)
	}
	// Values that would collide if joined naively stay apart.
	a, _ := Combine(Constant("x|"), Constant("y"))(ctx, "")
	b, _ := Combine(Constant("x"), Constant("|y"))(ctx, "")
	if a == b {
		t.Errorf("collision: %q", a)
	}
	if _, ok := Combine(ByMetadata("a"), ByMetadata("missing"))(ctx, ""); ok {
		t.Error("a skipping part did not skip")
	}
	if v, ok := Combine()(ctx, ""); !ok || v != "" {
		t.Errorf("Combine() = %q %v", v, ok)
	}
	for name, f := range map[string]func(){
		"Combine(nil)":     func() { Combine(nil) },
		"ByMetadata(\"\")": func() { ByMetadata("") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestByMetadataFirstValue(t *testing.T) {
	ctx := withIncoming(context.Background(), "k", "1", "k", "2", "e", "")
	if v, ok := ByMetadata("K")(ctx, ""); !ok || v != "1" {
		t.Errorf("got %q %v, want the first value", v, ok)
	}
	if v, ok := ByMetadata("e")(ctx, ""); !ok || v != "" {
		t.Errorf("empty value: %q %v", v, ok)
	}
}

func withIncoming(ctx context.Context, kv ...string) context.Context {
	return metadata.NewIncomingContext(ctx, metadata.Pairs(kv...))
}

func TestCeilMS(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		-time.Second:             0,
		0:                        0,
		time.Microsecond:         time.Millisecond,
		time.Millisecond:         time.Millisecond,
		1500 * time.Microsecond:  2 * time.Millisecond,
		time.Duration(1<<63 - 1): time.Duration(1<<63-1) - time.Duration(1<<63-1)%time.Millisecond,
	} {
		if got := ceilMS(in); got != want {
			t.Errorf("ceilMS(%v) = %v, want %v", in, got, want)
		}
	}
}

// The client reports DeadlineExceeded on its own, so the mapping is checked
// on the server's side too.
func TestStatusOfErrorContext(t *testing.T) {
	storeTimeout := fmt.Errorf("%w: %w", floodgate.ErrStoreUnavailable, context.DeadlineExceeded)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if got := status.Code(statusOfError(done, storeTimeout)); got != codes.Canceled {
		t.Errorf("caller gone: %v, want Canceled", got)
	}
	if got := status.Code(statusOfError(context.Background(), storeTimeout)); got != codes.Unavailable {
		t.Errorf("store timeout: %v, want Unavailable", got)
	}
}
