package cluster

import (
	"slices"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate"
)

// GossipNetwork is an in-memory network of gossip endpoints for this
// package's tests (the simulator has its own, memberlist-like transport):
// a broadcast reaches each other endpoint Delay after it was sent, when
// the caller calls Deliver; PushPull exchanges full state between every
// pair that can talk; Partition cuts the network into groups. It runs no
// goroutine and reads time only from its Clock, so a run is deterministic. It is safe for concurrent use.
type GossipNetwork struct {
	clock floodgate.Clock
	delay time.Duration

	mu        sync.Mutex
	endpoints []*GossipEndpoint
	queue     []gossipInFlight // in send order
	group     map[string]int   // partition group of each endpoint; nil: connected
}

// gossipInFlight is one message on its way to one endpoint.
type gossipInFlight struct {
	from, to string
	due      time.Time
	msg      []byte
}

// NewGossipNetwork returns an empty network whose messages take delay to
// arrive, on clock's time.
func NewGossipNetwork(clock floodgate.Clock, delay time.Duration) *GossipNetwork {
	return &GossipNetwork{clock: clock, delay: delay}
}

// GossipEndpoint is one node's place in a GossipNetwork; it implements
// GossipTransport.
type GossipEndpoint struct {
	net  *GossipNetwork
	name string
	mu   sync.Mutex
	hook MembershipHook
}

// Endpoint adds the node name to the network, or returns it if present.
func (n *GossipNetwork) Endpoint(name string) *GossipEndpoint {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range n.endpoints {
		if e.name == name {
			return e
		}
	}
	e := &GossipEndpoint{net: n, name: name}
	n.endpoints = append(n.endpoints, e)
	return e
}

// Attach implements GossipTransport.
func (e *GossipEndpoint) Attach(h MembershipHook) {
	e.mu.Lock()
	e.hook = h
	e.mu.Unlock()
}

func (e *GossipEndpoint) loadHook() MembershipHook {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hook
}

// Broadcast implements GossipTransport: one copy per other endpoint, due
// after the network's delay. Nothing is replaced: every message arrives.
func (e *GossipEndpoint) Broadcast(_ string, msg []byte) {
	n := e.net
	due := n.clock.Now().Add(n.delay)
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, to := range n.endpoints {
		if to != e {
			n.queue = append(n.queue, gossipInFlight{from: e.name, to: to.name, due: due, msg: slices.Clone(msg)})
		}
	}
}

// Deliver hands every message that is due to its endpoint, in send order,
// and returns how many it delivered. The network is FIFO: a message waits
// for those sent before it. A message between two partitioned groups is
// lost, as a datagram would be.
func (n *GossipNetwork) Deliver() int {
	now := n.clock.Now()
	n.mu.Lock()
	ready := 0
	for ready < len(n.queue) && !n.queue[ready].due.After(now) {
		ready++
	}
	due := make([]gossipInFlight, 0, ready)
	for _, m := range n.queue[:ready] {
		if n.connectedLocked(m.from, m.to) {
			due = append(due, m)
		}
	}
	clear(n.queue[:ready])
	n.queue = n.queue[ready:] // append moves the rest to a new array when it runs out of room
	n.mu.Unlock()
	for _, m := range due {
		if h := n.endpointHook(m.to); h != nil {
			h.NotifyMsg(m.msg)
		}
	}
	return len(due)
}

// InFlight returns the number of messages not yet delivered.
func (n *GossipNetwork) InFlight() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.queue)
}

// PushPull exchanges full state between every pair of endpoints that can
// talk, both ways: what memberlist's periodic push/pull does, all at once.
func (n *GossipNetwork) PushPull() {
	n.mu.Lock()
	eps := slices.Clone(n.endpoints)
	n.mu.Unlock()
	for _, a := range eps {
		for _, b := range eps {
			if a == b || !n.connected(a.name, b.name) {
				continue
			}
			ha, hb := a.loadHook(), b.loadHook()
			if ha != nil && hb != nil {
				hb.MergeRemoteState(ha.LocalState())
			}
		}
	}
}

// Partition cuts the network into groups of endpoint names; endpoints in
// no group form one more group together.
func (n *GossipNetwork) Partition(groups ...[]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.group = map[string]int{}
	for i, g := range groups {
		for _, name := range g {
			n.group[name] = i + 1
		}
	}
}

// Heal joins every group again.
func (n *GossipNetwork) Heal() {
	n.mu.Lock()
	n.group = nil
	n.mu.Unlock()
}

func (n *GossipNetwork) connected(a, b string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.connectedLocked(a, b)
}

func (n *GossipNetwork) connectedLocked(a, b string) bool {
	return n.group == nil || n.group[a] == n.group[b]
}

func (n *GossipNetwork) endpointHook(name string) MembershipHook {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range n.endpoints {
		if e.name == name {
			return e.loadHook()
		}
	}
	return nil
}
