package loadgen

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
)

// userAgent identifies the load in the service's logs.
const userAgent = "floodgate-bench"

type grpcTransport struct {
	p     plan
	conns []*h2Slot
}

// newGRPC opens Conns HTTP/2 connections (see h2Conn), so that the first
// calls are not charged the TCP and HTTP/2 handshakes. A connection that
// fails is not an error here: its calls will fail and be counted, as with
// HTTP, and it is dialled again as they come.
func newGRPC(ctx context.Context, p plan) (*grpcTransport, error) {
	t := &grpcTransport{p: p}
	for range p.Conns {
		// Plaintext: the benchmark targets a service on a trusted network,
		// normally loopback or a sidecar, as Envoy's RLS client does.
		s := &h2Slot{addr: p.Addr, timeout: p.Timeout}
		s.conn(ctx) // its error is the calls'
		t.conns = append(t.conns, s)
	}
	return t, nil
}

func (t *grpcTransport) client(worker int) client {
	return &grpcClient{
		conn: t.conns[worker%len(t.conns)],
		req: rlsRequest{domain: t.p.Domain, key: t.p.DescriptorKey, hits: uint32(t.p.Cost),
			value: make([]byte, 0, 20)},
		timeout: t.p.Timeout,
	}
}

func (t *grpcTransport) close() {
	for _, cc := range t.conns {
		cc.close()
	}
}

type grpcClient struct {
	conn    *h2Slot
	caller  h2Caller
	req     rlsRequest // its value rewritten per call
	resp    rlsAnswer
	timeout time.Duration
}

func (c *grpcClient) call(ctx context.Context, key int) (bool, error) {
	c.req.value = strconv.AppendInt(c.req.value[:0], int64(key), 10)
	err := c.caller.invoke(ctx, c.conn, c.timeout, rlsv3.RateLimitService_ShouldRateLimit_FullMethodName, &c.req, &c.resp)
	if err != nil {
		return false, err
	}
	switch code := rlsv3.RateLimitResponse_Code(c.resp.code); code {
	case rlsv3.RateLimitResponse_OK:
		return true, nil
	case rlsv3.RateLimitResponse_OVER_LIMIT:
		return false, nil
	default:
		return false, fmt.Errorf("ShouldRateLimit answered overall_code %s", code)
	}
}

// rlsRequest is a RateLimitRequest of one descriptor of one entry, key =
// value, in domain.
type rlsRequest struct {
	domain, key string
	value       []byte // the caller's reusable buffer; read only while marshalling
	hits        uint32
}

// Field numbers of envoy.service.ratelimit.v3.RateLimitRequest and
// RateLimitResponse, and of the descriptor's messages.
const (
	rlsDomain      protowire.Number = 1 // RateLimitRequest
	rlsDescriptors protowire.Number = 2
	rlsHitsAddend  protowire.Number = 3
	rlsEntries     protowire.Number = 1 // RateLimitDescriptor
	rlsEntryKey    protowire.Number = 1 // RateLimitDescriptor.Entry
	rlsEntryValue  protowire.Number = 2
	rlsOverallCode protowire.Number = 1 // RateLimitResponse
)

func (r *rlsRequest) sizeHint() int { return 16 + len(r.domain) + len(r.key) + len(r.value) }

func (r *rlsRequest) appendMessage(b []byte) []byte {
	entry := protowire.SizeTag(rlsEntryKey) + protowire.SizeBytes(len(r.key)) +
		protowire.SizeTag(rlsEntryValue) + protowire.SizeBytes(len(r.value))
	descriptor := protowire.SizeTag(rlsEntries) + protowire.SizeBytes(entry)
	b = protowire.AppendString(protowire.AppendTag(b, rlsDomain, protowire.BytesType), r.domain)
	b = protowire.AppendVarint(protowire.AppendTag(b, rlsDescriptors, protowire.BytesType), uint64(descriptor))
	b = protowire.AppendVarint(protowire.AppendTag(b, rlsEntries, protowire.BytesType), uint64(entry))
	b = protowire.AppendString(protowire.AppendTag(b, rlsEntryKey, protowire.BytesType), r.key)
	b = protowire.AppendBytes(protowire.AppendTag(b, rlsEntryValue, protowire.BytesType), r.value)
	if r.hits != 0 {
		b = protowire.AppendVarint(protowire.AppendTag(b, rlsHitsAddend, protowire.VarintType), uint64(r.hits))
	}
	return b
}

// errRLSResponse marks a RateLimitResponse this package cannot read.
var errRLSResponse = errors.New("malformed RateLimitResponse")

// rlsAnswer is what a call needs of a RateLimitResponse: its overall code.
type rlsAnswer struct{ code uint64 }

func (a *rlsAnswer) readMessage(b []byte) error {
	a.code = 0
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != rlsOverallCode || typ != protowire.VarintType { // skipped, as protobuf skips them
			return nil
		}
		code, n := protowire.ConsumeVarint(v)
		if n < 0 {
			return protowire.ParseError(n)
		}
		a.code = code
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", errRLSResponse, err)
	}
	return nil
}
