package decisionlog

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"

	"github.com/floodgate-io/floodgate/observe"
)

// KeyHashDigits is the length of a key_hash (observe.KeyHashDigits).
const KeyHashDigits = observe.KeyHashDigits

// KeyHash is key_hash for key as a Logger with Config.Secret = secret (nil:
// none) writes it: the first KeyHashDigits hex digits of HMAC-SHA-256(secret,
// key), or of SHA-256(key) without a secret. For tools that look a key up
// in the log.
func KeyHash(secret []byte, key string) string {
	if len(secret) == 0 {
		return observe.KeyHash(key)
	}
	m := hmac.New(sha256.New, secret)
	return sumHex(m, key)
}

// hasher computes key_hash, with a pool of HMACs when keyed: an HMAC holds
// state, and building one per record would cost its allocations each time.
type hasher struct {
	keyed bool
	macs  sync.Pool // of hash.Hash
}

func newHasher(secret []byte) *hasher {
	h := &hasher{keyed: len(secret) > 0}
	secret = append([]byte(nil), secret...) // the caller may reuse its slice
	h.macs.New = func() any { return hmac.New(sha256.New, secret) }
	return h
}

func (h *hasher) hash(key string) string {
	if !h.keyed {
		return KeyHash(nil, key)
	}
	m := h.macs.Get().(hash.Hash)
	defer h.macs.Put(m)
	m.Reset()
	return sumHex(m, key)
}

func sumHex(m hash.Hash, key string) string {
	_, _ = m.Write([]byte(key)) // a hash.Hash never fails to write
	var buf [sha256.Size]byte
	return hex.EncodeToString(m.Sum(buf[:0])[:KeyHashDigits/2])
}
