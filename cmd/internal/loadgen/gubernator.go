package loadgen

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// gubernator's V1 service (github.com/gubernator-io/gubernator,
// gubernator.proto, package pb.gubernator). Its messages are written and read
// here with protowire rather than its generated types, so that neither
// Floodgate nor its commands depend on gubernator's module.
const gubernatorMethod = "/pb.gubernator.V1/GetRateLimits"

// Field numbers and enum values of gubernator.proto.
const (
	// GetRateLimitsReq and GetRateLimitsResp: repeated requests / responses.
	guberListField protowire.Number = 1

	// RateLimitReq.
	guberReqName      protowire.Number = 1
	guberReqUniqueKey protowire.Number = 2
	guberReqHits      protowire.Number = 3
	guberReqLimit     protowire.Number = 4
	guberReqDuration  protowire.Number = 5 // milliseconds
	guberReqAlgorithm protowire.Number = 6
	guberReqBehavior  protowire.Number = 7
	guberReqBurst     protowire.Number = 8

	// RateLimitResp.
	guberRespStatus protowire.Number = 1
	guberRespError  protowire.Number = 5

	// Algorithm.
	guberTokenBucket = 0
	guberLeakyBucket = 1

	// Status.
	guberUnderLimit = 0
	guberOverLimit  = 1
)

// errGubernatorResponse marks a GetRateLimitsResp this package cannot read.
var errGubernatorResponse = errors.New("malformed gubernator GetRateLimitsResp")

// guberRequest is the one RateLimitReq of a GetRateLimitsReq. Behavior is
// left at its zero, BATCHING, which is what a caller gets by default.
type guberRequest struct {
	name      string
	uniqueKey []byte // the caller's reusable buffer; read only while marshalling
	hits      int64
	limit     int64
	duration  int64 // milliseconds
	algorithm int64
	burst     int64
}

// appendRateLimitReq appends the RateLimitReq message itself, fields in
// number order and zero values omitted, as proto3's own encoder writes them.
func (r *guberRequest) appendRateLimitReq(b []byte) []byte {
	b = protowire.AppendTag(b, guberReqName, protowire.BytesType)
	b = protowire.AppendString(b, r.name)
	b = protowire.AppendTag(b, guberReqUniqueKey, protowire.BytesType)
	b = protowire.AppendBytes(b, r.uniqueKey)
	for _, f := range [...]struct {
		num protowire.Number
		v   int64
	}{
		{guberReqHits, r.hits}, {guberReqLimit, r.limit}, {guberReqDuration, r.duration},
		{guberReqAlgorithm, r.algorithm}, {guberReqBurst, r.burst},
	} {
		if f.v != 0 {
			b = protowire.AppendTag(b, f.num, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(f.v))
		}
	}
	return b
}

// appendGetRateLimitsReq appends the whole request: one RateLimitReq, length
// prefixed, as field 1.
func (r *guberRequest) appendGetRateLimitsReq(b []byte) []byte {
	var scratch [128]byte
	inner := r.appendRateLimitReq(scratch[:0])
	b = protowire.AppendTag(b, guberListField, protowire.BytesType)
	return protowire.AppendBytes(b, inner)
}

// guberResponse is what a call needs from a GetRateLimitsResp: the status of
// its single RateLimitResp and gubernator's error text for it, if any.
type guberResponse struct {
	status int64
	err    string
}

// parseGetRateLimitsResp reads a GetRateLimitsResp that must hold exactly one
// RateLimitResp. Unknown fields are skipped, as proto3 readers do; anything
// that is not well-formed protobuf is an error wrapping
// errGubernatorResponse.
func parseGetRateLimitsResp(b []byte) (guberResponse, error) {
	var resp guberResponse
	n := 0
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != guberListField {
			return nil
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("responses (field 1) has wire type %d, want bytes", typ)
		}
		n++
		r, err := parseRateLimitResp(v)
		resp = r
		return err
	})
	switch {
	case err != nil:
		return guberResponse{}, fmt.Errorf("%w: %w", errGubernatorResponse, err)
	case n != 1:
		return guberResponse{}, fmt.Errorf("%w: %d responses to one request", errGubernatorResponse, n)
	}
	return resp, nil
}

