package sim

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cluster/clustertest"
)

// node is one member of the simulated fleet.
type node struct {
	name  string
	index int
	clock *virtualClock
	lim   floodgate.Limiter
	// round is the strategy's periodic work (nil: none).
	round func(ctx context.Context)
	// blocking: AllowN may call the store, so it runs as a process.
	blocking bool
	// decidesOnArrival: the strategy decides before it calls the store and
	// then holds the request for the call (sampled's push), so the
	// decision counts at the arrival, not when AllowN returns.
	decidesOnArrival bool
	alive            bool
	link             *gossipLink // gossip only

	offered, admitted int64
}

// members is cluster.Members (and MemberRanker) over the live nodes, as a
// failure detector that sees deaths and joins at once would report them.
type members struct {
	sim  *simulation
	self *node
}

// Self implements cluster.Members.
func (m members) Self() string { return m.self.name }

// Count implements cluster.Members.
func (m members) Count() int { return max(len(m.sim.live), 1) }

// Rank implements cluster.MemberRanker: names sort in index order.
func (m members) Rank() int {
	for i, n := range m.sim.live {
		if n == m.self {
			return i
		}
	}
	return -1
}

// shared is the state every node of one run reaches.
type shared struct {
	storeClock  *virtualClock
	counter     *clustertest.Counter
	coordinator *clustertest.Coordinator
	memory      *floodgate.Memory
}

// newShared builds the store side for the strategy.
func (s *simulation) newShared() (shared, error) {
	sh := shared{storeClock: &virtualClock{eng: &s.eng}}
	var err error
	switch s.cfg.Strategy {
	case "synced", "sampled":
		sh.counter, err = clustertest.NewCounter(sh.storeClock)
	case "leased":
		sh.coordinator, err = clustertest.NewCoordinator(sh.storeClock)
	case "exact":
		sh.memory = floodgate.NewMemory(floodgate.WithClock(sh.storeClock))
	}
	return sh, err
}

// newNode builds node i running the configured strategy.
func (s *simulation) newNode(i int, sh shared) (*node, error) {
	c := s.cfg
	n := &node{name: fmt.Sprintf("node-%03d", i), index: i, clock: &virtualClock{eng: &s.eng, offset: s.skewOf(i)}}
	mem := members{sim: s, self: n}
	quiet := slog.New(slog.DiscardHandler)
	var err error
	switch c.Strategy {
	case "exact":
		n.lim, n.blocking = remoteMemory{sim: s, inner: sh.memory}, true
	case "local":
		n.lim, err = cluster.NewLocal(cluster.LocalConfig{Members: mem, Clock: n.clock})
	case "leased":
		var l *cluster.Leased
		coord := delayedCoordinator{sim: s, inner: sh.coordinator, outageAfter: cluster.DefaultOutageAfter(c.Interval, c.Timeout)}
		l, err = cluster.NewLeased(cluster.LeasedConfig{Coordinator: coord,
			Members: mem, Clock: n.clock, Interval: c.Interval, Timeout: c.Timeout, Logger: quiet, WaitForRenewals: true})
		n.lim, n.blocking, n.round = l, true, func(ctx context.Context) { _ = l.Sync(ctx) }
	case "synced":
		var l *cluster.Synced
		l, err = cluster.NewSynced(cluster.SyncedConfig{Counter: delayedCounter{sim: s, inner: sh.counter},
			Interval: c.Interval, Clock: n.clock, Logger: quiet})
		n.lim, n.round = l, func(ctx context.Context) { _ = l.Sync(ctx) }
	case "sampled":
		n.lim, err = cluster.NewSampled(cluster.SampledConfig{Counter: delayedCounter{sim: s, inner: sh.counter},
			OneIn: c.OneIn, Clock: n.clock, Rand: rand.NewPCG(s.seeds.Uint64(), s.seeds.Uint64())})
		n.blocking, n.decidesOnArrival = true, true
	case "gossip":
		n.link = &gossipLink{sim: s, self: n}
		var g *cluster.Gossip
		g, err = cluster.NewGossip(cluster.GossipConfig{Members: mem, Transport: n.link, Clock: n.clock,
			Interval: c.Interval, Logger: quiet})
		n.lim, n.round = g, func(ctx context.Context) { g.Tick(ctx); s.flush(n.link); s.pushPull(n) }
	}
	if err != nil {
		return nil, fmt.Errorf("sim: %s node %d: %w", c.Strategy, i, err)
	}
	return n, nil
}

// skewOf spreads the clock offsets of the first Nodes nodes evenly over
// [−Skew, +Skew]; a node that joins later gets +Skew.
func (s *simulation) skewOf(i int) int64 {
	skew := s.cfg.Skew.Microseconds()
	if skew == 0 || s.cfg.Nodes == 1 {
		return 0
	}
	if i >= s.cfg.Nodes {
		return skew
	}
	return -skew + 2*skew*int64(i)/int64(s.cfg.Nodes-1)
}
