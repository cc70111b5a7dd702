package floodgate

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// entry is one key's state and the compiled limit it was last decided under.
// A sliding log, which needs lines of its own anyway, is kept apart (see
// slotArray) so that a slot fits one cache line.
type entry struct {
	key   string
	limit *compiledLimit
	state algo.State
}

// configure points the entry at a limit; a new algorithm starts fresh.
func (e *entry) configure(cl *compiledLimit, log **algo.Log) {
	if e.limit == nil || e.limit.params.Kind != cl.params.Kind {
		e.state, *log = algo.State{}, nil
	}
	e.limit = cl
}

// apply decides one request on the entry, whose sliding log is *log; with
// commit false the state stays as it was.
func (e *entry) apply(log **algo.Log, now, cost int64, commit bool, r *algo.Result) {
	p := &e.limit.params
	if p.Kind == algo.SlidingLog {
		if *log == nil {
			*log = new(algo.Log)
		}
		algo.DecideLog(p, *log, now, cost, commit, r)
		return
	}
	s := &e.state
	if !commit {
		scratch := e.state
		s = &scratch
	}
	algo.Decide(p, s, now, cost, r)
}

// fullAt returns when the key is back to a fresh key's state, as seen at at:
// at itself if it already is. It is derived rather than stored, which keeps
// a slot to one cache line; sweeps, its only users, are rare. A bucket whose
// horizon lies beyond at+MaxAhead reads as full early, so fullAt is a lower
// bound.
func (e *entry) fullAt(log **algo.Log, at int64) int64 {
	var r algo.Result
	e.apply(log, at, 0, false, &r)
	return at + r.ResetAfter
}

// slot is one place of a table: an entry, the word that says which key it
// holds, and the lock of the entry. A decision on an existing key reads and
// writes this one cache line and nothing else that is written elsewhere.
//
// The allocator starts tables of up to 512 bytes and of 32 KiB or more on a
// cache line; those in between start 8 bytes past one (an object header),
// and there the last word of each slot, the end of the state, lies on the
// next line, the one the next slot starts on.
type slot struct {
	ctl atomic.Uint64
	mu  sync.Mutex
	entry
}

// A slot's ctl is 0 when the slot is empty, ctlOf(h) when it holds a key of
// hash h, and retired when its table was replaced: the key is in the
// shard's new table. Only a goroutine holding the shard's lock changes it,
// and once the slot holds a key it also holds the slot's lock: so whoever
// locks the slot and then still reads ctlOf(h) there has that key's entry
// to itself. Filling an empty slot needs no slot lock because the entry is
// written before the ctl that publishes it.
const (
	usedBit = 1 << 63
	retired = 1
)

func ctlOf(h uint64) uint64 { return h | usedBit }

// probe returns the first slot from i on that holds word c, or -1 where the
// probe for c ends: at an empty slot, or at once in retired storage.
func (a *slotArray) probe(c uint64, i int) int {
	mask := len(a.slots) - 1
	for ; ; i = (i + 1) & mask {
		switch a.slots[i].ctl.Load() {
		case c:
			return i
		case 0, retired:
			return -1
		}
	}
}

// slotArray is one generation of a table's storage, replaced whole when the
// table grows or shrinks. logs[i] is the sliding log of the key in slots[i]:
// one pointer per slot, allocated with the slots whatever the keys'
// algorithms, so that a slot stays one line and every slot's log has a
// place that moves with it.
type slotArray struct {
	slots []slot
	logs  []*algo.Log
}

func newSlotArray(size int) *slotArray {
	return &slotArray{slots: make([]slot, size), logs: make([]*algo.Log, size)}
}

// table is one shard's keys: open addressing with linear probing, so that
// finding an existing key usually reads one slot, and backward-shift
// deletion, so that removals leave no tombstones behind.
//
// Decisions on existing keys find and lock their slot without the shard's
// lock (acquire), so that the shard's cache line is only read and stays in
// every core's cache. Everything else (adding, removing and moving keys,
// replacing the storage) holds the shard's lock and, to change a slot, the
// slot's. A search without the shard's lock can miss a key that is being
// moved; the caller then takes the shard's lock and searches again.
type table struct {
	cur atomic.Pointer[slotArray]
	lru *lru  // recency order, kept only for a bounded shard
	n   int32 // keys held
}

// link places one slot in the recency order: indexes of slots, -1 for none.
type link struct{ newer, older int32 }

