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

func TestSimulationReport(t *testing.T) {
	const service = 10 * time.Millisecond
	phases := []simPhase{{0, 8000, 40}, {8000, 16000, 20}, {16000, 24000, 40}}
	workers := func(n int) int {
		for _, p := range phases {
			if n < p.to {
				return p.workers
			}
		}
		return phases[len(phases)-1].workers
	}
	for _, tc := range simAlgorithms(t, service) {
		r := newSimBackend(1, service, workers).run(tc.alg, 24000)
		for _, p := range phases {
			m, sd := meanStd(r.limits[p.to-1000 : p.to])
			t.Logf("%s C=%d: converged after %d samples, mean %.1f sd %.2f (%.1f%%), p99 %.2f×service",
				tc.name, p.workers, p.converged(r.limits, 0.7, 1.5), m, sd, 100*sd/m,
				float64(percentile(r.rtts[p.to-1000:p.to], 0.99))/float64(service))
		}
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
