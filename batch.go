package floodgate

import (
	"context"
	"slices"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// Request is one limit of a multi-limit request.
type Request struct {
	Key   string
	Limit Limit
	Cost  int64
}

// BatchLimiter decides several limits at once, all or nothing: a tenant
// limit, a user limit and a tokens-per-minute limit on one call.
type BatchLimiter interface {
	// AllowAll consumes every request's cost if every limit admits it, and
	// nothing otherwise. The decisions come in the order of the requests.
	// When the batch is denied every decision is denied; the limits that
	// caused it have a RetryAfter, the others a RetryAfter of 0; Remaining
	// is each key's as it stands, since nothing was consumed.
	AllowAll(ctx context.Context, reqs []Request) ([]Decision, error)
}

// Allowed reports whether every decision allows.
func Allowed(ds []Decision) bool {
	for _, d := range ds {
		if !d.Allowed {
			return false
		}
	}
	return true
}

// Combine folds the decisions of several limits on one request into the
// decision of the request as a whole, as headers report it: allowed when all
// allow; Limit and Remaining of the limit with the least remaining; the
// longest RetryAfter (negative if any limit can never admit it), ResetAfter
// and Delay.
func Combine(ds []Decision) Decision {
	if len(ds) == 0 {
		return Decision{Allowed: true}
	}
	out := ds[0]
	for _, d := range ds[1:] {
		out.Allowed = out.Allowed && d.Allowed
		if d.Remaining < out.Remaining {
			out.Limit, out.Remaining = d.Limit, d.Remaining
		}
		if out.RetryAfter >= 0 && (d.RetryAfter < 0 || d.RetryAfter > out.RetryAfter) {
			out.RetryAfter = d.RetryAfter
		}
		out.ResetAfter = max(out.ResetAfter, d.ResetAfter)
		out.Delay = max(out.Delay, d.Delay)
	}
	return out
}

// AllowAll implements BatchLimiter atomically: it holds the locks of every
// shard involved (in shard order, so batches never deadlock), takes the
// requests in order and undoes what it took when one denies. No other
// decision can see the intermediate state.
func (m *Memory) AllowAll(_ context.Context, reqs []Request) ([]Decision, error) {
	compiled := make([]*compiledLimit, len(reqs))
	for i, rq := range reqs {
		if err := checkRequest(rq.Key, rq.Cost); err != nil {
			return nil, err
		}
		cl, err := m.limits.get(rq.Limit)
		if err != nil {
			return nil, err
		}
		compiled[i] = cl
	}
	now := m.now()
	hashes := make([]uint64, len(reqs))
	index := make([]int, len(reqs))
	shards := make([]*shard, len(reqs))
	for i, rq := range reqs {
		hashes[i] = m.hash(rq.Key)
		index[i] = int(hashes[i] & m.mask)
		shards[i] = &m.shards[index[i]]
	}
	locked := m.lockAll(index)
	defer m.unlockAll(locked)

	entries := make([]*entry, len(reqs))
	undo := make([]undoRecord, 0, len(reqs))
	out := make([]Decision, len(reqs))
	denied := false
	for i, rq := range reqs {
		e := shards[i].lookup(hashes[i], rq.Key, compiled[i], now)
		entries[i] = e
		saved := undoRecord{e: e, state: e.state, fullAt: e.fullAt, cost: rq.Cost}
		var r algo.Result
		e.apply(now, rq.Cost, true, &r)
		fill(&out[i], &r)
		if !r.Allowed {
			denied = true
			break
		}
		undo = append(undo, saved)
	}
	if !denied {
		for i, e := range entries {
			shards[i].minFull = min(shards[i].minFull, e.fullAt)
		}
		return out, nil
	}
	failed := len(undo)
	sequential := out[failed]
	rollback(undo)
	for i, rq := range reqs {
		if entries[i] == nil {
			entries[i] = shards[i].lookup(hashes[i], rq.Key, compiled[i], now)
		}
		deniedInBatch(entries[i], now, rq.Cost, &out[i])
	}
	if out[failed].RetryAfter == 0 { // the same key twice: it denies only after the others
		out[failed].RetryAfter = sequential.RetryAfter
	}
	return out, nil
}

// deniedInBatch describes one limit of a denied batch: nothing was consumed,
// Remaining and ResetAfter are the key's as it stands, and RetryAfter is the
// limit's own wait for this cost (0 when it alone would admit it now).
func deniedInBatch(e *entry, now, cost int64, d *Decision) {
	var r algo.Result
	e.apply(now, 0, false, &r)
	fill(d, &r)
	d.Allowed, d.Delay = false, 0
	if e.apply(now, cost, false, &r); !r.Allowed {
		d.RetryAfter = micros(r.RetryAfter)
	}
}

// lockAll locks each distinct shard once, in index order, and returns the
// indexes it locked.
func (m *Memory) lockAll(index []int) []int {
	locked := slices.Clone(index)
	slices.Sort(locked)
	locked = slices.Compact(locked)
	for _, i := range locked {
		m.shards[i].mu.Lock()
	}
	return locked
}

func (m *Memory) unlockAll(locked []int) {
	for _, i := range locked {
		m.shards[i].mu.Unlock()
	}
}

// undoRecord restores one entry to its state before an admission.
type undoRecord struct {
	e      *entry
	state  algo.State
	fullAt int64
	cost   int64
}

// rollback undoes admissions newest first, so that a key taken twice in one
// batch unwinds in order.
func rollback(undo []undoRecord) {
	for i := len(undo) - 1; i >= 0; i-- {
		u := undo[i]
		u.e.state, u.e.fullAt = u.state, u.fullAt
		if u.e.log != nil {
			u.e.log.Retract(u.cost)
		}
	}
}
