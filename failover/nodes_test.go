package failover

import (
	"sync/atomic"
	"testing"

	"github.com/floodgate-io/floodgate"
)

// countingFleet is a fleet whose size the test sets.
type countingFleet struct{ n atomic.Int64 }

func (f *countingFleet) Count() int { return int(f.n.Load()) }

// TestFailLocalFollowsTheFleet: with Fleet, FailLocal's share follows
// the fleet's size as it changes (a membership's live count), not the
// Nodes it started with; a count below 1 is one node.
func TestFailLocalFollowsTheFleet(t *testing.T) {
	fleet := &countingFleet{}
	l, _ := newLimiter(t, newFake(failUnavailable), Config{Mode: FailLocal, Nodes: 1, Fleet: fleet})
	limit := floodgate.PerSecond(10)
	for _, c := range []struct {
		nodes     int64
		wantLimit int64
	}{
		{5, 2},  // 10/5
		{2, 5},  // the fleet shrank
		{0, 10}, // below 1: one node
	} {
		fleet.n.Store(c.nodes)
		if r := decide(t, l, "k", limit, 0); r.Limit != c.wantLimit {
			t.Errorf("with %d nodes: %+v, want the share's limit %d", c.nodes, r.Decision, c.wantLimit)
		}
	}
}
