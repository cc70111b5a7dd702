package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

// sampledFleet builds n sampled nodes over one counter, node i drawing
// from PCG(seed, i).
func sampledFleet(t *testing.T, n int, oneIn int64, seed uint64, counter cluster.Counter, clock *floodgate.ManualClock) *counterFleet {
	t.Helper()
	f := &counterFleet{clock: clock}
	for i := range n {
		s, err := cluster.NewSampled(cluster.SampledConfig{Counter: counter, OneIn: oneIn, Clock: clock,
			Rand: rand.NewPCG(seed, uint64(i))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		f.nodes = append(f.nodes, s)
	}
	return f
}

// sampledBound is the overshoot NewSampled states for a window whose last
// admission was node i's, with D = 0 and rates per step of this window:
// z·σ + Σ_{j≠i} λ_j·(g/λ_i + 1 step), the extra step because arrivals come
// a step at a time.
func sampledBound(win *counterWindow, i int, stepsPerWindow, rate int64, z, g float64, oneIn int64) float64 {
	p := 1 / float64(oneIn)
	sigma := math.Sqrt(float64(rate) * (1 - p) / p)
	lambdaI := float64(win.arrivedAt[i]) / float64(stepsPerWindow)
	var stale float64
	for j, a := range win.arrivedAt {
		if j != i {
			stale += float64(a) / float64(stepsPerWindow) * (g/lambdaI + 1)
		}
	}
	return z*sigma + stale
}

// The counter's estimate of a window is unbiased, with the variance
// (1−p)/p per admitted unit that NewSampled states: measured over many
// seeds and windows.
func TestSampledEstimateMeanAndSpread(t *testing.T) {
	const rate, nodes, seeds, windows = 400, 4, 30, 4
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: time.Second}
	for _, oneIn := range []int64{2, 8} {
		t.Run(fmt.Sprintf("p=1/%d", oneIn), func(t *testing.T) {
			t.Parallel()
			var diffs []float64
			var admitted float64
			for seed := range uint64(seeds) {
				clock := floodgate.NewManualClock(counterEpoch)
				calls := &counterCalls{Counter: counterNewMemory(t, clock)}
				f := sampledFleet(t, nodes, oneIn, seed, calls, clock)
				res := f.play(t, "api", counterRun{limit: limit, step: 10 * time.Millisecond, steps: 100 * windows,
					perStep: 2 * rate / 100, pattern: counterPatterns[0]})
				for w, win := range res.windows {
					diffs = append(diffs, float64(calls.final[w]-win.admitted))
					admitted += float64(win.admitted)
				}
			}
			n := float64(len(diffs))
			mean, variance := counterMeanVariance(diffs)
			want := float64(oneIn-1) * admitted / n // (1−p)/p per admitted unit
			t.Logf("%d windows: mean X−A %.1f, variance %.0f, stated (1−p)/p·A = %.0f", len(diffs), mean, variance, want)
			if math.Abs(mean) > 4*math.Sqrt(want/n) {
				t.Errorf("mean error %.1f, more than 4 standard errors (%.1f) from 0", mean, 4*math.Sqrt(want/n))
			}
			if variance < 0.6*want || variance > 1.5*want {
				t.Errorf("variance %.0f, want within [0.6, 1.5] × %.0f", variance, want)
			}
		})
	}
}

func counterMeanVariance(xs []float64) (mean, variance float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(xs)-1)
}

