package grpclimit

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/client"
	"github.com/floodgate-io/floodgate/client/clienttest"
)

// fakeTime is the tests' time: a manual clock and a sleeper that moves it.
type fakeTime struct{ *clienttest.Time }

func newFakeTime() *fakeTime { return &fakeTime{clienttest.NewTime()} }

// zeroSource makes every jitter draw 0, so that a wait is exactly what the
// server asked.
type zeroSource struct{}

func (zeroSource) Uint64() uint64 { return 0 }

// exact are options that wait exactly what the server asks, on f's clock,
// with neither budget nor throttle.
func (f *fakeTime) exact(more ...client.Option) ClientOption {
	return RetryOptions(append([]client.Option{f.Option(), client.WithRand(rand.New(zeroSource{})),
		client.WithoutBudget(), client.WithoutThrottle()}, more...)...)
}

// seeded are options with jitter from a seeded source, on f's clock.
func (f *fakeTime) seeded(seed uint64, more ...client.Option) ClientOption {
	return RetryOptions(append([]client.Option{f.Option(), client.WithRand(rand.New(rand.NewPCG(seed, 0)))}, more...)...)
}

// reply is one scripted answer of EmptyCall: a status (nil: OK) and the
// metadata sent with it.
type reply struct {
	st      *status.Status
	header  metadata.MD
	trailer metadata.MD
}

func refuse(code codes.Code, retryInfo time.Duration) *status.Status {
	st := status.New(code, "scripted refusal")
	if retryInfo >= 0 {
		st, _ = st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryInfo)})
	}
	return st
}

const noRetryInfo = -1

// scripted is a TestService whose EmptyCall gives its replies in order, the
// last one to every call after.
type scripted struct {
	testpb.UnimplementedTestServiceServer
	mu      sync.Mutex
	replies []reply
	calls   int
}

func (s *scripted) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	s.mu.Lock()
	r := s.replies[min(s.calls, len(s.replies)-1)]
	s.calls++
	s.mu.Unlock()
	if r.header != nil {
		_ = grpc.SetHeader(ctx, r.header)
	}
	if r.trailer != nil {
		_ = grpc.SetTrailer(ctx, r.trailer)
	}
	if r.st != nil {
		return nil, r.st.Err()
	}
	return &testpb.Empty{}, nil
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// listen starts a real gRPC server on 127.0.0.1 with svc and the server
// options, and returns its address.
func listen(t testing.TB, svc testpb.TestServiceServer, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(srv, svc)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// dial is a client of addr through the client interceptors built with opts.
func dial(t testing.TB, addr string, opts ...ClientOption) testpb.TestServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)), grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

func pairs(kv ...string) metadata.MD { return metadata.Pairs(kv...) }

