package algo

// The token bucket and the leaky bucket are one algorithm, GCRA (the generic
// cell rate algorithm), read two ways. The state is the theoretical arrival
// time TAT: the moment the bucket would be empty of debt again. A request of
// cost n is admitted when
//
//	backlog + n·Interval ≤ Tolerance,   backlog = max(0, TAT − now)
//
// and then moves TAT n intervals further. Over any interval of length t at
// most Burst + Rate·t/Period units pass.
//
// Token bucket: the admitted request passes at once.
//
//	Limit      = Burst
//	Remaining  = ⌊(Tolerance − backlog)/Interval⌋: unit requests that would still pass now
//	RetryAfter = when backlog has drained enough for this cost: ⌈(backlog + n·Interval − Tolerance)/Scale⌉ µs
//	ResetAfter = ⌈backlog/Scale⌉ µs, when the bucket is full again
//
// Leaky bucket (a shaper, like nginx limit_req without nodelay): the same
// admission test, and the admitted request is held for Delay = ⌈backlog/Scale⌉ µs
// so that requests leave spaced Period/Rate apart. Burst is the queue's
// capacity: how many unit requests can be admitted at one instant, including
// the one that leaves at once (nginx's burst=b is Burst b+1). Remaining is the
// room left in the queue.
//
// A cost above Burst can never pass: it is denied with RetryAfter = Never and
// consumes nothing.

// backlog returns max(0, TAT − now) in ticks. A TAT further ahead than the
// bucket can ever be (the clock went backwards) saturates instead of
// overflowing; such a bucket denies everything until the clock catches up.
func (p *Params) backlog(s *State, now int64) int64 {
	tat, ticks := s.A, s.B
	if s.C != p.Scale && ticks != 0 {
		// The limit changed since the state was written: round the sub-µs
		// part up to the next whole µs rather than admit anything extra.
		tat, ticks = tat+1, 0
	}
	if tat < now {
		return 0 // ticks < Scale, so TAT itself is before now
	}
	if ahead := tat - now; ahead <= p.MaxAhead {
		return ahead*p.Scale + ticks
	}
	return p.MaxAhead * p.Scale
}

func decideBucket(p *Params, s *State, now, cost int64, r *Result) {
	backlog := p.backlog(s, now)
	*r = Result{Limit: p.Burst}
	if cost > p.Burst {
		r.RetryAfter = Never
	} else if need := backlog + cost*p.Interval; need <= p.Tolerance {
		r.Allowed = true
		if p.Kind == LeakyBucket {
			r.Delay = p.perScale.ceil(backlog)
		}
		if cost > 0 {
			backlog = need
		}
	} else {
		r.RetryAfter = p.perScale.ceil(need - p.Tolerance)
	}
	if backlog < p.Tolerance {
		r.Remaining = p.perInterval.div(p.Tolerance - backlog)
	}
	whole, ticks := p.perScale.divMod(backlog)
	if r.Allowed && cost > 0 {
		// Field by field: a whole-struct copy can defeat store forwarding
		// when the next decision reads the fields back.
		s.A, s.B, s.C = now+whole, ticks, p.Scale
	}
	r.ResetAfter = whole
	if ticks > 0 {
		r.ResetAfter++
	}
}
