package adaptive

import (
	"testing"
	"time"
)

// simPhase is a stretch of a simulated run with a fixed worker count.
type simPhase struct {
	from, to int // sample indexes
	workers  int
}

// converged is the index (from the phase's start) after which the limit
// stays within [lo·workers, hi·workers] to the end of the phase, or -1.
func (p simPhase) converged(limits []int, lo, hi float64) int {
	last := -1
	for i := p.to - 1; i >= p.from; i-- {
		l := float64(limits[i])
		if l < lo*float64(p.workers) || l > hi*float64(p.workers) {
			last = i
			break
		}
	}
	if last == p.to-1 {
		return -1
	}
	return last + 1 - p.from
}

// TestSimulatedOverload drives each algorithm in a closed loop far above
// the capacity of a simulated backend (40 workers, 10ms ±10% a request,
// samples 0–8000), halves the capacity (8000–16000) and restores it
// (16000–24000). In each phase the limit learnt must enter
// [0.7, 1.5]×workers within maxSamples[phase] samples and stay there; over
// the phase's last 1000 samples the p99 RTT must stay within 2× the
// service time and the limit's standard deviation below 10% of its mean.
// AIMD sees overload only through its Timeout, set to 1.3× the service
// time here; it settles where RTTs reach it.
func TestSimulatedOverload(t *testing.T) {
	const service = 10 * time.Millisecond
	phases := []simPhase{{0, 8000, 40}, {8000, 16000, 20}, {16000, 24000, 40}}
	maxSamples := []int{2000, 1500, 2000}
	workers := func(n int) int {
		for _, p := range phases {
			if n < p.to {
				return p.workers
			}
		}
		return phases[len(phases)-1].workers
	}
	for _, tc := range simAlgorithms(t, service) {
		t.Run(tc.name, func(t *testing.T) {
			r := newSimBackend(1, service, workers).run(tc.alg, 24000)
			for i, p := range phases {
				n := p.converged(r.learnt, 0.7, 1.5)
				m, sd := meanStd(r.limits[p.to-1000 : p.to])
				p99 := float64(percentile(r.rtts[p.to-1000:p.to], 0.99)) / float64(service)
				t.Logf("workers %d: within [0.7, 1.5]× after %d samples; limit %.1f ± %.2f (%.1f%%); p99 %.2f× service",
					p.workers, n, m, sd, 100*sd/m, p99)
				if n < 0 || n > maxSamples[i] {
					t.Errorf("workers %d: limit within [0.7, 1.5]×workers after %d samples (-1: never); want within %d",
						p.workers, n, maxSamples[i])
				}
				if p99 > 2 {
					t.Errorf("workers %d: p99 RTT %.2f× the service time; want at most 2×", p.workers, p99)
				}
				if sd > 0.1*m {
					t.Errorf("workers %d: limit %.1f ± %.2f over the last 1000 samples; want a standard deviation below 10%% of the mean",
						p.workers, m, sd)
				}
			}
		})
	}
}

type simAlgorithm struct {
	name string
	alg  Algorithm
}

func simAlgorithms(t *testing.T, service time.Duration) []simAlgorithm {
	t.Helper()
	aimd, err := NewAIMD(AIMDOptions{Timeout: service * 13 / 10})
	if err != nil {
		t.Fatal(err)
	}
	g2, err := NewGradient2(Gradient2Options{})
	if err != nil {
		t.Fatal(err)
	}
	vegas, err := NewVegas(VegasOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return []simAlgorithm{{"AIMD", aimd}, {"Gradient2", g2}, {"Vegas", vegas}}
}
