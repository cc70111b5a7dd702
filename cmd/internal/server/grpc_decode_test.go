package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// rawCodec sends a []byte as the message exactly as it is, so that a test
// can put any bytes on the wire, and decodes answers as protobuf.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("rawCodec sends []byte, not %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

func (rawCodec) Name() string { return "proto" }

// shouldRateLimitRaw calls ShouldRateLimit with body as the request's bytes.
func shouldRateLimitRaw(t *testing.T, conn *grpc.ClientConn, body []byte) (*rlsv3.RateLimitResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
	defer cancel()
	resp := new(rlsv3.RateLimitResponse)
	err := conn.Invoke(ctx, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, body, resp, grpc.ForceCodecV2(rawCodec{}))
	return resp, err
}

// Field numbers of RateLimitRequest and of its descriptors' entries.
const (
	fieldDomain      = 1
	fieldDescriptors = 2
	fieldHitsAddend  = 3
	fieldEntries     = 1
	fieldKey         = 1
	fieldValue       = 2
)

// wire builds protobuf bytes by hand, so that they can be wrong.
type wire []byte

func (w wire) str(num protowire.Number, s string) wire {
	return protowire.AppendString(protowire.AppendTag(w, num, protowire.BytesType), s)
}

func (w wire) msg(num protowire.Number, m wire) wire {
	return protowire.AppendBytes(protowire.AppendTag(w, num, protowire.BytesType), m)
}

func (w wire) varint(num protowire.Number, v uint64) wire {
	return protowire.AppendVarint(protowire.AppendTag(w, num, protowire.VarintType), v)
}

func (w wire) tag(num protowire.Number, typ protowire.Type) wire {
	return protowire.AppendTag(w, num, typ)
}

func (w wire) uvarint(v uint64) wire { return protowire.AppendVarint(w, v) }

// raw appends bytes as they are.
func (w wire) raw(b ...byte) wire { return append(w, b...) }

// entry is a descriptor with one entry.
func entry(key, value string) wire {
	return wire{}.msg(fieldEntries, wire{}.str(fieldKey, key).str(fieldValue, value))
}

// valid is a well-formed request for the tests' policy.
func valid() wire { return wire{}.str(fieldDomain, "api").msg(fieldDescriptors, entry("user", "ann")) }

