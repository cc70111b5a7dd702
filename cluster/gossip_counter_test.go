package cluster

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"pgregory.net/rapid"
)

// gossipGenCounter draws a G-counter over a few node names, so that draws
// share slots and merges have something to decide.
func gossipGenCounter(t *rapid.T, label string) gossipCounter {
	m := rapid.MapOf(rapid.SampledFrom([]string{"a", "b", "c", "d"}), rapid.Int64Range(0, 1000)).Draw(t, label)
	return gossipCounter(m)
}

// gossipMerged returns a merged with each of others, in order, leaving the
// inputs alone.
func gossipMerged(a gossipCounter, others ...gossipCounter) gossipCounter {
	out := a.clone()
	for _, o := range others {
		out.merge(o)
	}
	return out
}

func TestGossipCounterMergeIsASemilattice(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := gossipGenCounter(t, "a"), gossipGenCounter(t, "b"), gossipGenCounter(t, "c")
		if ab, ba := gossipMerged(a, b), gossipMerged(b, a); !maps.Equal(ab, ba) {
			t.Fatalf("not commutative: a⊔b = %v, b⊔a = %v", ab, ba)
		}
		if l, r := gossipMerged(gossipMerged(a, b), c), gossipMerged(a, gossipMerged(b, c)); !maps.Equal(l, r) {
			t.Fatalf("not associative: (a⊔b)⊔c = %v, a⊔(b⊔c) = %v", l, r)
		}
		if aa := gossipMerged(a, a); !maps.Equal(aa, a) {
			t.Fatalf("not idempotent: a⊔a = %v, a = %v", aa, a)
		}
		// No slot goes backwards, and the sum never falls.
		ab := gossipMerged(a, b)
		for node, v := range a {
			if ab[node] < v {
				t.Fatalf("slot %s fell from %d to %d", node, v, ab[node])
			}
		}
		if ab.sum() < max(a.sum(), b.sum()) {
			t.Fatalf("sum fell: %d < max(%d, %d)", ab.sum(), a.sum(), b.sum())
		}
	})
}

// Replicas that see the same slot updates in any order, any number of
// times, end equal: what lets gossip deliver late, twice or out of order.
func TestGossipCounterConvergesWhateverTheOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type update struct {
			node  string
			value int64
		}
		updates := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) update {
			return update{rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "node"), rapid.Int64Range(0, 50).Draw(t, "value")}
		}), 1, 30).Draw(t, "updates")
		order := rapid.Permutation(updates).Draw(t, "order")
		repeats := rapid.SliceOfN(rapid.SampledFrom(updates), 0, 10).Draw(t, "repeats")
		x, y := gossipCounter{}, gossipCounter{}
		for _, u := range updates {
			x.observe(u.node, u.value)
		}
		for _, u := range append(order, repeats...) {
			y.observe(u.node, u.value)
		}
		if !maps.Equal(x, y) {
			t.Fatalf("replicas diverged: %v vs %v", x, y)
		}
	})
}

func TestGossipWireRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		id := gossipWindowID{
			key:    rapid.StringN(1, 20, -1).Draw(t, "key") + "\xff", // not UTF-8: keys are bytes
			period: rapid.Int64Range(1, gossipMaxValue).Draw(t, "period"),
		}
		slot := gossipSlot{id: id, epoch: rapid.Int64().Draw(t, "epoch"),
			node: rapid.StringN(0, 10, -1).Draw(t, "node"), value: rapid.Int64Range(0, gossipMaxValue).Draw(t, "value")}
		got, err := gossipDecodeSlot(gossipEncodeSlot(slot))
		if err != nil || got != slot {
			t.Fatalf("slot %+v came back as %+v, %v", slot, got, err)
		}
		state := []gossipWindowState{{id: id, epoch: slot.epoch, counter: gossipGenCounter(t, "counter")}}
		back, err := gossipDecodeState(gossipEncodeState(state))
		if err != nil || len(back) != 1 || back[0].id != id || back[0].epoch != slot.epoch || !maps.Equal(back[0].counter, state[0].counter) {
			t.Fatalf("state %+v came back as %+v, %v", state, back, err)
		}
	})
}

// Whatever a peer sends, decoding answers an error or a value, never a panic.
func TestGossipWireSurvivesGarbage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "bytes")
		if rapid.Bool().Draw(t, "with a valid header") && len(b) >= 2 {
			b[0], b[1] = gossipWireVersion, rapid.SampledFrom([]byte{gossipKindSlot, gossipKindState}).Draw(t, "kind")
		}
		if s, err := gossipDecodeSlot(b); err == nil && (s.id.key == "" || s.id.period < 1 || s.value < 0) {
			t.Fatalf("decoded an invalid slot %+v", s)
		}
		_, _ = gossipDecodeState(b)
	})
}

func TestGossipWireRejectsTruncatedMessages(t *testing.T) {
	full := gossipEncodeSlot(gossipSlot{id: gossipWindowID{"tenant", 1_000_000}, epoch: 7, node: "node-a", value: 42})
	for n := range len(full) {
		if _, err := gossipDecodeSlot(full[:n]); err == nil {
			t.Errorf("decoded a slot cut to %d of %d bytes", n, len(full))
		}
	}
}

// Whatever the decisions, partitions and deliveries, once the network heals
// and every pair has pushed and pulled, all replicas hold the same counter,
// it sums to what the fleet admitted, and no slot ever went backwards.
func TestGossipReplicasConvergeAfterAnyHistory(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clock := floodgate.NewManualClock(localEpoch)
		net := NewGossipNetwork(clock, 10*time.Millisecond)
		names := []string{"a", "b", "c"}
		nodes := make([]*Gossip, len(names))
		for i, name := range names {
			g, err := NewGossip(GossipConfig{Members: StaticMembers{Name: name}, Transport: net.Endpoint(name), Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			nodes[i] = g
		}
		limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 20, Period: time.Hour}
		admitted := int64(0)
		last := make([]map[string]int64, len(nodes))
		for i := range rapid.IntRange(1, 60).Draw(t, "events") {
			switch rapid.IntRange(0, 4).Draw(t, fmt.Sprintf("event %d", i)) {
			case 0, 1:
				g := nodes[rapid.IntRange(0, len(nodes)-1).Draw(t, "node")]
				cost := rapid.Int64Range(0, 3).Draw(t, "cost")
				d, err := g.AllowN(context.Background(), "k", limit, cost)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted += cost
				}
			case 2:
				clock.Advance(time.Duration(rapid.IntRange(0, 20).Draw(t, "ms")) * time.Millisecond)
				net.Deliver()
			case 3:
				cut := rapid.IntRange(1, len(names)-1).Draw(t, "cut")
				net.Partition(names[:cut], names[cut:])
			case 4:
				net.Heal()
			}
			for j, g := range nodes {
				now := g.Counts("k", limit.Period)
				for node, v := range last[j] {
					if now[node] < v {
						t.Fatalf("replica %s: slot %s went back from %d to %d", names[j], node, v, now[node])
					}
				}
				last[j] = now
			}
		}
		net.Heal()
		clock.Advance(time.Second)
		net.Deliver()
		net.PushPull()
		want := nodes[0].Counts("k", limit.Period)
		if sum := gossipCounter(want).sum(); sum != admitted {
			t.Fatalf("the merged counter sums to %d, the fleet admitted %d", sum, admitted)
		}
		for j, g := range nodes {
			if got := g.Counts("k", limit.Period); !maps.Equal(got, want) {
				t.Fatalf("replica %s holds %v, replica a holds %v", names[j], got, want)
			}
		}
	})
}