// The wait before a retry is the server's, from the first of: the retry
// pushback trailer, RetryInfo, the ratelimit metadata; backoff otherwise.
// A negative or malformed pushback means no retry; only RESOURCE_EXHAUSTED
// and UNAVAILABLE are retried, and only for the methods marked safe.
func TestClientRetriesAsTheServerAsks(t *testing.T) {
	ok := reply{}
	exhausted := refuse(codes.ResourceExhausted, noRetryInfo)
	cases := []struct {
		name    string
		replies []reply
		opts    []ClientOption
		waits   []time.Duration
		code    codes.Code
	}{
		{"pushback trailer", []reply{{st: exhausted, trailer: pairs(RetryPushbackKey, "250")}, ok},
			nil, []time.Duration{250 * time.Millisecond}, codes.OK},
		{"RetryInfo", []reply{{st: refuse(codes.Unavailable, 1500*time.Millisecond)}, ok},
			nil, []time.Duration{1500 * time.Millisecond}, codes.OK},
		{"ratelimit metadata: the longest t at r=0", []reply{{st: exhausted,
			header: pairs(PolicyKey, `"a";q=5;w=10, "b";q=9;w=60`, LimitKey, `"a";r=0;t=7, "b";r=0;t=3`)}, ok},
			nil, []time.Duration{7 * time.Second}, codes.OK},
		{"nothing: backoff (no jitter here)", []reply{{st: status.New(codes.Unavailable, "")}, ok},
			nil, []time.Duration{0}, codes.OK},
		{"pushback before RetryInfo", []reply{{st: refuse(codes.ResourceExhausted, 5*time.Second), trailer: pairs(RetryPushbackKey, "100")}, ok},
			nil, []time.Duration{100 * time.Millisecond}, codes.OK},
		{"RetryInfo before ratelimit", []reply{{st: refuse(codes.ResourceExhausted, 2*time.Second), header: pairs(LimitKey, `"a";r=0;t=9`)}, ok},
			nil, []time.Duration{2 * time.Second}, codes.OK},
		{"negative pushback: no retry", []reply{{st: exhausted, trailer: pairs(RetryPushbackKey, "-1")}, ok},
			nil, nil, codes.ResourceExhausted},
		{"malformed pushback: no retry", []reply{{st: refuse(codes.Unavailable, time.Second), trailer: pairs(RetryPushbackKey, "soon")}, ok},
			nil, nil, codes.Unavailable},
		{"up to MaxRetries", []reply{{st: exhausted, trailer: pairs(RetryPushbackKey, "10")}},
			nil, []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}, codes.ResourceExhausted},
		{"a wait above MaxWait is not waited", []reply{{st: refuse(codes.ResourceExhausted, time.Minute)}, ok},
			nil, nil, codes.ResourceExhausted},
		{"other codes are not retried", []reply{{st: status.New(codes.PermissionDenied, "")}, ok},
			nil, nil, codes.PermissionDenied},
		{"methods not marked safe are not retried", []reply{{st: exhausted, trailer: pairs(RetryPushbackKey, "10")}, ok},
			[]ClientOption{RetryMethods(func(m string) bool { return m != emptyCall })}, nil, codes.ResourceExhausted},
		{"the methods marked safe are", []reply{{st: exhausted, trailer: pairs(RetryPushbackKey, "10")}, ok},
			[]ClientOption{RetryMethods(func(m string) bool { return m == emptyCall })}, []time.Duration{10 * time.Millisecond}, codes.OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeTime()
			svc := &scripted{replies: tc.replies}
			opts := append([]ClientOption{RetryAllMethods(), f.exact()}, tc.opts...)
			_, err := dial(t, listen(t, svc), opts...).EmptyCall(context.Background(), &testpb.Empty{})
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code %v (%v), want %v", got, err, tc.code)
			}
			if got := f.Slept(); !equalWaits(got, tc.waits) {
				t.Errorf("waits %v, want %v", got, tc.waits)
			}
			if got, want := svc.count(), 1+len(tc.waits); got != want {
				t.Errorf("server saw %d calls, want %d", got, want)
			}
		})
	}
}

func equalWaits(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// By default no method is retried: gRPC does not know which are idempotent.
func TestClientRetriesNothingByDefault(t *testing.T) {
	svc := &scripted{replies: []reply{{st: refuse(codes.ResourceExhausted, time.Millisecond)}, {}}}
	_, err := dial(t, listen(t, svc)).EmptyCall(context.Background(), &testpb.Empty{})
	if status.Code(err) != codes.ResourceExhausted || svc.count() != 1 {
		t.Errorf("%v after %d calls, want ResourceExhausted after 1", err, svc.count())
	}
}

// Without a wait from the server, retry n waits a draw in [0, Backoff's
// window n).
func TestClientBacksOffWithFullJitter(t *testing.T) {
	f := newFakeTime()
	svc := &scripted{replies: []reply{{st: status.New(codes.Unavailable, "")}}}
	_, err := dial(t, listen(t, svc), RetryAllMethods(), f.seeded(7, client.WithoutBudget())).EmptyCall(context.Background(), &testpb.Empty{})
	waits := f.Slept()
	if status.Code(err) != codes.Unavailable || len(waits) != client.DefaultMaxRetries {
		t.Fatalf("%v after waits %v, want Unavailable after %d", err, waits, client.DefaultMaxRetries)
	}
	for n, w := range waits {
		if w < 0 || w >= client.DefaultBackoff.Window(n) {
			t.Errorf("wait %d = %v, want in [0, %v)", n, w, client.DefaultBackoff.Window(n))
		}
	}
}

// A wait that would pass the deadline is not started: the call fails at
// once with DeadlineExceeded, saying what the server asked.
func TestClientFailsAtOnceWhenThePushbackPassesTheDeadline(t *testing.T) {
	f := newFakeTime()
	svc := &scripted{replies: []reply{{st: refuse(codes.ResourceExhausted, noRetryInfo), trailer: pairs(RetryPushbackKey, "40000")}, {}}}
	ctx, cancel := context.WithDeadline(context.Background(), f.Clock.Now().Add(30*time.Second))
	defer cancel()
	_, err := dial(t, listen(t, svc), RetryAllMethods(), f.exact(client.WithMaxWait(time.Hour))).EmptyCall(ctx, &testpb.Empty{})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, client.ErrPastDeadline) || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("error %v (code %v), want DeadlineExceeded wrapping context.DeadlineExceeded and client.ErrPastDeadline", err, status.Code(err))
	}
	if !strings.Contains(err.Error(), "40s") || !strings.Contains(err.Error(), RetryPushbackKey) {
		t.Errorf("error %q does not say what the server asked (40s, %s)", err, RetryPushbackKey)
	}
	if len(f.Slept()) != 0 || svc.count() != 1 {
		t.Errorf("waited %v and sent %d calls, want no wait and 1 call", f.Slept(), svc.count())
	}
}

