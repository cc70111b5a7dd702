package adaptive

import (
	"context"
	"fmt"
	"time"
)

// waiter is one Acquire waiting in the queue. Waiters are pooled: the
// blocking path allocates one (with its channel and timer) only when the
// pool has none.
type waiter struct {
	prio       Priority
	enq        time.Time
	prev, next *waiter
	state      waitState
	tok        Token
	reason     ShedReason
	retry      time.Duration
	ch         chan struct{} // one send when state leaves waiting
	timer      *time.Timer
}

type waitState int

const (
	waiting waitState = iota
	granted
	refused
)

func newWaiter() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &waiter{ch: make(chan struct{}, 1), timer: t}
}

// result is what Acquire returns once the waiter has left the queue.
func (w *waiter) result() (Token, error) {
	if w.state == granted {
		return w.tok, nil
	}
	return Token{}, &ShedError{Priority: w.prio, Reason: w.reason, RetryAfter: w.retry}
}

// queue holds the waiters of each class in the order they came, oldest
// at the head, as intrusive lists: pushing and removing allocate nothing.
type queue struct {
	order        Order
	head, tail   [numClasses]*waiter
	n            int
	standingFrom time.Time // CoDel: since when the queue has stood (see CoDel)
}

func (q *queue) len() int { return q.n }

func (q *queue) push(w *waiter, now time.Time) {
	if q.n == 0 {
		q.standingFrom = now
	}
	c := w.prio
	w.prev, w.next, w.state = q.tail[c], nil, waiting
	if q.tail[c] != nil {
		q.tail[c].next = w
	} else {
		q.head[c] = w
	}
	q.tail[c] = w
	q.n++
}

func (q *queue) remove(w *waiter) {
	c := w.prio
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head[c] = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail[c] = w.prev
	}
	w.prev, w.next = nil, nil
	q.n--
}

// next is class c's waiter to serve first, last the one to serve last.
func (q *queue) next(c Priority) *waiter {
	if q.order == LIFO {
		return q.tail[c]
	}
	return q.head[c]
}

func (q *queue) last(c Priority) *waiter {
	if q.order == LIFO {
		return q.head[c]
	}
	return q.tail[c]
}

// deadline is when w is shed if it is still waiting: after MaxWait, or,
// with CoDel, once it has waited Target in a queue standing for Interval.
// Within a class it never decreases from the oldest waiter to the newest,
// so expire need only look at the oldest. Called with mu.
func (l *Limiter) deadline(w *waiter) time.Time {
	d := w.enq.Add(l.opts.MaxWait)
	if c := l.opts.CoDel; c != (CoDel{}) {
		standing := w.enq.Add(c.Target)
		if s := l.q.standingFrom.Add(c.Interval); s.After(standing) {
			standing = s
		}
		if standing.Before(d) {
			d = standing
		}
	}
	return d
}

// Expire sheds the waiters whose wait is over by the limiter's clock. The
// limiter does so itself on every acquire and release and, in Acquire, on
// a timer of the system clock's time; call it after moving a clock that
// moves only when told (a floodgate.ManualClock in a test or simulation).
func (l *Limiter) Expire() {
	now := l.clock.Now()
	l.mu.Lock()
	l.expire(now)
	l.mu.Unlock()
}

// expire sheds every waiter past its deadline. Called with mu.
func (l *Limiter) expire(now time.Time) {
	if l.q.len() == 0 {
		return
	}
	for c := range Priority(numClasses) {
		for w := l.q.head[c]; w != nil && !now.Before(l.deadline(w)); w = l.q.head[c] {
			reason := ShedStandingQueue
			if !now.Before(w.enq.Add(l.opts.MaxWait)) {
				reason = ShedWaitedTooLong
			}
			l.q.remove(w)
			l.refuse(w, reason)
		}
	}
	l.stQueued.Store(int64(l.q.len()))
}

// dispatch gives the slots free for each class to its waiters, the
// highest class first. Called with mu.
func (l *Limiter) dispatch(now time.Time) {
	for c := Critical; c >= Sheddable && l.q.len() > 0; c-- {
		for w := l.q.next(c); w != nil; w = l.q.next(c) {
			t, ok := l.admit(c, now)
			if !ok {
				break
			}
			l.q.remove(w)
			if cd := l.opts.CoDel; cd != (CoDel{}) && now.Sub(w.enq) <= cd.Target {
				l.q.standingFrom = now
			}
			w.state, w.tok = granted, t
			w.ch <- struct{}{}
		}
	}
	l.stQueued.Store(int64(l.q.len()))
}

// displace sheds the waiter of the lowest class below p that would be
// served last, to make room for p in a full queue. Called with mu.
func (l *Limiter) displace(p Priority) bool {
	for c := Sheddable; c < p; c++ {
		if w := l.q.last(c); w != nil {
			l.q.remove(w)
			l.refuse(w, ShedDisplaced)
			return true
		}
	}
	return false
}

// refuse tells a waiter, already out of the queue, that it is shed.
// Called with mu.
func (l *Limiter) refuse(w *waiter, r ShedReason) {
	w.state, w.reason, w.retry = refused, r, l.retryAfter()
	l.shed[w.prio][r].Add(1)
	w.ch <- struct{}{}
}

// wait blocks until w leaves the queue, ctx ends or its deadline passes.
func (l *Limiter) wait(ctx context.Context, w *waiter, deadline time.Time) (Token, error) {
	defer l.waiters.Put(w)
	for {
		w.timer.Reset(deadline.Sub(l.clock.Now()))
		select {
		case <-w.ch:
			w.timer.Stop()
			return w.result()
		case <-ctx.Done():
			w.timer.Stop()
			return l.abandon(ctx, w)
		case <-w.timer.C:
			now := l.clock.Now()
			l.mu.Lock()
			l.expire(now)
			if w.state == waiting {
				deadline = l.deadline(w)
			}
			l.mu.Unlock()
		}
	}
}

// abandon takes w out of the queue when its ctx ended; a slot granted in
// the meantime is released without a sample.
func (l *Limiter) abandon(ctx context.Context, w *waiter) (Token, error) {
	err := fmt.Errorf("adaptive: waiting for a slot: %w", ctx.Err())
	l.mu.Lock()
	if w.state == waiting {
		l.q.remove(w)
		l.stQueued.Store(int64(l.q.len()))
		l.mu.Unlock()
		return Token{}, err
	}
	l.mu.Unlock()
	<-w.ch
	if t, e := w.result(); e == nil {
		t.Ignore()
	}
	return Token{}, err
}
