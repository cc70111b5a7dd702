package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"pgregory.net/rapid"
)

// The bytes below are written out by hand from gubernator.proto, so that the
// encoder is checked against the wire format rather than against itself.
func TestGubernatorRequestBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  guberRequest
		want []byte
	}{
		{
			name: "token bucket: algorithm and behavior at their zero, so omitted",
			req:  guberRequest{name: "bench", uniqueKey: []byte("user:42"), hits: 1, limit: 1000000, duration: 60000},
			want: concat(
				[]byte{0x0a, 26},                 // GetRateLimitsReq.requests (1), 26 bytes
				[]byte{0x0a, 5}, []byte("bench"), // name (1)
				[]byte{0x12, 7}, []byte("user:42"), // unique_key (2)
				[]byte{0x18, 1},                // hits (3) = 1
				[]byte{0x20, 0xc0, 0x84, 0x3d}, // limit (4) = 1,000,000
				[]byte{0x28, 0xe0, 0xd4, 0x03}, // duration (5) = 60,000 ms
			),
		},
		{
			name: "leaky bucket with a burst",
			req:  guberRequest{name: "n", uniqueKey: []byte("k:0"), hits: 2, limit: 5, duration: 1000, algorithm: guberLeakyBucket, burst: 3},
			want: concat(
				[]byte{0x0a, 19}, // 3+5+2+2+3+2+2
				[]byte{0x0a, 1}, []byte("n"),
				[]byte{0x12, 3}, []byte("k:0"),
				[]byte{0x18, 2},
				[]byte{0x20, 5},
				[]byte{0x28, 0xe8, 0x07}, // 1000
				[]byte{0x30, 1},          // algorithm (6) = LEAKY_BUCKET
				[]byte{0x40, 3},          // burst (8)
			),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := wireCodec{}.Marshal(&tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := data.Materialize(); !bytes.Equal(got, tc.want) {
				t.Errorf("encoded\n% x\nwant\n% x", got, tc.want)
			}
		})
	}
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestGubernatorResponse(t *testing.T) {
	// resp wraps RateLimitResp fields in a GetRateLimitsResp.
	resp := func(fields ...[]byte) []byte {
		inner := concat(fields...)
		return concat([]byte{0x0a, byte(len(inner))}, inner)
	}
	var (
		over     = []byte{0x08, 1}                             // status (1) = OVER_LIMIT
		limit    = []byte{0x10, 10}                            // limit (2)
		remain   = []byte{0x18, 9}                             // remaining (3)
		reset    = []byte{0x20, 0x80, 0x80, 0x04}              // reset_time (4)
		metadata = []byte{0x32, 6, 0x0a, 1, 'a', 0x12, 1, 'b'} // metadata (6): {"a": "b"}
		unknown  = []byte{0x3d, 1, 2, 3, 4}                    // field 7, fixed32: skipped
	)
	for _, tc := range []struct {
		name    string
		in      []byte
		allowed bool
		err     string // a fragment of the error; empty: none
		bad     bool   // the error is errGubernatorResponse
	}{
		{name: "UNDER_LIMIT is the zero status, so absent", in: resp(limit, remain, reset), allowed: true},
		{name: "empty RateLimitResp", in: resp(), allowed: true},
		{name: "OVER_LIMIT", in: resp(over, limit, remain, reset, metadata)},
		{name: "unknown fields are skipped", in: concat(resp(over, unknown), []byte{0x10, 7})},
		{name: "gubernator's error text", in: resp(concat([]byte{0x2a, 4}, []byte("boom"))), err: `error "boom"`},
		{name: "unknown status", in: resp([]byte{0x08, 7}), err: "unknown status 7"},
		{name: "no response", in: nil, err: "0 responses", bad: true},
		{name: "two responses", in: concat(resp(), resp(over)), err: "2 responses", bad: true},
		{name: "truncated tag", in: []byte{0x80}, bad: true},
		{name: "length past the end", in: []byte{0x0a, 5, 0x08}, bad: true},
		{name: "truncated status", in: resp([]byte{0x08, 0x80}), bad: true},
		{name: "responses as a varint", in: []byte{0x08, 1}, err: "wire type 0", bad: true},
		{name: "status as bytes", in: resp([]byte{0x0a, 1, 1}), err: "field 1 has wire type 2", bad: true},
		{name: "error as a varint", in: resp([]byte{0x28, 1}), err: "field 5 has wire type 0", bad: true},
		{name: "field number 0", in: []byte{0x00, 1}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r guberResponse
			err := wireCodec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(tc.in)}, &r)
			var allowed bool
			if err == nil {
				allowed, err = r.verdict()
			}
			switch {
			case tc.err == "" && !tc.bad:
				if err != nil || allowed != tc.allowed {
					t.Fatalf("got allowed=%v, %v; want allowed=%v, no error", allowed, err, tc.allowed)
				}
			case err == nil:
				t.Fatalf("got allowed=%v and no error; want an error", allowed)
			case !strings.Contains(err.Error(), tc.err):
				t.Errorf("error %q does not mention %q", err, tc.err)
			case errors.Is(err, errGubernatorResponse) != tc.bad:
				t.Errorf("error %q: errors.Is(errGubernatorResponse) = %v, want %v", err, !tc.bad, tc.bad)
			}
		})
	}
}

