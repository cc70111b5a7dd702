package insight

import "sync/atomic"

// nearKey names one key under one limit of a policy.
type nearKey struct{ limit, key string }

// nearEntry is a key whose last decision left it at or above the
// near-limit ratio.
type nearEntry struct {
	nearKey
	used            float64
	remaining, max  int64
	resetAt, seenAt int64 // Unix nanoseconds
	heapAt          int64 // its key in the heap: a past resetAt, ≤ resetAt
	pos             int   // in the policy's heap
}

// nearList is one policy's near-limit keys, in a min-heap on their reset
// time, so that the keys whose limits have reset leave first and cheaply.
// The heap is lazy: a decision that moves a key's reset later (the usual
// case: every decision of a busy key does) leaves the heap alone, and the
// key is moved down only when it reaches the top. Its size counts against
// a budget shared by every policy.
type nearList struct {
	byLimit map[string]map[string]*nearEntry // limit → key → entry: two string lookups hash faster than one on a pair
	heap    []*nearEntry
	budget  *nearBudget
}

func (l *nearList) get(k nearKey) *nearEntry {
	if len(l.heap) == 0 {
		return nil
	}
	return l.byLimit[k.limit][k.key]
}

func (l *nearList) put(e *nearEntry) {
	if l.byLimit == nil {
		l.byLimit = make(map[string]map[string]*nearEntry)
	}
	m := l.byLimit[e.limit]
	if m == nil {
		m = make(map[string]*nearEntry)
		l.byLimit[e.limit] = m
	}
	m[e.key] = e
}

func (l *nearList) forget(k nearKey) {
	m := l.byLimit[k.limit]
	delete(m, k.key)
	if len(m) == 0 {
		delete(l.byLimit, k.limit)
	}
}

// nearBudget is MaxNearLimit, shared by the policies' lists.
type nearBudget struct {
	max           int64
	used, dropped atomic.Int64
}

func (b *nearBudget) take() bool {
	if b.used.Add(1) > b.max {
		b.used.Add(-1)
		return false
	}
	return true
}

// note updates key after a decision at now. A key at or above the ratio
// is added or refreshed, one below it leaves. When the budget is spent, a
// new key takes the place of the policy's key that resets soonest, if
// that one resets before it; otherwise (or when the policy holds no key)
// it is dropped and counted.
func (l *nearList) note(k nearKey, near bool, used float64, remaining, limit, resetAt, now int64) {
	e := l.get(k)
	switch {
	case e == nil && !near:
		return
	case e != nil && !near:
		l.remove(e)
		return
	case e == nil:
		e = l.admit(k, resetAt)
		if e == nil {
			l.budget.dropped.Add(1)
			return
		}
	}
	e.used, e.remaining, e.max, e.seenAt, e.resetAt = used, remaining, limit, now, resetAt
	if resetAt < e.heapAt {
		e.heapAt = resetAt
		l.fix(e.pos)
	}
}

// admit makes room for a new key and returns its entry, or nil.
func (l *nearList) admit(k nearKey, resetAt int64) *nearEntry {
	if !l.budget.take() {
		l.settleTop()
		if len(l.heap) == 0 || l.heap[0].resetAt >= resetAt {
			return nil
		}
		old := l.heap[0]
		l.forget(old.nearKey)
		old.nearKey, old.heapAt = k, resetAt
		l.put(old)
		l.fix(0)
		return old
	}
	e := &nearEntry{nearKey: k, pos: len(l.heap), heapAt: resetAt}
	l.heap = append(l.heap, e)
	l.put(e)
	return e
}

// expire removes the keys whose limits have reset by now.
func (l *nearList) expire(now int64) {
	for len(l.heap) > 0 && l.heap[0].heapAt <= now {
		if top := l.heap[0]; top.resetAt > now {
			top.heapAt = top.resetAt
			l.fix(0)
			continue
		}
		l.remove(l.heap[0])
	}
}

// settleTop brings the heap's top up to date, so that it holds the key
// that resets soonest: once the top's heapAt is its resetAt, no key resets
// before it (every heapAt is at most its resetAt).
func (l *nearList) settleTop() {
	for len(l.heap) > 0 && l.heap[0].heapAt != l.heap[0].resetAt {
		l.heap[0].heapAt = l.heap[0].resetAt
		l.fix(0)
	}
}

func (l *nearList) remove(e *nearEntry) {
	last := len(l.heap) - 1
	i := e.pos
	l.swap(i, last)
	l.heap[last] = nil
	l.heap = l.heap[:last]
	if i < last {
		l.fix(i)
	}
	l.forget(e.nearKey)
	l.budget.used.Add(-1)
}

func (l *nearList) swap(i, j int) {
	l.heap[i], l.heap[j] = l.heap[j], l.heap[i]
	l.heap[i].pos, l.heap[j].pos = i, j
}

// fix restores the heap after entry i's heapAt changed.
func (l *nearList) fix(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if l.heap[p].heapAt <= l.heap[i].heapAt {
			break
		}
		l.swap(i, p)
		i = p
	}
	for {
		c := 2*i + 1
		if c >= len(l.heap) {
			return
		}
		if r := c + 1; r < len(l.heap) && l.heap[r].heapAt < l.heap[c].heapAt {
			c = r
		}
		if l.heap[i].heapAt <= l.heap[c].heapAt {
			return
		}
		l.swap(i, c)
		i = c
	}
}
