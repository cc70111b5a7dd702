package sim_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/sim"
)

// TestBadConfigNamesTheProblem: every mistake is an error wrapping
// ErrInvalidConfig whose text names the field.
func TestBadConfigNamesTheProblem(t *testing.T) {
	tests := []struct {
		name   string
		change func(*sim.Config)
		want   string
	}{
		{"unknown strategy", func(c *sim.Config) { c.Strategy = "magic" }, `unknown strategy "magic"`},
		{"unknown workload", func(c *sim.Config) { c.Workload = "chaos" }, `unknown workload "chaos"`},
		{"no nodes", func(c *sim.Config) { c.Nodes = 0 }, "nodes must be"},
		{"no interval", func(c *sim.Config) { c.Interval = 0 }, "interval must be positive"},
		{"no load", func(c *sim.Config) { c.Load = 0 }, "load must be"},
		{"loss of everything", func(c *sim.Config) { c.Loss = 1 }, "loss must be in [0, 1)"},
		{"negative delay", func(c *sim.Config) { c.Delay = -time.Millisecond }, "delay and jitter"},
		{"duration below a period", func(c *sim.Config) { c.Duration = time.Millisecond }, "at least one period"},
		{"bad limit", func(c *sim.Config) { c.Limit.Rate = 0 }, "limit"},
		{"too many requests", func(c *sim.Config) { c.Load = 1e9 }, "more than"},
		{"skew workload without skew", func(c *sim.Config) { c.Workload = "skew" }, "needs a clock skew"},
		{"shift on one node", func(c *sim.Config) { c.Workload, c.Nodes = "shift", 1 }, "at least 2 nodes"},
		{"zipf exponent of 1", func(c *sim.Config) { c.Workload, c.Params.ZipfS = "zipf", 1 }, "exponent must be above 1"},
		{"bursts that never end", func(c *sim.Config) {
			c.Workload, c.Params.BurstLength, c.Params.BurstEvery = "bursts", time.Second, time.Second
		}, "0 < length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := small("synced", "uniform")
			tt.change(&c)
			_, err := sim.Run(context.Background(), c)
			if !errors.Is(err, sim.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want ErrInvalidConfig mentioning %q", err, tt.want)
			}
		})
	}
}

// TestStrategyRefusesItsLimit: a limit the strategy does not serve fails
// the run at once (leased counts fixed windows only), testable as both an
// invalid config and an invalid limit.
func TestStrategyRefusesItsLimit(t *testing.T) {
	c := small("leased", "uniform")
	c.Limit.Algorithm = floodgate.TokenBucket
	_, err := sim.Run(context.Background(), c)
	if !errors.Is(err, sim.ErrInvalidConfig) || !errors.Is(err, floodgate.ErrInvalidLimit) {
		t.Fatalf("error %v, want ErrInvalidConfig and floodgate.ErrInvalidLimit", err)
	}
}

// TestCancelledRunStops: a cancelled context ends the run with its error.
func TestCancelledRunStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sim.Run(ctx, small("leased", "uniform")); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}