// The budget bounds the retries of a target: at most Max + Ratio·calls
// (no time passes here but the waits, and MinPerSecond is 0).
func TestClientRetriesWithinTheBudget(t *testing.T) {
	f := newFakeTime()
	svc := &scripted{replies: []reply{{st: refuse(codes.Unavailable, time.Millisecond)}}}
	budget := client.Budget{Ratio: 0.1, MinPerSecond: 0, Max: 2}
	c := dial(t, listen(t, svc), RetryAllMethods(), f.seeded(1, client.WithBudget(budget), client.WithoutThrottle()))
	const calls = 20
	for range calls {
		if _, err := c.EmptyCall(context.Background(), &testpb.Empty{}); status.Code(err) != codes.Unavailable {
			t.Fatalf("error %v, want the server's Unavailable", err)
		}
	}
	retries := svc.count() - calls
	if limit := budget.Max + budget.Ratio*calls; retries < 1 || float64(retries) > limit {
		t.Errorf("%d retries for %d calls, want between 1 and %v", retries, calls, limit)
	}
}

// Against a server that refuses everything, the throttle stops sending
// most calls: each call is sent with probability 1 − requests/(requests+1)
// (K·accepts is 0), and the others fail at once, wrapping ErrThrottled.
func TestClientThrottlesAServerThatRefuses(t *testing.T) {
	f := newFakeTime()
	svc := &scripted{replies: []reply{{st: refuse(codes.ResourceExhausted, noRetryInfo)}}}
	c := dial(t, listen(t, svc), f.seeded(3, client.WithMaxRetries(0)))
	const calls = 200
	throttled := 0
	for range calls {
		_, err := c.EmptyCall(context.Background(), &testpb.Empty{})
		switch {
		case errors.Is(err, client.ErrThrottled) && status.Code(err) == codes.Unavailable:
			throttled++
		case status.Code(err) != codes.ResourceExhausted:
			t.Fatalf("error %v, want ResourceExhausted or a local Unavailable wrapping ErrThrottled", err)
		}
	}
	// The expected number sent is about ln(200) ≈ 5.9; 25 is far in the tail.
	if sent := svc.count(); sent+throttled != calls || sent > 25 {
		t.Errorf("sent %d and throttled %d of %d calls, want at most 25 sent", sent, throttled, calls)
	}
}