// Per window the overshoot stays within z·σ + the staleness term, and a
// window that denied has undershot by at most z·σ, except in at most the
// stated fraction 1/(1+z²) + N·(1−p)^g of windows, for every p, N and
// arrival pattern.
func TestSampledStaysWithinItsBounds(t *testing.T) {
	const rate, seeds, windows, z = 400, 5, 4, 3.0
	const stepsPerWindow = 100
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: time.Second}
	for _, oneIn := range []int64{1, 4, 16} {
		for _, n := range []int{2, 4} {
			for _, pat := range counterPatterns {
				t.Run(fmt.Sprintf("p=1/%d/N=%d/%s", oneIn, n, pat.name), func(t *testing.T) {
					t.Parallel()
					p := 1 / float64(oneIn)
					g := 1.0 // p = 1: every admission is pushed
					if oneIn > 1 {
						g = math.Ceil(math.Log(float64(n)/0.01) / p) // N·(1−p)^g ≤ 0.01
					}
					allowed := 1/(1+z*z) + 0.01
					sigma := math.Sqrt(rate * (1 - p) / p)
					var total, overBad, underBad int
					worst := 0.0
					for seed := range uint64(seeds) {
						clock := floodgate.NewManualClock(counterEpoch)
						f := sampledFleet(t, n, oneIn, seed, counterNewMemory(t, clock), clock)
						res := f.play(t, "api", counterRun{limit: limit, step: 10 * time.Millisecond, steps: stepsPerWindow * windows,
							perStep: 3 * rate / stepsPerWindow, pattern: pat})
						for _, win := range res.windows {
							total++
							over := float64(win.admitted - rate)
							if over > sampledBound(win, win.lastNode, stepsPerWindow, rate, z, g, oneIn) {
								overBad++
							}
							if win.denied > 0 && -over > z*sigma {
								underBad++
							}
							worst = max(worst, over)
						}
					}
					t.Logf("%d windows: max overshoot %.0f; beyond the bound %d, undershoot beyond z·σ = %.0f: %d (allowed fraction %.2f)",
						total, worst, overBad, z*sigma, underBad, allowed)
					if float64(overBad) > allowed*float64(total) || float64(underBad) > allowed*float64(total) {
						t.Errorf("%d overshoots and %d undershoots beyond the bounds in %d windows", overBad, underBad, total)
					}
				})
			}
		}
	}
}

// Shared calls per admitted request are p.
func TestSampledSharedCallsArePPerDecision(t *testing.T) {
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1e6, Period: time.Second}
	for _, oneIn := range []int64{1, 10, 100} {
		clock := floodgate.NewManualClock(counterEpoch)
		calls := &counterCalls{Counter: counterNewMemory(t, clock)}
		f := sampledFleet(t, 4, oneIn, 7, calls, clock)
		res := f.play(t, "api", counterRun{limit: limit, step: time.Millisecond, steps: 1000, perStep: 20, pattern: counterPatterns[0]})
		p := 1 / float64(oneIn)
		got := float64(calls.calls) / float64(res.decisions)
		sd := math.Sqrt(p * (1 - p) / float64(res.decisions))
		t.Logf("p=1/%-3d %d decisions, %d calls: %.5f per decision", oneIn, res.decisions, calls.calls, got)
		if math.Abs(got-p) > 4*sd+1e-12 {
			t.Errorf("p=1/%d: %.5f calls per decision, want %.5f ± %.5f", oneIn, got, p, 4*sd)
		}
	}
}

