package floodgate

import (
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// ErrNotReservable is wrapped by the error Reserve returns for a limit
// whose algorithm cannot give a reservation back exactly: SlidingLog.
var ErrNotReservable = errors.New("floodgate: the algorithm cannot reserve")

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

// refundable is how many of the reservation's units can go back at now,
// the key's state being s.
func (r *Reservation) refundable(p *algo.Params, s *algo.State, now int64) int64 {
	end := &r.after
	switch p.Kind {
	case algo.TokenBucket:
		if *s == *end || ticksAhead(p, end, now) > r.cost*p.Interval {
			// Nothing came after it, or everything that did came while the
			// backlog before it was still there: without it they would have
			// been counted the same, only r.cost intervals earlier.
			return r.cost
		}
		// What came after may have been counted behind it (an empty
		// bucket would have counted it from its own arrival instead):
		// giving back could free units those requests still hold.
		return 0
	case algo.LeakyBucket:
		if now > r.act { // it has left the queue
			return 0
		}
		return r.cost - ceilUnits(ticksTakenSince(p, s, end), p.Interval)
	default: // the windows: only from the window it was counted in
		if s.A != end.A || now >= end.A+p.Period {
			return 0
		}
		return r.cost
	}
}

// ticksTakenSince is how far the bucket's TAT has moved past end, in
// ticks: what requests after the reservation took. A TAT moved back (a
// refund) counts 0; one further than the bucket can be (the clock went
// backwards) counts as the whole bucket.
func ticksTakenSince(p *algo.Params, s, end *algo.State) int64 {
	switch ahead := s.A - end.A; {
	case ahead < 0 || (ahead == 0 && s.B <= end.B):
		return 0
	case ahead > p.MaxAhead:
		return p.Tolerance
	default:
		return ahead*p.Scale + s.B - end.B
	}
}

// ticksAhead is how far the TAT of state s lies ahead of now, in ticks
// (0 when it is not ahead); the reservation's state is never further ahead
// of a later now than MaxAhead.
func ticksAhead(p *algo.Params, s *algo.State, now int64) int64 {
	if s.A < now {
		return 0
	}
	return min(s.A-now, p.MaxAhead)*p.Scale + s.B
}

// ceilUnits is ⌈ticks/interval⌉ for ticks ≥ 0.
func ceilUnits(ticks, interval int64) int64 { return (ticks + interval - 1) / interval }
