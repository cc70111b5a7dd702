package shared

import (
	"context"
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
)

// TestLeaseWaterfill shows how a budget is shared by demand.
func TestLeaseWaterfill(t *testing.T) {
	cases := []struct {
		name    string
		free    int64
		demands []int64
		mine    int64
		nodes   int64
		want    int64
	}{
		{"demands fit: mine plus an equal part of the rest", 100, []int64{10, 30}, 10, 2, 10 + 30},
		{"the rest is split over the fleet, not only the nodes that asked", 100, []int64{10}, 10, 4, 10 + 22},
		{"short: small demands met, big ones get the level", 100, []int64{10, 80, 80}, 80, 3, 45},
		{"short: a small demand is met in full", 100, []int64{10, 80, 80}, 10, 3, 10},
		{"nothing free", 0, []int64{5, 5}, 5, 2, 0},
		{"no demand anywhere: an equal part", 90, []int64{0, 0, 0}, 0, 3, 30},
	}
	for _, c := range cases {
		if got := leaseWaterfill(c.free, c.demands, c.mine, c.nodes); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
}

// TestLeaseWaterfillNeverSharesMoreThanFree: the shares of all demands add
// up to at most the free units, and a demand that fits below the level is
// met in full.
func TestLeaseWaterfillNeverSharesMoreThanFree(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		free := rapid.Int64Range(0, 1<<20).Draw(rt, "free")
		demands := rapid.SliceOfN(rapid.Int64Range(0, 1<<20), 1, 20).Draw(rt, "demands")
		nodes := rapid.Int64Range(1, 30).Draw(rt, "nodes")
		var sum, total int64
		for _, d := range demands {
			sum += leaseWaterfill(free, demands, d, nodes)
			total += d
		}
		if sum > free {
			rt.Fatalf("shares add up to %d > free %d", sum, free)
		}
		if total <= free {
			for _, d := range demands {
				if got := leaseWaterfill(free, demands, d, nodes); got < d {
					rt.Fatalf("demands fit but %d got %d", d, got)
				}
			}
		}
	})
}

// TestLeaseCoordinatorRefusesBadRequests: each malformed request is named.
func TestLeaseCoordinatorRefusesBadRequests(t *testing.T) {
	mem := NewCoordinator(floodgate.NewManualClock(time.Unix(1_700_000_000, 0)))
	good := LeaseRequest{Key: "k", Node: "a", Rate: 10, Period: time.Second, Lease: time.Second, Window: -1, Nodes: 1}
	cases := []struct {
		name   string
		change func(*LeaseRequest)
		want   error
	}{
		{"no key", func(r *LeaseRequest) { r.Key = "" }, ErrInvalidLeaseRequest},
		{"no node", func(r *LeaseRequest) { r.Node = "" }, ErrInvalidLeaseRequest},
		{"rate 0", func(r *LeaseRequest) { r.Rate = 0 }, floodgate.ErrInvalidLimit},
		{"rate too big", func(r *LeaseRequest) { r.Rate = MaxLeasedRate + 1 }, floodgate.ErrInvalidLimit},
		{"period below 1µs", func(r *LeaseRequest) { r.Period = time.Nanosecond }, floodgate.ErrInvalidLimit},
		{"period not whole µs", func(r *LeaseRequest) { r.Period = time.Second + time.Nanosecond }, floodgate.ErrInvalidLimit},
		{"no lease", func(r *LeaseRequest) { r.Lease = 0 }, ErrInvalidLeaseRequest},
		{"no nodes", func(r *LeaseRequest) { r.Nodes = 0 }, ErrInvalidLeaseRequest},
		{"negative used", func(r *LeaseRequest) { r.Used = -1 }, ErrInvalidLeaseRequest},
		{"negative demand", func(r *LeaseRequest) { r.Demand = -1 }, ErrInvalidLeaseRequest},
	}
	for _, c := range cases {
		req := good
		c.change(&req)
		if _, err := mem.Renew(context.Background(), req); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := mem.Renew(context.Background(), good); err != nil {
		t.Errorf("good request: %v", err)
	}
}
