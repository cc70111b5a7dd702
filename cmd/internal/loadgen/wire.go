package loadgen

import (
	"fmt"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// The gRPC targets write their requests and read their answers in
// protobuf's wire format by hand: a load generator that shares the
// machine with the service it measures should cost as little as it can,
// and it needs only a field or two of each answer (the gubernator target
// also avoids depending on gubernator's module).

// wireRequest is a request message the codec writes.
type wireRequest interface {
	appendMessage(b []byte) []byte
	sizeHint() int // about the length of the message
}

// wireResponse is an answer message the codec reads.
type wireResponse interface {
	readMessage(b []byte) error
}

// wireCodec carries wireRequests and wireResponses over gRPC. It names
// itself "proto", the content subtype the services decode: the bytes it
// sends are protobuf.
type wireCodec struct{}

func (wireCodec) Name() string { return "proto" }

func (wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(wireRequest)
	if !ok {
		return nil, fmt.Errorf("loadgen: the wire codec cannot marshal %T", v)
	}
	// A fresh buffer per call: gRPC may still be writing it after Invoke
	// returns (a server can answer before it has read the request).
	return mem.BufferSlice{mem.SliceBuffer(r.appendMessage(make([]byte, 0, r.sizeHint())))}, nil
}

func (wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(wireResponse)
	if !ok {
		return fmt.Errorf("loadgen: the wire codec cannot unmarshal into %T", v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return r.readMessage(buf.ReadOnlyData())
}

// eachField calls fn with each field of the message b: its number, wire
// type and value (a varint's or fixed value's bytes, or a length-delimited
// field's contents). It stops at the first error, fn's or the encoding's.
func eachField(b []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(m))
		}
		v := b[:m]
		if typ == protowire.BytesType {
			v, _ = protowire.ConsumeBytes(v) // well-formed: ConsumeFieldValue checked it
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		b = b[m:]
	}
	return nil
}
