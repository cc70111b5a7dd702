package observe

import (
	"crypto/sha256"
	"encoding/hex"
)

// KeyHashDigits is the length of KeyHash: 16 hex digits, the first 64 bits
// of the digest, enough that two keys of one deployment collide with a
// chance of about n²/2⁶⁵ among n keys.
const KeyHashDigits = 16

// KeyHash is how every observer that must not show a key (the traces'
// floodgate.key_hash, the decision log's key_hash without a secret, the
// top consumers with HashKeys) shows it instead: the first KeyHashDigits
// hex digits of its SHA-256, the same on every surface, so that one key
// can be followed from a trace to a log line to a top-consumers entry.
// A key from a small space (an IPv4 address) can be found again by
// hashing guesses: the decision log keys its hashes with a secret for
// that reason.
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:KeyHashDigits/2])
}
