package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The wire format of the gossip strategy. Binary rather than JSON because
// keys are arbitrary bytes (JSON would mangle invalid UTF-8) and broadcasts
// ride in UDP packets of about 1.4 kB. Every message starts with a version
// byte and a kind byte; strings are length-prefixed; integers are varints.
//
//	slot:  version kind=1 key period epoch node value
//	state: version kind=2 windows×(key period epoch slots×(node value))
const (
	gossipWireVersion = 1
	gossipKindSlot    = 1
	gossipKindState   = 2
)

// errGossipWire is wrapped by every decoding error: a peer sent bytes this
// version cannot read.
var errGossipWire = errors.New("gossip: malformed message")

func gossipEncodeSlot(s gossipSlot) []byte {
	b := make([]byte, 0, 32+len(s.id.key)+len(s.node))
	b = append(b, gossipWireVersion, gossipKindSlot)
	b = gossipAppendWindow(b, s.id, s.epoch)
	b = gossipAppendString(b, s.node)
	return binary.AppendUvarint(b, uint64(s.value))
}

func gossipEncodeState(windows []gossipWindowState) []byte {
	b := []byte{gossipWireVersion, gossipKindState}
	b = binary.AppendUvarint(b, uint64(len(windows)))
	for _, w := range windows {
		b = gossipAppendWindow(b, w.id, w.epoch)
		b = binary.AppendUvarint(b, uint64(len(w.counter)))
		for node, v := range w.counter {
			b = gossipAppendString(b, node)
			b = binary.AppendUvarint(b, uint64(v))
		}
	}
	return b
}

func gossipAppendWindow(b []byte, id gossipWindowID, epoch int64) []byte {
	b = gossipAppendString(b, id.key)
	b = binary.AppendUvarint(b, uint64(id.period))
	return binary.AppendVarint(b, epoch)
}

func gossipAppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// gossipReader decodes a message, remembering the first error so that the
// decoders read straight through and check once.
type gossipReader struct {
	b   []byte
	err error
}

func (r *gossipReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: bad %s", errGossipWire, what)
	}
	r.b = nil
}

func (r *gossipReader) uvarint(what string) uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bounded reads an unsigned varint in [lo, hi].
func (r *gossipReader) bounded(what string, lo, hi uint64) int64 {
	v := r.uvarint(what)
	if v < lo || v > hi {
		r.fail(what)
		return 0
	}
	return int64(v)
}

func (r *gossipReader) varint(what string) int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// string copies: the caller's buffer may be reused (memberlist does).
func (r *gossipReader) string(what string) string {
	n := r.uvarint(what + " length")
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail(what + " length")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *gossipReader) window() (gossipWindowID, int64) {
	key := r.string("key")
	period := r.bounded("period", 1, gossipMaxValue)
	epoch := r.varint("epoch")
	if key == "" {
		r.fail("key")
	}
	return gossipWindowID{key: key, period: period}, epoch
}

func (r *gossipReader) header(kind byte) {
	if len(r.b) < 2 || r.b[0] != gossipWireVersion || r.b[1] != kind {
		r.fail("header")
		return
	}
	r.b = r.b[2:]
}

func (r *gossipReader) end() {
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailer")
	}
}

func gossipDecodeSlot(b []byte) (gossipSlot, error) {
	r := gossipReader{b: b}
	r.header(gossipKindSlot)
	var s gossipSlot
	s.id, s.epoch = r.window()
	s.node = r.string("node")
	s.value = r.bounded("value", 0, gossipMaxValue)
	r.end()
	return s, r.err
}

func gossipDecodeState(b []byte) ([]gossipWindowState, error) {
	r := gossipReader{b: b}
	r.header(gossipKindState)
	// Each window takes at least 4 bytes, each slot 2: a count beyond what
	// the bytes left can hold is a lie, and must not size an allocation.
	n := r.bounded("window count", 0, uint64(len(r.b)))
	if n > int64(len(r.b)/4) {
		r.fail("window count")
	}
	if r.err != nil {
		return nil, r.err
	}
	windows := make([]gossipWindowState, 0, n)
	for range n {
		var w gossipWindowState
		w.id, w.epoch = r.window()
		slots := r.bounded("slot count", 0, gossipMaxSlots)
		if slots > int64(len(r.b)/2) {
			r.fail("slot count")
			return nil, r.err
		}
		w.counter = make(gossipCounter, slots)
		for range slots {
			node := r.string("node")
			w.counter.observe(node, r.bounded("value", 0, gossipMaxValue))
		}
		if r.err != nil {
			return nil, r.err
		}
		windows = append(windows, w)
	}
	r.end()
	return windows, r.err
}
