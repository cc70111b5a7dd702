package floodgate

import (
	"context"
	"hash/maphash"
	"math"
	"sync"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// Memory is the in-process store: a Limiter that keeps every key's state in
// a sharded table. It is safe for concurrent use; keys in different shards
// never contend. A decision on an existing key does not allocate.
//
// Memory holds a key only while its state differs from a fresh key's: a key
// back to its full state is dropped when the table next sweeps (sweeps run
// when a shard has doubled since the last one, and before evicting under
// WithMaxKeys), so memory follows the number of active keys. Memory starts no
// goroutine.
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
	mono   monotonicMicros
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

const defaultShards = 256

// NewMemory returns an empty in-memory store.
func NewMemory(opts ...MemoryOption) *Memory {
	var cfg memoryConfig
	for _, o := range opts {
		o(&cfg)
	}
	n := defaultShards
	if cfg.maxKeys > 0 {
		for n > 1 && n > cfg.maxKeys {
			n /= 2
		}
	}
	m := &Memory{
		shards: make([]shard, n),
		mask:   uint64(n - 1),
		seed:   maphash.MakeSeed(),
		clock:  cfg.clock,
		mono:   newMonotonicMicros(),
	}
	for i := range m.shards {
		m.shards[i].init(shareOf(cfg.maxKeys, n, i))
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

// AllowN implements Limiter. The context is not used: a Memory decision never
// waits.
func (m *Memory) AllowN(_ context.Context, key string, limit Limit, cost int64) (Decision, error) {
	if err := checkRequest(key, cost); err != nil {
		return Decision{}, err
	}
	now := m.now()
	sh := m.shardFor(key)
	sh.mu.Lock()
	r, err := sh.decide(key, limit, now, cost)
	sh.mu.Unlock()
	if err != nil {
		return Decision{}, err
	}
	return decision(r), nil
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
	sh := m.shardFor(key)
	sh.mu.Lock()
	if e := sh.keys[key]; e != nil {
		sh.remove(e)
	}
	sh.mu.Unlock()
	return nil
}

// Len returns the number of keys held.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.keys)
		sh.mu.Unlock()
	}
	return n
}

// Close drops every key. A Memory holds no goroutine or connection, so Close
// only releases memory early; the Memory stays usable and starts empty.
func (m *Memory) Close() {
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		sh.init(sh.capacity)
		sh.mu.Unlock()
	}
}

func (m *Memory) now() int64 {
	if m.clock != nil {
		return m.clock.Now().UnixMicro()
	}
	return m.mono.now()
}

func (m *Memory) shardFor(key string) *shard { return &m.shards[m.shardIndex(key)] }

func (m *Memory) shardIndex(key string) int { return int(maphash.String(m.seed, key) & m.mask) }

// entry is one key's state, with the parameters of the limit it was last
// decided under cached beside it so that the common case derives nothing.
type entry struct {
	key    string
	limit  Limit
	params algo.Params
	state  algo.State
	log    *algo.Log // sliding log only
	fullAt int64     // µs from which the state equals a fresh key's

	newer, older *entry // LRU order, kept only under WithMaxKeys
}

// apply decides one request on the entry; with commit false the state stays
// as it was.
func (e *entry) apply(now, cost int64, commit bool) algo.Result {
	var r algo.Result
	if e.params.Kind == algo.SlidingLog {
		if e.log == nil {
			e.log = new(algo.Log)
		}
		r = algo.DecideLog(&e.params, e.log, now, cost, commit)
	} else {
		var s algo.State
		s, r = algo.Decide(&e.params, e.state, now, cost)
		if commit {
			e.state = s
		}
	}
	e.fullAt = now + r.ResetAfter
	return r
}

// configure points the entry at limit; a new algorithm starts fresh.
func (e *entry) configure(limit Limit) error {
	p, err := limit.params()
	if err != nil {
		return err
	}
	if p.Kind != e.params.Kind {
		e.state, e.log = algo.State{}, nil
	}
	e.limit, e.params = limit, p
	return nil
}

