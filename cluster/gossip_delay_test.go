package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
)

// gossipSlowNet is a network at its worst short of a partition: each copy
// of a broadcast to each peer takes its own delay (so messages overtake
// each other), some arrive twice, some never; a push/pull every few steps
// repairs what was lost, as memberlist's does. Delays come from draw, on a
// virtual clock. The test calls it from one goroutine.
type gossipSlowNet struct {
	clock *floodgate.ManualClock
	hooks map[string]MembershipHook
	names []string
	queue []gossipInFlight
	// draw returns the delays of the copies of one message to one peer:
	// none when it is lost, two when it is duplicated.
	draw func() []time.Duration
}

type gossipSlowEndpoint struct {
	net  *gossipSlowNet
	name string
}

func (e gossipSlowEndpoint) Attach(h MembershipHook) { e.net.hooks[e.name] = h }

func (e gossipSlowEndpoint) Broadcast(_ string, msg []byte) {
	now := e.net.clock.Now()
	for _, to := range e.net.names {
		if to == e.name {
			continue
		}
		for _, d := range e.net.draw() {
			e.net.queue = append(e.net.queue, gossipInFlight{from: e.name, to: to, due: now.Add(d), msg: slices.Clone(msg)})
		}
	}
}

// deliver hands over every message that is due, earliest first.
func (n *gossipSlowNet) deliver() {
	now := n.clock.Now()
	slices.SortStableFunc(n.queue, func(a, b gossipInFlight) int { return a.due.Compare(b.due) })
	due := 0
	for due < len(n.queue) && !n.queue[due].due.After(now) {
		due++
	}
	ready := slices.Clone(n.queue[:due])
	n.queue = slices.Delete(n.queue, 0, due)
	for _, m := range ready {
		n.hooks[m.to].NotifyMsg(m.msg)
	}
}

// pushPull exchanges full state between every pair.
func (n *gossipSlowNet) pushPull() {
	for _, a := range n.names {
		for _, b := range n.names {
			if a != b {
				n.hooks[b].MergeRemoteState(n.hooks[a].LocalState())
			}
		}
	}
}

// Whatever the network does to the counts — delays up to D, longer than a
// Period or not, reordering, duplicates, losses repaired by push/pull —
// every epoch admits at most R + (N−1)·min(λ·D, R) units, with D the
// longest delay, or the push/pull interval when messages are lost, and
// λ·D a node's most arrivals in D; and never less than min(arrivals, R).
func TestGossipBoundWhateverTheNetworkDelay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const step, period = 10 * time.Millisecond, time.Second
		n := rapid.IntRange(2, 5).Draw(t, "nodes")
		rate := rapid.Int64Range(10, 300).Draw(t, "rate")
		maxDelay := rapid.IntRange(0, 150).Draw(t, "longest delay in steps") // up to 1.5 Periods
		dup := rapid.Float64Range(0, 0.3).Draw(t, "share duplicated")
		loss := rapid.SampledFrom([]float64{0, 0, 0.2, 1}).Draw(t, "share lost")
		pushPullEvery := rapid.IntRange(1, 60).Draw(t, "push/pull every (steps)")
		clock := floodgate.NewManualClock(localEpoch)
		net := &gossipSlowNet{clock: clock, hooks: map[string]MembershipHook{}}
		net.draw = func() []time.Duration {
			if rapid.Float64Range(0, 1).Draw(t, "lost") < loss {
				return nil
			}
			copies := 1
			if rapid.Float64Range(0, 1).Draw(t, "duplicated") < dup {
				copies = 2
			}
			ds := make([]time.Duration, copies)
			for i := range ds {
				ds[i] = time.Duration(rapid.IntRange(0, maxDelay).Draw(t, "delay")) * step
			}
			return ds
		}
		nodes := make([]*Gossip, n)
		perStep := make([]int64, n)
		var lambda int64 // the most arrivals of one node in a step
		for i := range nodes {
			name := string(rune('a' + i))
			net.names = append(net.names, name)
			g, err := NewGossip(GossipConfig{Members: StaticMembers{Name: name, Nodes: n}, Transport: gossipSlowEndpoint{net, name}, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			nodes[i] = g
			perStep[i] = rapid.Int64Range(0, 4).Draw(t, "arrivals per step")
			lambda = max(lambda, perStep[i])
		}
		d := int64(maxDelay)
		if loss > 0 {
			d = max(d, int64(pushPullEvery))
		}
		bound := rate + min(int64(n-1)*lambda*d, int64(n-1)*rate)
		limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: period}
		arrived, admitted := map[int64]int64{}, map[int64]int64{}
		ctx := context.Background()
		for s := range 4 * int(period/step) {
			if s%pushPullEvery == 0 {
				net.pushPull()
			}
			net.deliver()
			epoch := gossipEpochOf(clock.Now().UnixMicro(), period.Microseconds())
			for i, g := range nodes {
				for range perStep[i] {
					dec, err := g.AllowN(ctx, "tenant", limit, 1)
					if err != nil {
						t.Fatal(err)
					}
					arrived[epoch]++
					if dec.Allowed {
						admitted[epoch]++
					}
					net.deliver()
				}
			}
			clock.Advance(step)
			for _, g := range nodes {
				g.Tick(ctx)
			}
		}
		for e, got := range admitted {
			if got > bound {
				t.Errorf("epoch %d: admitted %d, above R + (N−1)·min(λ·D, R) = %d (D = %d steps)", e, got, bound, d)
			}
			if want := min(arrived[e], rate); got < want {
				t.Errorf("epoch %d: admitted %d < min(arrivals, R) = %d", e, got, want)
			}
		}
	})
}

// A network slower than a Period gives no more than (N−1)·R over: each
// node stops at R on its own count, and counts arriving after their epoch
// has ended are dropped, not carried into the next.
func TestGossipNetworkSlowerThanAPeriod(t *testing.T) {
	const rate = 100
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: gossipPeriod}
	f := newGossipFleet(t, 3, 3*gossipPeriod/2, 0)
	arrived, admitted := f.run(t, limit, func(_, _, _ int) int { return 2 })
	for e, got := range admitted {
		if got != min(arrived[e], 3*rate) {
			t.Errorf("epoch %d: admitted %d of %d arrivals, want each node alone: min(arrivals, N·R) = %d", e, got, arrived[e], min(arrived[e], 3*rate))
		}
	}
	if n := f.net.InFlight(); n == 0 {
		t.Fatal("no message still on its way: the delay did not apply")
	}
}
