package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// histogram counts latencies in log-linear buckets, HDR-style: values below
// 2^subBits ns each have their own bucket; above, every power-of-two range
// [2^k, 2^(k+1)) is split into 2^(subBits-1) equal buckets. A percentile is
// reported as the middle of its bucket, so it is off by at most 2^-subBits
// of its value (0.8%), exact below 128ns; min, max and mean are exact.
//
// One histogram per worker means recording takes no lock and no
// allocation, and memory stays fixed (about 16 KiB) however long the run,
// unlike a log of samples.
type histogram struct {
	counts   [numBuckets]uint64
	n        uint64
	sum      uint64 // ns; 2^64 ns is 584 years of summed latency
	min, max uint64
}

const (
	subBits  = 7
	subCount = 1 << subBits // exact buckets below this many ns
	half     = subCount / 2 // buckets per power of two above
	// maxTracked clamps the bucketed value (not max): 2^36 ns is about 69s,
	// well beyond any sane call timeout.
	maxTracked = 1<<36 - 1
	numBuckets = subCount + (36-subBits)*half
)

func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	if v > maxTracked {
		v = maxTracked
	}
	shift := bits.Len64(v) - subBits // ≥ 1: keeps subBits significant bits, the leading one included
	m := v >> shift                  // in [half, subCount)
	return subCount + (shift-1)*half + int(m-half)
}

// bucketMid is the value a bucket reports: its middle, which halves the
// worst-case error of reporting either edge.
func bucketMid(i int) uint64 {
	if i < subCount {
		return uint64(i)
	}
	shift := (i-subCount)/half + 1
	m := uint64((i-subCount)%half + half)
	return m<<shift + (1<<shift)/2
}

func (h *histogram) record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[bucketOf(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.n++
	h.sum += v
}

func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// quantile returns the smallest bucket value at or below which at least a
// fraction q of the samples lie, clamped to the exact [min, max].
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	// The epsilon keeps 0.9·n from rounding up past an exact rank.
	rank := uint64(math.Ceil(q*float64(h.n) - 1e-9))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(max(bucketMid(i), h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / h.n)
}
