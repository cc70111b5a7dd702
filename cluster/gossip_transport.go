package cluster

// GossipTransport carries the gossip strategy's state between nodes:
// broadcasts of changed slots and full-state exchanges. *Membership
// implements it over memberlist; a simulation or a test implements it in
// memory, where it decides when messages arrive.
type GossipTransport interface {
	// Attach routes what peers send to this node to h.
	Attach(h MembershipHook)
	// Broadcast sends msg to every other node, best effort; a message with
	// the same name still queued may be replaced by this one.
	Broadcast(name string, msg []byte)
}
