package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

// gossipSkewedClock is a node's clock: the fleet's virtual time plus the
// node's own offset.
type gossipSkewedClock struct {
	base   *floodgate.ManualClock
	offset time.Duration
}

func (c gossipSkewedClock) Now() time.Time { return c.base.Now().Add(c.offset) }

// gossipFleet is N gossip strategies on one virtual clock and one in-memory
// network whose messages take a fixed delay.
type gossipFleet struct {
	clock  *floodgate.ManualClock
	net    *GossipNetwork
	nodes  []*Gossip
	clocks []floodgate.Clock
}

// newGossipFleet starts n nodes; node i's clock runs i/(n−1)·skew ahead, so
// the first and the last differ by skew.
func newGossipFleet(t *testing.T, n int, delay, skew time.Duration) *gossipFleet {
	t.Helper()
	f := &gossipFleet{clock: floodgate.NewManualClock(localEpoch)}
	f.net = NewGossipNetwork(f.clock, delay)
	for i := range n {
		var offset time.Duration
		if n > 1 {
			offset = skew * time.Duration(i) / time.Duration(n-1)
		}
		name := fmt.Sprintf("node-%d", i)
		clock := gossipSkewedClock{base: f.clock, offset: offset}
		g, err := NewGossip(GossipConfig{Members: StaticMembers{Name: name, Nodes: n}, Transport: f.net.Endpoint(name), Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		f.nodes, f.clocks = append(f.nodes, g), append(f.clocks, clock)
	}
	return f
}

const (
	gossipStep    = 10 * time.Millisecond
	gossipPeriod  = time.Second
	gossipSteps   = int(gossipPeriod / gossipStep) // steps per window
	gossipWindows = 2
)

// gossipPatterns say how many unit requests node i receives at step s: at
// most 8 per 10 ms step (λ = 800/s) on a node, always above R = 500/s over
// the fleet, spread evenly, mostly on one node, or moving to another node
// halfway through; the last spreads evenly over nodes whose clocks differ
// by 150 ms.
var gossipPatterns = []struct {
	name    string
	perStep func(step, node, nodes int) int
	maxStep int // the most any node receives in one step
	skew    time.Duration
}{
	{"uniform", func(_, _, _ int) int { return 4 }, 4, 0},
	{"skewed", func(_, node, _ int) int {
		if node == 0 {
			return 8
		}
		return 1
	}, 8, 0},
	{"shift", func(step, node, nodes int) int {
		busy := 0
		if step >= gossipSteps*3/2 { // in the middle of the second window
			busy = nodes - 1
		}
		if node == busy {
			return 8
		}
		return 1
	}, 8, 0},
	{"uniform, skewed clocks", func(_, _, _ int) int { return 4 }, 4, 150 * time.Millisecond},
}

// run drives the fleet step by step, delivering every message as soon as it
// is due, and returns per epoch (by the admitting node's clock) the units
// that arrived and that were admitted over the fleet.
func (f *gossipFleet) run(t *testing.T, limit floodgate.Limit, perStep func(step, node, nodes int) int) (arrived, admitted map[int64]int64) {
	t.Helper()
	ctx := context.Background()
	arrived, admitted = map[int64]int64{}, map[int64]int64{}
	for s := range gossipSteps * gossipWindows {
		for i, g := range f.nodes {
			for range perStep(s, i, len(f.nodes)) {
				epoch := gossipEpochOf(f.clocks[i].Now().UnixMicro(), limit.Period.Microseconds())
				d, err := g.AllowN(ctx, "tenant", limit, 1)
				if err != nil {
					t.Fatal(err)
				}
				arrived[epoch]++
				if d.Allowed {
					admitted[epoch]++
				}
				f.net.Deliver()
			}
		}
		f.clock.Advance(gossipStep)
		f.net.Deliver()
		for _, g := range f.nodes {
			g.Tick(ctx)
		}
	}
	return arrived, admitted
}

func TestGossipOvershootWithinTheBound(t *testing.T) {
	const rate = 500
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: gossipPeriod}
	for _, n := range []int{2, 3, 5} {
		for _, delay := range []time.Duration{0, 30 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond} {
			for _, p := range gossipPatterns {
				t.Run(fmt.Sprintf("N=%d/D=%s/%s", n, delay, p.name), func(t *testing.T) {
					t.Parallel()
					f := newGossipFleet(t, n, delay, p.skew)
					arrived, admitted := f.run(t, limit, p.perStep)
					// R + (N−1)·min(λ·D, R), λ·D counted in whole steps.
					lambdaD := int64(p.maxStep) * int64(delay/gossipStep)
					bound := int64(n-1) * min(lambdaD, rate)
					worst := int64(0)
					for e, got := range admitted {
						worst = max(worst, got-rate)
						if over := got - rate; over > bound {
							t.Errorf("epoch %d: overshoot %d > (N−1)·min(λ·D, R) = %d", e, over, bound)
						}
						// Undershoot 0: a node denies only when the fleet is at R.
						if want := min(arrived[e], rate); got < want {
							t.Errorf("epoch %d: admitted %d < min(arrivals, R) = %d", e, got, want)
						}
					}
					t.Logf("R=%d: worst overshoot %d, bound %d", rate, worst, bound)
				})
			}
		}
	}
}

// The bound is not vacuous: with a delay, nodes do admit on stale counts,
// and without one the fleet admits exactly R.
func TestGossipDelayIsWhatOvershoots(t *testing.T) {
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 500, Period: gossipPeriod}
	uniform := gossipPatterns[0].perStep
	_, exact := newGossipFleet(t, 3, 0, 0).run(t, limit, uniform)
	_, late := newGossipFleet(t, 3, 100*time.Millisecond, 0).run(t, limit, uniform)
	for e, got := range exact {
		if got != 500 {
			t.Errorf("D=0, epoch %d: admitted %d, want exactly R = 500", e, got)
		}
		if late[e] <= 500 {
			t.Errorf("D=100ms, epoch %d: admitted %d, expected some overshoot", e, late[e])
		}
	}
}

