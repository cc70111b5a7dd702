package loadgen

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramBucketsAreContiguous(t *testing.T) {
	// Every value maps to a bucket whose range holds it, buckets never go
	// backwards, and the last value lands in the last bucket.
	prev := -1
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 257, 1000, 1 << 20, 1<<20 + 12345, 1<<36 - 1, 1 << 36, 1 << 62} {
		b := bucketOf(v)
		if b < prev || b >= numBuckets {
			t.Fatalf("bucketOf(%d) = %d after %d (of %d)", v, b, prev, numBuckets)
		}
		prev = b
		if v <= maxTracked {
			mid := bucketMid(b)
			if d := float64(mid) - float64(v); d < 0 && -d/float64(v) > 1.0/128 || d > 0 && d/float64(v) > 1.0/128 {
				t.Errorf("value %d reported as %d: off by more than 1/128", v, mid)
			}
		}
	}
	if bucketOf(maxTracked) != numBuckets-1 {
		t.Errorf("largest tracked value in bucket %d, want %d", bucketOf(maxTracked), numBuckets-1)
	}
	for v := uint64(0); v < 1<<16; v++ {
		if b := bucketOf(v); bucketOf(v+1) < b || (v < subCount && bucketMid(b) != v) {
			t.Fatalf("bucket order or exactness broken at %d", v)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	// Against exact percentiles of the same samples, spread over six orders
	// of magnitude, recorded by several "workers" and merged.
	rng := rand.New(rand.NewPCG(1, 2))
	var parts [4]histogram
	var all []time.Duration
	for i := range 20000 {
		d := time.Duration(float64(50*time.Nanosecond) * float64(int64(1)<<rng.IntN(20)) * (1 + rng.Float64()))
		parts[i%4].record(d)
		all = append(all, d)
	}
	var h histogram
	for i := range parts {
		h.merge(&parts[i])
	}
	slices.Sort(all)
	exact := func(q float64) time.Duration { return all[int(q*float64(len(all))+0.5)-1] }
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999, 1} {
		got, want := h.quantile(q), exact(q)
		if diff := float64(got-want) / float64(want); diff > 1.0/128 || diff < -1.0/128 {
			t.Errorf("q%.3f = %v, exact %v: off by %.2f%%", q, got, want, 100*diff)
		}
	}
	if time.Duration(h.min) != all[0] || time.Duration(h.max) != all[len(all)-1] || h.n != uint64(len(all)) {
		t.Errorf("min %v max %v n %d; want %v %v %d", h.min, h.max, h.n, all[0], all[len(all)-1], len(all))
	}
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	if h.mean() != sum/time.Duration(len(all)) {
		t.Errorf("mean %v, want %v", h.mean(), sum/time.Duration(len(all)))
	}
}

func TestHistogramSmallAndEmpty(t *testing.T) {
	var h histogram
	if h.quantile(0.5) != 0 || h.mean() != 0 {
		t.Error("empty histogram reports a latency")
	}
	for _, d := range []time.Duration{10, 20, 30, 40, -5} { // a negative reading (clock step) counts as 0
		h.record(d)
	}
	if h.quantile(0.5) != 20 || h.quantile(0.9) != 40 || h.quantile(0) != 0 || h.min != 0 || h.max != 40 {
		t.Errorf("p50 %v p90 %v min %v max %v", h.quantile(0.5), h.quantile(0.9), h.min, h.max)
	}
	h = histogram{}
	h.record(time.Hour) // beyond maxTracked: the percentile is clamped, max stays exact
	if h.quantile(0.99) != time.Hour || h.max != uint64(time.Hour) {
		t.Errorf("p99 %v max %v, want 1h", h.quantile(0.99), time.Duration(h.max))
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	var h histogram
	for i := range b.N {
		h.record(time.Duration(i&0xfffff) * 100)
	}
}