// Whatever the bytes, reading them is an answer or an error, never a panic.
func TestGubernatorResponseNeverPanics(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "bytes")
		if r, err := parseGetRateLimitsResp(b); err == nil {
			_, _ = r.verdict()
		}
	})
}

func TestWireCodecRejectsOtherTypes(t *testing.T) {
	if _, err := (wireCodec{}).Marshal("x"); err == nil || !strings.Contains(err.Error(), "string") {
		t.Errorf("Marshal(string): %v, want an error naming the type", err)
	}
	if err := (wireCodec{}).Unmarshal(nil, new(int)); err == nil || !strings.Contains(err.Error(), "*int") {
		t.Errorf("Unmarshal into *int: %v, want an error naming the type", err)
	}
}

func TestGubernatorConfig(t *testing.T) {
	for _, tc := range []struct {
		limit string
		err   string // a fragment; empty: valid
		want  guberRequest
	}{
		{limit: "token_bucket:1000000/1m", want: guberRequest{limit: 1000000, duration: 60000, algorithm: guberTokenBucket}},
		{limit: "token_bucket:10/1s:burst=10", want: guberRequest{limit: 10, duration: 1000, algorithm: guberTokenBucket}},
		{limit: "leaky_bucket:5/1s:burst=3", want: guberRequest{limit: 5, duration: 1000, algorithm: guberLeakyBucket, burst: 3}},
		{limit: "", err: "required by the gubernator target"},
		{limit: "token_bucket:10/1s:burst=20", err: "no burst apart from its limit"},
		{limit: "sliding_window:10/1s", err: "only token_bucket and leaky_bucket"},
		{limit: "fixed_window:10/1s", err: "only token_bucket and leaky_bucket"},
		{limit: "token_bucket:10/1500us", err: "whole milliseconds"},
		{limit: "token_bucket:0/1s", err: "rate"},
	} {
		t.Run(tc.limit, func(t *testing.T) {
			p, err := Config{Target: TargetGubernator, Addr: "127.0.0.1:1051", Limit: tc.limit}.resolve()
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				got, err := guberLimit(*p.limit)
				if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("gubernator fields %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != "Limit" || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("got %v; want a *ConfigError on Limit mentioning %q", err, tc.err)
			}
		})
	}
	// Several connections are a gRPC matter, so gubernator has them too.
	if _, err := (Config{Target: TargetGubernator, Addr: "127.0.0.1:1051", Limit: "token_bucket:1/1s", Concurrency: 4, Conns: 2}).resolve(); err != nil {
		t.Errorf("Conns with the gubernator target: %v", err)
	}
	var ce *ConfigError
	if _, err := (Config{Target: TargetGubernator, Addr: "localhost", Limit: "token_bucket:1/1s"}).resolve(); !errors.As(err, &ce) || ce.Field != "Addr" {
		t.Errorf("gubernator without a port: %v, want a *ConfigError on Addr", err)
	}
}

// rawCodec lets the fake server below see the bytes on the wire.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// guberServer is a real gRPC server that answers GetRateLimits as gubernator
// would shape its answer: OVER_LIMIT for odd keys, UNDER_LIMIT for even ones,
// and gubernator's error text for key 0. It decodes the request with its
// own reading of the wire format and fails the call when it is not what the
// run was configured to send.
type guberServer struct {
	keys  int
	calls atomic.Int64
}

