package floodgate

import (
	"context"
	"fmt"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// MaxAdjustment is the largest charge or refund one Adjust call accepts:
// 2^50 units, the largest count a limit holds, and a number every store,
// Redis's Lua doubles included, holds exactly.
const MaxAdjustment = algo.MaxValue

// ValidateAdjustment returns the error every Adjuster gives for an empty key
// (wrapping ErrInvalidKey) or a delta beyond ±MaxAdjustment (wrapping
// ErrInvalidCost), nil otherwise: for stores written outside this package.
func ValidateAdjustment(key string, delta int64) error {
	if err := ValidateRequest(key, 0); err != nil {
		return err
	}
	if !algo.ValidDelta(delta) {
		return fmt.Errorf("%w: adjustment %d is beyond ±%d", ErrInvalidCost, delta, int64(MaxAdjustment))
	}
	return nil
}

// Adjust implements Adjuster. A charge (delta > 0) is counted even past the
// limit, a refund (delta < 0) never takes the key beyond its empty state:
//
//   - TokenBucket, LeakyBucket: the backlog grows or shrinks by delta
//     emission intervals, down to 0 and up to about one bucket's depth
//     (Burst·Period/Rate plus 2µs at most: a debt beyond an empty bucket
//     is forgiven).
//   - FixedWindow: the current window's count grows or shrinks by delta,
//     not below 0.
//   - SlidingWindow: a charge goes to the current window's count; a refund
//     comes off it first and then off the previous window's, neither below 0.
//   - SlidingLog: a charge is recorded at now, merged into the newest entry
//     when the log already holds Rate entries (that entry moves to now); a
//     refund removes units from the newest entries first.
//
// Window counts and the log's total are capped at MaxAdjustment. A key with
// no state takes a charge and ignores a refund. Like AllowN, Adjust does
// not allocate for a key that exists under the same limit, and does not use
// the context.
func (m *Memory) Adjust(_ context.Context, key string, limit Limit, delta int64) error {
	if err := ValidateAdjustment(key, delta); err != nil {
		return err
	}
	if delta == 0 { // nothing to do, but the limit must still be one
		_, err := m.limits.get(limit)
		return err
	}
	now := m.now()
	h := m.hash(key)
	sh := m.shardOf(h)
	if ref, ok := sh.acquireKey(h, key, &limit); ok {
		ref.Value().adjust(ref.Cold(), now, delta)
		ref.Unlock()
		return nil
	}
	return m.adjustLocked(sh, h, key, limit, now, delta)
}

// acquireKey is AllowN's path to an existing key: it locks the key's slot
// without the shard's lock, or reports false when that path does not apply
// (a bounded shard, whose recency order every use changes; a batch holding
// the shard; a key that is absent, moving or under another limit) and the
// caller must take the shard's lock.
func (sh *shard) acquireKey(h uint64, key string, limit *Limit) (ref keyRef, ok bool) {
	if sh.capacity != 0 {
		return ref, false
	}
	if ref, ok = sh.t.Acquire(h, key); !ok {
		return ref, false
	}
	if sameLimit(&ref.Value().limit.limit, limit) && !sh.batching.Load() {
		return ref, true
	}
	ref.Unlock()
	return ref, false
}

// adjustLocked adjusts under the shard's lock, as allowLocked decides: the
// limit is compiled only when the key is absent or under another limit.
func (m *Memory) adjustLocked(sh *shard, h uint64, key string, limit Limit, now, delta int64) error {
	w := sh.t.Lock()
	if i, ref, ok := lockSameLimit(w, h, key, &limit); ok {
		sh.adjustOn(w, i, ref, now, delta)
		w.Unlock()
		return nil
	}
	w.Unlock()
	cl, err := m.limits.get(limit)
	if err != nil {
		return err
	}
	w = sh.t.Lock()
	defer w.Unlock()
	if i := w.Find(h, key); i >= 0 {
		ref := w.Slot(i)
		ref.Value().configure(cl, ref.Cold())
		sh.adjustOn(w, i, ref, now, delta)
		return nil
	}
	if delta < 0 {
		return nil // nothing was charged, nothing to give back
	}
	fresh, log := entry{}, (*algo.Log)(nil)
	fresh.configure(cl, &log)
	if reset := fresh.adjust(&log, now, delta); reset > 0 {
		sh.add(w, h, key, &fresh, log, now)
		sh.minFull = min(sh.minFull, now+reset)
	}
	return nil
}

// adjustOn adjusts the key at position i, whose slot ref the caller locked,
// under the shard's lock, as decideOn decides; it unlocks the slot.
func (sh *shard) adjustOn(w *lockedKeys, i int, ref keyRef, now, delta int64) {
	reset := ref.Value().adjust(ref.Cold(), now, delta)
	ref.Unlock()
	w.Touch(i)
	// A refund can make the key full sooner than any decision said: keep
	// minFull a lower bound, so that eviction still finds full keys first.
	sh.minFull = min(sh.minFull, now+reset)
}

// adjust applies delta to the entry, whose sliding log is *log, and returns
// the time until the key is full again (µs).
func (e *entry) adjust(log **algo.Log, now, delta int64) int64 {
	p := &e.limit.params
	if p.Kind != algo.SlidingLog {
		return algo.Adjust(p, &e.state, now, delta)
	}
	if *log == nil {
		if delta < 0 {
			return 0
		}
		*log = new(algo.Log)
	}
	return algo.AdjustLog(p, *log, now, delta)
}
