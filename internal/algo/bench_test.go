package algo

import "testing"

// BenchmarkDecide measures the algorithms alone, without a store or a clock.
func BenchmarkDecide(b *testing.B) {
	for k := TokenBucket; k <= SlidingWindow; k++ {
		b.Run(k.String(), func(b *testing.B) {
			p, err := NewParams(k, 1_000_000_000, 1_000_000, 0)
			if err != nil {
				b.Fatal(err)
			}
			var s State
			var l Log
			var r Result
			now := int64(1_800_000_000_000_000)
			b.ReportAllocs()
			for b.Loop() {
				now++
				if k == SlidingLog {
					DecideLog(&p, &l, now, 1, true, &r)
				} else {
					Decide(&p, &s, now, 1, &r)
				}
			}
		})
	}
}
