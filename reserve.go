package floodgate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// ErrNotReservable is wrapped by the error Reserve returns when the units
// could not be given back exactly: the algorithm is SlidingLog, or the
// Limiter keeps its state where no reservation can follow it (every
// Limiter but *Memory: the Redis store, the cluster strategies).
var ErrNotReservable = errors.New("floodgate: cannot reserve")

// reserver is a Limiter that hands out reservations: *Memory.
type reserver interface {
	Reserve(ctx context.Context, key string, limit Limit, cost int64) (*Reservation, error)
}

// Reserve takes cost units for key under limit from l now and returns them
// as a Reservation (see (*Memory).Reserve), for any Limiter: one that
// cannot reserve (every Limiter but *Memory) fails with an error wrapping
// ErrNotReservable, before asking it anything. Use Wait, or AllowN and
// Adjust, with those.
func Reserve(ctx context.Context, l Limiter, key string, limit Limit, cost int64) (*Reservation, error) {
	if r, ok := l.(reserver); ok {
		return r.Reserve(ctx, key, limit, cost)
	}
	if l == nil {
		return nil, errors.New("floodgate: Reserve needs a Limiter, got nil")
	}
	return nil, fmt.Errorf("%w: %T does not reserve (only *floodgate.Memory does); use Wait, or AllowN and Adjust", ErrNotReservable, l)
}

// Reservation is units that (*Memory).Reserve took from a key, which the
// holder either uses after Delay or gives back with Cancel. It is safe for
// concurrent use.
type Reservation struct {
	m        *Memory
	key      string
	limit    Limit
	cost     int64
	decision Decision
	act      int64      // µs on the Memory's clock: when the holder may act
	after    algo.State // the key's state right after the reservation
	done     atomic.Bool
}

// OK reports whether the units were taken. A reservation that is not OK
// holds nothing: its Decision says why (RetryAfter: when the same request
// would pass; negative when it never can).
func (r *Reservation) OK() bool { return r.decision.Allowed }

// Decision returns the decision the reservation was made with.
func (r *Reservation) Decision() Decision { return r.decision }

// Delay returns how long from now, on the Memory's clock, the holder must
// wait before acting: the leaky bucket's place in its queue, 0 for the
// other algorithms and once that time has come. A reservation that is not
// OK never comes due: Delay returns the largest Duration (as
// golang.org/x/time/rate's InfDuration).
func (r *Reservation) Delay() time.Duration {
	if !r.OK() {
		return math.MaxInt64
	}
	return micros(max(0, r.act-r.m.now()))
}

// Cancel gives the units back, for a holder that will not use them, as far
// as what happened since allows (see (*Memory).Reserve); it does nothing
// after the first call, for a reservation that is not OK, and once the
// units can no longer be given back exactly.
func (r *Reservation) Cancel() {
	if !r.OK() || r.cost == 0 || !r.done.CompareAndSwap(false, true) {
		return
	}
	r.m.giveBack(r)
}

// cancelOn gives the reservation back on the key's state s at now, as far
// as it can, and reports whether s changed.
func (r *Reservation) cancelOn(p *algo.Params, s *algo.State, now int64) bool {
	if p.Kind.IsBucket() {
		return r.unqueue(p, s, now)
	}
	// The windows: only from the window it was counted in, and only while
	// that window is current (see (*Memory).Reserve).
	if s.A != r.after.A || now >= r.after.A+p.Period {
		return false
	}
	algo.Adjust(p, s, now, -r.cost)
	return true
}

// unqueue takes a bucket reservation's units off the backlog, in ticks,
// under two bounds: no more than the part of its place still ahead of now
// (the part behind now has drained, and a request since may have been
// counted from there), and, for a leaky bucket, no more than the units no
// later request queued behind, so that the places handed out after it keep
// their spacing (x/time/rate's rule). A leaky reservation whose time has
// passed gives nothing back. Ticks, not units, so that a place cut by now
// is given back to the tick.
//
// Why this never gives back more than the reservation took: with the
// reservation, the key's TAT moved from T0 to T1 = T0 + cost·Interval;
// every request since moved both keys' TATs alike, except that one that
// arrived at t with the reservation-free TAT behind t closed the gap
// between them to at most T1 − t ≥ T1 − now. So the backlogs differ by at
// least min(cost·Interval, T1 − now), which bounds what is given back.
func (r *Reservation) unqueue(p *algo.Params, s *algo.State, now int64) bool {
	if p.Kind == algo.LeakyBucket && now > r.act {
		return false
	}
	taken, ok := ticksTakenSince(p, s, &r.after)
	if !ok {
		return false
	}
	back := r.cost * p.Interval
	if p.Kind == algo.LeakyBucket {
		back -= taken
	}
	back = min(back, ticksAhead(p, &r.after, now))
	if back <= 0 {
		return false
	}
	setBacklog(p, s, now, max(0, ticksAhead(p, s, now)-back))
	return true
}

// ticksTakenSince is how far the bucket's TAT has moved past end, in
// ticks: what requests after the reservation took. It is not ok when the
// TAT is behind end, which only a refund, a Reset or another Cancel since
// can do: what they gave back cannot be told from the reservation's units,
// so nothing more is given. A TAT further than the bucket can be (the
// clock went backwards) counts as the whole bucket.
func ticksTakenSince(p *algo.Params, s, end *algo.State) (taken int64, ok bool) {
	switch ahead := s.A - end.A; {
	case ahead < 0 || (ahead == 0 && s.B < end.B):
		return 0, false
	case ahead > p.MaxAhead:
		return p.Tolerance, true
	default:
		return ahead*p.Scale + s.B - end.B, true
	}
}

// ticksAhead is how far the TAT of state s lies ahead of now, in ticks
// (0 when it is not ahead), at most as far as decisions read it.
func ticksAhead(p *algo.Params, s *algo.State, now int64) int64 {
	if s.A < now {
		return 0
	}
	return min(s.A-now, p.MaxAhead)*p.Scale + s.B
}

// setBacklog writes a bucket state whose TAT lies backlog ticks ahead of
// now: the zero State, a key with nothing counted, when backlog is 0.
func setBacklog(p *algo.Params, s *algo.State, now, backlog int64) {
	if backlog == 0 {
		*s = algo.State{}
		return
	}
	s.A, s.B, s.C = now+backlog/p.Scale, backlog%p.Scale, p.Scale
}
