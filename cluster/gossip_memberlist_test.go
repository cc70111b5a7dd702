package cluster

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

// gossipOverMemberlist starts a node: a Membership on a loopback port
// joined to seeds, and a gossip strategy that uses it as Members and
// Transport, on clock.
func gossipOverMemberlist(t *testing.T, name string, clock floodgate.Clock, seeds ...string) (*Membership, *Gossip) {
	t.Helper()
	m := membershipStart(t, name, MembershipConfig{}, seeds...)
	g, err := NewGossip(GossipConfig{Members: m, Transport: m, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return m, g
}

// gossipAdmit sends n unit requests to g and returns how many passed.
func gossipAdmit(t *testing.T, g *Gossip, limit floodgate.Limit, n int) int {
	t.Helper()
	passed := 0
	for range n {
		d, err := g.AllowN(t.Context(), "tenant", limit, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			passed++
		}
	}
	return passed
}

// Three real memberlist nodes share one limit of 300 per minute. Each node
// waits until its count has spread (D → 0), so the fleet admits exactly R;
// a node that joins late gets the counts by push/pull and denies too.
func TestGossipOverMemberlistSharesOneLimit(t *testing.T) {
	// Decisions run on a frozen virtual clock, so that every one falls in
	// one window whatever the real time; memberlist runs on real time.
	clock := floodgate.NewManualClock(localEpoch)
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 300, Period: time.Minute}
	ma, a := gossipOverMemberlist(t, "node-a", clock)
	mb, b := gossipOverMemberlist(t, "node-b", clock, ma.Addr())
	mc, c := gossipOverMemberlist(t, "node-c", clock, ma.Addr())
	membershipEventually(t, 3*time.Second, "3 members", func() bool {
		return ma.Count() == 3 && mb.Count() == 3 && mc.Count() == 3
	})
	spread := func(node string, value int64, to ...*Gossip) {
		t.Helper()
		membershipEventually(t, 3*time.Second, fmt.Sprintf("%s's count %d reaches every node", node, value), func() bool {
			for _, g := range to {
				if g.Counts("tenant", limit.Period)[node] != value {
					return false
				}
			}
			return true
		})
	}

	steps := []struct {
		node  *Gossip
		name  string
		sent  int
		wants int
	}{
		{a, "node-a", 100, 100},
		{b, "node-b", 300, 200}, // knows a's 100: only 200 are left
		{c, "node-c", 10, 0},    // the fleet is at R
	}
	total := 0
	for _, s := range steps {
		got := gossipAdmit(t, s.node, limit, s.sent)
		if got != s.wants {
			t.Errorf("%s admitted %d of %d, want %d", s.name, got, s.sent, s.wants)
		}
		total += got
		if got > 0 {
			spread(s.name, int64(got), a, b, c)
		}
	}
	if total != int(limit.Rate) {
		t.Errorf("the fleet admitted %d, want R = %d", total, limit.Rate)
	}

	// A late node that attaches its strategy before it joins gets every
	// count in the push/pull of the join itself.
	md, d := gossipOverMemberlist(t, "node-d", clock)
	if err := md.Join(t.Context(), []string{ma.Addr()}); err != nil {
		t.Fatal(err)
	}
	if got, want := d.Counts("tenant", limit.Period), a.Counts("tenant", limit.Period); !maps.Equal(got, want) {
		t.Errorf("after joining, the late node holds %v, node-a %v", got, want)
	}
	if got := gossipAdmit(t, d, limit, 5); got != 0 {
		t.Errorf("the late node admitted %d with the fleet at R", got)
	}
}