func parseRateLimitResp(b []byte) (guberResponse, error) {
	var r guberResponse
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		var want protowire.Type
		switch num {
		case guberRespStatus:
			want = protowire.VarintType
		case guberRespError:
			want = protowire.BytesType
		default:
			return nil
		}
		if typ != want {
			return fmt.Errorf("RateLimitResp field %d has wire type %d, want %d", num, typ, want)
		}
		if num == guberRespError {
			r.err = string(v)
			return nil
		}
		s, k := protowire.ConsumeVarint(v)
		if k < 0 {
			return fmt.Errorf("RateLimitResp status: %w", protowire.ParseError(k))
		}
		r.status = int64(s)
		return nil
	})
	return r, err
}

// appendMessage appends the whole GetRateLimitsReq (see wireCodec).
func (r *guberRequest) appendMessage(b []byte) []byte { return r.appendGetRateLimitsReq(b) }

// sizeHint is about the length of the request.
func (r *guberRequest) sizeHint() int { return 64 + len(r.name) + len(r.uniqueKey) }

// readMessage reads a GetRateLimitsResp (see wireCodec).
func (r *guberResponse) readMessage(b []byte) error {
	resp, err := parseGetRateLimitsResp(b)
	*r = resp
	return err
}

// guberLimit turns the --limit of a gubernator run into RateLimitReq's
// limit, duration, algorithm and burst. gubernator counts in milliseconds and
// has two algorithms: its token bucket (limit tokens, all restored one
// duration after the first hit: it has no separate burst) and its leaky
// bucket (limit per duration leaking, burst capacity).
func guberLimit(l Limit) (guberRequest, error) {
	r := guberRequest{limit: l.Rate, burst: l.Burst}
	switch l.Algorithm {
	case "token_bucket":
		r.algorithm = guberTokenBucket
		if l.Burst != 0 && l.Burst != l.Rate {
			return r, fmt.Errorf("gubernator's token bucket has no burst apart from its limit; got burst=%d with rate %d", l.Burst, l.Rate)
		}
		r.burst = 0
	case "leaky_bucket":
		r.algorithm = guberLeakyBucket
	default:
		return r, fmt.Errorf("gubernator has only token_bucket and leaky_bucket, not %s", l.Algorithm)
	}
	if l.Period%time.Millisecond != 0 {
		return r, fmt.Errorf("gubernator counts durations in whole milliseconds; %s is not one", l.Period)
	}
	r.duration = l.Period.Milliseconds()
	return r, nil
}

// gubernatorTransport shares the connections of the grpc target; only the
// calls differ.
type gubernatorTransport struct {
	*grpcTransport
	req guberRequest // the fields every call has in common
}

func newGubernator(ctx context.Context, p plan) (*gubernatorTransport, error) {
	req, err := guberLimit(*p.limit) // resolve checked it
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	req.name, req.hits = p.Domain, p.Cost
	g, err := newGRPC(ctx, p)
	if err != nil {
		return nil, err
	}
	return &gubernatorTransport{grpcTransport: g, req: req}, nil
}

func (t *gubernatorTransport) client(worker int) client {
	c := &gubernatorClient{
		conn:    t.conns[worker%len(t.conns)],
		req:     t.req,
		prefix:  len(t.p.DescriptorKey) + 1,
		timeout: t.p.Timeout,
	}
	c.req.uniqueKey = append([]byte(t.p.DescriptorKey+":"), make([]byte, 0, 20)...)
	return c
}

type gubernatorClient struct {
	conn    *h2Slot
	caller  h2Caller
	req     guberRequest
	prefix  int // len("DescriptorKey:"), the start of the value in req.uniqueKey
	resp    guberResponse
	timeout time.Duration
}

// call asks about unique_key "DescriptorKey:key" in the name Domain:
// UNDER_LIMIT is allowed, OVER_LIMIT denied; an error text or another status
// is an error.
func (c *gubernatorClient) call(ctx context.Context, key int) (bool, error) {
	c.req.uniqueKey = strconv.AppendInt(c.req.uniqueKey[:c.prefix], int64(key), 10)
	err := c.caller.invoke(ctx, c.conn, c.timeout, gubernatorMethod, &c.req, &c.resp)
	if err != nil {
		return false, err
	}
	return c.resp.verdict()
}

// verdict classifies a response as the other targets do.
func (r guberResponse) verdict() (bool, error) {
	if r.err != "" {
		return false, fmt.Errorf("gubernator answered error %q (status %d)", r.err, r.status)
	}
	switch r.status {
	case guberUnderLimit:
		return true, nil
	case guberOverLimit:
		return false, nil
	default:
		return false, fmt.Errorf("gubernator answered unknown status %d", r.status)
	}
}
