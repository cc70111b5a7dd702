package insight

import (
	"hash/maphash"
	"math/bits"
)

// keyIndex maps a summary's keys to its counters. It is an open-addressing
// table with linear probing, at most half full, that deletes by moving
// back the entries after the deleted one (no tombstones). A full summary
// replaces a key on nearly every add under a long tail of keys; a Go map
// pays for that churn with tombstones and rehashing, and hashes the key
// once per operation (lookup, delete, insert), where keyIndex hashes it
// once per add.
type keyIndex struct {
	seed  maphash.Seed
	slots []indexSlot // a power of two long
}

// indexSlot is one slot: the key's hash, whose low bits are its home
// slot, and its counter's index in nodes plus one (0 is an empty slot, so
// that clear empties the table).
type indexSlot struct {
	hash, node uint32
}

func newKeyIndex(k int) keyIndex {
	n := 1 << bits.Len(uint(2*k-1)) // at least 2k: at most half full
	return keyIndex{seed: maphash.MakeSeed(), slots: make([]indexSlot, n)}
}

// hash is key's hash, as find, put and remove take it.
func (x *keyIndex) hash(key string) uint32 { return uint32(maphash.String(x.seed, key)) }

func (x *keyIndex) mask() uint32 { return uint32(len(x.slots) - 1) }

// find returns the slot of key (hashed h) among nodes, and whether it is
// there; when it is not, the slot is the empty one to put it in.
func (x *keyIndex) find(h uint32, key string, nodes []counter) (slot uint32, found bool) {
	m := x.mask()
	for i := h & m; ; i = (i + 1) & m {
		s := x.slots[i]
		if s.node == 0 {
			return i, false
		}
		if s.hash == h && nodes[s.node-1].key == key {
			return i, true
		}
	}
}

// node is the counter in slot i, which find found.
func (x *keyIndex) node(i uint32) int32 { return int32(x.slots[i].node - 1) }

// put puts node, of key hash h, in slot i, which find returned empty.
func (x *keyIndex) put(i, h uint32, node int32) {
	x.slots[i] = indexSlot{hash: h, node: uint32(node) + 1}
}

// remove takes node, of key hash h, out of the table, and moves back the
// entries after it that probing would no longer reach.
func (x *keyIndex) remove(h uint32, node int32) {
	m := x.mask()
	i := h & m
	for x.slots[i].node != uint32(node)+1 {
		i = (i + 1) & m
	}
	for j := (i + 1) & m; x.slots[j].node != 0; j = (j + 1) & m {
		// The entry at j moves into the hole at i when the hole lies on
		// its probe path, from its home slot to j (cyclically).
		home := x.slots[j].hash & m
		if (j-home)&m >= (j-i)&m {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = indexSlot{}
}

// reset empties the table, keeping its memory.
func (x *keyIndex) reset() { clear(x.slots) }
