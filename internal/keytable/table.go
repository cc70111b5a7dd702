// Package keytable is the concurrent hash table under floodgate.Memory: string
// keys hashed by the caller, each with a value V kept in its slot and a cold
// value C kept in a parallel array. It is open addressing with linear
// probing, so that finding an existing key usually reads one slot, and
// backward-shift deletion, so that removals leave no tombstones behind.
//
// Two kinds of lock guard a table, and the types carry the protocol:
//
//   - The table's lock is taken by Table.Lock, which returns the *Locked
//     view; every method that adds, removes, moves or finds keys, or keeps
//     the recency order, is a method of Locked, so none can be called
//     without the lock. Locked.Unlock gives it back.
//   - Each slot has a lock of its own, which guards its value and cold
//     value. Table.Acquire (without the table's lock) and Locked.Slot (with
//     it) return a Ref to a locked slot; a Ref is the only way to reach a
//     value and Ref.Unlock the only way to let go of a slot. The table's own
//     methods lock the slots they change themselves: Locked.Remove takes the
//     slot's lock and lets it go with the key, so a caller never unlocks a
//     slot it did not lock.
//
// A goroutine holding a Ref takes no other lock until it unlocks it: not the
// table's (whose holder may be waiting for that slot, to move it) and not
// another slot's. The table's methods lock at most two slots, one of them
// the next in probe order of a slot they already hold, so with that rule no
// wait can deadlock.
//
// A decision on an existing key finds and locks its slot without the table's
// lock (Acquire), so that the line holding the table is only read and stays
// in every core's cache. A search without the table's lock can miss a key
// that is being moved; the caller then takes the table's lock and searches
// again (Locked.Find), which is correct in every case and rare enough to
// cost nothing.
package keytable

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// LineValueBytes is the size of V that makes a slot one 64-byte cache line
// (the word, the lock and the key take the other 32 bytes): a decision on an
// existing key then reads and writes that line and nothing else that is
// written elsewhere.
const LineValueBytes = 32

// slot is one place of a table: a key and its value, the word that says
// which key it holds, and the lock of the value.
//
// The allocator starts arrays of up to 512 bytes and of 32 KiB or more on a
// cache line; those in between start 8 bytes past one (an object header),
// and there the last word of each slot, the end of the value, lies on the
// next line, the one the next slot starts on.
type slot[V any] struct {
	ctl atomic.Uint64
	mu  sync.Mutex
	key string
	val V
}

// A slot's ctl is 0 when the slot is empty, ctlOf(h) when it holds a key of
// hash h, and retired when its storage was replaced: the key is in the
// table's new storage. Only a goroutine holding the table's lock changes it,
// and once the slot holds a key it also holds the slot's lock: so whoever
// locks the slot and then still reads ctlOf(h) there has that key's value
// to itself. Filling an empty slot needs no slot lock because the value is
// written before the ctl that publishes it.
const (
	usedBit = 1 << 63
	retired = 1
)

func ctlOf(h uint64) uint64 { return h | usedBit }

