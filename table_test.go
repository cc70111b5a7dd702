package floodgate

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// tableModel is what a table should hold: each key's value (kept in
// state.A) and, for an ordered table, the keys from least to most recently
// used.
type tableModel struct {
	values map[string]int64
	logs   map[string]*algo.Log
	order  []string
}

func (m *tableModel) add(key string, value int64, log *algo.Log) {
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
		var tab table
		tab.init(ordered)
		model := &tableModel{values: map[string]int64{}, logs: map[string]*algo.Log{}}
		next := int64(1)
		insert := func(t *rapid.T, k string) {
			e, log := entry{key: k}, (*algo.Log)(nil)
			e.state.A = next
			if rapid.Bool().Draw(t, "with a log") {
				log = new(algo.Log)
			}
			tab.insert(hashOf[k], &e, log)
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
				i := tab.find(hashOf[k], k)
				if _, ok := model.values[k]; !ok || i < 0 {
					t.Skip("absent")
				}
				tab.touch(i)
				model.use(k)
			},
			"remove": func(t *rapid.T) {
				k := rapid.SampledFrom(keys).Draw(t, "key")
				i := tab.find(hashOf[k], k)
				if i < 0 {
					t.Skip("absent")
				}
				tab.at(i).mu.Lock()
				tab.remove(i)
				model.remove(k)
			},
			"remove oldest": func(t *rapid.T) {
				if !ordered || len(model.order) == 0 {
					t.Skip("no order")
				}
				i := tab.oldest()
				tab.at(i).mu.Lock()
				tab.remove(i)
				model.remove(model.order[0])
			},
			"sweep": func(t *rapid.T) {
				mod := rapid.Int64Range(1, 4).Draw(t, "keep one in")
				tab.sweep(func(e *entry, _ **algo.Log) bool { return e.state.A%mod != 0 })
				for k, v := range model.values {
					if v%mod != 0 {
						model.remove(k)
					}
				}
			},
			"": func(t *rapid.T) { checkTable(t, &tab, model, hashOf) },
		})
	})
}