// lru is the recency order of a table's keys, a doubly linked list through
// an array parallel to the slots, so that a slot moves with its links.
type lru struct {
	links          []link
	newest, oldest int32
}

const (
	minTableLen = 8
	// A table grows when an insert would take it over maxLoadNum/maxLoadDen
	// full. A full table keeps more keys' slots in cache and their pages in
	// the TLB, which saves more than the extra probes of linear probing at
	// this load cost.
	maxLoadNum, maxLoadDen = 7, 8
)

// acquire locks the first slot holding a key of hash h, without the
// shard's lock; i is -1 when there is none or it changed while we waited.
// The caller checks the slot's key, which tells it apart from another key
// of the same hash, and unlocks a.slots[i].mu; it takes the shard's lock and
// searches again whenever acquire does not deliver its key, which is
// correct in every case and rare enough to cost nothing. A goroutine holding
// a slot's lock never waits for another lock, so waiting for one here cannot
// deadlock.
func (t *table) acquire(h uint64) (a *slotArray, i int) {
	if a = t.cur.Load(); a == nil {
		return nil, -1
	}
	c := ctlOf(h)
	if i = a.probe(c, home(c, len(a.slots)-1)); i < 0 {
		return nil, -1
	}
	s := &a.slots[i]
	s.mu.Lock()
	if s.ctl.Load() != c { // emptied, refilled or retired while we waited
		s.mu.Unlock()
		return nil, -1
	}
	return a, i
}

// home is where the probe for word c starts. The low bits of a hash pick
// the shard, so the table starts from the high ones.
func home(c uint64, mask int) int { return int(bits.RotateLeft64(c, 32) & uint64(mask)) }

// The methods below need the shard's lock.

func (t *table) array() *slotArray { return t.cur.Load() }

// init empties the table, keeping a recency order when ordered. A goroutine
// still searching the old storage decides on a key as it was: as if it had
// come first.
func (t *table) init(ordered bool) {
	t.cur.Store(nil)
	t.lru, t.n = nil, 0
	if ordered {
		t.lru = &lru{newest: -1, oldest: -1}
	}
}

// find returns the index of key's slot, or -1. Keys change only under the
// shard's lock, so it reads them without locking slots.
func (t *table) find(h uint64, key string) int {
	if t.n == 0 {
		return -1
	}
	a := t.array()
	c, mask := ctlOf(h), len(a.slots)-1
	i := a.probe(c, home(c, mask))
	for i >= 0 && a.slots[i].key != key {
		i = a.probe(c, (i+1)&mask)
	}
	return i
}

// at returns slot i.
func (t *table) at(i int) *slot { return &t.array().slots[i] }

// logOf returns where slot i keeps its sliding log.
func (t *table) logOf(i int) **algo.Log { return &t.array().logs[i] }

// insert adds a key known to be absent, as the newest, and returns its index.
func (t *table) insert(h uint64, e *entry, log *algo.Log) int {
	size := 0
	if a := t.array(); a != nil {
		size = len(a.slots)
	}
	if (int(t.n)+1)*maxLoadDen > size*maxLoadNum {
		t.resize(max(minTableLen, 2*size))
	}
	i := t.place(t.array(), ctlOf(h), e, log)
	if t.lru != nil {
		t.lru.pushNewest(int32(i))
	}
	return i
}

// place puts an entry in the first empty slot of its probe. The entry is
// written before the word that publishes it.
func (t *table) place(a *slotArray, c uint64, e *entry, log *algo.Log) int {
	mask := len(a.slots) - 1
	i := home(c, mask)
	for a.slots[i].ctl.Load() != 0 {
		i = (i + 1) & mask
	}
	a.slots[i].entry, a.logs[i] = *e, log
	a.slots[i].ctl.Store(c)
	t.n++
	return i
}

// remove empties slot i, whose lock the caller holds, and shifts the rest of
// its cluster back over the gap, so that every key stays reachable from its
// home without tombstones. The gap stays locked while it moves, so that a
// key is never in two unlocked slots.
func (t *table) remove(i int) {
	if t.lru != nil {
		t.lru.unlink(int32(i))
	}
	a := t.array()
	mask := len(a.slots) - 1
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		w := a.slots[j].ctl.Load()
		if w == 0 {
			break
		}
		// The key at j may fill the gap at i unless its home lies in (i, j].
		if (j-home(w, mask))&mask >= (j-i)&mask {
			a.slots[j].mu.Lock()
			t.move(a, j, i, w)
			i = j
		}
	}
	a.slots[i].entry, a.logs[i] = entry{}, nil
	a.slots[i].ctl.Store(0)
	a.slots[i].mu.Unlock()
	t.n--
}

