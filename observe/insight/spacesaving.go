package insight

import (
	"cmp"
	"slices"
)

// summary is one sub-interval's weighted Space-Saving summary (Metwally,
// Agrawal and El Abbadi, 2005): at most k counters, kept in a min-heap on
// their counts so that the smallest can be replaced in O(log k). A key not
// yet monitored, arriving when all k counters are taken, replaces the
// smallest counter and inherits its count as its error: its count then
// over-estimates its true weight by at most that error, which is at most
// total/k.
//
// The heap holds each counter's count beside its index, not a pointer to
// it: sifting, which every add does, then reads contiguous memory and
// writes no pointer (no write barrier while the collector runs).
type summary struct {
	k     int
	idx   keyIndex  // key → its counter in nodes
	nodes []counter // the counters in use; their memory is kept after reset
	heap  []slot    // min-heap on count, one slot per counter in use
	total int64     // the weight of every add since reset: N
	// The decisions since reset, whatever their weight: exact is their
	// true units (an untimed one's too), cost the largest of them, and
	// period the largest Weight of a timed one (1: none was sampled).
	exact, cost, period int64
}

// counter is one monitored key; with its slot's count,
// count − err ≤ true weight ≤ count.
type counter struct {
	key  string
	err  int64
	pos  int32  // its slot in heap
	hash uint32 // its key's, in idx
}

// slot is a counter's place in the heap.
type slot struct {
	count int64
	node  int32 // the counter's index in nodes
}

// newSummary returns an empty summary of k counters. Its memory grows with
// the keys it sees, up to k counters, and is kept when it is reset.
func newSummary(k int) summary {
	return summary{k: k, idx: newKeyIndex(k)}
}

// add counts w units (w > 0) for key. It allocates nothing for a key
// already monitored, nor once the summary has held k keys.
func (s *summary) add(key string, w int64) {
	s.total += w
	h := s.idx.hash(key)
	at, found := s.idx.find(h, key, s.nodes)
	if found {
		pos := s.nodes[s.idx.node(at)].pos
		s.heap[pos].count += w
		s.down(int(pos))
		return
	}
	if n := len(s.nodes); n < s.k {
		s.nodes = append(s.nodes, counter{key: key, pos: int32(n), hash: h})
		s.heap = append(s.heap, slot{count: w, node: int32(n)})
		s.idx.put(at, h, int32(n))
		s.up(n)
		return
	}
	least := &s.heap[0] // key takes its counter and its count as error
	c := &s.nodes[least.node]
	s.idx.remove(c.hash, least.node)
	at, _ = s.idx.find(h, key, s.nodes) // the removal may have moved the empty slot
	s.idx.put(at, h, least.node)
	c.key, c.err, c.hash = key, least.count, h
	least.count += w
	s.down(0)
}

// count counts a decision of key for cost units and weight w (its
// Weight; 0 when it was untimed): in the exact figures, and in the
// summary for cost·w units when both are positive.
func (s *summary) count(key string, cost, w int64) {
	if cost <= 0 {
		return
	}
	s.exact += cost
	s.cost = max(s.cost, cost)
	if w > 0 {
		s.period = max(s.period, w)
		s.add(key, cost*w)
	}
}

// fold counts in the exact figures the units of untimed decisions
// counted without the lock, none of which cost more than cost.
func (s *summary) fold(units, cost int64) {
	s.exact += units
	s.cost = max(s.cost, cost)
}

// floor is the most weight a key that holds no counter can have had: the
// smallest count once every counter is taken, else 0 (every key seen so
// far holds one).
func (s *summary) floor() int64 {
	if len(s.heap) < s.k {
		return 0
	}
	return s.heap[0].count
}

// reset empties the summary, keeping its memory.
func (s *summary) reset() {
	s.idx.reset()
	clear(s.nodes) // let the keys go
	s.nodes = s.nodes[:0]
	s.heap = s.heap[:0]
	s.total, s.exact, s.cost, s.period = 0, 0, 0, 0
}

func (s *summary) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.nodes[s.heap[i].node].pos, s.nodes[s.heap[j].node].pos = int32(i), int32(j)
}

func (s *summary) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if s.heap[p].count <= s.heap[i].count {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *summary) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(s.heap) {
			return
		}
		m := l
		if r := l + 1; r < len(s.heap) && s.heap[r].count < s.heap[l].count {
			m = r
		}
		if s.heap[i].count <= s.heap[m].count {
			return
		}
		s.swap(i, m)
		i = m
	}
}

// merged is the union of several summaries of disjoint parts of a stream.
type merged struct {
	entries []TopEntry // every monitored key, largest count first
	total   int64      // the weight of the whole stream: N
	// The summaries' exact figures: exact summed, cost and period their
	// largest (period at least 1).
	exact, cost, period int64
}

// merge combines summaries of disjoint parts of one stream. A key
// monitored by a summary takes that summary's count and error; a key it
// does not monitor takes its floor as both (the key's true weight there
// lies between 0 and the floor). So for every key, count − error ≤ true ≤
// count still holds, and error ≤ Σ floor ≤ Σ totalᵢ/k = N/k. A key that
// no summary monitors weighs at most Σ floor ≤ N/k in all.
func merge(parts []*summary) merged {
	type acc struct{ count, err, floors int64 }
	var m merged
	var floors int64
	byKey := make(map[string]*acc)
	m.period = 1
	for _, s := range parts {
		m.total += s.total
		m.exact += s.exact
		m.cost, m.period = max(m.cost, s.cost), max(m.period, s.period)
		f := s.floor()
		floors += f
		for _, h := range s.heap {
			c := &s.nodes[h.node]
			a := byKey[c.key]
			if a == nil {
				a = new(acc)
				byKey[c.key] = a
			}
			a.count += h.count
			a.err += c.err
			a.floors += f
		}
	}
	m.entries = make([]TopEntry, 0, len(byKey))
	for k, a := range byKey {
		absent := floors - a.floors // the floors of the summaries that do not monitor k
		m.entries = append(m.entries, TopEntry{Key: k, Count: a.count + absent, Error: a.err + absent})
	}
	slices.SortFunc(m.entries, func(a, b TopEntry) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return m
}
