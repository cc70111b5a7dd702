package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
)

// syncedFaultFleet builds n synced nodes, each reaching counter through a
// probe with the given faults (nil: none).
func syncedFaultFleet(t counterT, n int, every, period time.Duration, counter cluster.Counter,
	clock *floodgate.ManualClock, link func(i int) cluster.Counter, fault func(i int) func() counterFault) *counterFaultFleet {
	t.Helper()
	f := &counterFaultFleet{clock: clock, store: counter, stale: every + period, failsWhenStale: true}
	nodes := make([]*cluster.Synced, n)
	for i := range nodes {
		p := f.probe(link(i))
		if fault != nil {
			p.fault = fault(i)
		}
		s, err := cluster.NewSynced(cluster.SyncedConfig{Counter: p, Interval: every, Clock: clock})
		if err != nil {
			t.Fatalf("%v", err)
		}
		nodes[i] = s
		f.nodes = append(f.nodes, s)
	}
	f.round = func(ctx context.Context, i int) error { return nodes[i].Sync(ctx) }
	return f
}

// Rounds that fail at random — applied with the reply lost, never sent,
// or applied later out of order — cost no unit twice and lose none: each
// window stays within the bound with T the time between successful rounds,
// and within (N−1)·R; a window that denied had R admitted; the store ends
// with exactly what was admitted; and a node fails its decisions exactly
// when its last successful round is more than T + Period old.
func TestSyncedRoundsThatFailCountOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 4).Draw(t, "nodes")
		every := rapid.IntRange(1, 10).Draw(t, "T in steps")
		rate := rapid.Int64Range(20, 200).Draw(t, "rate")
		const step, period = 10 * time.Millisecond, time.Second
		clock := floodgate.NewManualClock(counterEpoch)
		counter, _ := cluster.NewMemoryCounter(clock)
		f := syncedFaultFleet(t, n, time.Duration(every)*step, period, counter, clock,
			func(int) cluster.Counter { return counter }, counterDrawFaults(t))
		res := f.play(t, "api", counterFaultRun{limit: floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: period},
			step: step, every: every, steps: 400, arrivals: counterDrawArrivals(t, n, 4)})
		res.check(t, rate, true)
	})
}

// The overshoot measured against the bound, for the record, with none, a
// quarter or half of each node's rounds failing (T = 100ms, N = 4, load 3R).
func TestSyncedOvershootWithFailingRounds(t *testing.T) {
	const rate, n, every = 400, 4, 10
	const step, period = 10 * time.Millisecond, time.Second
	for _, lost := range []int{0, 2, 4} { // of every 8 rounds of a node
		t.Run(fmt.Sprintf("failing=%d/8", lost), func(t *testing.T) {
			clock := floodgate.NewManualClock(counterEpoch)
			counter := counterNewMemory(t, clock)
			fault := func(i int) func() counterFault {
				k := i
				return func() counterFault {
					k++
					if k%8 < lost {
						return counterFaults[k%len(counterFaults)]
					}
					return counterCallOK
				}
			}
			f := syncedFaultFleet(t, n, every*step, period, counter, clock, func(int) cluster.Counter { return counter }, fault)
			res := f.play(t, "api", counterFaultRun{limit: floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: period},
				step: step, every: every, steps: 500, arrivals: func(_, _ int) int64 { return 3 }})
			worst, bound := res.check(t, rate, true)
			t.Logf("worst overshoot %d (bound %d for that window)", worst, bound)
		})
	}
}
