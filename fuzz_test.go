package floodgate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

// FuzzMemory drives a Memory with arbitrary limits, costs and clock moves
// (backwards too). Whatever the input, AllowN answers without panicking,
// errors only for invalid input (and then with one of the sentinels), and
// every decision is well formed.
//
//	go test -run '^$' -fuzz FuzzMemory -fuzztime 1m .
func FuzzMemory(f *testing.F) {
	f.Add(uint8(0), int64(10), int64(1_000_000), int64(0), int64(1), int64(0), int64(1), int64(500))
	f.Add(uint8(1), int64(3), int64(7), int64(2), int64(2), int64(-5), int64(0), int64(3))
	f.Add(uint8(3), int64(1<<40), int64(86_400_000_000), int64(0), int64(1<<39), int64(1<<35), int64(1<<38), int64(1<<36))
	f.Add(uint8(4), int64(-1), int64(0), int64(-3), int64(-1), int64(0), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, alg uint8, rate, periodUS, burst, cost1, jump, cost2, jump2 int64) {
		algs := floodgate.Algorithms()
		limit := floodgate.Limit{
			Algorithm: algs[int(alg)%len(algs)],
			Rate:      rate,
			Period:    time.Duration(periodUS) * time.Microsecond,
			Burst:     burst,
		}
		if alg >= uint8(len(algs))*50 {
			limit.Algorithm = "unknown"
		}
		clock := floodgate.NewManualClock(time.Unix(1_800_000_000, 0))
		m := floodgate.NewMemory(floodgate.WithClock(clock))
		valid := limit.Validate() == nil
		for _, step := range []struct{ jump, cost int64 }{{0, cost1}, {jump, cost2}, {jump2, cost1}, {0, cost2}} {
			clock.Advance(time.Duration(step.jump%(1<<40)) * time.Microsecond)
			d, err := m.AllowN(ctx, "k", limit, step.cost)
			switch {
			case err == nil && !valid:
				t.Fatalf("%v accepted although Validate rejects it", limit)
			case err != nil && !errors.Is(err, floodgate.ErrInvalidLimit) && !errors.Is(err, floodgate.ErrInvalidCost):
				t.Fatalf("%v cost %d: unexpected error %v", limit, step.cost, err)
			case err != nil && valid && step.cost >= 0:
				t.Fatalf("%v cost %d: valid request failed: %v", limit, step.cost, err)
			case err == nil:
				checkWellFormed(t, limit, step.cost, d)
			}
		}
	})
}

func checkWellFormed(t *testing.T, l floodgate.Limit, cost int64, d floodgate.Decision) {
	t.Helper()
	switch {
	case d.Remaining < 0 || d.Remaining > d.Limit:
		t.Fatalf("%v cost %d: Remaining %d outside [0, %d]", l, cost, d.Remaining, d.Limit)
	case d.Allowed && d.RetryAfter != 0:
		t.Fatalf("%v cost %d: allowed with RetryAfter %v", l, cost, d.RetryAfter)
	case !d.Allowed && cost <= d.Limit && d.RetryAfter <= 0:
		t.Fatalf("%v cost %d: denied with RetryAfter %v", l, cost, d.RetryAfter)
	case !d.Allowed && cost > d.Limit && d.RetryAfter >= 0:
		t.Fatalf("%v cost %d above capacity: RetryAfter %v", l, cost, d.RetryAfter)
	case d.ResetAfter < 0 || d.Delay < 0 || d.Delay > d.ResetAfter:
		t.Fatalf("%v cost %d: ResetAfter %v, Delay %v", l, cost, d.ResetAfter, d.Delay)
	}
}
