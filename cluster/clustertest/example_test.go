package clustertest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cluster/clustertest"
)

// A test of two nodes sharing 10 requests a minute with the sampled
// strategy, with no Redis: both count on one in-memory Counter, on a clock
// that moves only when the test says. With OneIn 1 every admission is
// pushed, so node b, after a admitted 6, admits only the 4 left.
func ExampleNewCounter() {
	clock := floodgate.NewManualClock(time.Unix(1_700_000_000, 0))
	counter, err := clustertest.NewCounter(clock)
	if err != nil {
		panic(err)
	}
	node := func() *cluster.Sampled {
		s, err := cluster.NewSampled(cluster.SampledConfig{Counter: counter, OneIn: 1, Clock: clock})
		if err != nil {
			panic(err)
		}
		return s
	}
	a, b := node(), node()
	defer a.Close()
	defer b.Close()

	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: time.Minute}
	admit := func(l floodgate.Limiter, n int) (allowed int) {
		for range n {
			d, err := l.AllowN(context.Background(), "tenant:acme", limit, 1)
			if err != nil {
				panic(err)
			}
			if d.Allowed {
				allowed++
			}
		}
		return allowed
	}
	fmt.Println("a admits of 6:", admit(a, 6))
	fmt.Println("b admits of 10:", admit(b, 10))
	// Output:
	// a admits of 6: 6
	// b admits of 10: 4
}

// A test of two leased nodes sharing 100 requests a minute, with no Redis:
// each node's first request fetches a lease from the in-memory
// Coordinator, and Leased reads what the coordinator has handed out in the
// current window: node a's lease leaves node b its share, and together
// they never hold more than the budget.
func ExampleCoordinator_Leased() {
	clock := floodgate.NewManualClock(time.Unix(1_700_000_000, 0))
	coordinator, err := clustertest.NewCoordinator(clock)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 100, Period: time.Minute}
	for _, name := range []string{"node-a", "node-b"} {
		l, err := cluster.NewLeased(cluster.LeasedConfig{
			Coordinator:     coordinator,
			Members:         cluster.StaticMembers{Name: name, Nodes: 2},
			Clock:           clock,
			Interval:        time.Second,
			WaitForRenewals: true, // on a manual clock, renewals must not race a real-time timeout
		})
		if err != nil {
			panic(err)
		}
		defer l.Close()
		if _, err := l.AllowN(ctx, "tenant:acme", limit, 1); err != nil {
			panic(err)
		}
		fmt.Printf("after %s's first request, leased of 100: %d\n", name, coordinator.Leased("tenant:acme"))
	}
	// Output:
	// after node-a's first request, leased of 100: 52
	// after node-b's first request, leased of 100: 100
}
