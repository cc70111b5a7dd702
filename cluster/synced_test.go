package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cluster/clustertest"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

// syncedFleet builds n synced nodes over one counter, all on clock.
func syncedFleet(t *testing.T, n int, every time.Duration, counter cluster.Counter, clock *floodgate.ManualClock) *counterFleet {
	t.Helper()
	f := &counterFleet{clock: clock}
	nodes := make([]*cluster.Synced, n)
	for i := range nodes {
		s, err := cluster.NewSynced(cluster.SyncedConfig{Counter: counter, Interval: every, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		nodes[i] = s
		f.nodes = append(f.nodes, s)
	}
	f.sync = func(ctx context.Context, i int) error { return nodes[i].Sync(ctx) }
	return f
}

// syncedBound is the overshoot NewSynced states for a window whose last
// admission was node i's: Σ_{j≠i} min(λ_j·(2T + D), R), with D = 0 here
// (the counter answers at once) and λ_j·T = every × node j's arrivals in
// its busiest step.
func syncedBound(res counterResult, i, every int, rate int64) int64 {
	var bound int64
	for j, a := range res.maxStep {
		if j != i {
			bound += min(2*int64(every)*a, rate)
		}
	}
	return bound
}

// The fleet admits at most R plus the stated overshoot in every window,
// and denies only when R has been reached (undershoot 0), for every N, T
// and arrival pattern. The load is three times the limit, so every window
// fills up.
func TestSyncedStaysWithinItsBounds(t *testing.T) {
	const rate = 400
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: time.Second}
	step := 10 * time.Millisecond
	for _, n := range []int{1, 2, 4, 8} {
		for _, every := range []int{1, 10, 50} { // T = 10ms, 100ms, 500ms
			for _, p := range counterPatterns {
				t.Run(fmt.Sprintf("N=%d/T=%s/%s", n, time.Duration(every)*step, p.name), func(t *testing.T) {
					t.Parallel()
					clock := floodgate.NewManualClock(counterEpoch)
					f := syncedFleet(t, n, time.Duration(every)*step, counterNewMemory(t, clock), clock)
					res := f.play(t, "api", counterRun{limit: limit, step: step, every: every, steps: 400, perStep: 3 * rate / 100, pattern: p})
					worst, worstBound := int64(0), int64(0)
					for w, win := range res.windows {
						over := win.admitted - rate
						bound := syncedBound(res, win.lastNode, every, rate)
						if over > bound {
							t.Errorf("window %d: admitted %d, overshoot %d above the bound %d", w, win.admitted, over, bound)
						}
						if win.denied > 0 && win.admitted < rate {
							t.Errorf("window %d: denied %d with only %d of %d admitted", w, win.denied, win.admitted, rate)
						}
						if over > worst {
							worst, worstBound = over, bound
						}
					}
					t.Logf("max overshoot %d (bound %d for that window; min((N−1)·λ·2T, (N−1)·R) = %d)",
						worst, worstBound, min(int64(n-1)*2*int64(every)*res.maxStep[0], int64(n-1)*rate))
				})
			}
		}
	}
}

// One Counter call per round, one script call per key in it: per decision
// 1/(rate·T) for one key, shown falling with T.
func TestSyncedSharedCallsFallAsOneOverRateTimesT(t *testing.T) {
	const nodes, perStep = 4, 8 // 8000 requests per second across the fleet
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1e6, Period: time.Second}
	step := time.Millisecond
	last := 1.0
	for _, every := range []int{1, 10, 100, 1000} {
		clock := floodgate.NewManualClock(counterEpoch)
		calls := &counterCalls{Counter: counterNewMemory(t, clock)}
		f := syncedFleet(t, nodes, time.Duration(every)*step, calls, clock)
		const steps = 2000
		res := f.play(t, "api", counterRun{limit: limit, step: step, every: every, steps: steps, perStep: perStep, pattern: counterPatterns[0]})
		perDecision := float64(calls.add) / float64(res.decisions)
		// Each node: rate·T = (perStep/nodes)·every decisions per round.
		// The first round comes before any decision and has nothing to send.
		want := 1 / (float64(perStep/nodes) * float64(every))
		rounds := float64(steps / every)
		t.Logf("T=%-6s calls %5d, script calls per decision %.6f (1/(rate·T) = %.6f)", time.Duration(every)*step, calls.calls, perDecision, want)
		if perDecision > want+1e-12 || perDecision < want*(rounds-1)/rounds-1e-12 || perDecision >= last {
			t.Errorf("T=%s: %.6f script calls per decision, want %.6f less the first round, and below the shorter T's %.6f", time.Duration(every)*step, perDecision, want, last)
		}
		last = perDecision
	}
}

