package insight

import (
	"fmt"
	"testing"
)

// BenchmarkSummaryAdd is one summary of DefaultCounters counters fed
// uniformly by ten times as many keys (nearly every add replaces the
// smallest counter: the worst case) or by as many keys as it has
// counters (every add finds its key monitored).
func BenchmarkSummaryAdd(b *testing.B) {
	for _, keys := range []int{DefaultCounters, 10 * DefaultCounters} {
		b.Run(fmt.Sprint("keys=", keys), func(b *testing.B) {
			ks := make([]string, keys)
			for i := range ks {
				ks[i] = fmt.Sprint("per-user:user-", i)
			}
			s := newSummary(DefaultCounters)
			for _, k := range ks {
				s.add(k, 1)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.add(ks[i%len(ks)], 1)
				i += 7 // not in order: a cycle would always find the smallest counter last
			}
		})
	}
}