// checkTable compares the table with the model and checks the table's own
// invariants: every key reachable from its home, no slot held, the load
// bound, a recency list through exactly the keys held.
func checkTable(t *rapid.T, tab *table, model *tableModel, hashOf map[string]uint64) {
	if int(tab.n) != len(model.values) {
		t.Fatalf("table holds %d keys, model %d", tab.n, len(model.values))
	}
	for k := range hashOf {
		if _, ok := model.values[k]; !ok && tab.find(hashOf[k], k) >= 0 {
			t.Fatalf("key %q was removed but is found", k)
		}
	}
	for k, v := range model.values {
		i := tab.find(hashOf[k], k)
		if i < 0 || tab.at(i).state.A != v || *tab.logOf(i) != model.logs[k] {
			t.Fatalf("key %q: found at %d, want value %d and its own log", k, i, v)
		}
	}
	var slots []slot
	var logs []*algo.Log
	if a := tab.array(); a != nil {
		slots, logs = a.slots, a.logs
	}
	if len(slots) > 0 && int(tab.n)*maxLoadDen > len(slots)*maxLoadNum {
		t.Fatalf("%d keys in %d slots", tab.n, len(slots))
	}
	mask, held := len(slots)-1, 0
	for j := range slots {
		w := slots[j].ctl.Load()
		if w == 0 {
			if slots[j].entry != (entry{}) || logs[j] != nil {
				t.Fatalf("empty slot %d keeps an entry or a log", j)
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
	if tab.lru != nil {
		checkOrder(t, tab, model)
	}
}

func checkOrder(t *rapid.T, tab *table, model *tableModel) {
	var got []string
	for i := tab.lru.oldest; i >= 0; i = tab.lru.links[i].newer {
		if len(got) > len(model.order) {
			t.Fatalf("the recency list loops")
		}
		got = append(got, tab.at(int(i)).key)
	}
	if !slices.Equal(got, model.order) {
		t.Fatalf("recency order %v, want %v", got, model.order)
	}
}

// clusteredKeys returns n keys of shard 0 of m that start their probe at
// slot 0 of every table up to 64 slots, so that they share one cluster and
// every removal among them shifts the others.
func clusteredKeys(m *Memory, prefix string, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		h := m.hash(k)
		if h&m.mask == 0 && home(ctlOf(h), 63) == 0 {
			out = append(out, k)
		}
	}
	return out
}

// While keys are decided without the shard's lock, other goroutines add keys
// to the same cluster (growing the table), reset them (shifting the cluster),
// let them go full and sweep them (shrinking the table) and run batches over
// them. With the clock inside one window, every counted key must admit
// exactly its rate: a decision lost in a moved or retired slot, or made
// twice, would show.
func TestDecisionsSurviveMovingKeys(t *testing.T) {
	bg := context.Background()
	clk := NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := NewMemory(WithClock(clk))
	counted := clusteredKeys(m, "counted", 4)
	churn := [2][]string{clusteredKeys(m, "even", 60), clusteredKeys(m, "odd", 60)}
	const rate = 200
	window := Limit{Algorithm: FixedWindow, Rate: rate, Period: time.Hour}
	brief := Limit{Algorithm: TokenBucket, Rate: 1, Period: time.Millisecond}
	var admitted [4]atomic.Int64
	var done atomic.Bool
	var deciders, others sync.WaitGroup
	for g := range 4 {
		deciders.Go(func() {
			for i := 0; !done.Load() || i < 3*rate; i++ {
				k := (g + i) % len(counted)
				if d, _ := m.Allow(bg, counted[k], window); d.Allowed {
					admitted[k].Add(1)
				}
			}
		})
	}
	others.Go(func() {
		for round := range 30 {
			keys := churn[round%2]
			for _, k := range keys {
				m.Allow(bg, k, brief)
			}
			for _, k := range keys[:round%len(keys)] {
				m.Reset(bg, k)
			}
			// This round's keys are long full by the next round, whose
			// inserts sweep them out.
			clk.Advance(time.Minute + time.Second)
		}
	})
	others.Go(func() {
		for i := range rate {
			k := i % len(counted)
			other := churn[i%2][i%len(churn[0])]
			reqs := []Request{{Key: counted[k], Limit: window, Cost: 1}, {Key: other, Limit: brief, Cost: int64(i % 2 * 5)}}
			if ds, _ := m.AllowAll(bg, reqs); Allowed(ds) {
				admitted[k].Add(1)
			}
		}
	})
	others.Wait()
	done.Store(true)
	deciders.Wait()
	for k := range counted {
		if got := admitted[k].Load(); got != rate {
			t.Errorf("%s admitted %d in one window, want %d", counted[k], got, rate)
		}
	}
}

func TestCtlWordsNeverLookEmptyOrRetired(t *testing.T) {
	for _, h := range []uint64{0, 1, 2, 3, retired, 1 << 63, ^uint64(0)} {
		if c := ctlOf(h); c == 0 || c == retired || bits.LeadingZeros64(c) != 0 {
			t.Errorf("ctlOf(%#x) = %#x", h, c)
		}
	}
}

// A sweep drops a key when fullAt(cutoff) ≤ cutoff. That must mean the key
// was full at the cutoff and has stayed full since, whatever came after: a
// key in use is never dropped.
func TestFullAtTheCutoffMeansFullEverSince(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := Limit{
			Algorithm: rapid.SampledFrom(Algorithms()).Draw(t, "algorithm"),
			Rate:      rapid.Int64Range(1, 10).Draw(t, "rate"),
			Period:    time.Duration(rapid.Int64Range(1, 1000).Draw(t, "period")) * time.Microsecond,
		}
		var limits limitCache
		cl, err := limits.get(l)
		if err != nil {
			t.Fatal(err)
		}
		period := cl.params.Period
		e, log := entry{key: "k"}, (*algo.Log)(nil)
		e.configure(cl, &log)
		now := int64(1_800_000_000_000_000)
		var r algo.Result
		for range rapid.IntRange(0, 20).Draw(t, "requests") {
			now += rapid.Int64Range(0, 2*period).Draw(t, "gap")
			e.apply(&log, now, rapid.Int64Range(0, l.Rate+1).Draw(t, "cost"), true, &r)
		}
		cutoff := now + rapid.Int64Range(-3*period, period).Draw(t, "cutoff")
		if e.fullAt(&log, cutoff) > cutoff {
			return
		}
		for _, at := range []int64{cutoff, max(cutoff, now), max(cutoff, now) + period/2, max(cutoff, now) + period} {
			if e.apply(&log, at, 0, false, &r); r.ResetAfter != 0 || r.Remaining != r.Limit {
				t.Fatalf("full at %d by fullAt, but at %d: %+v", cutoff, at, r)
			}
		}
	})
}

