package floodgate

import (
	"fmt"

	"github.com/floodgate-io/floodgate/internal/excerpt"
)

// The key-size policy, the same for every store and surface: the memory and
// Redis stores, the cluster strategies, the service's explicit keys and
// descriptors, the proxy's routes and the middleware. A key is what a store
// holds state under; a descriptor's key and value are parts of one, so each
// is held to less, and the key they compose is still held to MaxKeyBytes.
// Input past a bound is refused with an error wrapping ErrKeyTooLong (and so
// ErrInvalidKey) that names the bound and the size and quotes only the
// input's first bytes, never all of it.
const (
	// MaxKeyBytes is the longest key a Limiter accepts (before a store's
	// own prefix).
	MaxKeyBytes = 4096
	// MaxValueBytes is the longest descriptor key or value a surface
	// accepts.
	MaxValueBytes = 1024
)

// ErrKeyTooLong is wrapped by the error for a key, descriptor key or
// descriptor value longer than the policy allows. It wraps ErrInvalidKey.
var ErrKeyTooLong = fmt.Errorf("%w: too long", ErrInvalidKey)

// CheckLength returns nil when s is at most max bytes long, and otherwise an
// error wrapping ErrKeyTooLong that calls s what ("key", "value"), quotes
// its first bytes and gives its length and max:
//
//	value "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…" (1048576 bytes) is longer than 1024 bytes
func CheckLength(what, s string, max int) error {
	if len(s) <= max {
		return nil
	}
	return &tooLongError{what: what, quoted: excerpt.Quote(s), max: max}
}

// tooLongError is CheckLength's error: it keeps the excerpt, not the input.
type tooLongError struct {
	what, quoted string
	max          int
}

func (e *tooLongError) Error() string {
	return fmt.Sprintf("%s %s is longer than %d bytes", e.what, e.quoted, e.max)
}

func (e *tooLongError) Unwrap() error { return ErrKeyTooLong }
