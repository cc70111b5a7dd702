package grpclimit

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/adaptive"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/observetest"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// recording is an adaptive.Algorithm with a fixed limit that keeps the
// samples it is given: what the interceptor told the limiter.
type recording struct {
	limit int
	mu    sync.Mutex
	got   []adaptive.Sample
}

func (a *recording) Limit() int { return a.limit }

func (a *recording) Update(s adaptive.Sample) int {
	a.mu.Lock()
	a.got = append(a.got, s)
	a.mu.Unlock()
	return a.limit
}

// outcome is how the one call's token was released, as the algorithm saw
// it: "success", "dropped", or "ignore" (no sample).
func (a *recording) outcome(t *testing.T) string {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case len(a.got) == 0:
		return "ignore"
	case len(a.got) > 1:
		t.Fatalf("%d samples for one call", len(a.got))
	case a.got[0].Dropped:
		return "dropped"
	}
	return "success"
}

func newAdaptive(t *testing.T, opts adaptive.LimiterOptions) *adaptive.Limiter {
	t.Helper()
	l, err := adaptive.NewLimiter(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// behind is a TestService whose UnaryCall and StreamingOutputCall do what
// handle says.
type behind struct {
	testpb.UnimplementedTestServiceServer
	handle func(ctx context.Context) error
}

func (b *behind) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if err := b.handle(ctx); err != nil {
		return nil, err
	}
	return &testpb.SimpleResponse{}, nil
}

func (b *behind) StreamingOutputCall(_ *testpb.StreamingOutputCallRequest, ss testpb.TestService_StreamingOutputCallServer) error {
	return b.handle(ss.Context())
}

// serveConcurrency starts a real server on 127.0.0.1:0 with both
// concurrency interceptors over l in front of handle. The channel receives
// once per call after the interceptor has returned, so after the token's
// release.
func serveConcurrency(t *testing.T, l *adaptive.Limiter, opts ConcurrencyOptions, handle func(context.Context) error) (testpb.TestServiceClient, <-chan struct{}) {
	t.Helper()
	unary, err := UnaryConcurrencyInterceptor(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := StreamConcurrencyInterceptor(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 16)
	outerUnary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		defer func() { done <- struct{}{} }()
		return h(ctx, req)
	}
	outerStream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		defer func() { done <- struct{}{} }()
		return h(srv, ss)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(outerUnary, unary), grpc.ChainStreamInterceptor(outerStream, stream))
	testpb.RegisterTestServiceServer(srv, &behind{handle: handle})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc), done
}