// shard is one lock's worth of keys. Padding keeps two shards' locks off one
// cache line.
type shard struct {
	mu       sync.Mutex
	keys     map[string]*entry
	newest   *entry // LRU list head, under a capacity
	oldest   *entry
	capacity int   // 0: unbounded
	sweepAt  int   // sweep when the shard grows to this many keys
	minFull  int64 // no key is full before this (a lower bound)
	_        [64]byte
}

const minSweep = 1024

func (sh *shard) init(capacity int) {
	*sh = shard{capacity: capacity, sweepAt: minSweep, minFull: math.MaxInt64}
}

// decide runs one request under the shard's lock.
func (sh *shard) decide(key string, limit Limit, now, cost int64) (algo.Result, error) {
	if e := sh.keys[key]; e != nil {
		if e.limit != limit {
			if err := e.configure(limit); err != nil {
				return algo.Result{}, err
			}
		}
		sh.touch(e)
		r := e.apply(now, cost, true)
		sh.minFull = min(sh.minFull, e.fullAt)
		return r, nil
	}
	fresh := entry{key: key}
	if err := fresh.configure(limit); err != nil {
		return algo.Result{}, err
	}
	r := fresh.apply(now, cost, true)
	if fresh.fullAt > now { // a key still full needs no memory
		e := new(entry)
		*e = fresh
		sh.insert(e, now)
	}
	return r, nil
}

// lookup returns the entry for key under limit, creating it if needed.
func (sh *shard) lookup(key string, limit Limit, now int64) (*entry, error) {
	e := sh.keys[key]
	if e == nil {
		e = &entry{key: key, fullAt: now}
		if err := e.configure(limit); err != nil {
			return nil, err
		}
		sh.insert(e, now)
		return e, nil
	}
	if e.limit != limit {
		if err := e.configure(limit); err != nil {
			return nil, err
		}
	}
	sh.touch(e)
	return e, nil
}

func (sh *shard) insert(e *entry, now int64) {
	if sh.keys == nil {
		sh.keys = make(map[string]*entry)
	}
	switch {
	case sh.capacity > 0 && len(sh.keys) >= sh.capacity:
		if now >= sh.minFull {
			sh.sweep(now)
		}
		for len(sh.keys) >= sh.capacity && sh.oldest != nil {
			sh.remove(sh.oldest)
		}
	case len(sh.keys) >= sh.sweepAt:
		sh.sweep(now)
		sh.sweepAt = max(minSweep, 2*len(sh.keys))
	}
	sh.keys[e.key] = e
	sh.minFull = min(sh.minFull, e.fullAt)
	if sh.capacity > 0 {
		sh.pushNewest(e)
	}
}

// sweep drops every key back to its full state and recomputes minFull.
func (sh *shard) sweep(now int64) {
	sh.minFull = math.MaxInt64
	for _, e := range sh.keys {
		if e.fullAt <= now {
			sh.remove(e)
		} else {
			sh.minFull = min(sh.minFull, e.fullAt)
		}
	}
}

func (sh *shard) remove(e *entry) {
	delete(sh.keys, e.key)
	if sh.capacity > 0 {
		sh.unlink(e)
	}
}

func (sh *shard) touch(e *entry) {
	if sh.capacity > 0 && sh.newest != e {
		sh.unlink(e)
		sh.pushNewest(e)
	}
}

func (sh *shard) pushNewest(e *entry) {
	e.older, e.newer = sh.newest, nil
	if sh.newest != nil {
		sh.newest.newer = e
	}
	sh.newest = e
	if sh.oldest == nil {
		sh.oldest = e
	}
}

func (sh *shard) unlink(e *entry) {
	if e.newer != nil {
		e.newer.older = e.older
	} else {
		sh.newest = e.older
	}
	if e.older != nil {
		e.older.newer = e.newer
	} else {
		sh.oldest = e.newer
	}
	e.newer, e.older = nil, nil
}
