package adaptive

import (
	"testing"
	"time"
)

// TestGradient2DriftIsAnchored runs a backend under sustained overload
// whose capacity halves after 6000 samples, so that at the same limit the
// RTT doubles. Without the anchor the long-term RTT climbs after the short
// one, the gradient returns to 1 and the limit stays high; with it the
// limit follows the capacity down.
func TestGradient2DriftIsAnchored(t *testing.T) {
	const service = 10 * time.Millisecond
	workers := func(n int) int {
		if n < 6000 {
			return 40
		}
		return 20
	}
	for _, tc := range []struct {
		name       string
		unanchored bool
		check      func(before, after float64) bool
		want       string
	}{
		{"without the anchor", true, func(before, after float64) bool { return after > 0.8*before }, "the limit stays above 80% of where it was: the drift"},
		{"with the anchor", false, func(before, after float64) bool { return after < 0.75*before }, "the limit falls below 75% of where it was"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := NewGradient2(Gradient2Options{})
			if err != nil {
				t.Fatal(err)
			}
			g.unanchored = tc.unanchored
			r := newSimBackend(1, service, workers).run(g, 12000)
			before, _ := meanStd(r.limits[5000:6000])
			after, _ := meanStd(r.limits[11000:12000])
			rttBefore := percentile(r.rtts[5000:6000], 0.5)
			rttAfter := percentile(r.rtts[11000:12000], 0.5)
			t.Logf("limit %.1f → %.1f, median RTT %v → %v", before, after, rttBefore, rttAfter)
			if !tc.check(before, after) {
				t.Errorf("limit %.1f → %.1f after the capacity halved; want %s", before, after, tc.want)
			}
		})
	}
}

// TestProbesFollowASlowerBackend: when the backend itself gets slower
// (each request takes twice as long, its worker count unchanged), the
// anchored limits shrink until the next probe measures the new unloaded
// RTT, then return to the worker count (probes aside: they lower the
// limit for a moment by design).
func TestProbesFollowASlowerBackend(t *testing.T) {
	const service, workers = 10 * time.Millisecond, 40
	for _, tc := range []struct {
		name string
		alg  func() (Algorithm, error)
	}{
		{"Gradient2", func() (Algorithm, error) { return NewGradient2(Gradient2Options{ProbeInterval: time.Second}) }},
		{"Vegas", func() (Algorithm, error) { return NewVegas(VegasOptions{ProbeInterval: time.Second}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alg, err := tc.alg()
			if err != nil {
				t.Fatal(err)
			}
			b := newSimBackend(1, service, func(int) int { return workers })
			b.timeout = time.Hour
			b.slower = func(n int) float64 {
				if n < 6000 {
					return 1
				}
				return 2
			}
			r := b.run(alg, 12000)
			end := simPhase{from: 6000, to: 12000, workers: workers}
			n := end.converged(r.learnt, 0.7, 1.5)
			t.Logf("limit back within [0.7, 1.5]×workers %d samples after the slowdown", n)
			if n < 0 || n > 4000 {
				t.Errorf("limit back within [0.7, 1.5]×%d %d samples after the slowdown; want within 4000 (a probe a second, %d samples a second)",
					workers, n, workers*50)
			}
		})
	}
}
