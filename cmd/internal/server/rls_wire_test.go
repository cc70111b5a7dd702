package server

import (
	"reflect"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"pgregory.net/rapid"
)

// The hand-written wire format (rls_wire.go) must read and write exactly
// what protobuf-go does. These tests hold it to that: any bytes read by
// both give the same request or the same error, and every reply written by
// hand decodes to the message the /json path builds.

// checkSameRequest fails unless rlsCall reads b as protobuf-go and fromRLS
// together do: both refuse it, or both give the same error for a message
// that decodes, or the same engine request.
func checkSameRequest(t interface{ Fatalf(string, ...any) }, b []byte) {
	var want rlsv3.RateLimitRequest
	perr := proto.Unmarshal(b, &want)
	var c rlsCall
	c.decode(mem.BufferSlice{mem.SliceBuffer(b)})
	if perr != nil {
		if c.err == nil {
			t.Fatalf("protobuf-go refuses %x (%v); the wire reader reads it", b, perr)
		}
		return
	}
	if c.err != nil {
		t.Fatalf("protobuf-go reads %x; the wire reader refuses it: %v", b, c.err)
	}
	got, gerr := c.request(true)
	wantReq, werr := fromRLS(&want, true)
	switch {
	case (gerr == nil) != (werr == nil):
		t.Fatalf("%x: wire reader's error %v, fromRLS's %v", b, gerr, werr)
	case gerr != nil && gerr.Error() != werr.Error():
		t.Fatalf("%x: wire reader's error %q, fromRLS's %q", b, gerr, werr)
	case gerr == nil && !reflect.DeepEqual(got, wantReq):
		t.Fatalf("%x: wire reader's request\n%+v\nfromRLS's\n%+v", b, got, wantReq)
	}
}

// appendNoise appends an unknown field, or a known one of the wrong wire
// type, which protobuf skips.
func appendNoise(t *rapid.T, b []byte) []byte {
	num := protowire.Number(rapid.IntRange(1, 40).Draw(t, "num"))
	switch rapid.IntRange(0, 3).Draw(t, "type") {
	case 0:
		return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), rapid.Uint64().Draw(t, "varint"))
	case 1:
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "bytes"))
	case 2:
		return protowire.AppendFixed32(protowire.AppendTag(b, num, protowire.Fixed32Type), rapid.Uint32().Draw(t, "fixed32"))
	default:
		b = protowire.AppendTag(b, num, protowire.StartGroupType)
		b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.VarintType), 7)
		return protowire.AppendTag(b, num, protowire.EndGroupType)
	}
}

// genMessage draws a message of up to max fields, each drawn by one of
// fields or as noise.
func genMessage(t *rapid.T, max int, fields ...func(*rapid.T, []byte) []byte) []byte {
	var b []byte
	for range rapid.IntRange(0, max).Draw(t, "fields") {
		if i := rapid.IntRange(0, len(fields)).Draw(t, "field"); i < len(fields) {
			b = fields[i](t, b)
		} else {
			b = appendNoise(t, b)
		}
	}
	return b
}

func strField(num protowire.Number, values ...string) func(*rapid.T, []byte) []byte {
	return func(t *rapid.T, b []byte) []byte {
		return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), rapid.SampledFrom(values).Draw(t, "string"))
	}
}

func varintField(num protowire.Number, values ...uint64) func(*rapid.T, []byte) []byte {
	return func(t *rapid.T, b []byte) []byte {
		return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), rapid.SampledFrom(values).Draw(t, "varint"))
	}
}

func msgField(num protowire.Number, gen func(*rapid.T) []byte) func(*rapid.T, []byte) []byte {
	return func(t *rapid.T, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), gen(t))
	}
}

// genRequest draws a RateLimitRequest on the wire: mostly one that makes
// sense (a domain, descriptors with entries), followed by fields of every
// kind, repeated, out of range, unknown or of the wrong wire type.
func genRequest(t *rapid.T) []byte {
	values := []string{"", "a", "user", "ann", "/api/x", "\xff", "é", string(make([]byte, 1100))}
	wrapper := func(t *rapid.T) []byte {
		return genMessage(t, 2, varintField(1, 0, 1, 5, 1<<32, 1<<32+1, 1<<64-1))
	}
	entry := func(t *rapid.T) []byte { return genMessage(t, 3, strField(1, values...), strField(2, values...)) }
	override := func(t *rapid.T) []byte {
		return genMessage(t, 4, varintField(1, 0, 1, 100, 1<<33+7), varintField(2, 0, 1, 2, 3, 4, 5, 6, 99, 1<<63),
			msgField(3, wrapper))
	}
	descriptor := func(t *rapid.T) []byte {
		var b []byte
		for range rapid.IntRange(1, 3).Draw(t, "sound entries") {
			b = protowire.AppendBytes(protowire.AppendTag(b, 1, protowire.BytesType),
				protowire.AppendString(protowire.AppendTag([]byte{0x0a, 4, 'u', 's', 'e', 'r'}, 2, protowire.BytesType), "ann"))
		}
		return append(b, genMessage(t, 5, msgField(1, entry), msgField(2, override), msgField(3, wrapper),
			varintField(4, 0, 1, 2))...)
	}
	var b []byte
	if rapid.IntRange(0, 9).Draw(t, "domain") > 0 {
		b = protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), "api")
	}
	for range rapid.IntRange(1, 3).Draw(t, "descriptors") {
		b = msgField(2, descriptor)(t, b)
	}
	return append(b, genMessage(t, 4, strField(1, "", "api", "\xc3"), msgField(2, descriptor),
		varintField(3, 0, 1, 3, 1<<32+2))...)
}

