package floodgate

import (
	"context"
	"hash/maphash"
	"math"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate/internal/algo"
	"github.com/floodgate-io/floodgate/internal/monotime"
)

// Memory is the in-process store: a Limiter that keeps every key's state in
// a sharded table. It is safe for concurrent use. A decision on an existing
// key does not allocate and, without WithMaxKeys, waits only for decisions
// on the same key; with it, for decisions in the same shard.
//
// Memory drops keys whose state is back to that of a fresh key, so memory
// follows the number of active keys: a shard that has doubled since its last
// sweep drops the keys that have been full for a minute, and under
// WithMaxKeys a shard drops every full key before it evicts one in use.
// Memory starts no goroutine.
//
// A key holds one state: use one key per limit. A key used with another
// limit of the same algorithm keeps its state and reads it under the new
// limit (a configuration change); a key used with another algorithm starts
// fresh.
type Memory struct {
	shards []shard
	mask   uint64
	seed   maphash.Seed
	clock  Clock // nil: the monotonic system clock
	mono   monotime.Micros
	limits limitCache
}

// MemoryOption configures NewMemory.
type MemoryOption func(*memoryConfig)

type memoryConfig struct {
	clock   Clock
	maxKeys int
}

// WithClock makes the Memory read time from c instead of the system clock:
// virtual time for tests and simulation.
func WithClock(c Clock) MemoryOption { return func(cfg *memoryConfig) { cfg.clock = c } }

// WithMaxKeys bounds the number of keys held to n (n ≤ 0: unbounded). To make
// room for a new key the Memory first drops keys already back to their full
// state, which loses nothing, and then the least recently used key of the
// shard, which forgets that key's usage. Each of the shards holds its share of
// n, so eviction is least-recently-used per shard.
func WithMaxKeys(n int) MemoryOption { return func(cfg *memoryConfig) { cfg.maxKeys = n } }

const (
	defaultShards = 256
	minShardKeys  = 64 // under WithMaxKeys, the fewest keys a shard holds
)

// NewMemory returns an empty in-memory store.
func NewMemory(opts ...MemoryOption) *Memory {
	var cfg memoryConfig
	for _, o := range opts {
		o(&cfg)
	}
	n := defaultShards
	if cfg.maxKeys > 0 {
		// Small bounds get few shards, so that eviction order stays close to
		// one least-recently-used list over all keys.
		for n > 1 && n*minShardKeys > cfg.maxKeys {
			n /= 2
		}
	}
	m := &Memory{
		shards: make([]shard, n),
		mask:   uint64(n - 1),
		seed:   maphash.MakeSeed(),
		clock:  cfg.clock,
		mono:   monotime.New(),
	}
	for i := range m.shards {
		m.shards[i].capacity = int32(shareOf(cfg.maxKeys, n, i))
		m.shards[i].init()
	}
	return m
}

// shareOf splits total over n shards, the first total%n shards taking one more.
func shareOf(total, n, i int) int {
	if total <= 0 {
		return 0
	}
	share := total / n
	if i < total%n {
		share++
	}
	return share
}

// NeverDegrades reports true: a Memory is its own store and never decides
// in a failed store's place, so it never notes a decision degraded. A
// surface reporting its decisions then skips the context that would
// carry such a note (observe.Undegradable).
func (m *Memory) NeverDegrades() bool { return true }

// AllowN implements Limiter. The context is not used: a Memory decision never
// waits.
func (m *Memory) AllowN(_ context.Context, key string, limit Limit, cost int64) (d Decision, err error) {
	if err := checkRequest(key, cost); err != nil {
		return d, err
	}
	now := m.now()
	h := m.hash(key)
	sh := m.shardOf(h)
	if sh.capacity == 0 {
		if ref, ok := sh.t.Acquire(h, key); ok {
			e := ref.Value()
			if sameLimit(&e.limit.limit, &limit) && !sh.batching.Load() {
				var r algo.Result
				e.apply(ref.Cold(), now, cost, true, &r)
				ref.Unlock()
				fill(&d, &r)
				return d, nil
			}
			ref.Unlock()
		}
	}
	return m.allowLocked(sh, h, key, limit, now, cost)
}

