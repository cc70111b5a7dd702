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
	// nothing otherwise. The decisions come in the order of the requests;
	// when one denies, each decision says what its limit alone would answer
	// and none was consumed.
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

// AllowAll implements BatchLimiter atomically: it holds the locks of every
// shard involved (in shard order, so batches never deadlock), takes the
// requests in order and undoes what it took when one denies. No other
// decision can see the intermediate state.
func (m *Memory) AllowAll(_ context.Context, reqs []Request) ([]Decision, error) {
	for _, rq := range reqs {
		if err := checkRequest(rq.Key, rq.Cost); err != nil {
			return nil, err
		}
	}
	now := m.now()
	index := make([]int, len(reqs))
	shards := make([]*shard, len(reqs))
	for i, rq := range reqs {
		index[i] = m.shardIndex(rq.Key)
		shards[i] = &m.shards[index[i]]
	}
	locked := m.lockAll(index)
	defer m.unlockAll(locked)

	entries := make([]*entry, len(reqs))
	undo := make([]undoRecord, 0, len(reqs))
	out := make([]Decision, len(reqs))
	denied := false
	for i, rq := range reqs {
		e, err := shards[i].lookup(rq.Key, rq.Limit, now)
		if err != nil {
			rollback(undo)
			return nil, err
		}
		entries[i] = e
		saved := undoRecord{e: e, state: e.state, fullAt: e.fullAt, cost: rq.Cost}
		r := e.apply(now, rq.Cost, true)
		if !r.Allowed {
			denied = true
			break
		}
		undo = append(undo, saved)
		out[i] = decision(r)
	}
	if !denied {
		for i, e := range entries {
			shards[i].minFull = min(shards[i].minFull, e.fullAt)
		}
		return out, nil
	}
	rollback(undo)
	for i, rq := range reqs {
		if entries[i] == nil {
			e, err := shards[i].lookup(rq.Key, rq.Limit, now)
			if err != nil {
				return nil, err
			}
			entries[i] = e
		}
		out[i] = decision(entries[i].apply(now, rq.Cost, false))
	}
	return out, nil
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
