package observe_test

import (
	"testing"

	"github.com/floodgate-io/floodgate/observe"
)

// KeyHash is the first 16 hex digits of the key's SHA-256, as
// "echo -n user-42 | sha256sum" shows them: the same everywhere.
func TestKeyHash(t *testing.T) {
	if got, want := observe.KeyHash("user-42"), "6d894aa3ee802549"; got != want {
		t.Fatalf("KeyHash(user-42) = %q, want %q", got, want)
	}
}
