package experiments

import (
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestSourceCountsAddUpExactly(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sources := rapid.IntRange(1, 500).Draw(t, "sources")
		requests := rapid.Int64Range(int64(sources), 100_000).Draw(t, "requests")
		alpha := rapid.Float64Range(0.5, 4).Draw(t, "alpha")
		counts, median := sourceCounts(rapid.Uint64().Draw(t, "seed"), sources, requests, alpha)
		var sum int64
		for i, c := range counts {
			if c < 1 {
				t.Fatalf("source %d has %d requests, want at least 1", i, c)
			}
			sum += c
		}
		if sum != requests {
			t.Fatalf("counts add up to %d, want %d", sum, requests)
		}
		if !(median >= 1) {
			t.Fatalf("median count %v, want at least 1", median)
		}
	})
}

func TestArrivalsStayInTheirSpanInOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Int64Range(0, 2000).Draw(t, "n")
		span := rapid.Float64Range(1000, 1e9).Draw(t, "span")
		duty := rapid.Float64Range(0.01, 1).Draw(t, "duty")
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1))
		times, _ := arrivals(rng, nil, nil, n, traceStart, span, span/10, duty)
		if int64(len(times)) != n {
			t.Fatalf("%d arrivals, want %d", len(times), n)
		}
		if !slices.IsSorted(times) {
			t.Fatalf("arrivals out of order: %v", times)
		}
		for _, at := range times {
			if at < traceStart || float64(at-traceStart) > span {
				t.Fatalf("arrival %d outside [%d, %d+%v]", at, int64(traceStart), int64(traceStart), span)
			}
		}
	})
}

// A bursty source sends at a higher rate while on than a steady one: its
// busiest stretch holds more of its requests.
func TestLowDutyCycleMakesBursts(t *testing.T) {
	const n, span = 5000, 1e9
	busiest := func(duty float64) int64 {
		times, _ := arrivals(rand.New(rand.NewPCG(1, 1)), nil, nil, n, 0, span, span/100, duty)
		return maxInAnyPeriod(times, span/100)
	}
	steady, bursty := busiest(1), busiest(0.05)
	if bursty < 5*steady {
		t.Errorf("busiest 1%% of the time: %d requests at duty 0.05, %d steady; want at least 5× more", bursty, steady)
	}
}
