package keytable

import (
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"pgregory.net/rapid"
)

// val is a test's value: a number and a count, with floodgate's entry's
// size; cold values are pointers, as floodgate's sliding logs are.
type val struct {
	a, b int64
	_    [LineValueBytes - 16]byte
}

type testTable = Table[val, *int]

// tableModel is what a table should hold: each key's value (kept in a) and
// cold value and, for an ordered table, the keys from least to most
// recently used.
type tableModel struct {
	values map[string]int64
	logs   map[string]*int
	order  []string
}

func (m *tableModel) add(key string, value int64, log *int) {
	m.values[key], m.logs[key] = value, log
	m.use(key)
}

func (m *tableModel) remove(key string) {
	delete(m.values, key)
	delete(m.logs, key)
	m.forget(key)
}

func (m *tableModel) use(key string) {
	m.forget(key)
	m.order = append(m.order, key)
}

func (m *tableModel) forget(key string) {
	if i := slices.Index(m.order, key); i >= 0 {
		m.order = slices.Delete(m.order, i, i+1)
	}
}

// TestTableAgainstAModel runs random inserts, lookups, touches, removals and
// sweeps on a table whose keys draw their hashes from a small pool, so that
// keys share homes and whole hashes, clusters wrap around the end and the
// table grows and shrinks; after each step the table must hold exactly what
// a map holds, in the same recency order.
func TestTableAgainstAModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ordered := rapid.Bool().Draw(t, "ordered")
		pool := rapid.SliceOfN(rapid.Uint64(), 1, 12).Draw(t, "hashes")
		keys := make([]string, rapid.IntRange(1, 300).Draw(t, "keys"))
		hashOf := map[string]uint64{}
		for i := range keys {
			keys[i] = fmt.Sprintf("k%d", i)
			hashOf[keys[i]] = rapid.SampledFrom(pool).Draw(t, "hash")
		}
		var tab testTable
		tab.Init(ordered)
		w := tab.Lock()
		defer w.Unlock()
		model := &tableModel{values: map[string]int64{}, logs: map[string]*int{}}
		next := int64(1)
		insert := func(t *rapid.T, k string) {
			v, log := val{a: next}, (*int)(nil)
			if rapid.Bool().Draw(t, "with a cold value") {
				log = new(int)
			}
			w.Insert(hashOf[k], k, &v, log)
			model.add(k, next, log)
			next++
		}
		t.Repeat(map[string]func(*rapid.T){
			"insert": func(t *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(t, "key")
				if _, ok := model.values[k]; ok {
					t.Skip("present")
				}
				insert(t, k)
			},
			"insert many": func(t *rapid.T) {
				for _, k := range keys {
					if _, ok := model.values[k]; !ok {
						insert(t, k)
					}
				}
			},
			"touch": func(t *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(t, "key")
				i := w.Find(hashOf[k], k)
				if _, ok := model.values[k]; !ok || i < 0 {
					t.Skip("absent")
				}
				w.Touch(i)
				model.use(k)
			},
			"remove": func(t *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(t, "key")
				i := w.Find(hashOf[k], k)
				if i < 0 {
					t.Skip("absent")
				}
				w.Remove(i)
				model.remove(k)
			},
			"remove oldest": func(t *rapid.T) {
				if !ordered || len(model.order) == 0 {
					t.Skip("no order")
				}
				w.Remove(w.Oldest())
				model.remove(model.order[0])
			},
			"sweep": func(t *rapid.T) {
				mod := rapid.Int64Range(1, 4).Draw(t, "keep one in")
				w.Sweep(func(v *val, _ **int) bool { return v.a%mod != 0 })
				for k, v := range model.values {
					if v%mod != 0 {
						model.remove(k)
					}
				}
			},
			"": func(t *rapid.T) { checkTable(t, w, model, hashOf) },
		})
	})
}

// checkTable compares the table with the model and checks the table's own
// invariants: every key reachable from its home, no slot held, the load
// bound, a recency list through exactly the keys held.
func checkTable(t *rapid.T, w *Locked[val, *int], model *tableModel, hashOf map[string]uint64) {
	if w.Len() != len(model.values) {
		t.Fatalf("table holds %d keys, model %d", w.Len(), len(model.values))
	}
	for k := range hashOf {
		if _, ok := model.values[k]; !ok && w.Find(hashOf[k], k) >= 0 {
			t.Fatalf("key %q was removed but is found", k)
		}
	}
	for k, v := range model.values {
		i := w.Find(hashOf[k], k)
		if i < 0 {
			t.Fatalf("key %q is not found", k)
		}
		ref := w.Slot(i)
		if ref.Value().a != v || *ref.Cold() != model.logs[k] {
			t.Fatalf("key %q: found at %d, want value %d and its own cold value", k, i, v)
		}
		ref.Unlock()
	}
	var slots []slot[val]
	var logs []*int
	if a := w.cur.Load(); a != nil {
		slots, logs = a.slots, a.cold
	}
	if len(slots) > 0 && w.Len()*maxLoadDen > len(slots)*maxLoadNum {
		t.Fatalf("%d keys in %d slots", w.Len(), len(slots))
	}
	mask, held := len(slots)-1, 0
	for j := range slots {
		w := slots[j].ctl.Load()
		if w == 0 {
			if slots[j].key != "" || slots[j].val != (val{}) || logs[j] != nil {
				t.Fatalf("empty slot %d keeps a key, a value or a cold value", j)
			}
			continue
		}
		held++
		if w != ctlOf(hashOf[slots[j].key]) || !slots[j].mu.TryLock() {
			t.Fatalf("slot %d of %q has word %#x or is locked", j, slots[j].key, w)
		}
		slots[j].mu.Unlock()
		for i := home(w, mask); i != j; i = (i + 1) & mask {
			if slots[i].ctl.Load() == 0 {
				t.Fatalf("%q at %d is cut off from its home by the empty slot %d", slots[j].key, j, i)
			}
		}
	}
	if held != len(model.values) {
		t.Fatalf("%d slots in use for %d keys", held, len(model.values))
	}
	if w.lru != nil {
		checkOrder(t, w, model)
	}
}