// probe returns the first slot from i on that holds word c, or -1 where the
// probe for c ends: at an empty slot, or at once in retired storage.
func (a *storage[V, C]) probe(c uint64, i int) int {
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

// storage is one generation of a table's slots, replaced whole when the
// table grows or shrinks. cold[i] is the cold value of the key in slots[i]:
// kept apart, so that a slot stays one line, and in an array allocated with
// the slots, so that every slot's cold value has a place that moves with it.
type storage[V, C any] struct {
	slots []slot[V]
	cold  []C
}

func newStorage[V, C any](size int) *storage[V, C] {
	return &storage[V, C]{slots: make([]slot[V], size), cold: make([]C, size)}
}

// Table holds string keys, each with a value V in its slot and a cold value
// C beside it. The zero Table is empty and keeps no recency order. A Table
// must not be copied after first use.
type Table[V, C any] struct {
	mu  sync.Mutex
	cur atomic.Pointer[storage[V, C]]
	lru *lru  // recency order, kept only for an ordered table
	n   int32 // keys held
}

// Locked is a Table whose lock the caller holds: Table.Lock returns it, and
// it is valid until its Unlock. Positions (slot indexes) it returns hold
// until its next Insert, Remove, Sweep or Clear, or its Unlock.
type Locked[V, C any] Table[V, C]

// Ref is a locked slot holding a key: the only way to reach the key's value
// and cold value, and to unlock the slot. A Ref and the pointers it gives
// are valid until its Unlock; the holder takes no other lock before that.
type Ref[V, C any] struct {
	s *slot[V]
	c *C
}

// Value returns the key's value.
func (r Ref[V, C]) Value() *V { return &r.s.val }

// Cold returns the key's cold value.
func (r Ref[V, C]) Cold() *C { return r.c }

// Unlock lets go of the slot.
func (r Ref[V, C]) Unlock() { r.s.mu.Unlock() }

const (
	minTableLen = 8
	// A table grows when an insert would take it over maxLoadNum/maxLoadDen
	// full. A full table keeps more keys' slots in cache and their pages in
	// the TLB, which saves more than the extra probes of linear probing at
	// this load cost.
	maxLoadNum, maxLoadDen = 7, 8
)

// Init empties the table, keeping a recency order when ordered (see
// Locked.Oldest). It is for a table no other goroutine uses yet.
func (t *Table[V, C]) Init(ordered bool) { t.reset(ordered) }

// Acquire returns the slot of key, of hash h, locked, without the table's
// lock; ok is false when the first slot of hash h holds another key, or
// there is none, or it changed while we waited: the caller then takes the
// table's lock and searches again with Locked.Find.
func (t *Table[V, C]) Acquire(h uint64, key string) (r Ref[V, C], ok bool) {
	a := t.cur.Load()
	if a == nil {
		return r, false
	}
	c := ctlOf(h)
	i := a.probe(c, home(c, len(a.slots)-1))
	if i < 0 {
		return r, false
	}
	s := &a.slots[i]
	s.mu.Lock()
	if s.ctl.Load() != c || s.key != key { // emptied, refilled or retired while we waited
		s.mu.Unlock()
		return r, false
	}
	return Ref[V, C]{s, &a.cold[i]}, true
}

// Lock takes the table's lock and returns the methods that need it.
func (t *Table[V, C]) Lock() *Locked[V, C] {
	t.mu.Lock()
	return (*Locked[V, C])(t)
}

// Unlock gives the table's lock back; w is not to be used after it.
func (w *Locked[V, C]) Unlock() { w.mu.Unlock() }

// Home is where the probe for a key of hash h starts in storage of size
// slots (a power of two). The low bits of a hash pick the caller's shard,
// so the table starts from the high ones. Tests use it to build keys that
// share a cluster.
func Home(h uint64, size int) int { return home(ctlOf(h), size-1) }

func home(c uint64, mask int) int { return int(bits.RotateLeft64(c, 32) & uint64(mask)) }

// reset empties the table, keeping a recency order when ordered. A
// goroutine still searching the old storage decides on a key as it was: as
// if it had come first.
func (t *Table[V, C]) reset(ordered bool) {
	t.cur.Store(nil)
	t.lru, t.n = nil, 0
	if ordered {
		t.lru = &lru{newest: -1, oldest: -1}
	}
}

// Clear empties the table and keeps its kind of order.
func (w *Locked[V, C]) Clear() { (*Table[V, C])(w).reset(w.lru != nil) }

// Len returns the number of keys held.
func (w *Locked[V, C]) Len() int { return int(w.n) }

// Find returns the position of key, of hash h, or -1. Keys change only
// under the table's lock, so it reads them without locking slots.
func (w *Locked[V, C]) Find(h uint64, key string) int {
	if w.n == 0 {
		return -1
	}
	a := w.cur.Load()
	c, mask := ctlOf(h), len(a.slots)-1
	i := a.probe(c, home(c, mask))
	for i >= 0 && a.slots[i].key != key {
		i = a.probe(c, (i+1)&mask)
	}
	return i
}

// Slot locks the slot at position i, which holds a key, and returns it.
func (w *Locked[V, C]) Slot(i int) Ref[V, C] {
	a := w.cur.Load()
	s := &a.slots[i]
	s.mu.Lock()
	return Ref[V, C]{s, &a.cold[i]}
}

// Insert adds key, of hash h and known to be absent, with its values, as
// the newest, and returns its position. It may move every other key.
func (w *Locked[V, C]) Insert(h uint64, key string, v *V, c C) int {
	size := 0
	if a := w.cur.Load(); a != nil {
		size = len(a.slots)
	}
	if (int(w.n)+1)*maxLoadDen > size*maxLoadNum {
		w.resize(max(minTableLen, 2*size))
	}
	i := w.place(w.cur.Load(), ctlOf(h), key, v, c)
	if w.lru != nil {
		w.lru.pushNewest(int32(i))
	}
	return i
}

// place puts a key in the first empty slot of its probe. The value is
// written before the word that publishes it.
func (w *Locked[V, C]) place(a *storage[V, C], c uint64, key string, v *V, cold C) int {
	mask := len(a.slots) - 1
	i := home(c, mask)
	for a.slots[i].ctl.Load() != 0 {
		i = (i + 1) & mask
	}
	a.slots[i].key, a.slots[i].val, a.cold[i] = key, *v, cold
	a.slots[i].ctl.Store(c)
	w.n++
	return i
}

// Remove takes out the key at position i, waiting for its slot's lock. It
// may move other keys.
func (w *Locked[V, C]) Remove(i int) {
	w.cur.Load().slots[i].mu.Lock()
	w.removeHeld(i)
}

// removeHeld empties slot i, whose lock we hold, and shifts the rest of its
// cluster back over the gap, so that every key stays reachable from its
// home without tombstones; it unlocks the slot. The gap stays locked while
// it moves, so that a key is never in two unlocked slots.
func (w *Locked[V, C]) removeHeld(i int) {
	if w.lru != nil {
		w.lru.unlink(int32(i))
	}
	a := w.cur.Load()
	mask := len(a.slots) - 1
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		c := a.slots[j].ctl.Load()
		if c == 0 {
			break
		}
		// The key at j may fill the gap at i unless its home lies in (i, j].
		if (j-home(c, mask))&mask >= (j-i)&mask {
			a.slots[j].mu.Lock()
			w.move(a, j, i, c)
			i = j
		}
	}
	var zero C
	a.slots[i].key, a.cold[i] = "", zero
	a.slots[i].val = *new(V)
	a.slots[i].ctl.Store(0)
	a.slots[i].mu.Unlock()
	w.n--
}

