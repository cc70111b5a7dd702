package sim

import (
	"container/heap"
	"time"
)

// event is one thing to do at a virtual time; seq breaks ties in the
// order events were scheduled, so the run never depends on heap internals.
type event struct {
	at  int64 // µs since the Unix epoch
	seq uint64
	fn  func()
}

// eventQueue is a min-heap of events by (at, seq).
type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = event{}
	*q = old[:len(old)-1]
	return e
}

// engine is the virtual time line.
type engine struct {
	now   int64
	seq   uint64
	queue eventQueue
}

// at schedules fn at virtual time t (never before now).
func (e *engine) at(t int64, fn func()) {
	e.seq++
	heap.Push(&e.queue, event{at: max(t, e.now), seq: e.seq, fn: fn})
}

// after schedules fn d µs from now.
func (e *engine) after(d int64, fn func()) { e.at(e.now+d, fn) }

// run executes events in order until none is left.
func (e *engine) run() {
	for e.queue.Len() > 0 {
		ev := heap.Pop(&e.queue).(event)
		e.now = ev.at
		ev.fn()
	}
}

// virtualClock is a floodgate.Clock reading the engine's time plus a fixed
// offset: a node's clock, or (offset 0) the store's.
type virtualClock struct {
	eng    *engine
	offset int64 // µs
}

// Now implements floodgate.Clock.
func (c *virtualClock) Now() time.Time { return time.UnixMicro(c.eng.now + c.offset) }
