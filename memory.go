package floodgate

import (
	"context"
	"hash/maphash"
	"math"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// Memory is the in-process store: a Limiter that keeps every key's state in
// a sharded table. It is safe for concurrent use; keys in different shards
// never contend. A decision on an existing key does not allocate.
//
// Memory drops keys whose state is back to that of a fresh key, so memory
// follows the number of active keys: a shard that has doubled since its last
// sweep drops the keys that have been full for a minute, and under
// WithMaxKeys a shard drops every full key before it evicts one in use. Memory starts no
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
func (m *Memory) AllowN(_ context.Context, key string, limit Limit, cost int64) (d Decision, err error) {
	if err := checkRequest(key, cost); err != nil {
		return d, err
	}
	now := m.now()
	h := m.hash(key)
	sh := m.shardOf(h)
	sh.mu.Lock()
	e := sh.find(h, key)
	if e == nil || e.compiled.limit != limit {
		sh.mu.Unlock()
		return m.allowSlow(sh, h, key, limit, now, cost)
	}
	sh.touch(e)
	var r algo.Result
	e.apply(now, cost, true, &r)
	sh.minFull = min(sh.minFull, e.fullAt)
	sh.mu.Unlock()
	fill(&d, &r)
	return d, nil
}

// allowSlow decides for a key that is new or whose limit changed.
func (m *Memory) allowSlow(sh *shard, h uint64, key string, limit Limit, now, cost int64) (d Decision, err error) {
	cl, err := m.limits.get(limit)
	if err != nil {
		return d, err
	}
	var r algo.Result
	sh.mu.Lock()
	sh.decide(h, key, cl, now, cost, &r)
	sh.mu.Unlock()
	fill(&d, &r)
	return d, nil
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
	sh.mu.Lock()
	if e := sh.find(h, key); e != nil {
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
		n += int(sh.n)
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
		sh.init(int(sh.capacity))
		sh.mu.Unlock()
	}
}

func (m *Memory) now() int64 {
	if m.clock != nil {
		return m.clock.Now().UnixMicro()
	}
	return m.mono.now()
}

// hash is computed once per decision: it picks the shard and is the key of
// the shard's table, so the key's bytes are hashed once.
func (m *Memory) hash(key string) uint64 { return maphash.String(m.seed, key) }

func (m *Memory) shardOf(h uint64) *shard { return &m.shards[h&m.mask] }

// entry is one key's state and the compiled limit it was last decided under.
// What a decision reads and writes fills the first 64 bytes, and the entry
// is 128 bytes (a size class whose objects are 128-aligned), so a decision
// touches one cache line of it.
type entry struct {
	key      string
	next     *entry // another key with the same hash
	compiled *compiledLimit
	state    algo.State
	fullAt   int64 // µs from which the state equals a fresh key's

	hash         uint64
	log          *algo.Log // sliding log only
	newer, older *entry    // LRU order, kept only under WithMaxKeys
	_            [32]byte
}

// apply decides one request on the entry; with commit false the state stays
// as it was.
func (e *entry) apply(now, cost int64, commit bool, r *algo.Result) {
	p := &e.compiled.params
	if p.Kind == algo.SlidingLog {
		if e.log == nil {
			e.log = new(algo.Log)
		}
		algo.DecideLog(p, e.log, now, cost, commit, r)
	} else {
		s := &e.state
		if !commit {
			scratch := e.state
			s = &scratch
		}
		algo.Decide(p, s, now, cost, r)
	}
	e.fullAt = now + r.ResetAfter
}

// configure points the entry at a limit; a new algorithm starts fresh.
func (e *entry) configure(cl *compiledLimit) {
	if e.compiled == nil || e.compiled.params.Kind != cl.params.Kind {
		e.state, e.log = algo.State{}, nil
	}
	e.compiled = cl
}

// shard is one lock's worth of keys, one cache line: the shards of a
// Memory fit in a few kilobytes of cache and no two share a line.
type shard struct {
	mu       sync.Mutex
	keys     map[uint64]*entry // by hash; keys that share a hash are chained
	n        int32             // keys held
	capacity int32             // 0: unbounded
	sweepAt  int32             // sweep when the shard grows to this many keys
	newest   *entry            // LRU list, under a capacity
	oldest   *entry
	minFull  int64 // no key is full before this (a lower bound)
	_        [4]byte
}

func (sh *shard) find(h uint64, key string) *entry {
	for e := sh.keys[h]; e != nil; e = e.next {
		if e.key == key {
			return e
		}
	}
	return nil
}

const (
	// minSweep is the size below which a shard does not sweep.
	minSweep = 64
	// idleGrace is how long an unbounded Memory keeps a key that is back to
	// full (µs).
	idleGrace = int64(time.Minute / time.Microsecond)
)

// init empties the shard; the caller holds its lock or owns it alone.
func (sh *shard) init(capacity int) {
	sh.keys, sh.n, sh.newest, sh.oldest = nil, 0, nil, nil
	sh.capacity, sh.sweepAt, sh.minFull = int32(capacity), minSweep, math.MaxInt64
}

// decide runs one request under the shard's lock.
func (sh *shard) decide(h uint64, key string, cl *compiledLimit, now, cost int64, r *algo.Result) {
	if e := sh.find(h, key); e != nil {
		e.configure(cl)
		sh.touch(e)
		e.apply(now, cost, true, r)
		sh.minFull = min(sh.minFull, e.fullAt)
		return
	}
	fresh := entry{key: key, hash: h}
	fresh.configure(cl)
	fresh.apply(now, cost, true, r)
	if fresh.fullAt > now { // a key still full needs no memory
		e := new(entry)
		*e = fresh
		sh.insert(e, now)
	}
}

// lookup returns the entry for key under a limit, creating it if needed.
func (sh *shard) lookup(h uint64, key string, cl *compiledLimit, now int64) *entry {
	e := sh.find(h, key)
	if e == nil {
		e = &entry{key: key, hash: h, fullAt: now}
		e.configure(cl)
		sh.insert(e, now)
		return e
	}
	e.configure(cl)
	sh.touch(e)
	return e
}

func (sh *shard) insert(e *entry, now int64) {
	if sh.keys == nil {
		sh.keys = make(map[uint64]*entry)
	}
	switch {
	case sh.capacity > 0 && sh.n >= sh.capacity:
		if now >= sh.minFull {
			sh.sweep(now)
		}
		for sh.n >= sh.capacity && sh.oldest != nil {
			sh.remove(sh.oldest)
		}
	case sh.n >= sh.sweepAt:
		// Without a bound, drop only keys that have been full for a while: a
		// key that just became full is likely to be back, and dropping it
		// would cost an allocation when it is.
		sh.sweep(now - idleGrace)
		sh.sweepAt = max(minSweep, 2*sh.n)
	}
	e.next = sh.keys[e.hash]
	sh.keys[e.hash] = e
	sh.n++
	sh.minFull = min(sh.minFull, e.fullAt)
	if sh.capacity > 0 {
		sh.pushNewest(e)
	}
}

// sweep drops every key that was back to its full state at cutoff and
// recomputes minFull.
func (sh *shard) sweep(cutoff int64) {
	sh.minFull = math.MaxInt64
	for _, head := range sh.keys {
		for e := head; e != nil; {
			next := e.next
			if e.fullAt <= cutoff {
				sh.remove(e)
			} else {
				sh.minFull = min(sh.minFull, e.fullAt)
			}
			e = next
		}
	}
}

func (sh *shard) remove(e *entry) {
	link := sh.keys[e.hash]
	if link == e {
		if e.next == nil {
			delete(sh.keys, e.hash)
		} else {
			sh.keys[e.hash] = e.next
		}
	} else {
		for link.next != e {
			link = link.next
		}
		link.next = e.next
	}
	e.next = nil
	sh.n--
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
