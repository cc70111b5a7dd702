package cluster

import (
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/memberlist"
)

// MembershipHook is a strategy's state as carried by the cluster's gossip:
// messages broadcast by peers, and full-state exchanges (push/pull) that
// make every pair of members converge even when broadcasts were lost. The
// methods are called from memberlist's goroutines and must be safe for
// concurrent use.
type MembershipHook interface {
	// NotifyMsg receives one message a peer broadcast. It must not keep msg.
	NotifyMsg(msg []byte)
	// LocalState returns this node's full state, sent to a peer.
	LocalState() []byte
	// MergeRemoteState merges a peer's full state into this node's.
	MergeRemoteState(state []byte)
}

// membershipDelegate adapts memberlist's Delegate and EventDelegate to a
// MembershipHook and to MembershipConfig.OnChange.
type membershipDelegate struct {
	self      string
	logger    *slog.Logger
	onChange  func(MemberEvent)
	hook      atomic.Pointer[membershipHookBox]
	stopped   atomic.Bool // set at shutdown: memberlist's timers may still fire
	queue     memberlist.TransmitLimitedQueue
	maxQueued int

	// live is the set of live members as told by memberlist's events. It is
	// kept here because memberlist sends the events under its own lock,
	// which its own NumMembers takes too: Count must not depend on it.
	mu     sync.Mutex
	live   map[string]struct{}
	sorted []string // the names in live, sorted: rebuilt on each change
}

// membershipHookBox lets an interface value live in an atomic.Pointer.
type membershipHookBox struct{ h MembershipHook }

func newMembershipDelegate(self string, logger *slog.Logger, onChange func(MemberEvent)) *membershipDelegate {
	d := &membershipDelegate{self: self, logger: logger, onChange: onChange, live: map[string]struct{}{}}
	d.queue.RetransmitMult = memberlist.DefaultLANConfig().RetransmitMult
	d.queue.NumNodes = d.numNodes
	return d
}

// numNodes counts the live members, this node included.
func (d *membershipDelegate) numNodes() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return max(len(d.live), 1)
}

// names returns the live members' names, sorted.
func (d *membershipDelegate) names() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.sorted)
}

// rank returns self's position among the sorted names, without allocating:
// the local strategy asks on every decision.
func (d *membershipDelegate) rank() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	i, _ := slices.BinarySearch(d.sorted, d.self)
	return i
}

// track records a change and returns the live count after it.
func (d *membershipDelegate) track(kind MemberEventKind, name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch kind {
	case MemberJoined, MemberUpdated:
		d.live[name] = struct{}{}
	case MemberLeft:
		delete(d.live, name)
	}
	d.sorted = slices.Sorted(maps.Keys(d.live))
	return max(len(d.live), 1)
}

func (d *membershipDelegate) attach(h MembershipHook) { d.hook.Store(&membershipHookBox{h}) }

func (d *membershipDelegate) loadHook() MembershipHook {
	if b := d.hook.Load(); b != nil {
		return b.h
	}
	return nil
}

func (d *membershipDelegate) broadcast(name string, msg []byte) {
	d.queue.QueueBroadcast(&membershipBroadcast{name: name, msg: msg})
	if d.queue.NumQueued() > d.maxQueued {
		d.queue.Prune(d.maxQueued)
	}
}

// NodeMeta implements memberlist.Delegate: members carry no metadata.
func (d *membershipDelegate) NodeMeta(int) []byte { return nil }

// NotifyMsg implements memberlist.Delegate. memberlist reuses buf, so the
// hook gets it only for the call.
func (d *membershipDelegate) NotifyMsg(buf []byte) {
	if h := d.loadHook(); h != nil {
		h.NotifyMsg(buf)
	}
}

// GetBroadcasts implements memberlist.Delegate.
func (d *membershipDelegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.queue.GetBroadcasts(overhead, limit)
}

// LocalState implements memberlist.Delegate.
func (d *membershipDelegate) LocalState(bool) []byte {
	if h := d.loadHook(); h != nil {
		return h.LocalState()
	}
	return nil
}

// MergeRemoteState implements memberlist.Delegate.
func (d *membershipDelegate) MergeRemoteState(buf []byte, _ bool) {
	if h := d.loadHook(); h != nil && len(buf) > 0 {
		h.MergeRemoteState(buf)
	}
}

// NotifyJoin implements memberlist.EventDelegate.
func (d *membershipDelegate) NotifyJoin(n *memberlist.Node) { d.notify(MemberJoined, n) }

// NotifyLeave implements memberlist.EventDelegate; a member declared dead
// is reported as having left.
func (d *membershipDelegate) NotifyLeave(n *memberlist.Node) { d.notify(MemberLeft, n) }

// NotifyUpdate implements memberlist.EventDelegate.
func (d *membershipDelegate) NotifyUpdate(n *memberlist.Node) { d.notify(MemberUpdated, n) }

// stop silences the events: a suspicion timer of a stopped memberlist can
// still declare a peer dead, and nobody is listening any more.
func (d *membershipDelegate) stop() { d.stopped.Store(true) }

func (d *membershipDelegate) notify(kind MemberEventKind, n *memberlist.Node) {
	if d.stopped.Load() {
		return
	}
	ev := MemberEvent{Kind: kind, Node: n.Name, Count: d.track(kind, n.Name)}
	d.logger.Info("cluster member changed", "self", d.self, "member", ev.Node, "event", kind.String(), "live", ev.Count)
	if d.onChange != nil {
		d.onChange(ev)
	}
}

// membershipBroadcast is one queued message; a newer one of the same name
// invalidates it, so the queue holds only the latest value of a slot.
type membershipBroadcast struct {
	name string
	msg  []byte
}

func (b *membershipBroadcast) Invalidates(other memberlist.Broadcast) bool {
	o, ok := other.(*membershipBroadcast)
	return ok && o.name == b.name
}

func (b *membershipBroadcast) Name() string    { return b.name }
func (b *membershipBroadcast) Message() []byte { return b.msg }
func (b *membershipBroadcast) Finished()       {}