func checkOrder(t *rapid.T, w *Locked[val, *int], model *tableModel) {
	var got []string
	for i := w.lru.oldest; i >= 0; i = w.lru.links[i].newer {
		if len(got) > len(model.order) {
			t.Fatalf("the recency list loops")
		}
		got = append(got, w.cur.Load().slots[i].key)
	}
	if !slices.Equal(got, model.order) {
		t.Fatalf("recency order %v, want %v", got, model.order)
	}
}

func TestCtlWordsNeverLookEmptyOrRetired(t *testing.T) {
	for _, h := range []uint64{0, 1, 2, 3, retired, 1 << 63, ^uint64(0)} {
		if c := ctlOf(h); c == 0 || c == retired || bits.LeadingZeros64(c) != 0 {
			t.Errorf("ctlOf(%#x) = %#x", h, c)
		}
	}
}

// Goroutines count on keys without the lock while a writer keeps moving
// them: it takes keys out and puts them back (every key behind them in the
// cluster shifts), and grows and shrinks the table. All keys share two
// hashes, so they form one cluster. No count may be lost or doubled.
func TestHeldSlotsSurviveShifts(t *testing.T) {
	const h1, h2 = 0x1111_0000_0000_0000, 0x2222_0000_0000_0000 // one home
	var tab testTable
	hashOf := func(k string) uint64 { return []uint64{h1, h2}[len(k)%2] }
	counted := []string{"c0", "c01", "c002", "c0003"}
	var fillers []string
	for i := range 10 {
		fillers = append(fillers, fmt.Sprintf("f%d", i*7))
	}
	w := tab.Lock()
	for _, k := range append(fillers, counted...) {
		w.Insert(hashOf(k), k, &val{}, nil)
	}
	w.Unlock()
	const perReader = 20_000
	var readers sync.WaitGroup
	for _, k := range counted {
		for range 2 {
			readers.Go(func() {
				for range perReader {
					countOn(&tab, hashOf(k), k)
				}
			})
		}
	}
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() {
		all := append(slices.Clone(fillers), counted...)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			w := tab.Lock()
			reseat(w, hashOf, all[i%len(all)])
			if i%50 == 0 {
				growAndShrink(w, hashOf, i)
			}
			w.Unlock()
		}
	})
	readers.Wait()
	close(stop)
	writer.Wait()
	w = tab.Lock()
	defer w.Unlock()
	for _, k := range counted {
		ref := w.Slot(w.Find(hashOf(k), k))
		if got := ref.Value().b; got != 2*perReader {
			t.Errorf("%s counted %d, want %d", k, got, 2*perReader)
		}
		ref.Unlock()
	}
}

// countOn adds one to key's count as a decision does: without the lock when
// the key is where it looks, under the lock otherwise.
func countOn(tab *testTable, h uint64, key string) {
	if ref, ok := tab.Acquire(h, key); ok {
		ref.Value().b++
		ref.Unlock()
		return
	}
	w := tab.Lock()
	ref := w.Slot(w.Find(h, key))
	ref.Value().b++
	ref.Unlock()
	w.Unlock()
}

// reseat takes key out of the table and puts it back with its entry, at the
// end of its cluster. It copies the entry and empties the slot under one
// hold of the slot's lock: a count made between the copy and the removal
// would be lost with the old slot.
func reseat(w *Locked[val, *int], hashOf func(string) uint64, key string) {
	i := w.Find(hashOf(key), key)
	a := w.cur.Load()
	a.slots[i].mu.Lock()
	v, log := a.slots[i].val, a.cold[i]
	w.removeHeld(i)
	w.Insert(hashOf(key), key, &v, log)
}

// growAndShrink adds enough keys to double the table, then sweeps them out.
func growAndShrink(w *Locked[val, *int], hashOf func(string) uint64, round int) {
	for j := range 2 * len(w.cur.Load().slots) {
		k := fmt.Sprint(round, "x", j)
		w.Insert(hashOf(k), k, &val{a: 1}, nil)
	}
	w.Sweep(func(v *val, _ **int) bool { return v.a == 1 }) // the keys just added
}

func TestSlotsFitCacheLines(t *testing.T) {
	if size := unsafe.Sizeof(slot[val]{}); size != 64 {
		t.Fatalf("a slot of a %d-byte value is %d bytes, want 64", unsafe.Sizeof(val{}), size)
	}
	// See slot: storage starts on a line or, from 1 to 16 KiB, 8 bytes past
	// one.
	for size := minTableLen; size <= 1<<12; size *= 2 {
		off := uintptr(unsafe.Pointer(&newStorage[val, *int](size).slots[0])) % 64
		if off != 0 && (off != 8 || size == minTableLen || size*64 >= 32<<10) {
			t.Fatalf("a table of %d slots starts %d bytes into a cache line", size, off)
		}
	}
}