func TestWireReadsRequestsAsProtobuf(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { checkSameRequest(t, genRequest(t)) })
}

// Requests that protobuf-go writes, including the ones with every field
// set, read the same.
func TestWireReadsMarshalledRequests(t *testing.T) {
	for _, req := range wireSeeds() {
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		checkSameRequest(t, b)
	}
}

func wireSeeds() []*rlsv3.RateLimitRequest {
	d := func(kv ...string) *ratelimitv3.RateLimitDescriptor {
		out := &ratelimitv3.RateLimitDescriptor{}
		for i := 0; i+1 < len(kv); i += 2 {
			out.Entries = append(out.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	full := d("path", "/api", "user", "ann")
	full.HitsAddend = wrapperspb.UInt64(3)
	full.IsNegativeHits = true
	full.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 10, Unit: typev3.RateLimitUnit_MINUTE,
		UnitMultiplier: wrapperspb.UInt32(5)}
	many := &rlsv3.RateLimitRequest{Domain: "api"}
	for range 9 { // more than rlsCall's buffers hold
		many.Descriptors = append(many.Descriptors, d("a", "1", "b", "2"))
	}
	return []*rlsv3.RateLimitRequest{
		{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{d("user", "ann")}},
		{Domain: "api", HitsAddend: 7, Descriptors: []*ratelimitv3.RateLimitDescriptor{full, d("k", "")}},
		many,
		{},
	}
}

// FuzzWireRequest compares the wire reader with protobuf-go on any bytes
// (go test -fuzz FuzzWireRequest ./cmd/internal/server).
func FuzzWireRequest(f *testing.F) {
	for _, req := range wireSeeds() {
		b, _ := proto.Marshal(req)
		f.Add(b)
	}
	f.Add([]byte("\x0a\x03api\x12\x00"))
	f.Fuzz(func(t *testing.T, b []byte) { checkSameRequest(t, b) })
}

// Every reply written by hand decodes to the message /json builds from it,
// and is as long as size says.
func TestWireWritesRepliesAsProtobuf(t *testing.T) {
	codes := []rlsv3.RateLimitResponse_Code{0, 1, 2}
	rapid.Check(t, func(t *rapid.T) {
		r := &reply{code: rapid.SampledFrom(codes).Draw(t, "code")}
		for range rapid.IntRange(0, 6).Draw(t, "statuses") {
			r.statuses = append(r.statuses, replyStatus{
				code:       rapid.SampledFrom(codes).Draw(t, "status code"),
				limited:    rapid.Bool().Draw(t, "limited"),
				name:       rapid.SampledFrom([]string{"", "per_user", string(make([]byte, 300))}).Draw(t, "name"),
				perUnit:    rapid.Uint32().Draw(t, "per unit"),
				unit:       rlsv3.RateLimitResponse_RateLimit_Unit(rapid.IntRange(0, 7).Draw(t, "unit")),
				remaining:  rapid.Uint32().Draw(t, "remaining"),
				untilReset: time.Duration(rapid.Int64Range(0, 1<<62).Draw(t, "until reset")),
			})
		}
		for range rapid.IntRange(0, 3).Draw(t, "headers") {
			r.headers = append(r.headers, replyHeader{
				rapid.SampledFrom([]string{"", "RateLimit", "X-Long"}).Draw(t, "key"),
				rapid.StringN(0, 200, -1).Draw(t, "value"),
			})
		}
		b := appendReply(nil, r)
		if len(b) != r.size() {
			t.Fatalf("wrote %d bytes, size says %d", len(b), r.size())
		}
		var got rlsv3.RateLimitResponse
		if err := proto.Unmarshal(b, &got); err != nil {
			t.Fatalf("protobuf-go cannot read the reply: %v", err)
		}
		if want := r.message(); !proto.Equal(&got, want) {
			t.Fatalf("wrote\n%v\nwant\n%v", &got, want)
		}
	})
}
