package insight

import "sync/atomic"

// nearKey names one key under one limit of a policy.
type nearKey struct{ limit, key string }

// nearEntry is a key whose last decision left it at or above the
// near-limit ratio.
type nearEntry struct {
	nearKey
	used           float64
	remaining, max int64
	resetAt, seenAt  int64 // Unix nanoseconds
	pos              int   // in the policy's heap
}

// nearList is one policy's near-limit keys, in a min-heap on their reset
// time, so that the keys whose limits have reset leave first and cheaply.
// Its size counts against a budget shared by every policy.
type nearList struct {
	byKey  map[nearKey]*nearEntry
	heap   []*nearEntry
	budget *nearBudget
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
	e := l.byKey[k]
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
	e.used, e.remaining, e.max, e.seenAt = used, remaining, limit, now
	e.resetAt = resetAt
	l.fix(e.pos)
}

// admit makes room for a new key and returns its entry, or nil.
func (l *nearList) admit(k nearKey, resetAt int64) *nearEntry {
	if !l.budget.take() {
		if len(l.heap) == 0 || l.heap[0].resetAt >= resetAt {
			return nil
		}
		old := l.heap[0]
		delete(l.byKey, old.nearKey)
		old.nearKey = k
		l.byKey[k] = old
		return old
	}
	if l.byKey == nil {
		l.byKey = make(map[nearKey]*nearEntry)
	}
	e := &nearEntry{nearKey: k, pos: len(l.heap)}
	l.heap = append(l.heap, e)
	l.byKey[k] = e
	return e
}

// expire removes the keys whose limits have reset by now.
func (l *nearList) expire(now int64) {
	for len(l.heap) > 0 && l.heap[0].resetAt <= now {
		l.remove(l.heap[0])
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
	delete(l.byKey, e.nearKey)
	l.budget.used.Add(-1)
}

func (l *nearList) swap(i, j int) {
	l.heap[i], l.heap[j] = l.heap[j], l.heap[i]
	l.heap[i].pos, l.heap[j].pos = i, j
}

// fix restores the heap after entry i's reset time changed.
func (l *nearList) fix(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if l.heap[p].resetAt <= l.heap[i].resetAt {
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
		if r := c + 1; r < len(l.heap) && l.heap[r].resetAt < l.heap[c].resetAt {
			c = r
		}
		if l.heap[i].resetAt <= l.heap[c].resetAt {
			return
		}
		l.swap(i, c)
		i = c
	}
}
