package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
)

// counterEpoch is a start time on a whole second, so windows of any period
// dividing a second start with the run.
var counterEpoch = time.Unix(1_700_000_000, 0)

func counterNewMemory(t *testing.T, clock floodgate.Clock) *cluster.MemoryCounter {
	t.Helper()
	c, err := cluster.NewMemoryCounter(clock)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// counterAdd adds one batch and fails the test on an error.
func counterAdd(t *testing.T, c cluster.Counter, adds ...cluster.CounterAdd) []cluster.CounterRead {
	t.Helper()
	reads, err := c.Add(context.Background(), adds)
	if err != nil {
		t.Fatal(err)
	}
	return reads
}

// The window rules, step by step, on one key of a 1s period.
func TestCounterWindowRules(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch)
	c := counterNewMemory(t, clock)
	w := counterEpoch.Unix() // the window number of a 1s period
	steps := []struct {
		name    string
		advance time.Duration
		add     cluster.CounterAdd
		want    cluster.CounterRead
	}{
		{"a read of a new key is empty", 0, cluster.CounterAdd{Window: w},
			cluster.CounterRead{Window: w}},
		{"a delta counts in the window it names", 0, cluster.CounterAdd{Window: w, Delta: 3},
			cluster.CounterRead{Window: w, Current: 3}},
		{"next window: the count becomes the previous one", time.Second, cluster.CounterAdd{Window: w + 1, Delta: 2},
			cluster.CounterRead{Window: w + 1, Current: 2, Previous: 3}},
		{"a late delta for the previous window still counts there", 0, cluster.CounterAdd{Window: w, Delta: 4},
			cluster.CounterRead{Window: w + 1, Current: 2, Previous: 7}},
		{"PrevDelta counts in the window before the named one", 0, cluster.CounterAdd{Window: w + 1, Delta: 1, PrevDelta: 1},
			cluster.CounterRead{Window: w + 1, Current: 3, Previous: 8}},
		{"a delta for a window already gone is dropped", 0, cluster.CounterAdd{Window: w - 1, Delta: 9},
			cluster.CounterRead{Window: w + 1, Current: 3, Previous: 8}},
		{"a delta for a window not reached yet counts now", 0, cluster.CounterAdd{Window: w + 5, Delta: 1},
			cluster.CounterRead{Window: w + 1, Current: 4, Previous: 8}},
		{"two windows later both counts are gone", 2 * time.Second, cluster.CounterAdd{Window: w + 3},
			cluster.CounterRead{Window: w + 3}},
		{"a clock that steps back keeps the newest window", -3 * time.Second, cluster.CounterAdd{Window: w, Delta: 1},
			cluster.CounterRead{Window: w + 3}},
	}
	for _, s := range steps {
		clock.Advance(s.advance)
		s.add.Key, s.add.Period = "k", time.Second
		got := counterAdd(t, c, s.add)[0]
		s.want.Now = clock.Now().UnixMicro()
		if got != s.want {
			t.Fatalf("%s: got %+v, want %+v", s.name, got, s.want)
		}
	}
}

// Keys and periods count apart; a batch is applied in order.
func TestCounterKeysAndPeriodsAreSeparate(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch)
	c := counterNewMemory(t, clock)
	sec, ms := counterEpoch.Unix(), counterEpoch.UnixMilli()
	reads := counterAdd(t, c,
		cluster.CounterAdd{Key: "a", Period: time.Second, Window: sec, Delta: 1},
		cluster.CounterAdd{Key: "b", Period: time.Second, Window: sec, Delta: 2},
		cluster.CounterAdd{Key: "a", Period: time.Millisecond, Window: ms, Delta: 4},
		cluster.CounterAdd{Key: "a", Period: time.Second, Window: sec, Delta: 8},
	)
	want := []int64{1, 2, 4, 9}
	for i, r := range reads {
		if r.Current != want[i] {
			t.Errorf("add %d: current %d, want %d", i, r.Current, want[i])
		}
	}
}

func TestCounterRejectsBadAdds(t *testing.T) {
	c := counterNewMemory(t, floodgate.NewManualClock(counterEpoch))
	cases := []struct {
		add  cluster.CounterAdd
		want error
		says string
	}{
		{cluster.CounterAdd{Period: time.Second}, floodgate.ErrInvalidKey, "key is empty"},
		{cluster.CounterAdd{Key: strings.Repeat("k", 1025), Period: time.Second}, floodgate.ErrInvalidKey, "longer than 1024"},
		{cluster.CounterAdd{Key: "k"}, floodgate.ErrInvalidLimit, "period 0s"},
		{cluster.CounterAdd{Key: "k", Period: 1500 * time.Nanosecond}, floodgate.ErrInvalidLimit, "whole number of microseconds"},
		{cluster.CounterAdd{Key: "k", Period: time.Second, Delta: -1}, floodgate.ErrInvalidCost, "must not be negative"},
		{cluster.CounterAdd{Key: "k", Period: time.Second, PrevDelta: 1 << 51}, floodgate.ErrInvalidCost, "delta above"},
	}
	for _, tc := range cases {
		// The bad add comes second: nothing of the batch is applied.
		_, err := c.Add(context.Background(), []cluster.CounterAdd{{Key: "ok", Period: time.Second, Delta: 1}, tc.add})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "add 1") {
			t.Errorf("%+v: got %v, want %v saying %q about add 1", tc.add, err, tc.want, tc.says)
		}
	}
	if r := counterAdd(t, c, cluster.CounterAdd{Key: "ok", Period: time.Second})[0]; r.Current != 0 {
		t.Errorf("a rejected batch was applied: %+v", r)
	}
}

func TestMemoryCounterOutage(t *testing.T) {
	c := counterNewMemory(t, floodgate.NewManualClock(counterEpoch))
	c.SetUnavailable(true)
	_, err := c.Add(context.Background(), []cluster.CounterAdd{{Key: "k", Period: time.Second, Delta: 1}})
	if !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("down: got %v, want ErrStoreUnavailable", err)
	}
	c.SetUnavailable(false)
	if r := counterAdd(t, c, cluster.CounterAdd{Key: "k", Period: time.Second})[0]; r.Current != 0 {
		t.Fatalf("an add made while down was applied: %+v", r)
	}
	if _, err := cluster.NewMemoryCounter(nil); err == nil || !strings.Contains(err.Error(), "clock") {
		t.Fatalf("NewMemoryCounter(nil): %v", err)
	}
}
