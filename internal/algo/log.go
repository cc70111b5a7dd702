package algo

// Sliding log: exact. Every admitted request is recorded with its time and
// cost; a request of cost n is admitted when the costs recorded in the last
// Period, (now − Period, now], plus n stay within Rate. So every interval of
// length Period holds at most Rate units. Memory is O(Rate) per key: one
// entry per admitted request, requests at the same microsecond merged.
//
//	Limit      = Rate
//	Remaining  = Rate − the units recorded in the last Period
//	RetryAfter = when enough of the oldest entries have left the log for n (Never above Rate)
//	ResetAfter = when the newest entry leaves the log
//
// A clock that reads earlier than the newest entry (it went backwards) is
// taken as reading that entry's time, so the log stays in order.

// Entry is one admitted request (or several in the same microsecond).
type Entry struct{ At, Cost int64 }

// Log is the sliding log of one key: a ring buffer of entries, oldest first.
// Its zero value is empty and ready to use; it allocates only to grow.
type Log struct {
	ring  []Entry
	head  int // index of the oldest entry
	n     int
	total int64 // sum of the entries' costs
}

// Len returns the number of entries.
func (l *Log) Len() int { return l.n }

// Total returns the sum of the entries' costs.
func (l *Log) Total() int64 { return l.total }

// Entries returns a copy of the entries, oldest first.
func (l *Log) Entries() []Entry {
	out := make([]Entry, l.n)
	for i := range out {
		out[i] = *l.at(i)
	}
	return out
}

// The ring's length is a power of two, so positions wrap with a mask.
func (l *Log) at(i int) *Entry { return &l.ring[(l.head+i)&(len(l.ring)-1)] }

func (l *Log) newest() *Entry { return l.at(l.n - 1) }

// expire drops the entries at or before cutoff.
func (l *Log) expire(cutoff int64) {
	for l.n > 0 && l.ring[l.head].At <= cutoff {
		l.total -= l.ring[l.head].Cost
		l.head = (l.head + 1) & (len(l.ring) - 1)
		l.n--
	}
	if l.n == 0 {
		l.head = 0
	}
}

func (l *Log) record(at, cost int64) {
	l.total += cost
	if l.n > 0 && l.newest().At == at {
		l.newest().Cost += cost
		return
	}
	if l.n == len(l.ring) {
		l.grow()
	}
	l.n++
	*l.newest() = Entry{At: at, Cost: cost}
}

func (l *Log) grow() {
	ring := make([]Entry, max(4, 2*len(l.ring))) // stays a power of two
	for i := 0; i < l.n; i++ {
		ring[i] = *l.at(i)
	}
	l.ring, l.head = ring, 0
}

// Retract takes cost units back off the newest entry, dropping it when it
// reaches zero: the undo of the last admission, for all-or-nothing batches.
func (l *Log) Retract(cost int64) {
	if l.n == 0 || cost <= 0 {
		return
	}
	e := l.newest()
	cost = min(cost, e.Cost)
	e.Cost -= cost
	l.total -= cost
	if e.Cost == 0 {
		l.n--
	}
}

// DecideLog applies one request of cost units at now (µs) to the log. With
// commit false the decision is only computed (entries that have expired are
// still dropped, which changes nothing that can be observed).
func DecideLog(p *Params, l *Log, now, cost int64, commit bool, r *Result) {
	at := now
	if l.n > 0 && l.newest().At > at {
		at = l.newest().At
	}
	l.expire(at - p.Period)
	*r = Result{Limit: p.Rate}
	switch {
	case cost > p.Rate:
		r.RetryAfter = Never
	case l.total+cost <= p.Rate:
		r.Allowed = true
		if commit && cost > 0 {
			l.record(at, cost)
		}
	default:
		r.RetryAfter = l.freedAt(l.total+cost-p.Rate) + p.Period - now
	}
	r.Remaining = max(0, p.Rate-l.total)
	if l.n > 0 {
		r.ResetAfter = l.newest().At + p.Period - now
	}
}

// freedAt returns the time of the entry whose expiry frees at least need
// units, counting from the oldest.
func (l *Log) freedAt(need int64) int64 {
	for i := 0; i < l.n; i++ {
		e := l.at(i)
		if need -= e.Cost; need <= 0 {
			return e.At
		}
	}
	return l.newest().At // unreachable while total ≤ Rate and cost ≤ Rate
}
