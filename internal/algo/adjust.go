package algo

// Adjustment corrects, after the fact, what a key was charged: a request
// reserved an estimate and turned out to cost more (delta > 0, a charge) or
// less (delta < 0, a refund). A charge is unconditional: the work is done,
// so it is counted even when it takes the key past its limit, and the
// requests after it wait for it. A refund never takes the key beyond its
// empty, unused state. Per algorithm:
//
// Token and leaky bucket. A charge of d moves the backlog (TAT − now) d
// intervals further, a refund moves it back, not below 0. The backlog is
// capped at MaxAhead µs, about one bucket's depth (Burst·Period/Rate plus
// under 2 µs): decisions read a TAT further ahead than that as a clock that
// went backwards (see Params.backlog), so a charge beyond what empties the
// bucket is forgiven rather than misread. The debt a bucket can carry thus
// grows with MaxAhead, and only with it.
//
// Fixed window. A charge adds d to the current window's count, a refund
// takes it off, not below 0. Past windows are never touched: what they
// counted no longer limits anything.
//
// Sliding window. A charge adds d to the current window's count. A refund
// takes from the current window first and the rest from the previous
// window's count (a reservation made just before the boundary is counted
// there), neither below 0. The previous window weighs only
// (Period − elapsed)/Period of the estimate, so a refund taken from it gives
// back less than -delta units of room: never more than was charged.
//
// Sliding log. A charge records d units at now (the log's newest time if
// the clock reads earlier), merged into the newest entry when that entry is
// at the same microsecond or when the log already holds Rate entries, the
// most that decisions alone ever leave in it; the merged entry then moves
// to now, so its units count a little longer than they would have (never
// shorter), and the log stays O(Rate). A refund removes units from the
// newest entries first, dropping the entries it empties, until the log is
// empty.
//
// Counts (window counts, the log's total) are capped at MaxValue, so every
// quantity a later decision forms stays below 2^53 and the Redis scripts
// stay exact. A charge that hits a cap is counted up to the cap only; below
// the caps, charging d then refunding d at the same instant restores the
// state's every decision.

// Adjust applies delta units to the state at now (µs) as described above
// and returns the time until the key is back to its empty state (µs; 0 when
// it is empty, and then *s is the zero State: a key with no state). delta 0
// changes nothing. The caller validates delta: |delta| ≤ MaxValue. It must
// not be used for SlidingLog, whose state is a Log.
func Adjust(p *Params, s *State, now, delta int64) (resetAfter int64) {
	if p.Kind == SlidingLog {
		panic("algo: Adjust called for " + p.Kind.String())
	}
	if delta == 0 {
		var r Result
		Decide(p, s, now, 0, &r) // a read: the state stays as it is
		return r.ResetAfter
	}
	switch p.Kind {
	case TokenBucket, LeakyBucket:
		return adjustBucket(p, s, now, delta)
	case FixedWindow:
		return adjustFixedWindow(p, s, now, delta)
	}
	return adjustSlidingWindow(p, s, now, delta)
}

// ValidDelta reports whether |delta| ≤ MaxValue: an adjustment every store
// can apply exactly (the Redis scripts read it as a double).
func ValidDelta(delta int64) bool { return -MaxValue <= delta && delta <= MaxValue }

// maxBacklog is the deepest backlog, in ticks, that decisions read as it is.
func (p *Params) maxBacklog() int64 { return p.MaxAhead * p.Scale }

func adjustBucket(p *Params, s *State, now, delta int64) int64 {
	backlog := p.backlog(s, now)
	switch limit := p.maxBacklog(); {
	case delta < 0 && -delta > backlog/p.Interval: // divide: -delta·Interval may overflow
		backlog = 0
	case delta < 0:
		backlog += delta * p.Interval
	case backlog >= limit:
		// As deep as decisions read it already: the clock went backwards.
		// Rewriting the state would move its TAT nearer, so it stays.
		return p.perScale.ceil(backlog)
	case delta > (limit-backlog)/p.Interval:
		backlog = limit
	default:
		backlog += delta * p.Interval
	}
	if backlog == 0 {
		*s = State{}
		return 0
	}
	whole, ticks := p.perScale.divMod(backlog)
	s.A, s.B, s.C = now+whole, ticks, p.Scale
	if ticks > 0 {
		return whole + 1
	}
	return whole
}

func adjustFixedWindow(p *Params, s *State, now, delta int64) int64 {
	start := p.windowStart(s, now)
	count := int64(0)
	if s.A == start {
		count = s.B
	}
	count = addClamped(count, delta)
	if count == 0 {
		*s = State{}
		return 0
	}
	*s = State{A: start, B: count}
	return start + p.Period - now
}

func adjustSlidingWindow(p *Params, s *State, now, delta int64) int64 {
	start, current, previous := p.slidingCounts(s, now)
	if rest := current + delta; rest < 0 { // a refund larger than the current window
		current, previous = 0, max(0, previous+rest)
	} else {
		current = addClamped(current, delta)
	}
	*s = State{A: start, B: current, C: previous}
	switch {
	case current > 0:
		return start + 2*p.Period - now
	case previous > 0:
		return start + p.Period - now
	}
	*s = State{}
	return 0
}

// addClamped returns count + delta within [0, MaxValue], for count in that
// range and |delta| ≤ MaxValue (so the sum cannot overflow).
func addClamped(count, delta int64) int64 {
	return min(max(0, count+delta), maxUnits)
}

// AdjustLog is Adjust for the sliding log. It returns the time until the
// log is empty (µs, 0 when it is).
func AdjustLog(p *Params, l *Log, now, delta int64) (resetAfter int64) {
	if delta == 0 {
		var r Result
		DecideLog(p, l, now, 0, false, &r)
		return r.ResetAfter
	}
	at := now
	if l.n > 0 && l.newest().At > at {
		at = l.newest().At
	}
	l.expire(at - p.Period)
	switch {
	case delta > 0:
		l.charge(p, at, min(delta, maxUnits-l.total))
	case delta < 0:
		l.takeNewest(-delta)
	}
	if l.n == 0 {
		return 0
	}
	return l.newest().At + p.Period - now
}

// charge records cost units at at, which is not before the newest entry.
func (l *Log) charge(p *Params, at, cost int64) {
	if cost <= 0 {
		return
	}
	if l.n > 0 && int64(l.n) >= p.Rate {
		// Full of entries: merge into the newest rather than grow past what
		// decisions need. Moving it to at only makes it count longer.
		e := l.newest()
		e.At, e.Cost = at, e.Cost+cost
		l.total += cost
		return
	}
	l.record(at, cost)
}

// takeNewest removes up to units units, newest entries first.
func (l *Log) takeNewest(units int64) {
	for units > 0 && l.n > 0 {
		e := l.newest()
		take := min(units, e.Cost)
		e.Cost, l.total, units = e.Cost-take, l.total-take, units-take
		if e.Cost == 0 {
			l.n--
		}
	}
	if l.n == 0 {
		l.head = 0
	}
}
