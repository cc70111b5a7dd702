package server

import (
	"fmt"
	"time"
	"unicode/utf8"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// ShouldRateLimit is the one call a busy Envoy makes for every request it
// serves, so the gRPC server reads its request and writes its answer in
// protobuf's wire format by hand: the request straight into the engine's
// (rlsCall), the answer straight from plain values (reply), with no
// message objects and no reflection in between. A request takes a few
// allocations instead of a dozen and a half, which a garbage-collected
// server pays for twice. The result is the same as protobuf-go's: the
// tests decode with both and compare (rls_wire_test.go), unknown fields
// and known fields of an unexpected wire type are skipped as protobuf-go
// skips them, and strings must be valid UTF-8 as proto3 requires. Every
// other message (health, reflection) goes through grpc-go's own codec.

// rlsCodec is the gRPC server's codec: protobuf, with rlsCall and reply
// read and written by hand. A reply goes back to replies once written.
type rlsCodec struct {
	proto   encoding.CodecV2
	replies *replyPool
}

func newRLSCodec(replies *replyPool) rlsCodec {
	return rlsCodec{proto: encoding.GetCodecV2(grpcproto.Name), replies: replies}
}

// Name is protobuf's: the codec speaks it.
func (rlsCodec) Name() string { return grpcproto.Name }

// Marshal writes a reply by hand, anything else as grpc-go does. The
// reply is not read again once written: grpc-go passes the message on only
// to stats handlers, which read the sizes it reports with it, and the
// server's (otelgrpc's) reads nothing of a message that is not protobuf's.
// So it goes back to the pool here.
func (c rlsCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*reply); ok {
		b := appendReply(make([]byte, 0, r.size()), r)
		c.replies.put(r)
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return c.proto.Marshal(v)
}

// Unmarshal reads an rlsCall by hand, anything else as grpc-go does. An
// rlsCall that does not decode keeps its error instead of returning it, so
// that the caller hears InvalidArgument (grpc-go makes every error of a
// codec Internal).
func (c rlsCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if call, ok := v.(*rlsCall); ok {
		call.decode(data)
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

// rlsCall is a ShouldRateLimit request as rlsCodec reads it. Its buffers
// hold an ordinary request, so that reading one allocates one string for
// all of the request's strings; the rlsCall itself is reused (rlsHandler).
type rlsCall struct {
	raw rlsRaw
	err error // why the request did not decode; nil when it did

	rawBuf   [4]rawDescriptor
	descBuf  [4]engine.Descriptor
	entryBuf [8]policy.Entry
	entries  []policy.Entry // the descriptors' entries, in order
}

// request is the engine's request, or why the call has none.
func (c *rlsCall) request(atomic bool) (engine.Request, error) {
	if c.err != nil {
		return engine.Request{}, c.err
	}
	descs := c.descBuf[:0]
	if len(c.raw.descs) > len(c.descBuf) {
		descs = make([]engine.Descriptor, len(c.raw.descs))
	}
	return c.raw.request(atomic, descs[:len(c.raw.descs)])
}

func (c *rlsCall) decode(data mem.BufferSlice) {
	var b []byte
	if len(data) == 1 {
		b = data[0].ReadOnlyData()
	} else {
		b = data.Materialize()
	}
	msg := string(b) // every string of the request is a part of this one
	c.err = nil
	c.raw = rlsRaw{descs: c.rawBuf[:0]}
	c.entries = c.entryBuf[:0]
	if err := c.readRequest(wire{b: b, msg: msg}, 0, len(b)); err != nil {
		c.err = fmt.Errorf("malformed RateLimitRequest (%d bytes): %w", len(b), err)
	}
}

// wire is a message's bytes, b, and the same as a string, msg, from which
// string fields are cut without copying.
type wire struct {
	b   []byte
	msg string
}

// field is one field of a message on the wire: its number and type, and
// its value, a varint or the bounds of a length-delimited one.
type field struct {
	num        protowire.Number
	typ        protowire.Type
	varint     uint64
	start, end int
}

func (f field) is(num protowire.Number, typ protowire.Type) bool { return f.num == num && f.typ == typ }

// next reads the field at i, which must end by end, and returns it and
// where the next one starts. Fields of other types are skipped whole,
// groups included.
func (w wire) next(i, end int) (field, int, error) {
	b := w.b[:end]
	num, typ, n := protowire.ConsumeTag(b[i:])
	if n < 0 {
		return field{}, 0, protowire.ParseError(n)
	}
	if num > protowire.MaxValidNumber { // protowire reads up to MaxInt32
		return field{}, 0, fmt.Errorf("field number %d above the maximum %d", num, protowire.MaxValidNumber)
	}
	i += n
	f := field{num: num, typ: typ}
	switch typ {
	case protowire.VarintType:
		f.varint, n = protowire.ConsumeVarint(b[i:])
	case protowire.BytesType:
		var v []byte
		v, n = protowire.ConsumeBytes(b[i:])
		f.start = i + n - len(v)
		f.end = f.start + len(v)
	default:
		n = protowire.ConsumeFieldValue(num, typ, b[i:])
	}
	if n < 0 {
		return field{}, 0, fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
	}
	return f, i + n, nil
}

// str is a string field's value; proto3 strings must be UTF-8.
func (w wire) str(f field, name string) (string, error) {
	if !utf8.Valid(w.b[f.start:f.end]) {
		return "", fmt.Errorf("field %s: invalid UTF-8", name)
	}
	return w.msg[f.start:f.end], nil
}

// readRequest reads a RateLimitRequest from w's bytes [i, end).
func (c *rlsCall) readRequest(w wire, i, end int) error {
	for i < end {
		f, next, err := w.next(i, end)
		if err != nil {
			return err
		}
		switch {
		case f.is(1, protowire.BytesType):
			if c.raw.domain, err = w.str(f, "domain"); err != nil {
				return err
			}
		case f.is(2, protowire.BytesType):
			d, err := c.readDescriptor(w, f.start, f.end)
			if err != nil {
				return fmt.Errorf("descriptors[%d]: %w", len(c.raw.descs), err)
			}
			c.raw.descs = append(c.raw.descs, d)
		case f.is(3, protowire.VarintType):
			c.raw.hits = uint32(f.varint)
		}
		i = next
	}
	return nil
}

// readDescriptor reads an envoy.extensions.common.ratelimit.v3
// RateLimitDescriptor; its entries go to c.entries.
func (c *rlsCall) readDescriptor(w wire, i, end int) (rawDescriptor, error) {
	var d rawDescriptor
	first := len(c.entries)
	for i < end {
		f, next, err := w.next(i, end)
		if err != nil {
			return d, err
		}
		switch {
		case f.is(1, protowire.BytesType):
			e, err := readEntry(w, f.start, f.end)
			if err != nil {
				return d, fmt.Errorf("entries[%d]: %w", len(c.entries)-first, err)
			}
			c.entries = append(c.entries, e)
		case f.is(2, protowire.BytesType): // a message given twice is merged
			if err := readOverride(w, f.start, f.end, &d.override); err != nil {
				return d, fmt.Errorf("limit: %w", err)
			}
			d.hasOverride = true
		case f.is(3, protowire.BytesType):
			v, err := readWrapped(w, f.start, f.end)
			if err != nil {
				return d, fmt.Errorf("hits_addend: %w", err)
			}
			if v.set {
				d.hits = v.value
			}
			d.hitsSet = true
		case f.is(4, protowire.VarintType):
			d.negative = f.varint != 0
		}
		i = next
	}
	// cut with its capacity: a later append must not write past it
	d.entries = c.entries[first:len(c.entries):len(c.entries)]
	return d, nil
}

func readEntry(w wire, i, end int) (policy.Entry, error) {
	var e policy.Entry
	for i < end {
		f, next, err := w.next(i, end)
		if err != nil {
			return e, err
		}
		switch {
		case f.is(1, protowire.BytesType):
			e.Key, err = w.str(f, "key")
		case f.is(2, protowire.BytesType):
			e.Value, err = w.str(f, "value")
		}
		if err != nil {
			return e, err
		}
		i = next
	}
	return e, nil
}

// readOverride merges a RateLimitOverride into o.
func readOverride(w wire, i, end int, o *rawOverride) error {
	for i < end {
		f, next, err := w.next(i, end)
		if err != nil {
			return err
		}
		switch {
		case f.is(1, protowire.VarintType):
			o.perUnit = uint32(f.varint)
		case f.is(2, protowire.VarintType):
			o.unit = typev3.RateLimitUnit(int32(f.varint))
		case f.is(3, protowire.BytesType):
			v, err := readWrapped(w, f.start, f.end)
			if err != nil {
				return fmt.Errorf("unit_multiplier: %w", err)
			}
			if v.set {
				o.multiplier = uint32(v.value)
			}
			o.multiplierSet = true
		}
		i = next
	}
	return nil
}

// wrapped is the value of a google.protobuf.UInt64Value or UInt32Value,
// set when the message has it.
type wrapped struct {
	value uint64
	set   bool
}

func readWrapped(w wire, i, end int) (wrapped, error) {
	var v wrapped
	for i < end {
		f, next, err := w.next(i, end)
		if err != nil {
			return v, err
		}
		if f.is(1, protowire.VarintType) {
			v = wrapped{f.varint, true}
		}
		i = next
	}
	return v, nil
}

// Field numbers of the answer's messages (envoy.service.ratelimit.v3).
const (
	numResponseOverallCode = 1 // RateLimitResponse
	numResponseStatuses    = 2
	numResponseHeaders     = 3

	numStatusCode       = 1 // DescriptorStatus
	numStatusLimit      = 2
	numStatusRemaining  = 3
	numStatusUntilReset = 4

	numLimitPerUnit = 1 // RateLimit
	numLimitUnit    = 2
	numLimitName    = 3

	numDurationSeconds = 1 // google.protobuf.Duration
	numDurationNanos   = 2

	numHeaderKey   = 1 // envoy.config.core.v3.HeaderValue
	numHeaderValue = 2
)

// appendReply appends r as a RateLimitResponse, as protobuf-go would
// write it: fields at their zero value are left out, messages that are set
// are written even when empty.
func appendReply(b []byte, r *reply) []byte {
	b = appendVarintField(b, numResponseOverallCode, uint64(r.code))
	for i := range r.statuses {
		st := &r.statuses[i]
		b = protowire.AppendTag(b, numResponseStatuses, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(st.size()))
		b = st.append(b)
	}
	for _, h := range r.headers {
		b = protowire.AppendTag(b, numResponseHeaders, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(stringFieldSize(h.key)+stringFieldSize(h.value)))
		b = appendStringField(b, numHeaderKey, h.key)
		b = appendStringField(b, numHeaderValue, h.value)
	}
	return b
}

// size is the length of r as appendReply writes it.
func (r *reply) size() int {
	n := varintFieldSize(uint64(r.code))
	for i := range r.statuses {
		n += messageFieldSize(r.statuses[i].size())
	}
	for _, h := range r.headers {
		n += messageFieldSize(stringFieldSize(h.key) + stringFieldSize(h.value))
	}
	return n
}

func (st *replyStatus) append(b []byte) []byte {
	b = appendVarintField(b, numStatusCode, uint64(st.code))
	if st.limited {
		b = protowire.AppendTag(b, numStatusLimit, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(st.limitSize()))
		b = appendVarintField(b, numLimitPerUnit, uint64(st.perUnit))
		b = appendVarintField(b, numLimitUnit, uint64(st.unit))
		b = appendStringField(b, numLimitName, st.name)
	}
	b = appendVarintField(b, numStatusRemaining, uint64(st.remaining))
	if st.limited {
		sec, nanos := durationParts(st.untilReset)
		b = protowire.AppendTag(b, numStatusUntilReset, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(varintFieldSize(uint64(sec))+varintFieldSize(uint64(nanos))))
		b = appendVarintField(b, numDurationSeconds, uint64(sec))
		b = appendVarintField(b, numDurationNanos, uint64(nanos))
	}
	return b
}

func (st *replyStatus) size() int {
	n := varintFieldSize(uint64(st.code)) + varintFieldSize(uint64(st.remaining))
	if st.limited {
		sec, nanos := durationParts(st.untilReset)
		n += messageFieldSize(st.limitSize()) + messageFieldSize(varintFieldSize(uint64(sec))+varintFieldSize(uint64(nanos)))
	}
	return n
}

func (st *replyStatus) limitSize() int {
	return varintFieldSize(uint64(st.perUnit)) + varintFieldSize(uint64(st.unit)) + stringFieldSize(st.name)
}

// durationParts splits d as google.protobuf.Duration does (durationpb.New).
func durationParts(d time.Duration) (seconds int64, nanos int64) {
	return int64(d / time.Second), int64(d % time.Second)
}

// The helpers below write the fields of numbers below 16 (a one-byte tag),
// leaving out those at their zero value, as proto3 does. An int64 or
// int32 field's negative value is the varint of its 64-bit two's
// complement, as uint64 conversion gives it.

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendStringField(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

func varintFieldSize(v uint64) int {
	if v == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(v)
}

func stringFieldSize(s string) int {
	if s == "" {
		return 0
	}
	return 1 + protowire.SizeBytes(len(s))
}

func messageFieldSize(n int) int { return 1 + protowire.SizeBytes(n) }
