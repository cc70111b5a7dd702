// Package conformance checks that a floodgate.Limiter decides exactly as
// the reference in-memory store does: the same Decision, field by field, for
// the same limits, keys, costs and times. Every store (Redis, and any future
// one) runs it from its tests:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, func(t *testing.T, clock floodgate.Clock) floodgate.Limiter {
//			return newStoreUnderTest(t, clock)
//		})
//	}
//
// The factory must return a Limiter that reads time from clock. Keys are
// unique per case, so one store may serve every case.
package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
)

// Factory makes the Limiter under test, reading time from clock.
type Factory func(t *testing.T, clock floodgate.Clock) floodgate.Limiter

// Run runs the whole suite: the table of cases, random sequences for every
// algorithm, when the Limiter is a floodgate.BatchLimiter batches, and the
// key-size policy.
func Run(t *testing.T, newLimiter Factory) {
	t.Run("cases", func(t *testing.T) { RunCases(t, newLimiter) })
	t.Run("random", func(t *testing.T) { RunRandom(t, newLimiter) })
	t.Run("batches", func(t *testing.T) { RunBatches(t, newLimiter) })
	t.Run("key policy", func(t *testing.T) { RunKeyPolicy(t, newLimiter) })
}

// pair is the Limiter under test beside the reference, on one clock.
type pair struct {
	clock *floodgate.ManualClock
	got   floodgate.Limiter
	want  *floodgate.Memory
	ns    string // key namespace, unique per pair
}

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newPair(t *testing.T, newLimiter Factory) *pair {
	clock := floodgate.NewManualClock(start)
	return &pair{
		clock: clock,
		got:   newLimiter(t, clock),
		want:  floodgate.NewMemory(floodgate.WithClock(clock)),
		ns:    fmt.Sprintf("conformance:%d:", rand.Uint64()),
	}
}

// fataler is what *testing.T and *rapid.T both offer.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// check decides one request on both and fails on any difference.
func (p *pair) check(t fataler, what, key string, limit floodgate.Limit, cost int64) floodgate.Decision {
	t.Helper()
	ctx := context.Background()
	want, wantErr := p.want.AllowN(ctx, p.ns+key, limit, cost)
	got, gotErr := p.got.AllowN(ctx, p.ns+key, limit, cost)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%s: %v cost %d on %q: error %v, reference error %v", what, limit, cost, key, gotErr, wantErr)
	}
	if got != want {
		t.Fatalf("%s: %v cost %d on %q at %s:\n got  %+v\n want %+v", what, limit, cost, key,
			p.clock.Now().Sub(start), got, want)
	}
	return got
}

// step is one request of a case: wait, then ask.
type step struct {
	wait time.Duration
	key  string // default "k"
	cost int64
}

type testCase struct {
	name  string
	limit floodgate.Limit
	steps []step
}

// burst returns n requests of cost 1 at one instant.
func burst(n int) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = step{cost: 1}
	}
	return out
}

