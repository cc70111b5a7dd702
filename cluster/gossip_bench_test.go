package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

// BenchmarkGossipAllowN is one admitted decision with its broadcast queued
// to two peers of an in-memory network (delivered every 1024 decisions, so
// the queue stays short).
func BenchmarkGossipAllowN(b *testing.B) {
	clock := floodgate.NewManualClock(localEpoch)
	net := NewGossipNetwork(clock, 0)
	var nodes []*Gossip
	for _, name := range []string{"a", "b", "c"} {
		g, err := NewGossip(GossipConfig{Members: StaticMembers{Name: name}, Transport: net.Endpoint(name), Clock: clock})
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, g)
	}
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1 << 40, Period: time.Hour}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := nodes[0].AllowN(ctx, "tenant", limit, 1); err != nil {
			b.Fatal(err)
		}
		if i++; i%1024 == 0 {
			net.Deliver()
		}
	}
}