func TestGossipPartitionThenHeal(t *testing.T) {
	const rate = 100
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: time.Minute}
	f := newGossipFleet(t, 4, 0, 0)
	f.net.Partition([]string{"node-0", "node-1"}, []string{"node-2", "node-3"})
	ctx := t.Context()
	admitted := int64(0)
	for round := range 60 {
		for i, g := range f.nodes {
			// Node 0 and node 2 are busy; the other two see a little traffic.
			for range 1 + 2*((i+1)%2) {
				if d, err := g.AllowN(ctx, "tenant", limit, 1); err != nil {
					t.Fatal(err)
				} else if d.Allowed {
					admitted++
				}
				f.net.Deliver()
			}
		}
		if round == 30 {
			f.net.PushPull() // push/pull inside each side changes nothing across
		}
	}
	// Each side counted to R on its own: a partition into 2 admits 2·R.
	if admitted != 2*rate {
		t.Fatalf("admitted %d during the partition, want 2·R = %d", admitted, 2*rate)
	}
	before := make([]map[string]int64, len(f.nodes))
	for i, g := range f.nodes {
		before[i] = g.Counts("tenant", limit.Period)
	}

	f.net.Heal()
	f.net.PushPull()
	want := f.nodes[0].Counts("tenant", limit.Period)
	var total int64
	for _, v := range want {
		total += v
	}
	if total != admitted {
		t.Errorf("merged slots sum to %d, want the %d admitted", total, admitted)
	}
	for i, g := range f.nodes {
		got := g.Counts("tenant", limit.Period)
		if !maps.Equal(got, want) {
			t.Errorf("node %d holds %v after heal, node 0 holds %v", i, got, want)
		}
		for node, v := range before[i] {
			if got[node] < v {
				t.Errorf("node %d: slot %s went back from %d to %d", i, node, v, got[node])
			}
		}
		if d, _ := g.AllowN(ctx, "tenant", limit, 1); d.Allowed {
			t.Errorf("node %d admitted after heal, with the fleet at %d", i, total)
		}
	}
}

