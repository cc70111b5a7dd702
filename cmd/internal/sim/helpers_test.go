package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/sim"
)

// small is a fast fleet: 100 units per 100ms window shared by 4 nodes,
// offered twice that, over 20 windows, on a 2ms network.
func small(strategy, workload string) sim.Config {
	return sim.Config{
		Strategy: strategy,
		Nodes:    4,
		Interval: 20 * time.Millisecond,
		Limit:    floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 100, Period: 100 * time.Millisecond},
		Workload: workload,
		Load:     2,
		Duration: 2 * time.Second,
		Delay:    2 * time.Millisecond,
		Jitter:   500 * time.Microsecond,
		Seed:     1,
	}
}

// run simulates c and fails the test on error.
func run(t *testing.T, c sim.Config) sim.Result {
	t.Helper()
	r, err := sim.Run(context.Background(), c)
	if err != nil {
		t.Fatalf("Run(%s/%s): %v", c.Strategy, c.Workload, err)
	}
	return r
}
