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
// decision can see the intermediate state: while the batch runs, decisions
// in its shards wait for their lock.
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

	out := make([]Decision, len(reqs))
	undo := make([]undoRecord, 0, len(reqs))
	failed := -1
	for i, rq := range reqs {
		sh := shards[i]
		j, added := sh.lookup(hashes[i], rq.Key, compiled[i], now)
		s := sh.t.at(j)
		var r algo.Result
		s.mu.Lock()
		undo = append(undo, undoRecord{sh: sh, hash: hashes[i], key: rq.Key, state: s.state, cost: rq.Cost, added: added})
		s.apply(sh.t.logOf(j), now, rq.Cost, true, &r)
		s.mu.Unlock()
		fill(&out[i], &r)
		if !r.Allowed {
			undo[i].cost, failed = 0, i // nothing to take back
			break
		}
		sh.minFull = min(sh.minFull, now+r.ResetAfter)
	}
	if failed < 0 {
		return out, nil
	}
	sequential := out[failed]
	rollback(undo)
	for i, rq := range reqs {
		shards[i].deniedInBatch(hashes[i], rq.Key, compiled[i], now, rq.Cost, &out[i])
	}
	if out[failed].RetryAfter == 0 { // the same key twice: it denies only after the others
		out[failed].RetryAfter = sequential.RetryAfter
	}
	return out, nil
}

// deniedInBatch describes one limit of a denied batch: nothing was consumed,
// Remaining and ResetAfter are the key's as it stands, and RetryAfter is the
// limit's own wait for this cost (0 when it alone would admit it now).
func (sh *shard) deniedInBatch(h uint64, key string, cl *compiledLimit, now, cost int64, d *Decision) {
	i := sh.t.find(h, key)
	if i < 0 {
		fresh, log := entry{}, (*algo.Log)(nil)
		fresh.configure(cl, &log)
		fresh.describeDenied(&log, now, cost, d)
		return
	}
	s, log := sh.t.at(i), sh.t.logOf(i)
	s.mu.Lock()
	s.configure(cl, log)
	s.describeDenied(log, now, cost, d)
	s.mu.Unlock()
	sh.t.touch(i)
}

func (e *entry) describeDenied(log **algo.Log, now, cost int64, d *Decision) {
	var r algo.Result
	e.apply(log, now, 0, false, &r)
	fill(d, &r)
	d.Allowed, d.Delay = false, 0
	if e.apply(log, now, cost, false, &r); !r.Allowed {
		d.RetryAfter = micros(r.RetryAfter)
	}
}

// lockAll locks each distinct shard once, in index order, and returns the
// indexes it locked. The shards are marked as batching so that decisions
// which find their key without the lock take it: a decision that had
// already found its slot finishes before the batch can hold that slot.
func (m *Memory) lockAll(index []int) []int {
	locked := slices.Clone(index)
	slices.Sort(locked)
	locked = slices.Compact(locked)
	for _, i := range locked {
		m.shards[i].mu.Lock()
		m.shards[i].batching.Store(true)
	}
	return locked
}

func (m *Memory) unlockAll(locked []int) {
	for _, i := range locked {
		m.shards[i].batching.Store(false)
		m.shards[i].mu.Unlock()
	}
}

// undoRecord restores one key to its state before an admission. It names
// the key rather than its slot: a later key of the batch may have moved it.
type undoRecord struct {
	sh    *shard
	hash  uint64
	key   string
	state algo.State
	cost  int64 // taken back from a sliding log
	added bool  // the batch added the key: rollback removes it
}

// rollback undoes admissions newest first, so that a key taken twice in one
// batch unwinds in order. A key the batch added is removed, as a key whose
// state stays full is not stored; a key evicted meanwhile is already fresh.
func rollback(undo []undoRecord) {
	for _, u := range slices.Backward(undo) {
		i := u.sh.t.find(u.hash, u.key)
		if i < 0 {
			continue
		}
		s := u.sh.t.at(i)
		s.mu.Lock()
		if u.added {
			u.sh.t.remove(i)
			continue
		}
		s.state = u.state
		if log := *u.sh.t.logOf(i); log != nil {
			log.Retract(u.cost)
		}
		s.mu.Unlock()
	}
}