// callStream opens a server stream and reads it to its end: its status.
func callStream(ctx context.Context, c testpb.TestServiceClient) error {
	s, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
	if err != nil {
		return err
	}
	for {
		if _, err := s.Recv(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

func TestConcurrencyReleasesByTheHandlersStatus(t *testing.T) {
	const timeout = 2 * time.Second
	for _, tc := range []struct {
		name string
		took time.Duration // by the manual clock, inside the handler
		err  error
		want string
	}{
		{"OK is a success", 0, nil, "success"},
		{"a caller's error is a success", 0, status.Error(codes.InvalidArgument, "bad"), "success"},
		{"NotFound is a success", 0, status.Error(codes.NotFound, "no"), "success"},
		{"Unavailable is overload: dropped", 0, status.Error(codes.Unavailable, "busy"), "dropped"},
		{"DeadlineExceeded is overload: dropped", 0, status.Error(codes.DeadlineExceeded, "late"), "dropped"},
		{"a context deadline is DeadlineExceeded: dropped", 0, context.DeadlineExceeded, "dropped"},
		{"ResourceExhausted is overload: dropped", 0, status.Error(codes.ResourceExhausted, "full"), "dropped"},
		{"Canceled: the caller left: ignored", 0, status.Error(codes.Canceled, "gone"), "ignore"},
		{"a context cancellation is Canceled: ignored", 0, context.Canceled, "ignore"},
		{"Internal says nothing about load: ignored", 0, status.Error(codes.Internal, "bug"), "ignore"},
		{"a plain error is Unknown: ignored", 0, errors.New("bug"), "ignore"},
		{"exactly the timeout is not past it: success", timeout, nil, "success"},
		{"past the timeout is dropped, even with OK", timeout + time.Millisecond, nil, "dropped"},
		{"past the timeout is dropped, even when Canceled", timeout + time.Millisecond, context.Canceled, "dropped"},
	} {
		for _, stream := range []bool{false, true} {
			name := tc.name
			if stream {
				name = "stream/" + name
			}
			t.Run(name, func(t *testing.T) {
				clock := floodgate.NewManualClock(epoch)
				alg := &recording{limit: 1}
				l := newAdaptive(t, adaptive.LimiterOptions{Algorithm: alg, Clock: clock})
				c, done := serveConcurrency(t, l, ConcurrencyOptions{Timeout: timeout, Clock: clock}, func(context.Context) error {
					clock.Advance(tc.took)
					return tc.err
				})
				if stream {
					callStream(context.Background(), c)
				} else {
					c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
				}
				<-done
				if got := alg.outcome(t); got != tc.want {
					t.Errorf("released as %s, want %s", got, tc.want)
				}
				if n := l.Stats().InFlight; n != 0 {
					t.Errorf("%d in flight after the call", n)
				}
			})
		}
	}
}

func TestConcurrencyReleasesOnPanic(t *testing.T) {
	alg := &recording{limit: 1}
	l := newAdaptive(t, adaptive.LimiterOptions{Algorithm: alg})
	unary, err := UnaryConcurrencyInterceptor(l, ConcurrencyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { recover() }()
		unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: unaryCall}, func(context.Context, any) (any, error) {
			panic("handler bug")
		})
	}()
	if n := l.Stats().InFlight; n != 0 || alg.outcome(t) != "ignore" {
		t.Errorf("after a panic: %d in flight, released as %s; want 0, ignore", n, alg.outcome(t))
	}
}

// hold keeps calls in the handler until release is closed.
type hold struct {
	entered chan struct{}
	release chan struct{}
}

func newHold() *hold { return &hold{entered: make(chan struct{}, 64), release: make(chan struct{})} }

func (h *hold) handle(context.Context) error {
	h.entered <- struct{}{}
	<-h.release
	return nil
}

func withPriority(p string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-priority", p)
}

func TestConcurrencyShedsWithUnavailableAndPushback(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "unary", true: "stream"}[stream], func(t *testing.T) {
			rec := &observetest.Recorder{}
			l := newAdaptive(t, adaptive.LimiterOptions{Algorithm: &recording{limit: 10}})
			h := newHold()
			c, done := serveConcurrency(t, l, ConcurrencyOptions{Name: "rpc", Observer: rec}, h.handle)
			// Seven critical calls fill sheddable's share (70% of 10).
			for range 7 {
				go c.UnaryCall(withPriority("critical"), &testpb.SimpleRequest{})
				<-h.entered
			}
			var trailer metadata.MD
			var err error
			if stream {
				var s testpb.TestService_StreamingOutputCallClient
				if s, err = c.StreamingOutputCall(withPriority("SHEDDABLE"), &testpb.StreamingOutputCallRequest{}); err == nil {
					_, err = s.Recv()
					trailer = s.Trailer()
				}
			} else {
				_, err = c.UnaryCall(withPriority("SHEDDABLE"), &testpb.SimpleRequest{}, grpc.Trailer(&trailer))
			}
			<-done
			st := status.Convert(err)
			if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "sheddable") {
				t.Errorf("status %v, want Unavailable naming the class", st)
			}
			// No success yet: adaptive's RetryAfter is a second.
			if got := trailer.Get(RetryPushbackKey); len(got) != 1 || got[0] != "1000" {
				t.Errorf("trailer %s = %v, want [1000]", RetryPushbackKey, got)
			}
			if ri := retryInfo(st); ri == nil || ri.GetRetryDelay().AsDuration() != time.Second {
				t.Errorf("RetryInfo %v, want a delay of 1s", ri)
			}
			// A default call still fits under its 90% share.
			go c.UnaryCall(withPriority("default"), &testpb.SimpleRequest{})
			<-h.entered
			close(h.release)
			for range 8 {
				<-done
			}
			ev := rec.Events()
			if len(ev) != 1 {
				t.Fatalf("%d events, want 1 (only the shed call): %+v", len(ev), ev)
			}
			e := ev[0]
			if e.Surface != observe.SurfaceGRPC || e.Policy != "rpc" || e.Limit != ConcurrencyLimit || e.Key != "sheddable" ||
				e.Outcome != observe.Shed || e.Client != "127.0.0.1" {
				t.Errorf("event %+v", e)
			}
			if st := l.Stats(); st.Shed[adaptive.Sheddable][adaptive.ShedAtLimit] != 1 || st.InFlight != 0 {
				t.Errorf("stats %+v: want one sheddable shed at the limit, nothing in flight", st)
			}
		})
	}
}

