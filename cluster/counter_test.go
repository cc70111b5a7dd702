package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cluster/clustertest"
)

// counterEpoch is a start time on a whole second, so windows of any period
// dividing a second start with the run.
var counterEpoch = time.Unix(1_700_000_000, 0)

func counterNewMemory(t *testing.T, clock floodgate.Clock) *clustertest.Counter {
	t.Helper()
	c, err := clustertest.NewCounter(clock)
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

// The window rules, step by step, on one key of a 1s period written by
// nodes a and b.
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
		{"a read of a new key is empty", 0, cluster.CounterAdd{Node: "a", Window: w},
			cluster.CounterRead{Window: w}},
		{"a count counts in the window it names", 0, cluster.CounterAdd{Node: "a", Window: w, Count: 3},
			cluster.CounterRead{Window: w, Current: 3, Own: 3}},
		{"the same count again changes nothing", 0, cluster.CounterAdd{Node: "a", Window: w, Count: 3},
			cluster.CounterRead{Window: w, Current: 3, Own: 3}},
		{"a smaller one, late, neither", 0, cluster.CounterAdd{Node: "a", Window: w, Count: 1},
			cluster.CounterRead{Window: w, Current: 3, Own: 3}},
		{"a larger one adds the difference", 0, cluster.CounterAdd{Node: "a", Window: w, Count: 5},
			cluster.CounterRead{Window: w, Current: 5, Own: 5}},
		{"another node's count adds to the sum", 0, cluster.CounterAdd{Node: "b", Window: w, Count: 2},
			cluster.CounterRead{Window: w, Current: 7, Own: 2}},
		{"next window: the counts become the previous ones", time.Second, cluster.CounterAdd{Node: "a", Window: w + 1, Count: 2},
			cluster.CounterRead{Window: w + 1, Current: 2, Previous: 7, Own: 2, OwnPrevious: 5}},
		{"a late count for the previous window still counts there", 0, cluster.CounterAdd{Node: "b", Window: w, Count: 6},
			cluster.CounterRead{Window: w + 1, Current: 2, Previous: 11, OwnPrevious: 6}},
		{"PrevCount counts in the window before the named one", 0, cluster.CounterAdd{Node: "a", Window: w + 1, Count: 3, PrevCount: 6},
			cluster.CounterRead{Window: w + 1, Current: 3, Previous: 12, Own: 3, OwnPrevious: 6}},
		{"a count for a window already gone is dropped", 0, cluster.CounterAdd{Node: "a", Window: w - 1, Count: 9},
			cluster.CounterRead{Window: w + 1, Current: 3, Previous: 12, Own: 3, OwnPrevious: 6}},
		{"a count for a window not reached yet is not kept", 0, cluster.CounterAdd{Node: "b", Window: w + 5, Count: 4},
			cluster.CounterRead{Window: w + 1, Current: 3, Previous: 12, OwnPrevious: 6}},
		{"two windows later every count is gone", 2 * time.Second, cluster.CounterAdd{Node: "a", Window: w + 3, Count: 1},
			cluster.CounterRead{Window: w + 3, Current: 1, Own: 1}},
		{"a clock that steps back keeps the newest window", -3 * time.Second, cluster.CounterAdd{Node: "b", Window: w + 3, Count: 2},
			cluster.CounterRead{Window: w + 3, Current: 3, Own: 2}},
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

// Adds are idempotent: each window's sum is, over the nodes, the largest
// count each sent for it, however often and in whatever order the adds
// arrive, so an add sent again after a lost reply counts once.
func TestCounterAddsMergeIdempotently(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clock := floodgate.NewManualClock(counterEpoch)
		c, _ := clustertest.NewCounter(clock)
		w := counterEpoch.Unix()
		nodes := []string{"a", "b", "c"}
		largest := map[[2]int64]int64{} // (node, window) → the largest count sent
		var sent, applied []cluster.CounterAdd
		for range rapid.IntRange(1, 60).Draw(t, "adds") {
			var a cluster.CounterAdd
			if len(sent) > 0 && rapid.Bool().Draw(t, "again") {
				a = sent[rapid.IntRange(0, len(sent)-1).Draw(t, "which")] // a duplicate, or late
			} else {
				a = cluster.CounterAdd{Key: "k", Period: time.Second, Node: rapid.SampledFrom(nodes).Draw(t, "node"),
					Window: w + rapid.Int64Range(0, 1).Draw(t, "window"), Count: rapid.Int64Range(0, 50).Draw(t, "count"),
					PrevCount: rapid.Int64Range(0, 50).Draw(t, "prev")}
				sent = append(sent, a)
			}
			applied = append(applied, a)
			n := int64(a.Node[0])
			largest[[2]int64{n, a.Window}] = max(largest[[2]int64{n, a.Window}], a.Count)
			largest[[2]int64{n, a.Window - 1}] = max(largest[[2]int64{n, a.Window - 1}], a.PrevCount)
		}
		// The store's clock is in window w+1 throughout: w is its previous.
		clock.Set(counterEpoch.Add(time.Second))
		reads, err := c.Add(context.Background(), append(applied, cluster.CounterAdd{Key: "k", Period: time.Second, Node: "reader", Window: w + 1}))
		if err != nil {
			t.Fatal(err)
		}
		r := reads[len(reads)-1]
		var cur, prev int64
		for k, v := range largest {
			switch k[1] {
			case w + 1:
				cur += v
			case w:
				prev += v
			}
		}
		if r.Current != cur || r.Previous != prev {
			t.Fatalf("sums %d and %d, want %d and %d: the largest count of each node", r.Current, r.Previous, cur, prev)
		}
	})
}

