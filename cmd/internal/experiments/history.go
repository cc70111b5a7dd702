package experiments

// admittedWindow is an exact record of what was admitted in the last Period:
// a queue of (time, cost), oldest first. It answers the sliding log's rule,
// "at most Rate units in (now − Period, now]", for a history that someone
// else (the sliding window counter) chose, which algo.Log cannot hold: it
// records only what it admits itself.
type admittedWindow struct {
	times, costs []int64
	head         int
	total        int64
}

// admits reports whether cost more units at now keep the units admitted in
// (now − period, now] within rate. Times must not go backwards.
func (w *admittedWindow) admits(now, period, rate, cost int64) bool {
	w.expire(now - period)
	return w.total+cost <= rate
}

func (w *admittedWindow) record(at, cost int64) {
	w.times = append(w.times, at)
	w.costs = append(w.costs, cost)
	w.total += cost
}

// expire drops the entries at or before cutoff, compacting the queue once
// half of it is dead so its memory stays proportional to what is live.
func (w *admittedWindow) expire(cutoff int64) {
	for w.head < len(w.times) && w.times[w.head] <= cutoff {
		w.total -= w.costs[w.head]
		w.head++
	}
	if w.head > 0 && w.head*2 >= len(w.times) {
		n := copy(w.times, w.times[w.head:])
		copy(w.costs, w.costs[w.head:])
		w.times, w.costs, w.head = w.times[:n], w.costs[:n], 0
	}
}