// With p = 1 a lone node knows the exact count and decides as the
// in-memory store does.
func TestSampledAloneWithPOneDecidesAsMemory(t *testing.T) {
	checkAloneDecidesAsMemory(t, func(t *rapid.T, counter cluster.Counter, clock floodgate.Clock) (floodgate.Limiter, func()) {
		s, err := cluster.NewSampled(cluster.SampledConfig{Counter: counter, OneIn: 1, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return s, func() {}
	})
}

// A seed fixes the run; another seed gives another run.
func TestSampledSeedsReproduce(t *testing.T) {
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 100, Period: time.Second}
	run := func(seed uint64) int64 {
		clock := floodgate.NewManualClock(counterEpoch)
		calls := &counterCalls{Counter: counterNewMemory(t, clock)}
		f := sampledFleet(t, 3, 8, seed, calls, clock)
		f.play(t, "api", counterRun{limit: limit, step: 10 * time.Millisecond, steps: 300, perStep: 3, pattern: counterPatterns[1]})
		var sum int64
		for w, x := range calls.final {
			sum += w%1000*1000 + x // a fingerprint of every window's count
		}
		return sum
	}
	if a, b := run(1), run(1); a != b {
		t.Fatalf("same seed, different runs: %d, %d", a, b)
	}
	if run(1) == run(2) {
		t.Fatal("two seeds gave the same run")
	}
}

// Store down: a push that fails does not fail its request, and its amount
// is sent later; after a period with no reply, decisions fail with
// ErrStoreUnavailable until the store answers again.
func TestSampledStoreOutage(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch)
	counter := counterNewMemory(t, clock)
	s, err := cluster.NewSampled(cluster.SampledConfig{Counter: counter, OneIn: 1, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 100, Period: time.Second}
	allow := func() (floodgate.Decision, error) { return s.AllowN(context.Background(), "k", limit, 1) }
	if _, err := allow(); err != nil {
		t.Fatal(err)
	}
	counter.SetUnavailable(true)
	for range 3 {
		clock.Advance(300 * time.Millisecond)
		if d, err := allow(); err != nil || !d.Allowed {
			t.Fatalf("within a period of the last reply: %+v, %v; want a local decision", d, err)
		}
	}
	clock.Advance(101 * time.Millisecond)
	if _, err := allow(); !errors.Is(err, floodgate.ErrStoreUnavailable) || !strings.Contains(err.Error(), "period") {
		t.Fatalf("a period after the last reply: %v, want ErrStoreUnavailable naming the period", err)
	}
	counter.SetUnavailable(false)
	if _, err := allow(); err != nil {
		t.Fatalf("store back: %v", err)
	}
	// 1 before the outage, 3 owed from it (window 0), then 1 in window 1.
	w := counterEpoch.Unix()
	r := counterAdd(t, counter, cluster.CounterAdd{Key: "k", Period: time.Second, Node: "reader", Window: w + 1})[0]
	if r.Previous != 4 || r.Current != 1 {
		t.Fatalf("counts %+v, want 4 in the outage's window and 1 after", r)
	}
}

func TestSampledRejectsBadInput(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch)
	counter := counterNewMemory(t, clock)
	for _, tc := range []struct {
		cfg  cluster.SampledConfig
		says string
	}{
		{cluster.SampledConfig{OneIn: 1}, "Counter is nil"},
		{cluster.SampledConfig{Counter: counter}, "OneIn must be between 1 and 1048576"},
		{cluster.SampledConfig{Counter: counter, OneIn: 1 << 21}, "OneIn must be between"},
	} {
		if _, err := cluster.NewSampled(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: got %v, want %q", tc.cfg, err, tc.says)
		}
	}
	s, err := cluster.NewSampled(cluster.SampledConfig{Counter: counter, OneIn: 1 << 20, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	counterCheckRequests(t, s)
	_, err = s.AllowN(context.Background(), "k", floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1 << 40, Period: time.Second}, 1)
	if !errors.Is(err, floodgate.ErrInvalidLimit) || !strings.Contains(err.Error(), "× OneIn") {
		t.Errorf("rate × OneIn above 2^50: %v", err)
	}
}

// The same fleet on a real Redis runs exactly as on memory and keeps its
// bound; with Redis dead, pushes
// fail quietly until the period is over, then decisions fail with
// ErrStoreUnavailable.
func TestSampledOnRedis(t *testing.T) {
	srv := testkit.StartServer(t)
	clock := floodgate.NewManualClock(counterEpoch)
	counter := counterNewRedis(t, cluster.RedisCounterConfig{Client: counterRedisClient(t, srv.Addr()), Clock: clock, Timeout: time.Second})
	const rate, oneIn = 200, 4
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: time.Second}
	f := sampledFleet(t, 3, oneIn, 1, counter, clock)
	run := counterRun{limit: limit, step: 10 * time.Millisecond, steps: 200, perStep: 6, pattern: counterPatterns[0]}
	res := f.play(t, "api", run)
	// Same seeds over a clustertest.Counter: the very same run.
	memClock := floodgate.NewManualClock(counterEpoch)
	if mem := sampledFleet(t, 3, oneIn, 1, counterNewMemory(t, memClock), memClock).play(t, "api", run); !counterSameWindows(res, mem) {
		t.Errorf("the fleet on Redis and on memory differ")
	}
	g := math.Ceil(math.Log(3/0.01) * oneIn)
	for w, win := range res.windows {
		if over, bound := float64(win.admitted-rate), sampledBound(win, win.lastNode, 100, rate, 3, g, oneIn); over > bound {
			t.Errorf("window %d: overshoot %.0f above %.0f", w, over, bound)
		}
	}
	srv.Kill()
	if d, err := f.nodes[0].AllowN(context.Background(), "api", limit, 0); err != nil || !d.Allowed {
		t.Fatalf("Redis just died: %+v, %v; want a local decision", d, err)
	}
	clock.Advance(2 * time.Second)
	if _, err := f.nodes[0].AllowN(context.Background(), "api", limit, 1); !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("Redis dead for 2 periods: %v, want ErrStoreUnavailable", err)
	}
}

// Decisions and their pushes running at once lose nothing: a lone node
// with p = 1 admits exactly the limit.
func TestSampledConcurrentDecisions(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch)
	s, err := cluster.NewSampled(cluster.SampledConfig{Counter: counterNewMemory(t, clock), OneIn: 1, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1000, Period: time.Hour}
	noRounds := func(context.Context) error { time.Sleep(time.Millisecond); return nil }
	if got := counterHammer(t, s, limit, 4000, noRounds); got != 1000 {
		t.Fatalf("admitted %d of 4000, want exactly 1000", got)
	}
}