// Goroutines count on keys without the lock while a writer keeps moving
// them: it takes keys out and puts them back (every key behind them in the
// cluster shifts), and grows and shrinks the table. All keys share two
// hashes, so they form one cluster. No count may be lost or doubled.
func TestHeldSlotsSurviveShifts(t *testing.T) {
	const h1, h2 = 0x1111_0000_0000_0000, 0x2222_0000_0000_0000 // one home
	var (
		tab table
		mu  sync.Mutex
	)
	tab.init(false)
	hashOf := func(k string) uint64 { return []uint64{h1, h2}[len(k)%2] }
	counted := []string{"c0", "c01", "c002", "c0003"}
	var fillers []string
	for i := range 10 {
		fillers = append(fillers, fmt.Sprintf("f%d", i*7))
	}
	for _, k := range append(fillers, counted...) {
		tab.insert(hashOf(k), &entry{key: k}, nil)
	}
	const perReader = 20_000
	var readers sync.WaitGroup
	for _, k := range counted {
		for range 2 {
			readers.Go(func() {
				for range perReader {
					countOn(&tab, &mu, hashOf(k), k)
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
			mu.Lock()
			reseat(&tab, hashOf, all[i%len(all)])
			if i%50 == 0 {
				growAndShrink(&tab, hashOf, i)
			}
			mu.Unlock()
		}
	})
	readers.Wait()
	close(stop)
	writer.Wait()
	for _, k := range counted {
		if got := tab.at(tab.find(hashOf(k), k)).state.B; got != 2*perReader {
			t.Errorf("%s counted %d, want %d", k, got, 2*perReader)
		}
	}
}

// countOn adds one to key's count as a decision does: without the lock when
// the key is where it looks, under the lock otherwise.
func countOn(tab *table, mu *sync.Mutex, h uint64, key string) {
	if a, i := tab.acquire(h); i >= 0 {
		s := &a.slots[i]
		if s.key == key {
			s.state.B++
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
	mu.Lock()
	s := tab.at(tab.find(h, key))
	s.mu.Lock()
	s.state.B++
	s.mu.Unlock()
	mu.Unlock()
}

// reseat takes key out of the table and puts it back with its entry, at the
// end of its cluster.
func reseat(tab *table, hashOf func(string) uint64, key string) {
	i := tab.find(hashOf(key), key)
	tab.at(i).mu.Lock()
	e, log := tab.at(i).entry, *tab.logOf(i)
	tab.remove(i)
	tab.insert(hashOf(key), &e, log)
}

// growAndShrink adds enough keys to double the table, then sweeps them out.
func growAndShrink(tab *table, hashOf func(string) uint64, round int) {
	for j := range 2 * len(tab.array().slots) {
		k := fmt.Sprint(round, "x", j)
		tab.insert(hashOf(k), &entry{key: k}, nil)
	}
	tab.sweep(func(e *entry, _ **algo.Log) bool { return e.key[0] != 'c' && e.key[0] != 'f' })
}
