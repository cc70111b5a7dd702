package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cluster/clustertest"
)

// Each strategy's Serves function gives the verdict its AllowN gives on
// the first request: nil where AllowN decides, the same error where AllowN
// refuses the limit. A service that checks its policy with them at
// start-up refuses exactly the limits that would fail at the first request.
func TestServesAgreesWithAllowN(t *testing.T) {
	clock := floodgate.NewManualClock(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	counter, err := clustertest.NewCounter(clock)
	if err != nil {
		t.Fatal(err)
	}
	coord, err := clustertest.NewCoordinator(clock)
	if err != nil {
		t.Fatal(err)
	}
	members := cluster.StaticMembers{Name: "a", Nodes: 1}
	local, err := cluster.NewLocal(cluster.LocalConfig{Members: members, Clock: clock})
	must(t, err)
	leased, err := cluster.NewLeased(cluster.LeasedConfig{Coordinator: coord, Members: members, Clock: clock, Interval: time.Second, WaitForRenewals: true})
	must(t, err)
	synced, err := cluster.NewSynced(cluster.SyncedConfig{Counter: counter, Interval: time.Second, Clock: clock})
	must(t, err)
	const oneIn = 1 << 10
	sampled, err := cluster.NewSampled(cluster.SampledConfig{Counter: counter, OneIn: oneIn, Clock: clock})
	must(t, err)
	gossip, err := cluster.NewGossip(cluster.GossipConfig{Members: members, Transport: cluster.NewGossipNetwork(clock, 0).Endpoint("a"), Clock: clock})
	must(t, err)
	for _, c := range []interface{ Close() }{local, leased, synced, sampled, gossip} {
		t.Cleanup(c.Close)
	}
	strategies := []struct {
		name    string
		limiter floodgate.Limiter
		serves  func(floodgate.Limit) error
	}{
		{"local", local, cluster.LocalServes},
		{"leased", leased, cluster.LeasedServes},
		{"synced", synced, cluster.SyncedServes},
		{"sampled", sampled, func(l floodgate.Limit) error { return cluster.SampledServes(l, oneIn) }},
		{"gossip", gossip, cluster.GossipServes},
	}
	var limits []floodgate.Limit
	for _, a := range floodgate.Algorithms() {
		l := floodgate.Limit{Algorithm: a, Rate: 10, Period: time.Second}
		if a == floodgate.TokenBucket || a == floodgate.LeakyBucket {
			l.Burst = 20
		}
		limits = append(limits, l)
	}
	limits = append(limits,
		floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1 << 45, Period: time.Hour},       // past sampled's exact counts at 1 in 1024
		floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: 400 * 24 * time.Hour}, // past a lease's span
		floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: 0})                    // invalid everywhere
	for _, s := range strategies {
		for _, l := range limits {
			verdict := s.serves(l)
			_, err := s.limiter.AllowN(context.Background(), "k", l, 1)
			refused := err != nil && errors.Is(err, floodgate.ErrInvalidLimit)
			if fmt.Sprint(verdict) != fmt.Sprint(map[bool]error{true: err}[refused]) {
				t.Errorf("%s, %s: Serves says %v; AllowN says %v", s.name, l, verdict, err)
			}
			if verdict != nil && !errors.Is(verdict, floodgate.ErrInvalidLimit) {
				t.Errorf("%s, %s: Serves says %v, which does not wrap ErrInvalidLimit", s.name, l, verdict)
			}
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
