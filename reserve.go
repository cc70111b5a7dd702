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

// unqueue gives a bucket reservation back while nothing has been counted
// on the key since it (the key's state is still the one it left): the key's
// TAT goes from T1 back to T0 = T1 − cost·Interval, where it would be
// without the reservation, or to idle once T0 has passed; so only the part
// of the units still ahead of now comes back, to the tick. A leaky
// reservation whose time has passed gives nothing back.
//
// Why nothing once something was counted since: x/time/rate gives back
// the units later reservations did not take, but a part given back moves
// the TAT beneath the places of the reservations after it, and their own
// Cancel, reading where they ended, would then give back room that the
// requests since hold. The property test that cancels many reservations in
// any order found it; for unit costs the two rules agree. The first rule
// here also missed that part of a place can drain before its Delay ends,
// which is rounded up to a whole µs.
func (r *Reservation) unqueue(p *algo.Params, s *algo.State, now int64) bool {
	if *s != r.after || (p.Kind == algo.LeakyBucket && now > r.act) || !aheadOf(s.A, s.B, now) {
		return false
	}
	// T0 = T1 − cost·Interval, exactly: µs and ticks, so that a TAT beyond
	// what decisions read (the clock went backwards) is not cut short.
	span := r.cost * p.Interval
	a, b := s.A-span/p.Scale, s.B-span%p.Scale
	if b < 0 {
		a, b = a-1, b+p.Scale
	}
	if aheadOf(a, b, now) {
		s.A, s.B = a, b
	} else {
		*s = algo.State{} // idle: the key without the reservation
	}
	return true
}

// aheadOf reports whether the TAT of µs a and ticks b lies after now.
func aheadOf(a, b, now int64) bool { return a > now || (a == now && b > 0) }
