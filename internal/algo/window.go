package algo

// Both window algorithms align windows to multiples of Period since the Unix
// epoch, so every node and the store agree on where a window starts. When the
// clock reads a time before the window the state already counts in (it went
// backwards), the decision is made in that newer window, as at its start.

// windowStart returns the start of the window that holds now, never before
// the one the state is in.
func (p *Params) windowStart(s *State, now int64) int64 {
	start := p.perPeriod.floor(now) * p.Period
	if s.A > start {
		return s.A
	}
	return start
}

// Fixed window: at most Rate units per aligned window, so at most 2·Rate
// across a boundary.
//
//	Limit      = Rate
//	Remaining  = Rate − units admitted in this window
//	RetryAfter = until the next window (a cost above Rate: Never)
//	ResetAfter = until the next window, 0 when nothing was admitted in this one
func decideFixedWindow(p *Params, s *State, now, cost int64, r *Result) {
	start := p.windowStart(s, now)
	count := int64(0)
	if s.A == start {
		count = s.B
	}
	end := start + p.Period
	*r = Result{Limit: p.Rate}
	switch {
	case cost > p.Rate:
		r.RetryAfter = Never
	case count+cost <= p.Rate:
		r.Allowed = true
		if cost > 0 {
			count += cost
			s.A, s.B = start, count
		}
	default:
		r.RetryAfter = end - now
	}
	r.Remaining = max(0, p.Rate-count)
	if count > 0 {
		r.ResetAfter = end - now
	}
}

// Sliding window counter: the count of the last Period is estimated as
//
//	estimate = previous·(Period − elapsed)/Period + current
//
// where elapsed is the time since the current window began, and a request of
// cost n is admitted when estimate + n ≤ Rate. The comparison is exact: it
// uses weighted = ⌈previous·(Period − elapsed)/Period⌉, which is ≤ Rate − current − n
// exactly when the real-valued estimate is. An aligned window admits at most
// Rate, any interval of length Period at most 2·Rate.
//
//	Limit      = Rate
//	Remaining  = Rate − current − weighted (not below 0)
//	RetryAfter = the first moment the estimate leaves room for n (exact; Never above Rate)
//	ResetAfter = until both windows are empty: the end of the next window when
//	             current > 0, else the end of this one when previous > 0, else 0
func decideSlidingWindow(p *Params, s *State, now, cost int64, r *Result) {
	start, current, previous := p.slidingCounts(s, now)
	elapsed := max(0, now-start)
	weighted := mulDivCeil(previous, p.Period-elapsed, p.Period)
	*r = Result{Limit: p.Rate}
	switch {
	case cost > p.Rate:
		r.RetryAfter = Never
	case weighted+current+cost <= p.Rate:
		r.Allowed = true
		if cost > 0 {
			current += cost
			s.A, s.B, s.C = start, current, previous
		}
	default:
		r.RetryAfter = p.slidingRetry(start, current, previous, cost) - now
	}
	r.Remaining = max(0, p.Rate-current-weighted)
	switch {
	case current > 0:
		r.ResetAfter = start + 2*p.Period - now
	case previous > 0:
		r.ResetAfter = start + p.Period - now
	}
}

// slidingRetry returns the first time (µs) at which a request of cost ≤ Rate
// passes if nothing else arrives. The estimate only falls as time passes: the
// previous window's weight shrinks, then the current window becomes the
// previous one.
func (p *Params) slidingRetry(start, current, previous, cost int64) int64 {
	if room := p.Rate - current - cost; room >= 0 {
		// Within this window once previous·(Period − e) ≤ room·Period; at the
		// latest when the window ends, where the room is still there.
		return start + p.Period - mulDivFloor(room, p.Period, previous)
	}
	// In the next window, once current·(Period − e) ≤ (Rate − cost)·Period.
	return start + 2*p.Period - mulDivFloor(p.Rate-cost, p.Period, current)
}

// slidingCounts reads a sliding window's state at now: the current
// window's start and count, and the previous window's count (0 when the
// state is older than that).
func (p *Params) slidingCounts(s *State, now int64) (start, current, previous int64) {
	start = p.windowStart(s, now)
	switch s.A {
	case start:
		current, previous = s.B, s.C
	case start - p.Period:
		previous = s.B
	}
	return start, current, previous
}
