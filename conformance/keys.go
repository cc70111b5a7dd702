package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate"
)

// RunKeyPolicy checks the key-size policy: keys up to floodgate.MaxKeyBytes
// are decided as the reference decides them, longer ones are refused with
// an error wrapping floodgate.ErrKeyTooLong whose text stays short however
// long the key (it quotes only the key's start). Batches too, when the
// Limiter is a floodgate.BatchLimiter.
func RunKeyPolicy(t *testing.T, newLimiter Factory) {
	p := newPair(t, newLimiter)
	limit := floodgate.PerSecond(2)
	for _, tc := range []struct {
		name    string
		size    int // of the whole key
		tooLong bool
	}{
		{"2000 bytes", 2000, false},
		{"exactly the maximum", floodgate.MaxKeyBytes, false},
		{"one byte over", floodgate.MaxKeyBytes + 1, true},
		{"one megabyte", 1 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := p.ns + strings.Repeat("k", tc.size-len(p.ns))
			if !tc.tooLong {
				for i := range 3 { // the third is denied, by both
					p.check(t, "decision "+string(rune('1'+i)), key, limit, 1)
				}
				return
			}
			_, err := p.got.AllowN(context.Background(), key, limit, 1)
			checkTooLong(t, "AllowN", err)
			if b, ok := p.got.(floodgate.BatchLimiter); ok {
				_, err := b.AllowAll(context.Background(), []floodgate.Request{
					{Key: p.ns + "short", Limit: limit, Cost: 1}, {Key: key, Limit: limit, Cost: 1}})
				checkTooLong(t, "AllowAll", err)
			}
		})
	}
}

// maxErrorBytes bounds the text of a key-too-long error: a few sentences
// and a quoted excerpt, nothing near the key's own length.
const maxErrorBytes = 512

func checkTooLong(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case !errors.Is(err, floodgate.ErrKeyTooLong):
		t.Fatalf("%s: error %v, want one wrapping floodgate.ErrKeyTooLong", what, err)
	case !errors.Is(err, floodgate.ErrInvalidKey):
		t.Fatalf("%s: error %v does not wrap floodgate.ErrInvalidKey", what, err)
	case len(err.Error()) > maxErrorBytes:
		t.Fatalf("%s: error text is %d bytes, want at most %d: it echoes the key", what, len(err.Error()), maxErrorBytes)
	}
}
