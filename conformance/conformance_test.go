package conformance_test

import (
	"testing"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/conformance"
)

// The reference agrees with itself: a sanity check of the suite, and the
// proof that a fresh Memory per case behaves as one shared Memory.
func TestMemoryConforms(t *testing.T) {
	conformance.Run(t, func(t *testing.T, clock floodgate.Clock) floodgate.Limiter {
		return floodgate.NewMemory(floodgate.WithClock(clock))
	})
}