func seq(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func at(wait time.Duration, cost int64) []step { return []step{{wait: wait, cost: cost}} }

func lim(a floodgate.Algorithm, rate int64, period time.Duration, burst int64) floodgate.Limit {
	return floodgate.Limit{Algorithm: a, Rate: rate, Period: period, Burst: burst}
}

// cases are the situations each algorithm must get exactly right.
func cases() []testCase {
	var out []testCase
	for _, a := range floodgate.Algorithms() {
		out = append(out,
			testCase{"burst then refill", lim(a, 5, time.Second, 0), seq(burst(7), at(200*time.Millisecond, 1), at(time.Second, 1), burst(6))},
			testCase{"costs", lim(a, 10, time.Minute, 0), seq(at(0, 4), at(0, 4), at(0, 4), at(0, 0), at(10*time.Second, 3), at(time.Minute, 10))},
			testCase{"cost above capacity", lim(a, 3, time.Second, 0), seq(at(0, 4), at(0, 1), at(0, 100))},
			testCase{"window boundary", lim(a, 4, time.Second, 0), seq(at(999*time.Millisecond, 4), at(time.Millisecond, 4), at(500*time.Millisecond, 2), at(2*time.Second, 4))},
			testCase{"sub-microsecond interval", lim(a, 7, 3*time.Microsecond, 0), seq(burst(9), at(time.Microsecond, 2), at(time.Microsecond, 1), at(2*time.Microsecond, 7))},
			testCase{"large numbers", lim(a, 1<<40, 24*time.Hour, 0), seq(at(0, 1<<39), at(7*time.Hour, 1<<39), at(20*time.Hour, 1<<39), at(time.Hour, 1<<38), at(3*time.Hour, 1))},
			testCase{"several keys", lim(a, 2, time.Second, 0), []step{{key: "a", cost: 2}, {key: "b", cost: 1}, {key: "a", cost: 1}, {key: "b", cost: 1}, {key: "b", cost: 1}}},
			testCase{"long idle", lim(a, 3, time.Second, 0), seq(burst(3), at(100*time.Hour, 3), burst(1))},
		)
	}
	out = append(out,
		testCase{"token bucket burst above rate", lim(floodgate.TokenBucket, 2, time.Second, 10), seq(burst(11), at(250*time.Millisecond, 1), at(500*time.Millisecond, 1))},
		testCase{"leaky bucket delays", lim(floodgate.LeakyBucket, 4, time.Second, 3), seq(burst(4), at(100*time.Millisecond, 1), at(400*time.Millisecond, 2))},
		testCase{"sliding window weights", lim(floodgate.SlidingWindow, 10, time.Second, 0), seq(at(0, 10), at(time.Second+300*time.Millisecond, 3), at(0, 1), at(200*time.Millisecond, 2), at(0, 1))},
		testCase{"sliding log expiry", lim(floodgate.SlidingLog, 3, time.Second, 0), seq(at(0, 1), at(300*time.Millisecond, 1), at(300*time.Millisecond, 1), at(399*time.Millisecond, 1), at(time.Millisecond, 1), at(0, 1))},
	)
	return out
}

// RunCases runs the table of cases.
func RunCases(t *testing.T, newLimiter Factory) {
	for _, c := range cases() {
		t.Run(string(c.limit.Algorithm)+"/"+c.name, func(t *testing.T) {
			p := newPair(t, newLimiter)
			for i, s := range c.steps {
				p.clock.Advance(s.wait)
				key := s.key
				if key == "" {
					key = "k"
				}
				p.check(t, fmt.Sprintf("step %d", i), key, c.limit, s.cost)
			}
		})
	}
	t.Run("limit change on one key", func(t *testing.T) {
		p := newPair(t, newLimiter)
		l := lim(floodgate.TokenBucket, 3, time.Second, 0)
		p.check(t, "3/s", "k", l, 2)
		p.check(t, "7/s", "k", lim(floodgate.TokenBucket, 7, time.Second, 0), 1)
		p.clock.Advance(100 * time.Millisecond)
		p.check(t, "3/s again", "k", l, 1)
		p.check(t, "another algorithm", "k", lim(floodgate.FixedWindow, 3, time.Second, 0), 1)
		p.check(t, "the sliding log", "k", lim(floodgate.SlidingLog, 3, time.Second, 0), 2)
		p.check(t, "back to a bucket", "k", l, 1)
	})
}

// RunRandom runs random limits and arrival sequences for every algorithm.
func RunRandom(t *testing.T, newLimiter Factory) {
	for _, a := range floodgate.Algorithms() {
		t.Run(string(a), func(t *testing.T) {
			p := newPair(t, newLimiter)
			rapid.Check(t, func(rt *rapid.T) {
				l := genLimit(rt, a)
				key := fmt.Sprintf("r%d", rand.Uint64())
				for i, s := range genSteps(rt, l) {
					p.clock.Advance(s.wait)
					p.check(rt, fmt.Sprintf("step %d", i), key, l, s.cost)
				}
			})
		})
	}
}

func genLimit(t *rapid.T, a floodgate.Algorithm) floodgate.Limit {
	if rapid.IntRange(0, 9).Draw(t, "huge") == 0 { // the exact wide arithmetic
		return lim(a, rapid.Int64Range(1<<30, 1<<44).Draw(t, "rate"), 24*time.Hour, 0)
	}
	periods := []time.Duration{time.Microsecond, 7 * time.Microsecond, time.Millisecond, 3 * time.Millisecond, time.Second, time.Minute}
	l := lim(a, rapid.Int64Range(1, 20).Draw(t, "rate"), rapid.SampledFrom(periods).Draw(t, "period"), 0)
	if a == floodgate.TokenBucket || a == floodgate.LeakyBucket {
		l.Burst = rapid.Int64Range(0, 25).Draw(t, "burst")
	}
	return l
}

func capacity(l floodgate.Limit) int64 {
	if (l.Algorithm == floodgate.TokenBucket || l.Algorithm == floodgate.LeakyBucket) && l.Burst > 0 {
		return l.Burst
	}
	return l.Rate
}

func genSteps(t *rapid.T, l floodgate.Limit) []step {
	n := rapid.IntRange(1, 25).Draw(t, "n")
	out := make([]step, n)
	for i := range out {
		out[i] = step{
			wait: time.Duration(rapid.Int64Range(0, 2*int64(l.Period)/int64(time.Microsecond)).Draw(t, "wait_us")) * time.Microsecond,
			cost: rapid.OneOf(rapid.Just(int64(1)), rapid.Int64Range(0, capacity(l)+1), rapid.Int64Range(0, capacity(l)/3+1)).Draw(t, "cost"),
		}
		if rapid.IntRange(0, 3).Draw(t, "same instant") == 0 {
			out[i].wait = 0
		}
	}
	return out
}