// move copies locked slot from, of word c, into locked slot to and unlocks
// slot to.
func (w *Locked[V, C]) move(a *storage[V, C], from, to int, c uint64) {
	a.slots[to].key, a.slots[to].val, a.cold[to] = a.slots[from].key, a.slots[from].val, a.cold[from]
	a.slots[to].ctl.Store(c)
	a.slots[to].mu.Unlock()
	if w.lru != nil {
		w.lru.move(int32(from), int32(to))
	}
}

// resize rehashes every key into size slots, keeping the recency order. Each
// old slot is locked while copied and then retired, so that no decision
// lands in the old storage once a key has left it.
func (w *Locked[V, C]) resize(size int) {
	old, order := w.cur.Load(), w.lru
	a := newStorage[V, C](size)
	w.n = 0
	if order == nil {
		if old != nil {
			for i := range old.slots {
				w.copyOut(old, i, a)
			}
		}
	} else {
		w.lru = &lru{links: make([]link, size), newest: -1, oldest: -1}
		for i := order.oldest; i >= 0; i = order.links[i].newer {
			w.lru.pushNewest(int32(w.copyOut(old, int(i), a)))
		}
	}
	w.cur.Store(a)
}

// copyOut moves old slot i into a, retiring it, and returns where it went.
func (w *Locked[V, C]) copyOut(old *storage[V, C], i int, a *storage[V, C]) int {
	s := &old.slots[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.ctl.Load()
	s.ctl.Store(retired)
	if c == 0 {
		return -1
	}
	return w.place(a, c, s.key, &s.val, old.cold[i])
}

// Sweep removes every key drop reports and shrinks the table if it is
// mostly empty afterwards. drop sees the key's values while its slot is
// locked, and takes no lock.
func (w *Locked[V, C]) Sweep(drop func(v *V, c *C) bool) {
	if w.n == 0 {
		return
	}
	a := w.cur.Load()
	// Start after an empty slot: no cluster then wraps around the start, so
	// the shifts of removeHeld only bring in keys not yet visited.
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
			if drop(&s.val, &a.cold[i]) {
				w.removeHeld(i) // slot i now holds the next key of its cluster, if any
				continue
			}
			s.mu.Unlock()
		}
		i = (i + 1) & mask
		visited++
	}
	w.shrink()
}

// shrink rehashes a table left under an eighth full into one at most half
// full: the table follows the keys it holds, and it takes a good part of its
// size in inserts before it grows again.
func (w *Locked[V, C]) shrink() {
	size := len(w.cur.Load().slots)
	if int(w.n)*8 >= size || size <= minTableLen {
		return
	}
	if w.n == 0 {
		w.Clear()
		return
	}
	size = minTableLen
	for size < 2*int(w.n) {
		size *= 2
	}
	w.resize(size)
}

// Touch makes the key at position i the newest (of an ordered table).
func (w *Locked[V, C]) Touch(i int) {
	if w.lru != nil && w.lru.newest != int32(i) {
		w.lru.unlink(int32(i))
		w.lru.pushNewest(int32(i))
	}
}

// Oldest returns the position of the least recently inserted or touched
// key, or -1 when the table is empty or keeps no order.
func (w *Locked[V, C]) Oldest() int {
	if w.lru == nil {
		return -1
	}
	return int(w.lru.oldest)
}

// link places one slot in the recency order: indexes of slots, -1 for none.
type link struct{ newer, older int32 }

// lru is the recency order of a table's keys, a doubly linked list through
// an array parallel to the slots, so that a slot moves with its links.
type lru struct {
	links          []link
	newest, oldest int32
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