// A lone synced node knows the exact count, so it decides exactly as the
// in-memory store does, whenever its rounds happen.
func TestSyncedAloneDecidesAsMemory(t *testing.T) {
	checkAloneDecidesAsMemory(t, func(t *rapid.T, counter cluster.Counter, clock floodgate.Clock) (floodgate.Limiter, func()) {
		s, err := cluster.NewSynced(cluster.SyncedConfig{Counter: counter, Interval: time.Hour, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return s, func() {
			if rapid.Bool().Draw(t, "sync") {
				if err := s.Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

// checkAloneDecidesAsMemory drives a lone node of a strategy (made by
// newNode, with a hook run before each request) and *floodgate.Memory
// through the same random requests on one clock, and compares every
// decision.
func checkAloneDecidesAsMemory(t *testing.T, newNode func(*rapid.T, cluster.Counter, floodgate.Clock) (floodgate.Limiter, func())) {
	rapid.Check(t, func(t *rapid.T) {
		clock := floodgate.NewManualClock(counterEpoch)
		counter, _ := clustertest.NewCounter(clock)
		node, beforeEach := newNode(t, counter, clock)
		mem := floodgate.NewMemory(floodgate.WithClock(clock))
		limit := floodgate.Limit{
			Algorithm: rapid.SampledFrom([]floodgate.Algorithm{floodgate.FixedWindow, floodgate.SlidingWindow}).Draw(t, "algorithm"),
			Rate:      rapid.Int64Range(1, 20).Draw(t, "rate"),
			Period:    time.Duration(rapid.Int64Range(1, 100).Draw(t, "period ms")) * time.Millisecond,
		}
		for step := range rapid.IntRange(1, 200).Draw(t, "requests") {
			clock.Advance(time.Duration(rapid.Int64Range(0, 30_000).Draw(t, "advance µs")) * time.Microsecond)
			beforeEach()
			key := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "key")
			cost := rapid.Int64Range(0, limit.Rate+1).Draw(t, "cost")
			got, err1 := node.AllowN(context.Background(), key, limit, cost)
			want, err2 := mem.AllowN(context.Background(), key, limit, cost)
			if err1 != nil || err2 != nil || got != want {
				t.Fatalf("step %d, %s cost %d: node %+v (%v), memory %+v (%v)", step, key, cost, got, err1, want, err2)
			}
		}
	})
}

// Windows follow the store's clock: nodes whose clocks are off by ±300ms
// agree on where a window ends once they have synced.
func TestSyncedWindowsFollowTheStoreClock(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch.Add(100 * time.Millisecond))
	counter := counterNewMemory(t, clock)
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: time.Second}
	for _, skew := range []time.Duration{-300 * time.Millisecond, 0, 300 * time.Millisecond} {
		s, err := cluster.NewSynced(cluster.SyncedConfig{Counter: counter, Interval: time.Second,
			Clock: counterSkewedClock{base: clock, skew: skew}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AllowN(context.Background(), "k", limit, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		d, err := s.AllowN(context.Background(), "k", limit, 1)
		if err != nil || d.ResetAfter != 900*time.Millisecond {
			t.Errorf("clock off by %s: ResetAfter %s (%v), want 900ms: the store's window ends then", skew, d.ResetAfter, err)
		}
	}
}

// A node whose clock runs windows ahead of the store's numbers its first
// counts in a window the store has not reached; once a reply has told it
// the store's clock, those counts move back to the store's window, and the
// node decides with the fleet from then on, neither alone nor stuck
// denying until the store catches up with its clock.
func TestSyncedNodeAheadRejoinsTheStoreWindows(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch)
	counter := counterNewMemory(t, clock)
	const rate, step = 10, 250 * time.Millisecond
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: time.Second}
	var nodes []*cluster.Synced
	for _, skew := range []time.Duration{0, 5 * time.Second} {
		s, err := cluster.NewSynced(cluster.SyncedConfig{Counter: counter, Interval: step, Clock: counterSkewedClock{base: clock, skew: skew}})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, s)
	}
	ctx := context.Background()
	for w := range 8 {
		admitted := make([]int, len(nodes))
		for range 4 { // steps of the window
			for i, s := range nodes {
				for range rate {
					if d, err := s.AllowN(ctx, "k", limit, 1); err != nil {
						t.Fatal(err)
					} else if d.Allowed {
						admitted[i]++
					}
				}
				if err := s.Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(step)
		}
		// From the second window on: R, plus at most what the other node
		// admits in 2T (each node gets R a step); and the node ahead, which
		// decides second in each step, admits at the start of each window,
		// before its view has the other's count, like the first node.
		if total := admitted[0] + admitted[1]; w > 0 && (total < rate || total > 2*rate || admitted[1] == 0) {
			t.Errorf("window %d: admitted %v, %d in all; want R = %d to R + min(λ·2T, R) = %d, some by each node", w, admitted, total, rate, 2*rate)
		}
	}
}

// Store down: rounds fail with ErrStoreUnavailable; decisions go on, on
// the last totals and the local counts, for T + one period; then they fail,
// until a round succeeds. Nothing counted meanwhile is lost.
func TestSyncedStoreOutage(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch)
	counter := counterNewMemory(t, clock)
	s, err := cluster.NewSynced(cluster.SyncedConfig{Counter: counter, Interval: 100 * time.Millisecond, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 100, Period: time.Second}
	allow := func() (floodgate.Decision, error) { return s.AllowN(context.Background(), "k", limit, 1) }
	if _, err := allow(); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	counter.SetUnavailable(true)
	for range 4 {
		clock.Advance(200 * time.Millisecond)
		if err := s.Sync(context.Background()); !errors.Is(err, floodgate.ErrStoreUnavailable) {
			t.Fatalf("round while down: %v, want ErrStoreUnavailable", err)
		}
		if d, err := allow(); err != nil || !d.Allowed {
			t.Fatalf("%s after the last round: %+v, %v; want to decide locally", 200*time.Millisecond, d, err)
		}
	}
	clock.Advance(301 * time.Millisecond) // T + Period + 1ms after the last good round
	_, err = allow()
	if !errors.Is(err, floodgate.ErrStoreUnavailable) || !strings.Contains(err.Error(), "interval + the limit's period") {
		t.Fatalf("T + a period after the last round: %v, want ErrStoreUnavailable naming the period", err)
	}
	counter.SetUnavailable(false)
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The window of the outage holds the 4 requests counted meanwhile.
	w := counterEpoch.Unix()
	r := counterAdd(t, counter, cluster.CounterAdd{Key: "k", Period: time.Second, Node: "reader", Window: w + 1})[0]
	if r.Previous != 5 {
		t.Fatalf("previous window holds %d, want the 1+4 admitted", r.Previous)
	}
	if _, err := allow(); err != nil {
		t.Fatalf("after a good round: %v", err)
	}
}

func TestSyncedRejectsBadInput(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch)
	counter := counterNewMemory(t, clock)
	for _, tc := range []struct {
		cfg  cluster.SyncedConfig
		says string
	}{
		{cluster.SyncedConfig{Interval: time.Second}, "Counter is nil"},
		{cluster.SyncedConfig{Counter: counter}, "Interval must be positive"},
		{cluster.SyncedConfig{Counter: counter, Interval: -time.Second}, "Interval must be positive"},
		{cluster.SyncedConfig{Counter: counter, Interval: time.Second, Timeout: -time.Second}, "Timeout must not be negative"},
	} {
		if _, err := cluster.NewSynced(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: got %v, want %q", tc.cfg, err, tc.says)
		}
	}
	s, err := cluster.NewSynced(cluster.SyncedConfig{Counter: counter, Interval: time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	counterCheckRequests(t, s)
}

// counterCheckRequests checks what both strategies refuse: the algorithms
// they do not serve, bad limits, bad keys and costs.
func counterCheckRequests(t *testing.T, l floodgate.Limiter) {
	t.Helper()
	for _, tc := range []struct {
		key   string
		limit floodgate.Limit
		cost  int64
		want  error
		says  string
	}{
		{"k", floodgate.PerSecond(10), 1, floodgate.ErrInvalidLimit, "serves fixed_window and sliding_window"},
		{"k", floodgate.Limit{Algorithm: floodgate.SlidingLog, Rate: 1, Period: time.Second}, 1, floodgate.ErrInvalidLimit, "not sliding_log"},
		{"k", floodgate.Limit{Algorithm: floodgate.FixedWindow, Period: time.Second}, 1, floodgate.ErrInvalidLimit, "rate must be positive"},
		{"", floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1, Period: time.Second}, 1, floodgate.ErrInvalidKey, "key is empty"},
		{"k", floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1, Period: time.Second}, -1, floodgate.ErrInvalidCost, "negative"},
	} {
		_, err := l.AllowN(context.Background(), tc.key, tc.limit, tc.cost)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q %s cost %d: got %v, want %v saying %q", tc.key, tc.limit, tc.cost, err, tc.want, tc.says)
		}
	}
}

// The background loop runs rounds on a real ticker until Close.
func TestSyncedBackgroundLoop(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch)
	calls := &counterCalls{Counter: counterNewMemory(t, clock)}
	s, err := cluster.NewSynced(cluster.SyncedConfig{Counter: calls, Interval: time.Millisecond, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: time.Hour}
	if _, err := s.AllowN(context.Background(), "k", limit, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); !errors.Is(err, cluster.ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		calls.mu.Lock()
		n := calls.calls
		calls.mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rounds in 5s with a 1ms interval", n)
		}
		time.Sleep(time.Millisecond)
	}
	s.Close()
	s.Close()
	if err := s.Start(context.Background()); !errors.Is(err, cluster.ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
}

// The same fleet on a real Redis runs exactly as on memory, the bound
// holds, and a dead server makes rounds fail with ErrStoreUnavailable.
func TestSyncedOnRedis(t *testing.T) {
	srv := testkit.StartServer(t)
	clock := floodgate.NewManualClock(counterEpoch)
	counter := counterNewRedis(t, cluster.RedisCounterConfig{Client: counterRedisClient(t, srv.Addr()), Clock: clock, Timeout: time.Second})
	const rate, n, every = 200, 3, 5
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: time.Second}
	f := syncedFleet(t, n, every*10*time.Millisecond, counter, clock)
	memClock := floodgate.NewManualClock(counterEpoch)
	mem := syncedFleet(t, n, every*10*time.Millisecond, counterNewMemory(t, memClock), memClock)
	for _, p := range counterPatterns[:2] {
		run := counterRun{limit: limit, step: 10 * time.Millisecond, every: every, steps: 200, perStep: 6, pattern: p}
		res := f.play(t, "api:"+p.name, run)
		if !counterSameWindows(res, mem.play(t, "api:"+p.name, run)) {
			t.Errorf("%s: the fleet on Redis and on memory differ", p.name)
		}
		for w, win := range res.windows {
			if over, bound := win.admitted-rate, syncedBound(res, win.lastNode, every, rate); over > bound {
				t.Errorf("%s window %d: overshoot %d above %d", p.name, w, over, bound)
			}
			if win.denied > 0 && win.admitted < rate {
				t.Errorf("%s window %d: denied with %d admitted", p.name, w, win.admitted)
			}
		}
	}
	srv.Kill()
	if err := f.sync(context.Background(), 0); !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("round with Redis down: %v, want ErrStoreUnavailable", err)
	}
}

// Decisions and rounds running at once lose nothing: a lone node admits
// exactly the limit.
func TestSyncedConcurrentDecisionsAndRounds(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch)
	s, err := cluster.NewSynced(cluster.SyncedConfig{Counter: counterNewMemory(t, clock), Interval: time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1000, Period: time.Hour}
	if got := counterHammer(t, s, limit, 4000, s.Sync); got != 1000 {
		t.Fatalf("admitted %d of 4000, want exactly 1000", got)
	}
}

// A round forgets the keys no decision used in the current or previous
// window: they cost no shared calls and no memory.
func TestSyncedForgetsIdleKeys(t *testing.T) {
	clock := floodgate.NewManualClock(counterEpoch)
	calls := &counterCalls{Counter: counterNewMemory(t, clock)}
	s, err := cluster.NewSynced(cluster.SyncedConfig{Counter: calls, Interval: time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: time.Second}
	for i := range 100 {
		if _, err := s.AllowN(context.Background(), fmt.Sprintf("user:%d", i), limit, 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []int64{100, 200, 200} { // now, a window later (still the previous one), two later
		if err := s.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if calls.add != want {
			t.Fatalf("%d script calls so far, want %d", calls.add, want)
		}
		clock.Advance(time.Second)
	}
}
