package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// h2Service is a RateLimitService for h2Conn's tests: it echoes the
// descriptor's value as the overall code ("1" is OK, "2" OVER_LIMIT), fails
// with the code named by a value "fail:N", and holds a value "hang" until
// the call's end.
type h2Service struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (h2Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	switch v := req.GetDescriptors()[0].GetEntries()[0].GetValue(); v {
	case "hang":
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	case "fail":
		return nil, status.Error(codes.ResourceExhausted, "no more 100% sure")
	case "long":
		return nil, status.Error(codes.ResourceExhausted, longMessage)
	case "2":
		return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{}}}, nil
	default:
		return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
	}
}

// longMessage is the message of the value "long": 40,000 bytes, more
// than an HTTP/2 frame holds, so that the trailers come as HEADERS and
// CONTINUATION frames.
var longMessage = strings.Repeat("0123456789", 4000)

// serveH2 serves h2Service with opts on lis until the test ends; stop
// stops it early.
func serveH2(t *testing.T, lis net.Listener, opts ...grpc.ServerOption) (stop func()) {
	t.Helper()
	srv := grpc.NewServer(opts...)
	rlsv3.RegisterRateLimitServiceServer(srv, h2Service{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(lis)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { srv.Stop(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

func ask(ctx context.Context, s *h2Slot, value string) (uint64, error) {
	req := rlsRequest{domain: "d", key: "k", value: []byte(value)}
	var a rlsAnswer
	err := s.invoke(ctx, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, &req, &a)
	return a.code, err
}

// A grpc-go server hears h2Conn's calls as its own client's: answers,
// status errors (with their percent-encoded messages), deadlines, and a
// server that allows one stream at a time; and more calls than the
// connection's first flow-control window holds.
func TestH2ConnCalls(t *testing.T) {
	lis := listen(t)
	serveH2(t, lis, grpc.MaxConcurrentStreams(1))
	s := &h2Slot{addr: lis.Addr().String(), timeout: timing.Patience}
	defer s.close()
	ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
	defer cancel()

	if code, err := ask(ctx, s, "2"); err != nil || code != uint64(rlsv3.RateLimitResponse_OVER_LIMIT) {
		t.Fatalf("OVER_LIMIT call: %d, %v", code, err)
	}
	_, err := ask(ctx, s, "fail")
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || st.Message() != "no more 100% sure" {
		t.Fatalf("failing call: %v, want ResourceExhausted with its message", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = ask(short, s, "hang")
	cancelShort()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("hanging call: %v, want DeadlineExceeded", err)
	}

	// 16 callers, 4,000 calls: one stream at a time, and 4,000 requests
	// of 20-odd bytes each are more than the 65,535 bytes the server grants
	// at first.
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := range 250 {
				v := "1"
				if (w+i)%2 == 1 {
					v = "2"
				}
				code, err := ask(ctx, s, v)
				if err != nil || code != uint64(v[0]-'0') { // OK is 1, OVER_LIMIT 2
					errs <- errors.Join(err, errors.New("wrong answer"))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A caller reuses its call's memory from call to call, and each answer is
// still its own: an OK after a longer OVER_LIMIT answer, a status error, a
// call that misses its timeout (whose memory the reader may still hold, so
// it is not reused) and the calls after it; 16 callers at once, each with
// its own h2Caller, keep theirs apart.
func TestH2CallerReusesItsCall(t *testing.T) {
	lis := listen(t)
	serveH2(t, lis)
	s := &h2Slot{addr: lis.Addr().String(), timeout: timing.Patience}
	defer s.close()
	call := func(k *h2Caller, v string, timeout time.Duration) (uint64, error) {
		req := rlsRequest{domain: "d", key: "k", value: []byte(v)}
		var a rlsAnswer
		err := k.invoke(t.Context(), s, timeout, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, &req, &a)
		return a.code, err
	}
	var k h2Caller
	for i, step := range []struct {
		value   string
		timeout time.Duration
		code    uint64
		status  codes.Code
	}{
		{"2", timing.Patience, 2, codes.OK},
		{"1", timing.Patience, 1, codes.OK},
		{"fail", timing.Patience, 0, codes.ResourceExhausted},
		{"1", timing.Patience, 1, codes.OK},
		{"hang", 20 * time.Millisecond, 0, codes.DeadlineExceeded},
		{"2", timing.Patience, 2, codes.OK},
		{"1", timing.Patience, 1, codes.OK},
	} {
		before := k.call
		code, err := call(&k, step.value, step.timeout)
		if status.Code(err) != step.status || code != step.code {
			t.Fatalf("call %d (%s): code %d, %v; want code %d, %v", i, step.value, code, err, step.code, step.status)
		}
		if i > 0 && step.status != codes.DeadlineExceeded && before != nil && k.call != before {
			t.Errorf("call %d (%s): a new h2Call, want the previous one reused", i, step.value)
		}
		if step.status == codes.DeadlineExceeded && k.call != nil {
			t.Errorf("call %d: the h2Call of a call that missed its deadline is kept for the next", i)
		}
	}

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			var k h2Caller
			for i := range 250 {
				v := []string{"1", "2"}[(w+i)%2]
				if code, err := call(&k, v, timing.Patience); err != nil || code != uint64(v[0]-'0') {
					errs <- fmt.Errorf("caller %d, call %d (%s): code %d, %v", w, i, v, code, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// When the server goes away, calls fail with Unavailable, at once; when it
// is back, the slot dials again and calls go through.
func TestH2SlotRedials(t *testing.T) {
	lis := listen(t)
	addr := lis.Addr().String()
	stop := serveH2(t, lis)
	s := &h2Slot{addr: addr, timeout: timing.Patience}
	defer s.close()
	ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
	defer cancel()
	if _, err := ask(ctx, s, "1"); err != nil {
		t.Fatal(err)
	}
	stop()
	for {
		_, err := ask(ctx, s, "1")
		if status.Code(err) == codes.Unavailable {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("calls after the server stopped: %v, want Unavailable", err)
		}
	}
	lis2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	serveH2(t, lis2)
	for {
		_, err := ask(ctx, s, "1")
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the server is back and calls still fail: %v", err)
		}
		time.Sleep(h2Redial / 4) // the slot dials again every h2Redial
	}
}

// grpc-timeout is the smallest unit that holds the time in 8 digits, and
// its field is a literal the server does not add to its table.
func TestGRPCTimeout(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "1n"}, {time.Nanosecond, "1n"}, {1500 * time.Microsecond, "1500000n"}, {time.Second, "1000000u"},
		{200 * time.Second, "200000m"}, {100 * time.Hour, "360000S"}, {-time.Second, "1n"},
	} {
		if got := string(appendGRPCTimeout(nil, tc.d)); got != tc.want {
			t.Errorf("appendGRPCTimeout(%s) = %s, want %s", tc.d, got, tc.want)
		}
		field := appendTimeoutField(nil, tc.d)
		if field[0] != 0 { // RFC 7541, 6.2.2
			t.Errorf("the field of %s starts with %#x, want 0 (a literal without indexing, a new name)", tc.d, field[0])
		}
		got, err := hpack.NewDecoder(4096, nil).DecodeFull(field)
		if want := []hpack.HeaderField{{Name: "grpc-timeout", Value: tc.want}}; err != nil || !slices.Equal(got, want) {
			t.Errorf("the field of %s decodes to %v, %v; want %v", tc.d, got, err, want)
		}
	}
}

// The header blocks h2Conn sends decode, at a server that follows them, to
// the call's fields, whatever came before: a method's first call, its
// later calls (a kept block of references), another method, a deadline or
// none, and the server resizing its table, which the next block must
// announce before anything else (RFC 7541, 4.2).
func TestRequestHeaderBlocks(t *testing.T) {
	bw := bufio.NewWriter(io.Discard)
	c := &h2Conn{authority: "127.0.0.1:8081", bw: bw, wfr: http2.NewFramer(bw, nil)}
	c.henc = hpack.NewEncoder(&c.hbuf)
	server := hpack.NewDecoder(4096, nil)
	const a, b = "/a.A/Call", "/b.B/Call"
	for i, step := range []struct {
		method    string
		timeout   time.Duration
		tableSize uint32 // > 0: the server's SETTINGS_HEADER_TABLE_SIZE before the call
		kept      bool   // the block is kept after the call
	}{
		{method: a, timeout: time.Second},
		{method: a, timeout: time.Second, kept: true},
		{method: a, timeout: 2 * time.Second, kept: true},
		{method: a, kept: true},
		{method: b, timeout: time.Second},
		{method: b, timeout: time.Second, kept: true},
		{method: a, timeout: time.Second, kept: true}, // a's fields are still in the table
		{method: a, timeout: time.Second, tableSize: 64},
		{method: a, timeout: time.Second}, // a's fields do not all fit in 64 bytes
		{method: b, tableSize: 4096},
		{method: b, kept: true},
	} {
		if step.tableSize > 0 {
			if err := c.settings(settingsFrame(t, http2.Setting{ID: http2.SettingHeaderTableSize, Val: step.tableSize})); err != nil {
				t.Fatal(err)
			}
		}
		block := slices.Clone(c.requestHeaders(step.method))
		if step.tableSize > 0 && (len(block) == 0 || block[0]&0xe0 != 0x20) {
			t.Errorf("call %d: the block after a table size of %d starts with %x, want a size update", i, step.tableSize, block)
		}
		if step.timeout > 0 {
			block = appendTimeoutField(block, step.timeout)
		}
		got, err := server.DecodeFull(block)
		if err != nil {
			t.Fatalf("call %d (%s): the server cannot decode the block: %v", i, step.method, err)
		}
		want := []hpack.HeaderField{
			{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
			{Name: ":path", Value: step.method}, {Name: ":authority", Value: c.authority},
			{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
			{Name: "user-agent", Value: userAgent},
		}
		if step.timeout > 0 {
			want = append(want, hpack.HeaderField{Name: "grpc-timeout", Value: string(appendGRPCTimeout(nil, step.timeout))})
		}
		if !slices.Equal(got, want) {
			t.Errorf("call %d: the server reads %v, want %v", i, got, want)
		}
		if kept := c.hkept.block != nil; kept != step.kept {
			t.Errorf("call %d: block kept %v, want %v", i, kept, step.kept)
		}
	}
}

// settingsFrame is a SETTINGS frame holding settings, as a framer reads it.
func settingsFrame(t *testing.T, settings ...http2.Setting) *http2.SettingsFrame {
	t.Helper()
	var buf bytes.Buffer
	if err := http2.NewFramer(&buf, nil).WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	f, err := http2.NewFramer(nil, &buf).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	return f.(*http2.SettingsFrame)
}

// A grpc-go server hears h2Conn's calls and h2Conn reads its answers
// whatever the server's header table: its default, none at all, or one
// too small for a call's fields; with calls of two methods in turn on one
// connection, and trailers that take more than one frame.
func TestH2ConnHeaderTables(t *testing.T) {
	const missing = "/envoy.service.ratelimit.v3.RateLimitService/Missing"
	for _, tc := range []struct {
		name string
		opts []grpc.ServerOption
	}{
		{"default table", nil},
		{"no table", []grpc.ServerOption{grpc.HeaderTableSize(0)}},
		{"64-byte table", []grpc.ServerOption{grpc.HeaderTableSize(64)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lis := listen(t)
			serveH2(t, lis, tc.opts...)
			s := &h2Slot{addr: lis.Addr().String(), timeout: timing.Patience}
			defer s.close()
			var k h2Caller
			for i, step := range []struct {
				method, value string
				code          uint64
				status        codes.Code
			}{
				{rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, "1", 1, codes.OK},
				{rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, "2", 2, codes.OK},
				{rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, "1", 1, codes.OK},
				{missing, "1", 0, codes.Unimplemented},
				{rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, "2", 2, codes.OK},
				{missing, "1", 0, codes.Unimplemented},
				{missing, "1", 0, codes.Unimplemented},
				{rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, "long", 0, codes.ResourceExhausted},
				{rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, "1", 1, codes.OK},
			} {
				req := rlsRequest{domain: "d", key: "k", value: []byte(step.value)}
				var a rlsAnswer
				err := k.invoke(t.Context(), s, timing.Patience, step.method, &req, &a)
				if status.Code(err) != step.status || a.code != step.code {
					t.Fatalf("call %d (%s, %s): code %d, %v; want code %d, %v", i, step.method, step.value, a.code, err, step.code, step.status)
				}
				if step.value == "long" && status.Convert(err).Message() != longMessage {
					t.Fatalf("call %d: a message of %d bytes, want the %d sent", i, len(status.Convert(err).Message()), len(longMessage))
				}
			}
		})
	}
}

// A stream the server cancels once the call's deadline has passed is the
// deadline (the server's own grpc-timeout fired first); any other reset
// is the server's doing.
func TestStreamResetAtTheDeadline(t *testing.T) {
	past, future := time.Now().Add(-time.Millisecond), time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name     string
		deadline time.Time
		err      error
		want     codes.Code
	}{
		{"cancelled past the deadline", past, &streamReset{code: http2.ErrCodeCancel}, codes.DeadlineExceeded},
		{"cancelled before the deadline", future, &streamReset{code: http2.ErrCodeCancel}, codes.Unavailable},
		{"cancelled without a deadline", time.Time{}, &streamReset{code: http2.ErrCodeCancel}, codes.Unavailable},
		{"refused past the deadline", past, &streamReset{code: http2.ErrCodeRefusedStream}, codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := deadlineReset(tc.deadline, tc.err)
			if err == nil {
				err = tc.err
			}
			if got := status.Code(err); got != tc.want {
				t.Fatalf("%v: code %v, want %v", err, got, tc.want)
			}
		})
	}
}