func (s *guberServer) handle(_ any, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	if method != gubernatorMethod {
		return status.Errorf(codes.Unimplemented, "method %s", method)
	}
	var req []byte
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	s.calls.Add(1)
	key, err := s.check(req)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	var inner []byte
	switch {
	case key == 0:
		inner = protowire.AppendTag(inner, guberRespError, protowire.BytesType)
		inner = protowire.AppendString(inner, "field 'namespace' cannot be empty")
	case key%2 == 1:
		inner = protowire.AppendTag(inner, guberRespStatus, protowire.VarintType)
		inner = protowire.AppendVarint(inner, guberOverLimit)
	}
	out := protowire.AppendTag(nil, guberListField, protowire.BytesType)
	out = protowire.AppendBytes(out, inner)
	return stream.SendMsg(&out)
}

// check reads one RateLimitReq and returns the number after "user:".
func (s *guberServer) check(b []byte) (int, error) {
	num, typ, n := protowire.ConsumeTag(b)
	if num != 1 || typ != protowire.BytesType {
		return 0, fmt.Errorf("want one requests field, got field %d type %d", num, typ)
	}
	inner, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return 0, fmt.Errorf("want exactly one RateLimitReq in % x", b)
	}
	got := map[protowire.Number]any{}
	for len(inner) > 0 {
		num, typ, n := protowire.ConsumeTag(inner)
		inner = inner[n:]
		switch typ {
		case protowire.BytesType:
			v, k := protowire.ConsumeString(inner)
			got[num], inner = v, inner[k:]
		case protowire.VarintType:
			v, k := protowire.ConsumeVarint(inner)
			got[num], inner = int64(v), inner[k:]
		default:
			return 0, fmt.Errorf("field %d has wire type %d", num, typ)
		}
	}
	key, _ := got[guberReqUniqueKey].(string)
	delete(got, guberReqUniqueKey)
	want := map[protowire.Number]any{
		guberReqName: DefaultDomain, guberReqHits: int64(DefaultCost), guberReqLimit: int64(100), guberReqDuration: int64(60000),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return 0, fmt.Errorf("RateLimitReq fields %v, want %v", got, want)
	}
	v, ok := strings.CutPrefix(key, DefaultDescriptorKey+":")
	k, err := strconv.Atoi(v)
	if !ok || err != nil || k < 0 || k >= s.keys {
		return 0, fmt.Errorf("unique_key %q is not %s:N with N in 0..%d", key, DefaultDescriptorKey, s.keys-1)
	}
	return k, nil
}

func startGubernator(t *testing.T, s *guberServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(s.handle))
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}

func TestGubernatorRun(t *testing.T) {
	s := &guberServer{keys: 4}
	addr := startGubernator(t, s)
	r, err := Run(t.Context(), patient(Config{Target: TargetGubernator, Addr: addr, Concurrency: 4, Conns: 2,
		Requests: 400, Keys: s.keys, Limit: "token_bucket:100/1m"}))
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.Calls != 400 || s.calls.Load() != 400 {
		t.Fatalf("report counts %d calls, server saw %d; want 400", r.Calls, s.calls.Load())
	}
	// Keys are drawn at random; 400 draws of 4 keys miss none of them.
	if r.Allowed == 0 || r.Denied == 0 || r.Errors == 0 {
		t.Errorf("allowed %d, denied %d, errors %d: want each outcome (keys 2, 1 and 3, 0)", r.Allowed, r.Denied, r.Errors)
	}
	if !strings.Contains(r.FirstError, "cannot be empty") {
		t.Errorf("first error %q, want gubernator's error text", r.FirstError)
	}
}

func TestGubernatorRunAgainstOtherService(t *testing.T) {
	// A ShouldRateLimit server does not have gubernator's method: every
	// call is an error naming it, not a crash or a silent success.
	_, addr := startGRPC(t)
	r, err := Run(t.Context(), patient(Config{Target: TargetGubernator, Addr: addr, Concurrency: 2, Requests: 4,
		Limit: "token_bucket:1/1s"}))
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 4 || !strings.Contains(r.FirstError, "Unimplemented") {
		t.Errorf("errors %d (first %q), want 4 Unimplemented", r.Errors, r.FirstError)
	}
}
