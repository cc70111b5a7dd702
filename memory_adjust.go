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
	if s, log := sh.acquireKey(h, key, &limit); s != nil {
		s.adjust(log, now, delta)
		s.mu.Unlock()
		return nil
	}
	return m.adjustLocked(sh, h, key, limit, now, delta)
}

// acquireKey is AllowN's path to an existing key: it locks the key's slot
// without the shard's lock and returns it with its log, or nil when that
// path does not apply (a bounded shard, whose recency order every use
// changes; a batch holding the shard; a key that is absent, moving or under
// another limit) and the caller must take the shard's lock.
func (sh *shard) acquireKey(h uint64, key string, limit *Limit) (*slot, **algo.Log) {
	if sh.capacity != 0 {
		return nil, nil
	}
	a, i := sh.t.acquire(h)
	if i < 0 {
		return nil, nil
	}
	s := &a.slots[i]
	if s.key == key && sameLimit(&s.limit.limit, limit) && !sh.batching.Load() {
		return s, &a.logs[i]
	}
	s.mu.Unlock()
	return nil, nil
}

// adjustLocked adjusts under the shard's lock, as allowLocked decides: the
// limit is compiled only when the key is absent or under another limit.
func (m *Memory) adjustLocked(sh *shard, h uint64, key string, limit Limit, now, delta int64) error {
	sh.mu.Lock()
	if i := sh.t.find(h, key); i >= 0 && sameLimit(&sh.t.at(i).limit.limit, &limit) {
		sh.adjustAt(i, nil, now, delta)
		sh.mu.Unlock()
		return nil
	}
	sh.mu.Unlock()
	cl, err := m.limits.get(limit)
	if err != nil {
		return err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i := sh.t.find(h, key); i >= 0 {
		sh.adjustAt(i, cl, now, delta)
		return nil
	}
	if delta < 0 {
		return nil // nothing was charged, nothing to give back
	}
	fresh, log := entry{key: key}, (*algo.Log)(nil)
	fresh.configure(cl, &log)
	if reset := fresh.adjust(&log, now, delta); reset > 0 {
		sh.add(h, &fresh, log, now)
		sh.minFull = min(sh.minFull, now+reset)
	}
	return nil
}

// adjustAt adjusts slot i under the shard's lock, first moving the key to
// limit cl unless cl is nil, as decideAt does for a decision.
func (sh *shard) adjustAt(i int, cl *compiledLimit, now, delta int64) {
	s, log := sh.t.at(i), sh.t.logOf(i)
	s.mu.Lock()
	if cl != nil {
		s.configure(cl, log)
	}
	reset := s.adjust(log, now, delta)
	s.mu.Unlock()
	sh.t.touch(i)
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
