package conformance_test

import (
	"testing"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/conformance"
)

// The reference's adjustments agree with themselves, and their properties
// hold: the suite's own sanity check.
func TestMemoryAdjustConforms(t *testing.T) {
	conformance.RunAdjust(t, func(t *testing.T, clock floodgate.Clock) floodgate.Limiter {
		return floodgate.NewMemory(floodgate.WithClock(clock))
	})
}

// A bounded Memory takes the locked path for every key and still agrees.
func TestBoundedMemoryAdjustConforms(t *testing.T) {
	conformance.RunAdjust(t, func(t *testing.T, clock floodgate.Clock) floodgate.Limiter {
		return floodgate.NewMemory(floodgate.WithClock(clock), floodgate.WithMaxKeys(1<<20))
	})
}
