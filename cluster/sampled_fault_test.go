package cluster_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cluster/clustertest"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

// sampledFaultFleet builds n sampled nodes, node i drawing from
// PCG(seed, i) and reaching counter through a probe with the given faults
// (nil: none).
func sampledFaultFleet(t counterT, n int, oneIn int64, seed uint64, period time.Duration, counter cluster.Counter,
	clock *floodgate.ManualClock, link func(i int) cluster.Counter, fault func(i int) func() counterFault) *counterFaultFleet {
	t.Helper()
	f := &counterFaultFleet{clock: clock, store: counter, stale: period}
	for i := range n {
		p := f.probe(link(i))
		if fault != nil {
			p.fault = fault(i)
		}
		s, err := cluster.NewSampled(cluster.SampledConfig{Counter: p, OneIn: oneIn, Clock: clock, Rand: rand.NewPCG(seed, uint64(i))})
		if err != nil {
			t.Fatalf("%v", err)
		}
		f.nodes = append(f.nodes, s)
	}
	return f
}

// Pushes that fail at random — applied with the reply lost, never sent, or
// applied later out of order — count no claim twice: the next push carries
// the node's whole count. With p = 1 each window stays within the bound
// with g the node's admissions since its last successful push, a window
// that denied had R admitted, and the store ends with what was admitted;
// with p < 1 the store holds at most what the nodes claimed. A decision
// fails only once its key has had no reply for a Period.
func TestSampledPushesThatFailCountOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 4).Draw(t, "nodes")
		oneIn := rapid.SampledFrom([]int64{1, 1, 2, 8}).Draw(t, "1/p")
		rate := rapid.Int64Range(20, 200).Draw(t, "rate")
		const step, period = 10 * time.Millisecond, time.Second
		clock := floodgate.NewManualClock(counterEpoch)
		counter, _ := clustertest.NewCounter(clock)
		f := sampledFaultFleet(t, n, oneIn, rapid.Uint64().Draw(t, "seed"), period, counter, clock,
			func(int) cluster.Counter { return counter }, counterDrawFaults(t))
		res := f.play(t, "api", counterFaultRun{limit: floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: period},
			step: step, steps: 300, arrivals: counterDrawArrivals(t, n, 3)})
		res.check(t, rate, oneIn == 1)
	})
}

// On a real Redis, with each node behind a link that turns slow (replies
// later than the store timeout: the push fails, applied), cuts pushes
// mid-flight, resets them before they arrive, or swallows them: with p = 1
// the fleet keeps its bound in every window, with g a node's admissions
// since its last successful push, and counts nothing twice; with p = 1/4
// the store holds no more than the nodes claimed. A key with no reply for
// a Period fails its decisions, for the failure policy to decide.
func TestSampledOnSlowRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out store timeouts on a real Redis")
	}
	srv := testkit.StartServer(t)
	const rate, n, stepsPerWindow = 30, 3, 20
	const period = time.Second
	step := period / stepsPerWindow
	for _, oneIn := range []int64{1, 4} {
		t.Run(fmt.Sprintf("p=1/%d", oneIn), func(t *testing.T) {
			clock := floodgate.NewManualClock(counterEpoch)
			links := counterRedisLinks(t, srv, n, clock)
			store := counterNewRedis(t, cluster.RedisCounterConfig{Client: counterRedisClient(t, srv.Addr()),
				KeyPrefix: fmt.Sprintf("p%d:", oneIn), Clock: clock, Timeout: time.Second})
			for _, l := range links {
				l.counter = counterNewRedis(t, cluster.RedisCounterConfig{Client: counterRedisClient(t, l.proxy.Addr()),
					KeyPrefix: fmt.Sprintf("p%d:", oneIn), Clock: clock, Timeout: counterLinkTimeout})
			}
			f := sampledFaultFleet(t, n, oneIn, 1, period, store, clock, func(i int) cluster.Counter { return links[i] }, nil)
			plan := counterFaultPlan{
				1: {faults: []string{"slow"}, steps: 10},
				2: {faults: []string{"", "cut"}},
				3: {faults: []string{"hang", "", "reset"}, steps: 4},
				5: {faults: []string{"cut"}},
				6: {faults: []string{"cut"}, steps: 6}, // 26 steps: no reply for longer than a Period
			}
			res := f.play(t, "api", counterFaultRun{limit: floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: period},
				step: step, steps: 9 * stepsPerWindow, before: plan.before(links, stepsPerWindow),
				arrivals: func(_, _ int) int64 { return 1 }})
			for _, l := range links {
				l.set("")
			}
			res.log(t, rate)
			worst, bound := res.check(t, rate, oneIn == 1)
			failed := res.windows[res.order[6]].failed
			if failed == 0 {
				t.Errorf("node 0 had no reply for longer than a Period, and it went on deciding")
			}
			t.Logf("worst overshoot %d (bound %d for that window); %d decisions handed over in window 6", worst, bound, failed)
		})
	}
}

// Through each way Redis fails, for two steps, a fleet with p = 1 keeps
// its bound and counts nothing twice; a Redis restarted empty gets the
// window's counts back with each node's next push.
func TestSampledThroughEveryRedisFault(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out store timeouts on a real Redis")
	}
	const n = 3
	counterThroughEveryFault(t, n, 0, 2, true, func(t *testing.T, counter func(int) cluster.Counter, store cluster.Counter, clock *floodgate.ManualClock) *counterFaultFleet {
		return sampledFaultFleet(t, n, 1, 1, time.Second, store, clock, counter, nil)
	})
}
