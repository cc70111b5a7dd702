package floodgate_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/floodgate-io/floodgate"
)

// BenchmarkMemoryBytesPerKey measures what a key costs a Memory: b.N
// distinct keys, each taking one unit of a 1-per-hour limit (so none is back
// to full and dropped), and the live heap before and after, reported as
// B/key (the key's string included, as a server holds it). Bounded, the
// Memory holds at most its bound whatever b.N, so B/key falls as b.N grows
// past it. Run with -benchtime=1000000x (or 2000000x) for the figure at
// that many keys; scripts/rss-per-key.sh measures a whole serve process.
func BenchmarkMemoryBytesPerKey(b *testing.B) {
	for _, bc := range []struct {
		name    string
		maxKeys int
	}{
		{"unbounded", 0},
		{"max=100000", 100_000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			limit := floodgate.PerHour(1)
			before := liveHeapBytes()
			m := floodgate.NewMemory(floodgate.WithMaxKeys(bc.maxKeys))
			b.ResetTimer()
			for i := range b.N {
				if _, err := m.AllowN(ctx, "user:"+strconv.Itoa(i), limit, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			after := liveHeapBytes()
			b.ReportMetric(float64(int64(after)-int64(before))/float64(b.N), "B/key")
			b.ReportMetric(float64(m.Len()), "keys")
			runtime.KeepAlive(m)
		})
	}
}

// liveHeapBytes is the heap in use after a collection.
func liveHeapBytes() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
