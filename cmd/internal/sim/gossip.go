package sim

import (
	"math"
	"slices"

	"github.com/floodgate-io/floodgate/cluster"
)

// gossipLink is a node's cluster.GossipTransport in the simulation, as
// memberlist behaves: a broadcast is queued (a newer one of the same name
// replaces it) and goes out with the node's next round, every Interval,
// to gossipFanout random live peers, each message retransmitted for
// gossipRetransmits rounds; every message travels on its own one-way delay
// and may be lost.
type gossipLink struct {
	sim   *simulation
	self  *node
	hook  cluster.MembershipHook
	queue map[string]*queuedBroadcast
}

// queuedBroadcast is a message waiting for its remaining rounds.
type queuedBroadcast struct {
	msg  []byte
	sent int // rounds it went out in
}

// memberlist's defaults: GossipNodes, and RetransmitMult·⌈log₁₀(N+1)⌉
// rounds per message.
const (
	gossipFanout         = 3
	gossipRetransmitMult = 4
)

// Attach implements cluster.GossipTransport.
func (l *gossipLink) Attach(h cluster.MembershipHook) { l.hook = h }

// Broadcast implements cluster.GossipTransport: queue msg for the next
// rounds.
func (l *gossipLink) Broadcast(name string, msg []byte) {
	if l.queue == nil {
		l.queue = map[string]*queuedBroadcast{}
	}
	l.queue[name] = &queuedBroadcast{msg: msg}
}

// flush sends the queued broadcasts to gossipFanout random live peers:
// one round of memberlist's gossip.
func (s *simulation) flush(l *gossipLink) {
	if len(l.queue) == 0 {
		return
	}
	peers := s.randomPeers(l.self, gossipFanout)
	limit := gossipRetransmitMult * int(math.Ceil(math.Log10(float64(len(s.live)+1))))
	names := make([]string, 0, len(l.queue))
	for name := range l.queue {
		names = append(names, name)
	}
	slices.Sort(names) // the same order, so the same random draws, every run
	for _, name := range names {
		b := l.queue[name]
		for _, to := range peers {
			msg := b.msg
			s.sendGossip(to, func(h cluster.MembershipHook) { h.NotifyMsg(msg) })
		}
		if b.sent++; b.sent >= limit {
			delete(l.queue, name)
		}
	}
}

// randomPeers picks up to k distinct live nodes other than self.
func (s *simulation) randomPeers(self *node, k int) []*node {
	var others []*node
	for _, n := range s.live {
		if n != self {
			others = append(others, n)
		}
	}
	for i := range min(k, len(others)) {
		j := i + s.net.IntN(len(others)-i)
		others[i], others[j] = others[j], others[i]
	}
	return others[:min(k, len(others))]
}

// sendGossip delivers one message to a node after a one-way delay, unless
// it is lost or the node is dead by then.
func (s *simulation) sendGossip(to *node, deliver func(cluster.MembershipHook)) {
	s.gossipMessages++
	if s.lost() {
		return
	}
	s.eng.after(s.oneWay(), func() {
		if to.alive && to.link.hook != nil {
			deliver(to.link.hook)
		}
	})
}

// pushPull is a gossip node's periodic full-state exchange with one random
// live peer: its state goes there, and the peer's comes back on arrival.
func (s *simulation) pushPull(from *node) {
	if len(s.live) < 2 {
		return
	}
	peer := s.live[s.net.IntN(len(s.live))]
	for peer == from {
		peer = s.live[s.net.IntN(len(s.live))]
	}
	state := from.link.hook.LocalState()
	s.sendGossip(peer, func(h cluster.MembershipHook) {
		h.MergeRemoteState(state)
		reply := h.LocalState()
		s.sendGossip(from, func(h cluster.MembershipHook) { h.MergeRemoteState(reply) })
	})
}