// sameLimit is l == o, field by field so that it inlines: the generated
// struct equality is a call on every decision.
func sameLimit(l, o *Limit) bool {
	return l.Rate == o.Rate && l.Period == o.Period && l.Burst == o.Burst && l.Algorithm == o.Algorithm
}

// allowLocked decides under the shard's lock: for a bounded shard, whose
// recency order every decision changes, and for a key that is new, moving,
// in a batch or under another limit.
func (m *Memory) allowLocked(sh *shard, h uint64, key string, limit Limit, now, cost int64) (d Decision, err error) {
	var r algo.Result
	w := sh.t.Lock()
	if i, ref, ok := lockSameLimit(w, h, key, &limit); ok {
		sh.decideOn(w, i, ref, now, cost, &r)
		w.Unlock()
		fill(&d, &r)
		return d, nil
	}
	w.Unlock()
	cl, err := m.limits.get(limit)
	if err != nil {
		return d, err
	}
	w = sh.t.Lock()
	sh.decide(w, h, key, cl, now, cost, &r)
	w.Unlock()
	fill(&d, &r)
	return d, nil
}

// lockSameLimit returns the position of key and its slot, locked, when the
// key is held under limit; ok is false, and nothing is locked, otherwise.
func lockSameLimit(w *lockedKeys, h uint64, key string, limit *Limit) (i int, ref keyRef, ok bool) {
	if i = w.Find(h, key); i < 0 {
		return i, ref, false
	}
	if ref = w.Slot(i); sameLimit(&ref.Value().limit.limit, limit) {
		return i, ref, true
	}
	ref.Unlock()
	return i, ref, false
}

// Allow is AllowN with a cost of 1.
func (m *Memory) Allow(ctx context.Context, key string, limit Limit) (Decision, error) {
	return m.AllowN(ctx, key, limit, 1)
}

// Reset forgets key: its next request starts from a full state.
func (m *Memory) Reset(_ context.Context, key string) error {
	if err := checkRequest(key, 0); err != nil {
		return err
	}
	h := m.hash(key)
	sh := m.shardOf(h)
	w := sh.t.Lock()
	if i := w.Find(h, key); i >= 0 {
		w.Remove(i)
	}
	w.Unlock()
	return nil
}

// Len returns the number of keys held.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		w := m.shards[i].t.Lock()
		n += w.Len()
		w.Unlock()
	}
	return n
}

// Close drops every key. A Memory holds no goroutine or connection, so Close
// only releases memory early; the Memory stays usable and starts empty.
func (m *Memory) Close() {
	for i := range m.shards {
		sh := &m.shards[i]
		w := sh.t.Lock()
		w.Clear()
		sh.resetSweeps()
		w.Unlock()
	}
}

func (m *Memory) now() int64 {
	if m.clock != nil {
		return m.clock.Now().UnixMicro()
	}
	return m.mono.Now()
}

// hash is computed once per decision: it picks the shard and is the key of
// the shard's table, so the key's bytes are hashed once.
func (m *Memory) hash(key string) uint64 { return maphash.String(m.seed, key) }

func (m *Memory) shardOf(h uint64) *shard { return &m.shards[h&m.mask] }

// shard is one lock's worth of keys in one cache line: the shards of a
// Memory fit in a few kilobytes of cache, and a decision on an existing key
// of an unbounded shard only reads the line, so it stays in the cache of
// every core that decides. The padding comes last: when the allocator starts
// the shards 8 bytes past a line, it is the padding that shares the next
// shard's line.
//
// The table's lock is the shard's: sweepAt and minFull are read and written
// only by its holder, which is why the methods that use them take the
// *lockedKeys that Lock returns.
type shard struct {
	t        keys
	capacity int32       // 0: unbounded; set once, read without the lock
	batching atomic.Bool // an AllowAll holds the lock: decide under it
	sweepAt  int32       // sweep when the shard grows to this many keys
	minFull  int64       // under a capacity, no key is full before this (a lower bound)
	_        [8]byte
}

