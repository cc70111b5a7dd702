package sim

import "github.com/floodgate-io/floodgate/cluster"

// gossipLink is a node's cluster.GossipTransport in the simulation: every
// message travels on its own one-way delay and may be lost.
type gossipLink struct {
	sim  *simulation
	self *node
	hook cluster.MembershipHook
}

// Attach implements cluster.GossipTransport.
func (l *gossipLink) Attach(h cluster.MembershipHook) { l.hook = h }

// Broadcast implements cluster.GossipTransport: one copy to every other
// live node.
func (l *gossipLink) Broadcast(_ string, msg []byte) {
	for _, to := range l.sim.live {
		if to != l.self {
			l.sim.sendGossip(to, func(h cluster.MembershipHook) { h.NotifyMsg(msg) })
		}
	}
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
