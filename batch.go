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

// Violated reports whether d, one of the decisions ds of a request, is one
// that denied it. A denied batch denies every decision and marks those that
// caused it with a RetryAfter (see BatchLimiter); when none is marked (a
// sequential fallback, a store that does not say) every denied decision
// counts.
func Violated(d Decision, ds []Decision) bool {
	if d.Allowed {
		return false
	}
	if d.RetryAfter != 0 {
		return true
	}
	for _, o := range ds {
		if !o.Allowed && o.RetryAfter != 0 {
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
	for i, rq := range reqs {
		hashes[i] = m.hash(rq.Key)
		index[i] = int(hashes[i] & m.mask)
	}
	// The shards' tables under their locks: per distinct shard, and per
	// request. Small batches keep these on the stack.
	held, ws := make([]*lockedKeys, len(reqs)), make([]*lockedKeys, len(reqs))
	locked := m.lockAll(index, held, ws)
	defer m.unlockAll(locked, held)

	out := make([]Decision, len(reqs))
	undo := make([]undoRecord, 0, len(reqs))
	failed := -1
	for i, rq := range reqs {
		sh, w := &m.shards[index[i]], ws[i]
		j, added := sh.lookup(w, hashes[i], rq.Key, compiled[i], now)
		ref := w.Slot(j)
		e := ref.Value()
		var r algo.Result
		undo = append(undo, undoRecord{w: w, hash: hashes[i], key: rq.Key, state: e.state, cost: rq.Cost, added: added})
		e.apply(ref.Cold(), now, rq.Cost, true, &r)
		ref.Unlock()
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
		deniedInBatch(ws[i], hashes[i], rq.Key, compiled[i], now, rq.Cost, &out[i])
	}
	if out[failed].RetryAfter == 0 { // the same key twice: it denies only after the others
		out[failed].RetryAfter = sequential.RetryAfter
	}
	return out, nil
}

// deniedInBatch describes one limit of a denied batch: nothing was consumed,
// Remaining and ResetAfter are the key's as it stands, and RetryAfter is the
// limit's own wait for this cost (0 when it alone would admit it now).
func deniedInBatch(w *lockedKeys, h uint64, key string, cl *compiledLimit, now, cost int64, d *Decision) {
	i := w.Find(h, key)
	if i < 0 {
		fresh, log := entry{}, (*algo.Log)(nil)
		fresh.configure(cl, &log)
		fresh.describeDenied(&log, now, cost, d)
		return
	}
	ref := w.Slot(i)
	e := ref.Value()
	e.configure(cl, ref.Cold())
	e.describeDenied(ref.Cold(), now, cost, d)
	ref.Unlock()
	w.Touch(i)
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

// lockAll locks each distinct shard of index once, in index order, and
// returns the indexes it locked; held[n] is then the table of shard
// locked[n] under its lock, and ws[i] that of request i's shard index[i].
// The shards are marked as batching so that decisions which find their key
// without the lock take it: a decision that had already found its slot
// finishes before the batch can hold that slot.
func (m *Memory) lockAll(index []int, held, ws []*lockedKeys) []int {
	locked := slices.Clone(index)
	slices.Sort(locked)
	locked = slices.Compact(locked)
	for n, i := range locked {
		held[n] = m.shards[i].t.Lock()
		m.shards[i].batching.Store(true)
	}
	for i, s := range index {
		n, _ := slices.BinarySearch(locked, s)
		ws[i] = held[n]
	}
	return locked
}

func (m *Memory) unlockAll(locked []int, held []*lockedKeys) {
	for n, i := range locked {
		m.shards[i].batching.Store(false)
		held[n].Unlock()
	}
}

// undoRecord restores one key to its state before an admission. It names
// the key rather than its slot: a later key of the batch may have moved it.
type undoRecord struct {
	w     *lockedKeys
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
		i := u.w.Find(u.hash, u.key)
		switch {
		case i < 0:
		case u.added:
			u.w.Remove(i)
		default:
			ref := u.w.Slot(i)
			ref.Value().state = u.state
			if log := *ref.Cold(); log != nil {
				log.Retract(u.cost)
			}
			ref.Unlock()
		}
	}
}
