package clustertest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cluster/clustertest"
)

// The semantics of both stand-ins are tested in package cluster, against
// the Redis implementations and under every strategy; these tests cover
// what only the stand-ins have.

// TestCounterOutage: SetUnavailable fails every Add with
// ErrStoreUnavailable and applies none of it, until it is lifted.
func TestCounterOutage(t *testing.T) {
	c, err := clustertest.NewCounter(floodgate.NewManualClock(time.Unix(1_700_000_000, 0)))
	if err != nil {
		t.Fatal(err)
	}
	add := []cluster.CounterAdd{{Key: "k", Period: time.Second, Node: "n", Count: 1}}
	c.SetUnavailable(true)
	if _, err := c.Add(context.Background(), add); !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("down: got %v, want ErrStoreUnavailable", err)
	}
	c.SetUnavailable(false)
	add[0].Count = 0 // reads only
	reads, err := c.Add(context.Background(), add)
	if err != nil {
		t.Fatal(err)
	}
	if reads[0].Current != 0 {
		t.Fatalf("an add made while down was applied: %+v", reads[0])
	}
}

// TestNeedAClock: each constructor names the missing clock.
func TestNeedAClock(t *testing.T) {
	if _, err := clustertest.NewCounter(nil); err == nil || !strings.Contains(err.Error(), "clock") {
		t.Errorf("NewCounter(nil): %v", err)
	}
	if _, err := clustertest.NewCoordinator(nil); err == nil || !strings.Contains(err.Error(), "clock") {
		t.Errorf("NewCoordinator(nil): %v", err)
	}
}