// Keys and periods count apart; a batch is applied in order.
func TestCounterKeysAndPeriodsAreSeparate(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch)
	c := counterNewMemory(t, clock)
	sec, ms := counterEpoch.Unix(), counterEpoch.UnixMilli()
	reads := counterAdd(t, c,
		cluster.CounterAdd{Key: "a", Period: time.Second, Node: "n", Window: sec, Count: 1},
		cluster.CounterAdd{Key: "b", Period: time.Second, Node: "n", Window: sec, Count: 2},
		cluster.CounterAdd{Key: "a", Period: time.Millisecond, Node: "n", Window: ms, Count: 4},
		cluster.CounterAdd{Key: "a", Period: time.Second, Node: "n", Window: sec, Count: 8},
	)
	want := []int64{1, 2, 4, 8}
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
		{cluster.CounterAdd{Period: time.Second, Node: "n"}, floodgate.ErrInvalidKey, "key is empty"},
		{cluster.CounterAdd{Key: strings.Repeat("k", floodgate.MaxKeyBytes+1), Period: time.Second, Node: "n"}, floodgate.ErrKeyTooLong, "(4097 bytes) is longer than 4096 bytes"},
		{cluster.CounterAdd{Key: "k", Period: time.Second}, floodgate.ErrInvalidKey, "node name must be 1 to 256 bytes, got 0"},
		{cluster.CounterAdd{Key: "k", Period: time.Second, Node: strings.Repeat("n", 257)}, floodgate.ErrInvalidKey, "got 257"},
		{cluster.CounterAdd{Key: "k", Node: "n"}, floodgate.ErrInvalidLimit, "period 0s"},
		{cluster.CounterAdd{Key: "k", Node: "n", Period: 1500 * time.Nanosecond}, floodgate.ErrInvalidLimit, "whole number of microseconds"},
		{cluster.CounterAdd{Key: "k", Node: "n", Period: time.Second, Count: -1}, floodgate.ErrInvalidCost, "must not be negative"},
		{cluster.CounterAdd{Key: "k", Node: "n", Period: time.Second, PrevCount: 1 << 51}, floodgate.ErrInvalidCost, "count above"},
	}
	for _, tc := range cases {
		// The bad add comes second: nothing of the batch is applied.
		_, err := c.Add(context.Background(), []cluster.CounterAdd{{Key: "ok", Period: time.Second, Node: "n", Count: 1}, tc.add})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "add 1") {
			t.Errorf("%+v: got %v, want %v saying %q about add 1", tc.add, err, tc.want, tc.says)
		}
	}
	if r := counterAdd(t, c, cluster.CounterAdd{Key: "ok", Period: time.Second, Node: "n"})[0]; r.Current != 0 {
		t.Errorf("a rejected batch was applied: %+v", r)
	}
}