func marshal(t *testing.T, m proto.Message) wire {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGRPCMalformedRequests: whatever bytes come in place of a
// RateLimitRequest, the answer is InvalidArgument naming the problem, in a
// message that stays short whatever the size of the input.
func TestGRPCMalformedRequests(t *testing.T) {
	h := newHarness(t, setup{})
	long := strings.Repeat("x", 100_000)
	withHits := func(hits uint64) wire {
		d := rdesc("user", "ann")
		d.HitsAddend = wrapperspb.UInt64(hits)
		return marshal(t, rreq(d))
	}
	for _, tc := range []struct {
		name string
		body wire
		want string // in the status message
	}{
		// Bytes that are not protobuf.
		{"truncated varint", valid().tag(fieldHitsAddend, protowire.VarintType).raw(0x80), "malformed RateLimitRequest"},
		{"varint of 11 bytes", valid().tag(fieldHitsAddend, protowire.VarintType).raw(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), "malformed RateLimitRequest"},
		{"length past the end", valid().tag(fieldDomain, protowire.BytesType).raw(5, 'a', 'b'), "malformed RateLimitRequest"},
		{"huge declared length", valid().tag(fieldDomain, protowire.BytesType).uvarint(1 << 62), "malformed RateLimitRequest"},
		{"huge length in a descriptor", wire{}.str(fieldDomain, "api").msg(fieldDescriptors, wire{}.tag(fieldEntries, protowire.BytesType).uvarint(1<<40)), "malformed RateLimitRequest"},
		{"wire type 7", valid().tag(fieldDomain, 7), "malformed RateLimitRequest"},
		{"end group without a start", valid().tag(9, protowire.EndGroupType), "malformed RateLimitRequest"},
		{"field number 0", valid().raw(0x00, 0x01), "malformed RateLimitRequest"},
		{"invalid UTF-8 in the domain", wire{}.str(fieldDomain, "ap\xffi").msg(fieldDescriptors, entry("user", "ann")), "field domain: invalid UTF-8"},
		{"invalid UTF-8 in an entry", wire{}.str(fieldDomain, "api").msg(fieldDescriptors, entry("user", long+"\xc3")), "descriptors[0]: entries[0]: field value: invalid UTF-8"},
		{"noise", wire("\xde\xad\xbe\xef" + long), "malformed RateLimitRequest"},
		// Protobuf that decodes, to a request that is not one. (A known field
		// of the wrong wire type is an unknown field to protobuf: the domain
		// is then missing.)
		{"wrong wire type", wire{}.varint(fieldDomain, 1).msg(fieldDescriptors, entry("user", "ann")), "domain is empty"},
		{"nothing", wire{}, "domain is empty"},
		{"no descriptors", wire{}.str(fieldDomain, "api"), "descriptors is empty"},
		{"empty descriptor", wire{}.str(fieldDomain, "api").msg(fieldDescriptors, wire{}), "descriptors[0]: no entries"},
		{"empty entry key", wire{}.str(fieldDomain, "api").msg(fieldDescriptors, entry("", "ann")), "descriptors[0]: entries[0]: key is empty"},
		{"hits_addend one above the maximum", withHits(1<<32 + 1), "hits_addend 4294967297 above the maximum 4294967296"},
		{"hits_addend at uint64's maximum", withHits(1<<64 - 1), "above the maximum"},
		{"unit out of the enum", marshal(t, rreq(&ratelimitv3.RateLimitDescriptor{
			Entries: rdesc("user", "ann").Entries,
			Limit:   &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit(99)},
		})), "limit override: unit 99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := shouldRateLimitRaw(t, h.conn, tc.body)
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("got %v %q, want InvalidArgument naming %q", st.Code(), st.Message(), tc.want)
			}
			if len(st.Message()) > 200 {
				t.Fatalf("a message of %d bytes: the input is echoed: %.200q...", len(st.Message()), st.Message())
			}
		})
	}
	// The same connection still decides.
	resp, err := shouldRateLimitRaw(t, h.conn, valid())
	if err != nil || resp.GetOverallCode() != OK {
		t.Fatalf("a valid request after the bad ones: %v %v", resp, err)
	}
}

// TestGRPCReflectionDescribesRLS: the service registered by hand is still
// described by reflection, as generated code registers it.
func TestGRPCReflectionDescribesRLS(t *testing.T) {
	h := newHarness(t, setup{})
	ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(h.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	symbol := "envoy.service.ratelimit.v3.RateLimitService"
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if files := resp.GetFileDescriptorResponse().GetFileDescriptorProto(); len(files) == 0 {
		t.Fatalf("no file describes %s: %v", symbol, resp)
	}
}

// FuzzGRPCShouldRateLimit: whatever bytes come as a ShouldRateLimit
// request over a real connection, the answer is a decision or
// InvalidArgument, never a panic or an Internal error.
func FuzzGRPCShouldRateLimit(f *testing.F) {
	for _, seed := range []wire{
		valid(),
		valid().varint(fieldHitsAddend, 1<<32-1),
		wire{}.str(fieldDomain, "api").msg(fieldDescriptors, entry("path", "/blocked")).msg(fieldDescriptors, entry("tenant", "a")),
		wire{}.str(fieldDomain, "api\xff").msg(fieldDescriptors, entry("user", "ann")),
		valid().tag(fieldDomain, protowire.BytesType).uvarint(1 << 62),
		valid().tag(fieldHitsAddend, protowire.VarintType).raw(0x80),
		wire{}, wire("\x00"),
	} {
		f.Add([]byte(seed))
	}
	conn := grpcConn(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := shouldRateLimitRaw(t, conn, body)
		switch code := status.Code(err); code {
		case codes.OK:
			if resp.GetOverallCode() == rlsv3.RateLimitResponse_UNKNOWN {
				t.Fatalf("%q: a decision without a code: %v", body, resp)
			}
		case codes.InvalidArgument:
		default:
			t.Fatalf("%q: %v", body, err)
		}
	})
}