// A ratelimit field at r=0 on an answer, a success too, holds the next call
// until the policy's t instead of sending it to be refused.
func TestClientPausesWhileAPolicyIsAtZero(t *testing.T) {
	f := newFakeTime()
	svc := &scripted{replies: []reply{
		{header: pairs(LimitKey, `"tenant";r=0;t=3`)},
		{header: pairs(LimitKey, `"tenant";r=4;t=3`)},
	}}
	c := dial(t, listen(t, svc), f.exact())
	for range 3 {
		if _, err := c.EmptyCall(context.Background(), &testpb.Empty{}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := f.Slept(), []time.Duration{3 * time.Second}; !equalWaits(got, want) {
		t.Errorf("waits %v, want %v: one pause, before the second call only", got, want)
	}
}

// Against grpclimit's own server interceptor, on one manual clock, a
// refused call waits exactly the RetryInfo the limiter computed, and then
// passes.
func TestClientWaitsTheRetryInfoOfTheServerInterceptor(t *testing.T) {
	f := newFakeTime()
	limiter := floodgate.NewMemory(floodgate.WithClock(f.Clock))
	unary, err := UnaryServerInterceptor(limiter, Options{Rules: []Rule{
		{Name: "all", Limit: floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 1, Period: 10 * time.Second}, Key: Constant("x")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	svc := &service{}
	c := dial(t, listen(t, svc, grpc.UnaryInterceptor(unary)), RetryAllMethods(), f.exact())
	for range 2 {
		if _, err := c.EmptyCall(context.Background(), &testpb.Empty{}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := f.Slept(), []time.Duration{10 * time.Second}; !equalWaits(got, want) {
		t.Errorf("waits %v, want %v (the RetryInfo of a 1 per 10 s bucket)", got, want)
	}
	if svc.calls.Load() != 2 {
		t.Errorf("the handler ran %d times, want 2", svc.calls.Load())
	}
}

// A stream that fails to open with UNAVAILABLE (nothing listens) is
// retried like a unary call; one of a method not marked safe is not.
func TestClientRetriesAStreamThatFailsToOpen(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there now: every attempt is refused
	for _, tc := range []struct {
		name  string
		opt   ClientOption
		waits int
	}{{"safe", RetryAllMethods(), client.DefaultMaxRetries}, {"not marked", RetryMethods(func(string) bool { return false }), 0}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeTime()
			c := dial(t, addr, tc.opt, f.seeded(5, client.WithoutBudget(), client.WithoutThrottle()))
			_, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
			if status.Code(err) != codes.Unavailable || len(f.Slept()) != tc.waits {
				t.Errorf("error %v after waits %v, want Unavailable after %d", err, f.Slept(), tc.waits)
			}
		})
	}
}

// A stream the server refuses after it opened is not retried, but its
// ratelimit metadata still pauses the next call.
func TestClientStreamRefusedAfterOpeningPausesTheNextCall(t *testing.T) {
	f := newFakeTime()
	limiter := floodgate.NewMemory(floodgate.WithClock(f.Clock))
	opts := Options{Rules: []Rule{{Name: "all", Limit: floodgate.Limit{Algorithm: floodgate.TokenBucket, Rate: 1, Period: 4 * time.Second}, Key: Constant("x")}}}
	stream, err := StreamServerInterceptor(limiter, opts)
	if err != nil {
		t.Fatal(err)
	}
	addr := listen(t, &service{}, grpc.StreamInterceptor(stream))
	other := dial(t, addr) // another client, which takes the one call of the next 4 s
	c := dial(t, addr, RetryAllMethods(), f.exact())
	open := func(c testpb.TestServiceClient) error {
		s, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
		if err == nil {
			_, err = s.Recv()
		}
		return err
	}
	if err := open(other); err != nil {
		t.Fatal(err)
	}
	if err := open(c); status.Code(err) != codes.ResourceExhausted || len(f.Slept()) != 0 {
		t.Fatalf("refused stream: %v after waits %v, want ResourceExhausted and no retry", err, f.Slept())
	}
	if err := open(c); err != nil {
		t.Fatalf("next stream: %v", err)
	}
	if got, want := f.Slept(), []time.Duration{4 * time.Second}; !equalWaits(got, want) {
		t.Errorf("waits %v, want %v: the next stream paused until the policy's t", got, want)
	}
}

// Invalid options fail every call, before sending, naming the option.
func TestClientInvalidOptionsFailEveryCall(t *testing.T) {
	for _, opt := range []ClientOption{RetryMethods(nil), RetryOptions(client.WithMaxRetries(-1)), RetryOptions(client.WithClock(nil, nil))} {
		verr := ValidateClient(opt)
		if !errors.Is(verr, client.ErrInvalidOption) {
			t.Errorf("ValidateClient = %v, want ErrInvalidOption", verr)
		}
		svc := &scripted{replies: []reply{{}}}
		_, err := dial(t, listen(t, svc), opt).EmptyCall(context.Background(), &testpb.Empty{})
		if !errors.Is(err, client.ErrInvalidOption) || svc.count() != 0 {
			t.Errorf("call: %v after %d sent, want ErrInvalidOption and none sent", err, svc.count())
		}
	}
	if err := ValidateClient(RetryAllMethods(), RetryOptions(client.WithMaxRetries(1))); err != nil {
		t.Errorf("ValidateClient of valid options = %v", err)
	}
}

// A successful call costs the interceptor no allocation: the header and
// trailer it asks gRPC for are pooled, the target is found without a lock.
func TestClientInterceptorAllocatesNothingOnSuccess(t *testing.T) {
	cc, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	unary := UnaryClientInterceptor(RetryAllMethods())
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _ = unary(ctx, emptyCall, nil, nil, cc, invoker) }); n != 0 {
		t.Errorf("%v allocations per successful call, want 0", n)
	}
}

// BenchmarkUnaryClientInterceptor is the cost of a successful call over a
// real connection without and with the interceptor (default options: the
// throttle and the budget on).
func BenchmarkUnaryClientInterceptor(b *testing.B) {
	addr := listen(b, &service{})
	for _, bc := range []struct {
		name string
		opts []grpc.DialOption
	}{
		{"without", nil},
		{"with", []grpc.DialOption{grpc.WithUnaryInterceptor(UnaryClientInterceptor(RetryAllMethods()))}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cc, err := grpc.NewClient(addr, append(bc.opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			c := testpb.NewTestServiceClient(cc)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.EmptyCall(ctx, &testpb.Empty{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUnaryClientInterceptorOverhead is the interceptor alone around
// an invoker that answers at once.
func BenchmarkUnaryClientInterceptorOverhead(b *testing.B) {
	cc, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	unary := UnaryClientInterceptor(RetryAllMethods())
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = unary(ctx, emptyCall, nil, nil, cc, invoker)
	}
}
