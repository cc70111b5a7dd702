package monotime_test

import (
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/internal/monotime"
)

func TestFollowsTheWallClockItStartedAt(t *testing.T) {
	before := time.Now().UnixMicro()
	m := monotime.New()
	first := m.Now()
	after := time.Now().UnixMicro()
	if first < before || first > after {
		t.Fatalf("Now() = %d, outside the wall clock's [%d, %d] around it", first, before, after)
	}
	for range 1000 {
		if next := m.Now(); next < first {
			t.Fatalf("went back from %d to %d", first, next)
		} else {
			first = next
		}
	}
}
