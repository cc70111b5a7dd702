package cluster

import (
	"errors"
	"fmt"
)

// errGossipFull is returned when a new key finds the replica at its cap.
var errGossipFull = errors.New("gossip: key capacity reached")

// gossipWindowID names one limit of one key: the key and the limit's Period
// in microseconds, since the window's epochs count in Periods.
type gossipWindowID struct {
	key    string
	period int64
}

// gossipSlot is one node's count of one window: the unit of gossip.
type gossipSlot struct {
	id    gossipWindowID
	epoch int64
	node  string
	value int64
}

// gossipWindowState is one window's whole counter: the unit of push/pull.
type gossipWindowState struct {
	id      gossipWindowID
	epoch   int64
	counter gossipCounter
}

// gossipEpochsAhead is how many epochs past its own current one a replica
// keeps counts for: peers whose clocks run ahead by less than a Period
// count in the next epoch before this node gets there.
const gossipEpochsAhead = 1

// gossipReplica is one node's copy of every window's G-counter. It is plain
// data: no lock, no goroutine, no clock; time comes in as arguments (µs) and
// the caller serialises access.
type gossipReplica struct {
	maxKeys int
	keys    map[gossipWindowID]map[int64]gossipCounter // epoch → counter
}

func newGossipReplica(maxKeys int) *gossipReplica {
	return &gossipReplica{maxKeys: maxKeys, keys: map[gossipWindowID]map[int64]gossipCounter{}}
}

// gossipEpochOf is the epoch that holds now for a period: floor(now/period),
// also for times before 1970.
func gossipEpochOf(now, period int64) int64 {
	e := now / period
	if now%period < 0 {
		e--
	}
	return e
}

// counter returns the counter of id's window at epoch, creating it; at the
// cap it first drops ended windows and fails if that freed no room.
func (r *gossipReplica) counter(id gossipWindowID, epoch, now int64) (gossipCounter, error) {
	epochs, ok := r.keys[id]
	if !ok {
		if !r.room(now) {
			return nil, fmt.Errorf("%w: %d keys", errGossipFull, r.maxKeys)
		}
		epochs = map[int64]gossipCounter{}
		r.keys[id] = epochs
	}
	c, ok := epochs[epoch]
	if !ok {
		c = gossipCounter{}
		epochs[epoch] = c
	}
	return c, nil
}

// room reports whether one more key fits, collecting ended windows first
// when it would not.
func (r *gossipReplica) room(now int64) bool {
	if r.maxKeys <= 0 || len(r.keys) < r.maxKeys {
		return true
	}
	r.collect(now)
	return len(r.keys) < r.maxKeys
}

// accepts reports whether a peer's count for epoch still matters here: a
// window that has ended on this node's clock will not be decided on again,
// and one too far ahead means a clock skew beyond what the bound assumes.
func gossipAccepts(epoch, now, period int64) bool {
	cur := gossipEpochOf(now, period)
	return epoch >= cur && epoch <= cur+gossipEpochsAhead
}

// observe merges a peer's slot and reports whether anything changed.
func (r *gossipReplica) observe(s gossipSlot, now int64) (bool, error) {
	if !gossipAccepts(s.epoch, now, s.id.period) {
		return false, nil
	}
	c, err := r.counter(s.id, s.epoch, now)
	if err != nil {
		return false, err
	}
	return c.observe(s.node, s.value), nil
}

// mergeWindow merges a peer's whole counter of one window.
func (r *gossipReplica) mergeWindow(w gossipWindowState, now int64) error {
	if !gossipAccepts(w.epoch, now, w.id.period) {
		return nil
	}
	c, err := r.counter(w.id, w.epoch, now)
	if err != nil {
		return err
	}
	c.merge(w.counter)
	return nil
}

// collect drops every window that has ended at now, and keys left without
// windows; it returns how many windows it dropped.
func (r *gossipReplica) collect(now int64) int {
	dropped := 0
	for id, epochs := range r.keys {
		cur := gossipEpochOf(now, id.period)
		for e := range epochs {
			if e < cur {
				delete(epochs, e)
				dropped++
			}
		}
		if len(epochs) == 0 {
			delete(r.keys, id)
		}
	}
	return dropped
}

// snapshot copies every window, for a peer's push/pull.
func (r *gossipReplica) snapshot() []gossipWindowState {
	var out []gossipWindowState
	for id, epochs := range r.keys {
		for e, c := range epochs {
			out = append(out, gossipWindowState{id: id, epoch: e, counter: c.clone()})
		}
	}
	return out
}

// len is the number of keys held.
func (r *gossipReplica) len() int { return len(r.keys) }