func TestConcurrencyPushbackIsRetryAfterInMilliseconds(t *testing.T) {
	for _, tc := range []struct {
		rtt  time.Duration // of the one success before the shed call
		want string
	}{
		{time.Microsecond, "1"}, // at least a millisecond
		{1500 * time.Microsecond, "2"},
		{2500 * time.Millisecond, "2500"},
	} {
		t.Run(tc.rtt.String(), func(t *testing.T) {
			clock := floodgate.NewManualClock(epoch)
			l := newAdaptive(t, adaptive.LimiterOptions{Algorithm: &recording{limit: 1}, Clock: clock})
			h := newHold()
			first := true
			c, done := serveConcurrency(t, l, ConcurrencyOptions{Clock: clock}, func(ctx context.Context) error {
				if first {
					first = false
					clock.Advance(tc.rtt) // the success that sets the smoothed RTT
					return nil
				}
				return h.handle(ctx)
			})
			c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			<-done
			go c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			<-h.entered
			var trailer metadata.MD
			_, err := c.UnaryCall(withPriority("critical"), &testpb.SimpleRequest{}, grpc.Trailer(&trailer))
			// RetryAfter = RTT × (1 + 0 queued) ÷ limit 1 = RTT.
			if status.Code(err) != codes.Unavailable || strings.Join(trailer.Get(RetryPushbackKey), ",") != tc.want {
				t.Errorf("%v, pushback %v; want Unavailable, %s", err, trailer.Get(RetryPushbackKey), tc.want)
			}
			close(h.release)
		})
	}
}

func TestConcurrencyCallerThatLeftWhileQueuedIsNotShed(t *testing.T) {
	rec := &observetest.Recorder{}
	l := newAdaptive(t, adaptive.LimiterOptions{Algorithm: &recording{limit: 1}, MaxQueue: 1, MaxWait: time.Hour})
	h := newHold()
	c, done := serveConcurrency(t, l, ConcurrencyOptions{Observer: rec}, h.handle)
	go c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	<-h.entered
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for l.Stats().Queued == 0 {
			runtime.Gosched() // until the second call waits
		}
		cancel()
	}()
	if _, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}); status.Code(err) != codes.Canceled {
		t.Fatalf("%v, want Canceled", err)
	}
	<-done
	close(h.release)
	<-done
	if ev := rec.Events(); len(ev) != 0 {
		t.Errorf("events %+v: a caller that left was not shed", ev)
	}
	if st := l.Stats(); st.InFlight != 0 || st.Queued != 0 {
		t.Errorf("stats %+v: want nothing in flight or queued", st)
	}
}

func TestConcurrencyPriority(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts ConcurrencyOptions
		md   []string
		want adaptive.Priority
	}{
		{"critical", ConcurrencyOptions{}, []string{"x-priority", "critical"}, adaptive.Critical},
		{"any case", ConcurrencyOptions{}, []string{"x-priority", "Sheddable"}, adaptive.Sheddable},
		{"missing is default", ConcurrencyOptions{}, nil, adaptive.Default},
		{"unknown is default, not an error", ConcurrencyOptions{}, []string{"x-priority", "urgent"}, adaptive.Default},
		{"the first of several values", ConcurrencyOptions{}, []string{"x-priority", "critical", "x-priority", "sheddable"}, adaptive.Critical},
		{"another key, in any case", ConcurrencyOptions{PriorityKey: "X-Criticality"}, []string{"x-criticality", "critical"}, adaptive.Critical},
		{"a function instead", ConcurrencyOptions{Priority: func(_ context.Context, m string) adaptive.Priority {
			return map[bool]adaptive.Priority{true: adaptive.Sheddable, false: adaptive.Critical}[strings.HasSuffix(m, "/UnaryCall")]
		}}, []string{"x-priority", "critical"}, adaptive.Sheddable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := newGate(newAdaptive(t, adaptive.LimiterOptions{Algorithm: &recording{limit: 1}}), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(tc.md...))
			if got := g.priority(ctx, unaryCall); got != tc.want {
				t.Errorf("priority %s, want %s", got, tc.want)
			}
		})
	}
}