const (
	// minSweep is the size below which a shard does not sweep.
	minSweep = 64
	// idleGrace is how long an unbounded Memory keeps a key that is back to
	// full (µs).
	idleGrace = int64(time.Minute / time.Microsecond)
)

// init readies a shard that no other goroutine uses yet.
func (sh *shard) init() {
	sh.t.Init(sh.capacity > 0)
	sh.resetSweeps()
}

// resetSweeps is the sweep schedule of an empty shard; the caller holds
// the shard's lock or owns it alone.
func (sh *shard) resetSweeps() { sh.sweepAt, sh.minFull = minSweep, math.MaxInt64 }

// decide runs one request under the shard's lock.
func (sh *shard) decide(w *lockedKeys, h uint64, key string, cl *compiledLimit, now, cost int64, r *algo.Result) {
	if i := w.Find(h, key); i >= 0 {
		ref := w.Slot(i)
		ref.Value().configure(cl, ref.Cold())
		sh.decideOn(w, i, ref, now, cost, r)
		return
	}
	fresh, log := entry{}, (*algo.Log)(nil)
	fresh.configure(cl, &log)
	fresh.apply(&log, now, cost, true, r)
	if r.ResetAfter > 0 { // a key still full needs no memory
		sh.add(w, h, key, &fresh, log, now)
		sh.minFull = min(sh.minFull, now+r.ResetAfter)
	}
}

// decideOn runs one request on the key at position i, whose slot ref the
// caller locked, under the shard's lock; it unlocks the slot.
func (sh *shard) decideOn(w *lockedKeys, i int, ref keyRef, now, cost int64, r *algo.Result) {
	ref.Value().apply(ref.Cold(), now, cost, true, r)
	ref.Unlock()
	w.Touch(i)
	sh.minFull = min(sh.minFull, now+r.ResetAfter)
}

// lookup returns the position of key under a limit, adding the key if
// needed, and whether it added it. The position holds until the shard's
// next add or remove.
func (sh *shard) lookup(w *lockedKeys, h uint64, key string, cl *compiledLimit, now int64) (i int, added bool) {
	if i = w.Find(h, key); i >= 0 {
		ref := w.Slot(i)
		ref.Value().configure(cl, ref.Cold())
		ref.Unlock()
		w.Touch(i)
		return i, false
	}
	fresh, log := entry{}, (*algo.Log)(nil)
	fresh.configure(cl, &log)
	return sh.add(w, h, key, &fresh, log, now), true
}

// add makes room for a key known to be absent and inserts it.
func (sh *shard) add(w *lockedKeys, h uint64, key string, e *entry, log *algo.Log, now int64) int {
	switch n := int32(w.Len()); {
	case sh.capacity > 0 && n >= sh.capacity:
		if now >= sh.minFull {
			sh.sweep(w, now)
		}
		for int32(w.Len()) >= sh.capacity {
			w.Remove(w.Oldest())
		}
	case n >= sh.sweepAt:
		// Without a bound, drop only keys that have been full for a while: a
		// key that just became full is likely to be back.
		sh.sweep(w, now-idleGrace)
		sh.sweepAt = max(minSweep, 2*int32(w.Len()))
	}
	return w.Insert(h, key, e, log)
}

// sweep drops every key that was back to its full state at cutoff and
// recomputes minFull.
func (sh *shard) sweep(w *lockedKeys, cutoff int64) {
	minFull := int64(math.MaxInt64)
	w.Sweep(func(e *entry, log **algo.Log) bool {
		at := e.fullAt(log, cutoff)
		if at <= cutoff {
			return true
		}
		minFull = min(minFull, at)
		return false
	})
	sh.minFull = minFull
}