// move copies locked slot from, of word w, into locked slot to and unlocks
// slot to.
func (t *table) move(a *slotArray, from, to int, w uint64) {
	a.slots[to].entry, a.logs[to] = a.slots[from].entry, a.logs[from]
	a.slots[to].ctl.Store(w)
	a.slots[to].mu.Unlock()
	if t.lru != nil {
		t.lru.move(int32(from), int32(to))
	}
}

// resize rehashes every key into size slots, keeping the recency order. Each
// old slot is locked while copied and then retired, so that no decision
// lands in the old storage once a key has left it.
func (t *table) resize(size int) {
	old, order := t.array(), t.lru
	a := newSlotArray(size)
	t.n = 0
	if order == nil {
		for i := range old.slotsOrNone() {
			t.copyOut(old, i, a)
		}
	} else {
		t.lru = &lru{links: make([]link, size), newest: -1, oldest: -1}
		for i := order.oldest; i >= 0; i = order.links[i].newer {
			t.lru.pushNewest(int32(t.copyOut(old, int(i), a)))
		}
	}
	t.cur.Store(a)
}

func (a *slotArray) slotsOrNone() []slot {
	if a == nil {
		return nil
	}
	return a.slots
}

// copyOut moves old slot i into a, retiring it, and returns where it went.
func (t *table) copyOut(old *slotArray, i int, a *slotArray) int {
	s := &old.slots[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.ctl.Load()
	s.ctl.Store(retired)
	if w == 0 {
		return -1
	}
	return t.place(a, w, &s.entry, old.logs[i])
}

// sweep removes every key drop reports and shrinks the table if it is
// mostly empty afterwards. drop sees the entry and its log while the slot
// is locked.
func (t *table) sweep(drop func(*entry, **algo.Log) bool) {
	if t.n == 0 {
		return
	}
	a := t.array()
	// Start after an empty slot: no cluster then wraps around the start, so
	// the shifts of remove only bring in keys not yet visited.
	start := 0
	for a.slots[start].ctl.Load() != 0 {
		start++
	}
	mask := len(a.slots) - 1
	i := (start + 1) & mask
	for visited := 1; visited < len(a.slots); {
		s := &a.slots[i]
		if s.ctl.Load() != 0 {
			s.mu.Lock()
			if drop(&s.entry, &a.logs[i]) {
				t.remove(i) // slot i now holds the next key of its cluster, if any
				continue
			}
			s.mu.Unlock()
		}
		i = (i + 1) & mask
		visited++
	}
	t.shrink()
}

// shrink rehashes a table left under an eighth full into one at most half
// full: the table follows the keys it holds, and it takes a good part of its
// size in inserts before it grows again.
func (t *table) shrink() {
	size := len(t.array().slots)
	if int(t.n)*8 >= size || size <= minTableLen {
		return
	}
	if t.n == 0 {
		t.init(t.lru != nil)
		return
	}
	size = minTableLen
	for size < 2*int(t.n) {
		size *= 2
	}
	t.resize(size)
}

// touch makes slot i the newest.
func (t *table) touch(i int) {
	if t.lru != nil && t.lru.newest != int32(i) {
		t.lru.unlink(int32(i))
		t.lru.pushNewest(int32(i))
	}
}

// oldest returns the least recently used slot, or -1 (and -1 when no order
// is kept).
func (t *table) oldest() int {
	if t.lru == nil {
		return -1
	}
	return int(t.lru.oldest)
}

func (l *lru) pushNewest(i int32) {
	l.links[i] = link{newer: -1, older: l.newest}
	if l.newest >= 0 {
		l.links[l.newest].newer = i
	} else {
		l.oldest = i
	}
	l.newest = i
}

func (l *lru) unlink(i int32) {
	k := l.links[i]
	if k.newer >= 0 {
		l.links[k.newer].older = k.older
	} else {
		l.newest = k.older
	}
	if k.older >= 0 {
		l.links[k.older].newer = k.newer
	} else {
		l.oldest = k.newer
	}
}

// move gives slot to the place of slot from in the order; slot from is left
// out of it.
func (l *lru) move(from, to int32) {
	k := l.links[from]
	l.links[to] = k
	if k.newer >= 0 {
		l.links[k.newer].older = to
	} else {
		l.newest = to
	}
	if k.older >= 0 {
		l.links[k.older].newer = to
	} else {
		l.oldest = to
	}
}