func TestConcurrencyFailsInternalForAClassThePriorityFunctionMadeUp(t *testing.T) {
	l := newAdaptive(t, adaptive.LimiterOptions{Algorithm: &recording{limit: 1}})
	c, done := serveConcurrency(t, l, ConcurrencyOptions{Priority: func(context.Context, string) adaptive.Priority { return 7 }},
		func(context.Context) error { t.Error("handler called"); return nil })
	_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	<-done
	if st := status.Convert(err); st.Code() != codes.Internal || !strings.Contains(st.Message(), "unknown priority") {
		t.Errorf("%v, want Internal naming the unknown priority", err)
	}
}

func TestConcurrencyPassesMethodsItDoesNotSelect(t *testing.T) {
	l := newAdaptive(t, adaptive.LimiterOptions{Algorithm: &recording{limit: 1}})
	h := newHold()
	c, done := serveConcurrency(t, l, ConcurrencyOptions{Methods: func(m string) bool { return m == unaryCall }}, h.handle)
	go c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	<-h.entered
	// The limit of 1 is taken, but streams are not selected.
	go callStream(context.Background(), c)
	<-h.entered
	close(h.release)
	<-done
	<-done
}

func TestConcurrencyOptionsAreChecked(t *testing.T) {
	l := newAdaptive(t, adaptive.LimiterOptions{Algorithm: &recording{limit: 1}})
	for _, tc := range []struct {
		name string
		l    *adaptive.Limiter
		opts ConcurrencyOptions
		want string // in the error; "" for none
	}{
		{"defaults", l, ConcurrencyOptions{}, ""},
		{"a key in capitals is lowercased", l, ConcurrencyOptions{PriorityKey: "X-Criticality"}, ""},
		{"nil limiter", nil, ConcurrencyOptions{}, "nil adaptive.Limiter"},
		{"negative timeout", l, ConcurrencyOptions{Timeout: -time.Second}, "negative Timeout"},
		{"a key with a space", l, ConcurrencyOptions{PriorityKey: "x priority"}, `PriorityKey "x priority"`},
		{"gRPC's own keys", l, ConcurrencyOptions{PriorityKey: "grpc-priority"}, "not a metadata key"},
		{"a binary key", l, ConcurrencyOptions{PriorityKey: "x-priority-bin"}, "not a metadata key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, uerr := UnaryConcurrencyInterceptor(tc.l, tc.opts)
			_, serr := StreamConcurrencyInterceptor(tc.l, tc.opts)
			for _, err := range []error{uerr, serr} {
				switch {
				case tc.want == "" && err != nil:
					t.Errorf("error %v, want none", err)
				case tc.want != "" && (!errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want)):
					t.Errorf("error %v, want ErrInvalidOptions naming %q", err, tc.want)
				}
			}
		})
	}
}

// admittedUnary is one admitted unary call through the interceptor, with
// md as the incoming metadata (nil: none).
func admittedUnary(tb testing.TB, md metadata.MD) func() {
	alg, err := adaptive.NewFixed(100)
	if err != nil {
		tb.Fatal(err)
	}
	l, err := adaptive.NewLimiter(adaptive.LimiterOptions{Algorithm: alg})
	if err != nil {
		tb.Fatal(err)
	}
	unary, err := UnaryConcurrencyInterceptor(l, ConcurrencyOptions{Timeout: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	if md != nil {
		ctx = metadata.NewIncomingContext(ctx, md)
	}
	info := &grpc.UnaryServerInfo{FullMethod: unaryCall}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	return func() { unary(ctx, nil, info, handler) }
}

func TestConcurrencyAdmissionAllocations(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   metadata.MD
		want float64
	}{
		{"without a priority", nil, 0},
		// metadata.ValueFromIncomingContext copies the values it returns.
		{"with a priority", metadata.Pairs("x-priority", "critical"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := admittedUnary(t, tc.md)
			call()
			if n := testing.AllocsPerRun(100, call); n > tc.want {
				t.Errorf("%.1f allocations per admitted call, want at most %.0f", n, tc.want)
			}
		})
	}
}

func BenchmarkConcurrencyUnaryAdmitted(b *testing.B) {
	for _, bc := range []struct {
		name string
		md   metadata.MD
	}{{"no-priority", nil}, {"priority", metadata.Pairs("x-priority", "critical")}} {
		b.Run(bc.name, func(b *testing.B) {
			call := admittedUnary(b, bc.md)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					call()
				}
			})
		})
	}
}
