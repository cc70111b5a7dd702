package floodgate

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate/internal/algo"
	"github.com/floodgate-io/floodgate/internal/keytable"
)

func TestHotStructsFitCacheLines(t *testing.T) {
	if size := unsafe.Sizeof(shard{}); size != 64 {
		t.Fatalf("shard is %d bytes, want 64", size)
	}
	// keytable checks that a value of this size makes a slot one line.
	if size := unsafe.Sizeof(entry{}); size != keytable.LineValueBytes {
		t.Fatalf("entry is %d bytes, want %d", size, keytable.LineValueBytes)
	}
}

// Keys whose hashes collide share a probe sequence; each must keep its own
// state.
func TestKeysWithTheSameHashStayApart(t *testing.T) {
	m := NewMemory()
	sh := &m.shards[0]
	limit, _ := m.limits.get(PerMinute(1))
	w := sh.t.Lock()
	defer w.Unlock()
	setA := func(i int, v int64) {
		ref := w.Slot(i)
		ref.Value().state.A = v
		ref.Unlock()
	}
	stateA := func(i int) int64 {
		ref := w.Slot(i)
		defer ref.Unlock()
		return ref.Value().state.A
	}
	a, _ := sh.lookup(w, 42, "a", limit, 0)
	setA(a, 1)
	b, _ := sh.lookup(w, 42, "b", limit, 0)
	setA(b, 2)
	if a == b || w.Find(42, "a") != a || w.Find(42, "b") != b || w.Len() != 2 {
		t.Fatal("colliding keys were merged")
	}
	w.Remove(a)
	if i := w.Find(42, "b"); w.Find(42, "a") >= 0 || i < 0 || stateA(i) != 2 || w.Len() != 1 {
		t.Fatal("removing one colliding key disturbed the other")
	}
	w.Remove(w.Find(42, "b"))
	if w.Find(42, "a") >= 0 || w.Find(42, "b") >= 0 || w.Len() != 0 {
		t.Fatal("a removed key is still found")
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
		if h&m.mask == 0 && keytable.Home(h, 64) == 0 {
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
		e, log := entry{}, (*algo.Log)(nil)
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