func TestGossipDecisionFields(t *testing.T) {
	clock := floodgate.NewManualClock(localEpoch.Add(250 * time.Millisecond))
	g, err := NewGossip(GossipConfig{Members: StaticMembers{Name: "a"}, Transport: NewGossipNetwork(clock, 0).Endpoint("a"), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 3, Period: time.Second}
	steps := []struct {
		cost int64
		want floodgate.Decision
	}{
		{0, floodgate.Decision{Allowed: true, Limit: 3, Remaining: 3}},
		{2, floodgate.Decision{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: 750 * time.Millisecond}},
		{2, floodgate.Decision{Limit: 3, Remaining: 1, RetryAfter: 750 * time.Millisecond, ResetAfter: 750 * time.Millisecond}},
		{4, floodgate.Decision{Limit: 3, Remaining: 1, RetryAfter: -time.Microsecond, ResetAfter: 750 * time.Millisecond}},
		{1, floodgate.Decision{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 750 * time.Millisecond}},
	}
	for i, s := range steps {
		d, err := g.AllowN(t.Context(), "k", limit, s.cost)
		if err != nil || d != s.want {
			t.Fatalf("step %d (cost %d): %+v, %v; want %+v", i, s.cost, d, err, s.want)
		}
	}
}

func TestGossipForgetsEndedWindowsAndCapsKeys(t *testing.T) {
	clock := floodgate.NewManualClock(localEpoch)
	g, err := NewGossip(GossipConfig{Members: StaticMembers{Name: "a"}, Transport: NewGossipNetwork(clock, 0).Endpoint("a"),
		Clock: clock, MaxKeys: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 5, Period: time.Second}
	for _, key := range []string{"k1", "k2"} {
		if _, err := g.AllowN(ctx, key, limit, 1); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	// A third live key does not fit: the store is full, the failure policy decides.
	if _, err := g.AllowN(ctx, "k3", limit, 1); !errors.Is(err, floodgate.ErrStoreUnavailable) {
		t.Fatalf("third key at the cap: %v, want ErrStoreUnavailable", err)
	}
	// Once their window has ended the two keys make room by themselves.
	clock.Advance(time.Second)
	if d, err := g.AllowN(ctx, "k3", limit, 1); err != nil || !d.Allowed {
		t.Fatalf("after the window: %+v, %v", d, err)
	}
	if g.Keys() != 1 {
		t.Fatalf("holds %d keys, want 1 (k3)", g.Keys())
	}
	clock.Advance(time.Second)
	if dropped := g.Tick(ctx); dropped != 1 || g.Keys() != 0 {
		t.Fatalf("Tick dropped %d windows and left %d keys; want 1 and 0", dropped, g.Keys())
	}
}

// A peer's count for an ended window, or for one too far ahead, is not kept;
// garbage is dropped without touching the counters.
func TestGossipIgnoresStaleFutureAndMalformedCounts(t *testing.T) {
	clock := floodgate.NewManualClock(localEpoch)
	g, err := NewGossip(GossipConfig{Members: StaticMembers{Name: "a"}, Transport: NewGossipNetwork(clock, 0).Endpoint("a"), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	period := time.Second
	now := gossipEpochOf(clock.Now().UnixMicro(), period.Microseconds())
	id := gossipWindowID{key: "k", period: period.Microseconds()}
	for _, msg := range [][]byte{
		gossipEncodeSlot(gossipSlot{id: id, epoch: now - 1, node: "b", value: 9}),
		gossipEncodeSlot(gossipSlot{id: id, epoch: now + 2, node: "b", value: 9}),
		[]byte("not a slot"),
		nil,
	} {
		g.NotifyMsg(msg)
	}
	g.MergeRemoteState([]byte{gossipWireVersion, gossipKindState, 200})
	if g.Keys() != 0 {
		t.Fatalf("kept %d keys from stale, future or malformed counts", g.Keys())
	}
	// The next epoch is kept: a peer a little ahead counts there first.
	g.NotifyMsg(gossipEncodeSlot(gossipSlot{id: id, epoch: now + 1, node: "b", value: 4}))
	clock.Advance(period)
	if got := g.Counts("k", period); got["b"] != 4 {
		t.Fatalf("the next epoch's count was not kept: %v", got)
	}
}

func TestGossipRejectsBadConfigAndLimits(t *testing.T) {
	clock := floodgate.NewManualClock(localEpoch)
	ep := NewGossipNetwork(clock, 0).Endpoint("a")
	configs := []struct {
		name string
		cfg  GossipConfig
	}{
		{"no members", GossipConfig{Transport: ep}},
		{"no node name", GossipConfig{Members: StaticMembers{}, Transport: ep}},
		{"no transport", GossipConfig{Members: StaticMembers{Name: "a"}}},
		{"negative key cap", GossipConfig{Members: StaticMembers{Name: "a"}, Transport: ep, MaxKeys: -1}},
		{"negative interval", GossipConfig{Members: StaticMembers{Name: "a"}, Transport: ep, Interval: -time.Second}},
	}
	for _, tt := range configs {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewGossip(tt.cfg); !errors.Is(err, ErrInvalidGossipConfig) {
				t.Fatalf("got %v, want ErrInvalidGossipConfig", err)
			}
		})
	}

	g, err := NewGossip(GossipConfig{Members: StaticMembers{Name: "a"}, Transport: ep, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	requests := []struct {
		name    string
		key     string
		limit   floodgate.Limit
		cost    int64
		want    error
		mention string
	}{
		{"token bucket", "k", floodgate.PerSecond(10), 1, floodgate.ErrInvalidLimit, "fixed_window"},
		{"sliding log", "k", floodgate.PerSecond(10).WithAlgorithm(floodgate.SlidingLog), 1, floodgate.ErrInvalidLimit, "fixed_window"},
		{"zero period", "k", floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1}, 1, floodgate.ErrInvalidLimit, "period"},
		{"empty key", "", floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1, Period: time.Second}, 1, floodgate.ErrInvalidKey, "key"},
		{"negative cost", "k", floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1, Period: time.Second}, -1, floodgate.ErrInvalidCost, "cost"},
	}
	for _, tt := range requests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := g.AllowN(t.Context(), tt.key, tt.limit, tt.cost)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("got %v, want an error wrapping %v that mentions %q", err, tt.want, tt.mention)
			}
		})
	}
}

// Start drives Tick on a real ticker: ended windows go without a call.
func TestGossipStartCollectsInTheBackground(t *testing.T) {
	clock := floodgate.NewManualClock(localEpoch)
	g, err := NewGossip(GossipConfig{Members: StaticMembers{Name: "a"}, Transport: NewGossipNetwork(clock, 0).Endpoint("a"),
		Clock: clock, Interval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 5, Period: time.Second}
	if _, err := g.AllowN(t.Context(), "k", limit, 1); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(t.Context()); !errors.Is(err, ErrStarted) {
		t.Fatalf("a second Start: %v, want ErrStarted", err)
	}
	defer g.Close()
	clock.Advance(time.Second)
	membershipEventually(t, 2*time.Second, "the loop drops the ended window", func() bool { return g.Keys() == 0 })
	g.Close()
	g.Close() // Close is idempotent
}
