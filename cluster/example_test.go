package cluster_test

import (
	"context"
	"fmt"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
)

// The local strategy on one node of a fleet of four sharing 100 requests
// a minute: the node enforces its quarter in memory and talks to nobody.
// Every strategy is a floodgate.Limiter, so the caller does not change when
// the strategy does.
func ExampleNewLocal() {
	local, err := cluster.NewLocal(cluster.LocalConfig{
		Members: cluster.StaticMembers{Name: "node-a", Nodes: 4},
		Clock:   floodgate.NewManualClock(time.Unix(1_700_000_000, 0)),
	})
	if err != nil {
		panic(err)
	}
	defer local.Close()

	limit := floodgate.PerMinute(100)
	share, _ := local.Share(limit)
	fmt.Println("this node's share:", share.Rate)

	var l floodgate.Limiter = local
	allowed := 0
	for range 40 {
		d, err := l.AllowN(context.Background(), "tenant:acme", limit, 1)
		if err != nil {
			panic(err)
		}
		if d.Allowed {
			allowed++
		}
	}
	fmt.Println("allowed of 40:", allowed)
	// Output:
	// this node's share: 25
	// allowed of 40: 25
}
