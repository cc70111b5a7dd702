package insight

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// stream is weighted traffic cut into sub-intervals, with its exact
// counts, to hold the summaries against.
type stream struct {
	parts []*summary
	exact map[string]int64
	total int64
}

func newStream(k, slots int) *stream {
	s := &stream{exact: map[string]int64{}}
	for range slots {
		p := newSummary(k)
		s.parts = append(s.parts, &p)
	}
	return s
}

func (s *stream) add(slot int, key string, w int64) {
	s.parts[slot].add(key, w)
	s.exact[key] += w
	s.total += w
}

// check holds the merged summary to the bounds the package doc states,
// and returns it.
func (s *stream) check(t interface {
	Helper()
	Fatalf(string, ...any)
}) merged {
	t.Helper()
	m := merge(s.parts)
	k := int64(s.parts[0].k)
	if m.total != s.total {
		t.Fatalf("merged total %d, want %d", m.total, s.total)
	}
	bound := s.total / k
	listed := map[string]bool{}
	for _, e := range m.entries {
		listed[e.Key] = true
		if got := s.exact[e.Key]; e.Count < got || e.Count-e.Error > got {
			t.Fatalf("key %q: count %d, error %d, but its true count %d is not in [count−error, count]", e.Key, e.Count, e.Error, got)
		}
		if e.Error > bound {
			t.Fatalf("key %q: error %d above N/K = %d/%d", e.Key, e.Error, s.total, k)
		}
	}
	top := map[string]bool{}
	for _, e := range m.entries[:min(int(k), len(m.entries))] {
		top[e.Key] = true
	}
	for key, c := range s.exact {
		if c > bound && !listed[key] {
			t.Fatalf("key %q with %d of %d units (above N/K = %d) is not tracked", key, c, s.total, bound)
		}
		if c > 2*bound && !top[key] {
			t.Fatalf("key %q with %d of %d units (above 2N/K = %d) is not in the top K", key, c, s.total, 2*bound)
		}
		if len(s.parts) == 1 && c > bound && !top[key] {
			t.Fatalf("one summary: key %q with %d units (above N/K = %d) is not in the top K", key, c, bound)
		}
	}
	return m
}

// recall is the share of the true top n that the summary's top n lists.
func (s *stream) recall(m merged, n int) float64 {
	type kc struct {
		k string
		c int64
	}
	var all []kc
	for k, c := range s.exact {
		all = append(all, kc{k, c})
	}
	// the n-th largest true count: keys tied with it all count as true top n
	counts := make([]int64, 0, len(all))
	for _, e := range all {
		counts = append(counts, e.c)
	}
	nth := nthLargest(counts, n)
	hit := 0
	for _, e := range m.entries[:min(n, len(m.entries))] {
		if s.exact[e.Key] >= nth {
			hit++
		}
	}
	return float64(hit) / float64(n)
}

func nthLargest(xs []int64, n int) int64 {
	c := append([]int64(nil), xs...)
	for i := range n { // selection: n is small
		m := i
		for j := i + 1; j < len(c); j++ {
			if c[j] > c[m] {
				m = j
			}
		}
		c[i], c[m] = c[m], c[i]
	}
	return c[n-1]
}

func TestSpaceSavingOnZipfTraffic(t *testing.T) {
	for _, tc := range []struct {
		skew    float64 // Zipf's s: larger is more concentrated
		keys    uint64
		k       int
		slots   int
		maxCost int64
	}{
		{skew: 1.05, keys: 100_000, k: 128, slots: 6, maxCost: 1},
		{skew: 1.1, keys: 50_000, k: 128, slots: 6, maxCost: 10},
		{skew: 1.5, keys: 50_000, k: 128, slots: 6, maxCost: 10},
		{skew: 2, keys: 10_000, k: 32, slots: 6, maxCost: 100},
		{skew: 1.2, keys: 50_000, k: 128, slots: 1, maxCost: 1},
	} {
		t.Run(fmt.Sprintf("s=%v,keys=%d,K=%d,slots=%d,cost≤%d", tc.skew, tc.keys, tc.k, tc.slots, tc.maxCost), func(t *testing.T) {
			r := rand.New(rand.NewPCG(16, uint64(tc.skew*100)))
			z := rand.NewZipf(r, tc.skew, 1, tc.keys-1)
			s := newStream(tc.k, tc.slots)
			const events = 300_000
			for i := range events {
				key := fmt.Sprintf("user-%d", z.Uint64())
				s.add(i*tc.slots/events, key, 1+r.Int64N(tc.maxCost))
			}
			m := s.check(t)
			rc := s.recall(m, 10)
			if rc < 0.9 {
				t.Errorf("top-10 recall %.2f, want ≥ 0.9", rc)
			}
			t.Logf("%d units over %d keys: top-10 recall %.2f, N/K = %d", s.total, len(s.exact), rc, s.total/int64(tc.k))
		})
	}
}

func TestSpaceSavingBoundsHoldForAnyStream(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, 12).Draw(t, "K")
		slots := rapid.IntRange(1, 4).Draw(t, "slots")
		keys := rapid.IntRange(1, 40).Draw(t, "keys")
		s := newStream(k, slots)
		n := rapid.IntRange(0, 300).Draw(t, "events")
		for range n {
			slot := rapid.IntRange(0, slots-1).Draw(t, "slot")
			key := fmt.Sprint(rapid.IntRange(0, keys-1).Draw(t, "key"))
			s.add(slot, key, rapid.Int64Range(1, 1000).Draw(t, "cost"))
		}
		s.check(t)
	})
}

func TestSummaryResetKeepsItsMemory(t *testing.T) {
	keys := []string{"a", "b", "c", "d"}
	s := newSummary(4)
	for i := range 10 {
		s.add(fmt.Sprint(i), int64(i))
	}
	s.reset()
	indexed := 0
	for _, sl := range s.idx.slots {
		if sl.node != 0 {
			indexed++
		}
	}
	if s.total != 0 || len(s.heap) != 0 || indexed != 0 || len(s.nodes) != 0 || cap(s.nodes) < 4 || cap(s.heap) < 4 {
		t.Fatalf("after reset: total %d, %d counters, %d indexed, %d kept", s.total, len(s.heap), indexed, cap(s.nodes))
	}
	allocs := testing.AllocsPerRun(100, func() {
		s.reset()
		for i := range 4 {
			s.add(keys[i], 1)
		}
	})
	if allocs != 0 {
		t.Fatalf("refilling a reset summary allocates %v times", allocs)
	}
}
