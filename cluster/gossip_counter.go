package cluster

import "math"

// gossipCounter is a G-counter: one slot per node, each slot written only
// by its node and only upwards. Merging takes the element-wise maximum, so
// merges commute, associate and may repeat (a message delivered twice, or
// old state pushed again, changes nothing), and every replica that has seen
// the same updates holds the same counter whatever the order.
type gossipCounter map[string]int64

// gossipMaxSlots bounds the slots of one counter: a window is shared by the
// nodes of one cluster, and a peer sending ever new names must not grow it
// without end.
const gossipMaxSlots = 4096

// gossipMaxValue bounds a slot (the largest rate a limit may have), so that
// sums over many slots cannot overflow.
const gossipMaxValue = 1 << 50

// sum is the counter's value: the units admitted in the window by every
// node this replica has heard of. It saturates instead of overflowing.
func (c gossipCounter) sum() int64 {
	var s int64
	for _, v := range c {
		if s > math.MaxInt64-v {
			return math.MaxInt64
		}
		s += v
	}
	return s
}

// observe merges one slot: it keeps the larger value, so a slot never goes
// backwards. It reports whether the counter changed; a new slot beyond
// gossipMaxSlots is dropped.
func (c gossipCounter) observe(node string, value int64) bool {
	old, ok := c[node]
	if ok && old >= value {
		return false
	}
	if !ok && len(c) >= gossipMaxSlots {
		return false
	}
	c[node] = value
	return true
}

// merge folds other into c, slot by slot.
func (c gossipCounter) merge(other gossipCounter) {
	for node, v := range other {
		c.observe(node, v)
	}
}

// clone returns a copy that shares nothing with c.
func (c gossipCounter) clone() gossipCounter {
	out := make(gossipCounter, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}
