package floodgate

import (
	"context"
	"fmt"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// Reserve takes cost units from key under limit now, as AllowN does, and
// returns them as a Reservation that the caller can give back with Cancel
// when it will not act after all (x/time/rate's Reserve). The decision is
// AllowN's: a reservation that AllowN would deny is not OK and takes
// nothing. Cancel never leaves the key with more room than a key that saw
// every request but the cancelled reservations. What each algorithm
// reserves, and what Cancel gives back:
//
//   - LeakyBucket reserves into the future: the reservation's Delay is its
//     place in the queue, up to Burst−1 emission intervals ahead. Cancel,
//     until that time has passed and while nothing has been queued behind
//     it, gives its place back: the key is then as if it had never been
//     reserved (all of it before its time; at its time, whatever of it
//     had not drained yet, since Delay is rounded up to a whole µs). Once
//     a request has queued behind it, nothing: the places after it keep
//     their spacing (as x/time/rate's Cancel does for unit costs).
//   - TokenBucket reserves only what passes now (Delay 0). Its state holds
//     no debt beyond an empty bucket: that bound keeps a key honest under a
//     clock that goes backwards, and memory and Redis share it, so a slot
//     in the future cannot be promised without every later decision
//     misreading it; a reservation that would have to wait is not OK, and
//     its Decision says when to try again (Wait does). For reservations
//     into the future use LeakyBucket. Cancel, while nothing has been
//     admitted on the key since, gives back what the bucket has not
//     refilled of the units yet, exactly as if they had never been taken;
//     nothing once a request has been admitted after it.
//   - FixedWindow and SlidingWindow reserve in the current window (Delay
//     0); Cancel gives the units back while that window is current, and
//     nothing after (a fixed window's past no longer limits anything; in a
//     sliding window the units would have to come off the previous
//     window's count, which later requests were weighed against).
//   - SlidingLog cannot reserve: Reserve returns an error wrapping
//     ErrNotReservable. Its log merges entries, so the units of one request
//     cannot be found again to give them back.
//
// A reservation gives nothing back once its key is gone (Reset, evicted)
// or decided under another limit. Cancel before a Reset: after one, a
// window's Cancel takes its units off what requests since counted in the
// same window.
//
// Only Memory reserves (see Reserve for the others): the Redis store's
// scripts answer a decision, not the key's state after it, which Cancel
// needs to tell whether anything came after the reservation; a caller of a
// Redis store can give units back with Adjust instead, without that guard.
func (m *Memory) Reserve(_ context.Context, key string, limit Limit, cost int64) (*Reservation, error) {
	// Small enough to inline, so that a caller that keeps the reservation
	// to itself has it on its stack: no allocation.
	return m.reserve(new(Reservation), key, limit, cost)
}

// reserve decides the request into r and records what Cancel needs; it
// returns r, or nil and the error.
func (m *Memory) reserve(r *Reservation, key string, limit Limit, cost int64) (*Reservation, error) {
	r.m, r.key, r.limit, r.cost = m, key, limit, cost
	if err := checkRequest(r.key, r.cost); err != nil {
		return nil, err
	}
	cl, err := m.limits.get(r.limit)
	if err != nil {
		return nil, err
	}
	if cl.params.Kind == algo.SlidingLog {
		return nil, fmt.Errorf("%w: %s merges the requests it records, so a reservation could not be given back", ErrNotReservable, r.limit.Algorithm)
	}
	now := m.now()
	h := m.hash(r.key)
	sh := m.shardOf(h)
	var res algo.Result
	w := sh.t.Lock()
	sh.decide(w, h, r.key, cl, now, r.cost, &res)
	if i := w.Find(h, r.key); i >= 0 && res.Allowed {
		ref := w.Slot(i)
		r.after = ref.Value().state
		ref.Unlock()
	}
	w.Unlock()
	fill(&r.decision, &res)
	r.act = now + res.Delay
	return r, nil
}

// giveBack cancels a reservation under the shard's lock.
func (m *Memory) giveBack(r *Reservation) {
	now := m.now()
	h := m.hash(r.key)
	sh := m.shardOf(h)
	w := sh.t.Lock()
	defer w.Unlock()
	i, ref, ok := lockSameLimit(w, h, r.key, &r.limit)
	if !ok {
		return
	}
	if !r.cancelOn(&ref.Value().limit.params, &ref.Value().state, now) {
		ref.Unlock()
		return
	}
	sh.adjustOn(w, i, ref, now, 0) // a read: the eviction bookkeeping for the new state
}
