package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cluster/clustertest"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

// syncedFaultFleet builds n synced nodes, each reaching counter through a
// probe with the given faults (nil: none).
func syncedFaultFleet(t counterT, n int, every, period time.Duration, counter cluster.Counter,
	clock *floodgate.ManualClock, link func(i int) cluster.Counter, fault func(i int) func() counterFault) *counterFaultFleet {
	t.Helper()
	return syncedFaultFleetWaiting(t, n, every, period, counterRoundWait, counter, clock, link, fault)
}

// syncedFaultFleetWaiting is syncedFaultFleet with rounds that wait up to
// wait for their replies.
func syncedFaultFleetWaiting(t counterT, n int, every, period, wait time.Duration, counter cluster.Counter,
	clock *floodgate.ManualClock, link func(i int) cluster.Counter, fault func(i int) func() counterFault) *counterFaultFleet {
	t.Helper()
	f := &counterFaultFleet{clock: clock, store: counter, stale: every + period, failsWhenStale: true}
	nodes := make([]*cluster.Synced, n)
	for i := range nodes {
		p := f.probe(link(i))
		if fault != nil {
			p.fault = fault(i)
		}
		s, err := cluster.NewSynced(cluster.SyncedConfig{Counter: p, Interval: every, Timeout: wait, Clock: clock})
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
		counter, _ := clustertest.NewCounter(clock)
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

// On a real Redis, with each node behind a link that turns slow (replies
// later than the store timeout), cuts calls mid-flight (applied, then the
// connection reset), resets them before they arrive, or swallows them, the
// fleet keeps its bound in every window with T the time between successful
// rounds, and counts nothing twice. A slow link is no outage: its rounds
// wait for their replies. A node whose rounds have all failed for longer
// than T + Period fails its decisions, for the failure policy to decide.
func TestSyncedOnSlowRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out store timeouts on a real Redis")
	}
	srv := testkit.StartServer(t)
	const rate, n, stepsPerWindow, every = 60, 3, 20, 2
	const period = time.Second
	step := period / stepsPerWindow
	clock := floodgate.NewManualClock(counterEpoch)
	links := counterRedisLinks(t, srv, n, clock)
	store := counterNewRedis(t, cluster.RedisCounterConfig{Client: counterRedisClient(t, srv.Addr()), Clock: clock, Timeout: time.Second})
	f := syncedFaultFleet(t, n, every*step, period, store, clock, func(i int) cluster.Counter { return links[i] }, nil)
	plan := counterFaultPlan{
		1: {faults: []string{"slow"}},
		2: {faults: []string{"", "cut"}},
		3: {faults: []string{"slow", "slow", "slow"}, steps: 4},
		4: {faults: []string{"hang", "", "reset"}, steps: 2},
		6: {faults: []string{"cut"}},
		7: {faults: []string{"cut"}, steps: 6}, // 26 steps: longer than T + Period
	}
	res := f.play(t, "api", counterFaultRun{limit: floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: period},
		step: step, every: every, steps: 10 * stepsPerWindow, before: plan.before(links, stepsPerWindow),
		arrivals: func(_, _ int) int64 { return 2 }})
	for _, l := range links {
		l.set("")
	}
	res.log(t, rate)
	worst, bound := res.check(t, rate, true)
	for _, w := range []int{1, 3} {
		if stale := res.windows[res.order[w]].stale; stale >= every {
			t.Errorf("window %d, links slow: a decision %d steps after its node's last successful round; want every round answered", w, stale)
		}
	}
	failed := res.windows[res.order[7]].failed
	if failed == 0 {
		t.Errorf("node 0's rounds all failed for longer than T + Period, and it went on deciding")
	}
	t.Logf("worst overshoot %d (bound %d for that window); %d decisions handed over in window 7", worst, bound, failed)
}

// counterOneWay is a Counter behind a network whose one-way delays pass on
// the fleet's virtual clock: up before the store applies a call, down
// after.
type counterOneWay struct {
	cluster.Counter
	clock    *floodgate.ManualClock
	up, down time.Duration
}

func (c *counterOneWay) Add(ctx context.Context, adds []cluster.CounterAdd) ([]cluster.CounterRead, error) {
	c.clock.Advance(c.up)
	reads, err := c.Counter.Add(ctx, adds)
	c.clock.Advance(c.down)
	return reads, err
}

// A node reads the store's clock through its replies. Replies that come
// back slowly, and slower one way than the other, do not move its windows
// off the store's: a slow round trip's range of possible offsets holds the
// one a fast round trip taught, which it keeps.
func TestSyncedSlowRepliesKeepTheStoreClock(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch.Add(100 * time.Millisecond))
	link := &counterOneWay{Counter: counterNewMemory(t, clock), clock: clock}
	// The node's clock is 300ms ahead of the store's.
	s, err := cluster.NewSynced(cluster.SyncedConfig{Counter: link, Interval: time.Second,
		Clock: counterSkewedClock{base: clock, skew: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 100, Period: time.Second}
	ctx := context.Background()
	for i, trip := range []struct{ up, down time.Duration }{{0, 0}, {0, 400 * time.Millisecond}, {250 * time.Millisecond, 0}, {10 * time.Millisecond, 90 * time.Millisecond}} {
		if _, err := s.AllowN(ctx, "k", limit, 1); err != nil {
			t.Fatal(err)
		}
		link.up, link.down = trip.up, trip.down
		if err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		d, err := s.AllowN(ctx, "k", limit, 0)
		end := clock.Now().Truncate(time.Second).Add(time.Second)
		if want := end.Sub(clock.Now()); err != nil || d.ResetAfter != want {
			t.Errorf("round %d (up %s, down %s): ResetAfter %s (%v), want %s: the store's window ends then",
				i, trip.up, trip.down, d.ResetAfter, err, want)
		}
	}
}

// counterHung is a store that never answers: each call waits for its
// context to end.
type counterHung struct{}

func (counterHung) Add(ctx context.Context, _ []cluster.CounterAdd) ([]cluster.CounterRead, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A round that gets no reply within SyncedConfig.Timeout fails with the
// store unavailable (and the deadline it met); one stopped by its caller
// fails with the caller's error.
func TestSyncedRoundTimeout(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch)
	s, err := cluster.NewSynced(cluster.SyncedConfig{Counter: counterHung{}, Interval: time.Second, Timeout: 10 * time.Millisecond, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: time.Second}
	if _, err := s.AllowN(context.Background(), "k", limit, 1); err != nil {
		t.Fatal(err)
	}
	err = s.Sync(context.Background())
	if !errors.Is(err, floodgate.ErrStoreUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hung store: %v, want ErrStoreUnavailable and the round's deadline", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Sync(ctx); !errors.Is(err, context.Canceled) || errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Errorf("canceled round: %v, want the caller's context.Canceled", err)
	}
}

// Through each way Redis fails (killed and restarted empty, stopped,
// connections reset, replies 300 ms or 40 ms late, a link that swallows
// everything, replies at 1 KB/s), for two rounds of every node, the fleet
// keeps its bound and counts nothing twice; a Redis restarted empty gets
// the window's counts back with the next rounds, as each node sends its
// whole count.
func TestSyncedThroughEveryRedisFault(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out store timeouts on a real Redis")
	}
	const n, every = 3, 1
	counterThroughEveryFault(t, n, every, 2, true, func(t *testing.T, counter func(int) cluster.Counter, store cluster.Counter, clock *floodgate.ManualClock) *counterFaultFleet {
		return syncedFaultFleetWaiting(t, n, every*100*time.Millisecond, time.Second, 4*counterLinkTimeout, store, clock, counter, nil)
	})
}
