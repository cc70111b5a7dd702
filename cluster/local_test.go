package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

// localView is one node's view of the fleet: what its Members would say.
type localView struct {
	name    string
	n, rank int
}

func (v *localView) Self() string { return v.name }
func (v *localView) Count() int   { return v.n }
func (v *localView) Rank() int    { return v.rank }

// localEpoch is a start time on a whole second, so that windows of a
// second start on the steps of the simulations below.
var localEpoch = time.Unix(1_700_000_000, 0)

// localFleet is N local strategies on one ManualClock.
type localFleet struct {
	clock *floodgate.ManualClock
	views []*localView
	nodes []*Local
}

func newLocalFleet(t *testing.T, n int) *localFleet {
	t.Helper()
	f := &localFleet{clock: floodgate.NewManualClock(localEpoch)}
	for i := range n {
		v := &localView{name: fmt.Sprintf("node-%d", i), n: n, rank: i}
		l, err := NewLocal(LocalConfig{Members: v, Clock: f.clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		f.views, f.nodes = append(f.views, v), append(f.nodes, l)
	}
	return f
}

// localPattern says how many unit requests node i receives at step s of a
// window of steps.
type localPattern func(step, node, nodes int) int

// The arrival patterns of the tables: demand above the limit spread evenly,
// most of it on one node, and the busy node changing halfway through.
var localPatterns = []struct {
	name    string
	pattern localPattern
}{
	{"uniform", func(_, _, _ int) int { return 3 }},
	{"skewed", func(_, node, _ int) int {
		if node == 0 {
			return 20
		}
		return 1
	}},
	{"shift", func(step, node, nodes int) int {
		busy := 0
		if step >= localSteps*localWindows/2 {
			busy = nodes - 1
		}
		if node == busy {
			return 20
		}
		return 1
	}},
}

const (
	localSteps   = 100 // steps per window
	localWindows = 4
	localPeriod  = time.Second
)

// localRun drives the fleet through the pattern, one step of Period/localSteps
// at a time, and returns per window the units each node received and admitted.
func (f *localFleet) run(t *testing.T, limit floodgate.Limit, p localPattern) (arrived, admitted [][]int64) {
	t.Helper()
	ctx := context.Background()
	for w := range localWindows {
		arrived, admitted = append(arrived, make([]int64, len(f.nodes))), append(admitted, make([]int64, len(f.nodes)))
		for s := range localSteps {
			for i, l := range f.nodes {
				for range p(w*localSteps+s, i, len(f.nodes)) {
					arrived[w][i]++
					d, err := l.AllowN(ctx, "tenant", limit, 1)
					if err != nil {
						t.Fatal(err)
					}
					if d.Allowed {
						admitted[w][i]++
					}
				}
			}
			f.clock.Advance(localPeriod / localSteps)
		}
	}
	return arrived, admitted
}

func localSum(xs []int64) (s int64) {
	for _, x := range xs {
		s += x
	}
	return s
}

func TestLocalFixedWindowOvershootAndUndershoot(t *testing.T) {
	const rate = 1000
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: localPeriod}
	for _, n := range []int{1, 3, 10} {
		for _, p := range localPatterns {
			t.Run(fmt.Sprintf("N=%d/%s", n, p.name), func(t *testing.T) {
				f := newLocalFleet(t, n)
				arrived, admitted := f.run(t, limit, p.pattern)
				for w := range arrived {
					got, demand := localSum(admitted[w]), localSum(arrived[w])
					// Overshoot 0: the shares sum to the limit.
					if got > rate {
						t.Errorf("window %d: fleet admitted %d > R = %d", w, got, rate)
					}
					// Each node admits exactly min(arrivals, its share), so
					// the undershoot is what skew strands on busy nodes.
					var want int64
					for i := range n {
						want += min(arrived[w][i], localShareOf(rate, n, i))
					}
					if got != want {
						t.Errorf("window %d: fleet admitted %d, want Σ min(aᵢ, sᵢ) = %d", w, got, want)
					}
					under := min(demand, rate) - got
					if bound := int64(rate - rate/n); under > bound {
						t.Errorf("window %d: undershoot %d > R − ⌊R/N⌋ = %d", w, under, bound)
					}
				}
			})
		}
	}
}

func TestLocalTokenBucketNeverExceedsTheFleetBucket(t *testing.T) {
	const rate, burst = 1000, 200
	limit := floodgate.PerSecond(rate).WithBurst(burst)
	for _, n := range []int{1, 3, 10} {
		for _, p := range localPatterns {
			t.Run(fmt.Sprintf("N=%d/%s", n, p.name), func(t *testing.T) {
				f := newLocalFleet(t, n)
				_, admitted := f.run(t, limit, p.pattern)
				// A window of steps spans (localSteps−1) steps of time: the
				// fleet may admit B + R·t/Period in it, as one bucket would.
				bound := int64(burst + rate*(localSteps-1)/localSteps)
				for w := range admitted {
					if got := localSum(admitted[w]); got > bound {
						t.Errorf("window %d: fleet admitted %d > B + R·t/P = %d", w, got, bound)
					}
				}
			})
		}
	}
}

// The spec's example: 1000 per second over 10 nodes; node A receives 150
// and the nine others 20 each: A denies 50 while the fleet used 280.
func TestLocalSpecExampleUndershoot(t *testing.T) {
	f := newLocalFleet(t, 10)
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1000, Period: time.Second}
	denied, admitted := 0, 0
	for i, l := range f.nodes {
		arrivals := 20
		if i == 0 {
			arrivals = 150
		}
		for range arrivals {
			d, err := localAllow(t, l, limit)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted++
			} else {
				denied++
			}
		}
	}
	if admitted != 280 || denied != 50 {
		t.Fatalf("admitted %d, denied %d; want 280 and 50", admitted, denied)
	}
}

// localAllow is a unit request on the key the tests share.
func localAllow(t *testing.T, l *Local, limit floodgate.Limit) (floodgate.Decision, error) {
	t.Helper()
	return l.AllowN(t.Context(), "tenant", limit, 1)
}

// While views of N differ (d is joining: a and b have not seen it yet), each
// node enforces the share of its own view, and the fleet admits the sum.
func TestLocalDisagreeingViewsAreBounded(t *testing.T) {
	const rate = 1000
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: time.Second}
	tests := []struct {
		name  string
		views []localView // n and rank as each node sees them
	}{
		{"all agree on 4", []localView{{"a", 4, 0}, {"b", 4, 1}, {"c", 4, 2}, {"d", 4, 3}}},
		{"a and b still see 3", []localView{{"a", 3, 0}, {"b", 3, 1}, {"c", 4, 2}, {"d", 4, 3}}},
		{"only d sees 4", []localView{{"a", 3, 0}, {"b", 3, 1}, {"c", 3, 2}, {"d", 4, 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newLocalFleet(t, len(tt.views))
			var sumOfShares int64
			for i, v := range tt.views {
				*f.views[i] = v
				sumOfShares += localShareOf(rate, v.n, v.rank)
			}
			// 500 arrivals per node and window: every share is used up.
			_, admitted := f.run(t, limit, func(_, _, _ int) int { return 5 })
			n := int64(len(tt.views))
			worst := n*((rate+n-2)/(n-1)) - rate // N·⌈R/(N−1)⌉ − R
			for w := range admitted {
				got := localSum(admitted[w])
				if got != sumOfShares {
					t.Errorf("window %d: fleet admitted %d, want Σ shares = %d", w, got, sumOfShares)
				}
				if got-rate > worst {
					t.Errorf("window %d: overshoot %d > N·⌈R/(N−1)⌉ − R = %d", w, got-rate, worst)
				}
			}
		})
	}
}

// A change of N in the middle of a window takes effect on the next decision
// and keeps what the key has used: a node that spent its old share is not
// refilled, whether its share shrinks (a join) or grows (a leave).
func TestLocalMembershipChangeKeepsCounters(t *testing.T) {
	tests := []struct {
		name       string
		limit      floodgate.Limit
		from, to   int   // the node's view of N before and after
		used       int   // unit requests admitted before the change
		afterLimit int64 // Decision.Limit after the change
		afterPass  bool  // whether the next request passes
	}{
		{"window, join: 400 used of a new share of 300", floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1200, Period: time.Second}, 3, 4, 400, 300, false},
		{"window, leave: 300 used of a new share of 400", floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1200, Period: time.Second}, 4, 3, 300, 400, true},
		{"bucket, leave: an empty bucket stays empty", floodgate.PerSecond(100), 2, 1, 50, 100, false},
		{"bucket, join: an empty bucket stays empty", floodgate.PerSecond(100), 1, 2, 100, 50, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newLocalFleet(t, 1)
			a := f.nodes[0]
			f.views[0].n = tt.from
			for i := range tt.used {
				if d, _ := localAllow(t, a, tt.limit); !d.Allowed {
					t.Fatalf("request %d denied within the old share", i)
				}
			}
			f.views[0].n = tt.to
			d, err := localAllow(t, a, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != tt.afterPass || d.Limit != tt.afterLimit {
				t.Fatalf("after the change: %+v, want allowed=%v under a share of %d", d, tt.afterPass, tt.afterLimit)
			}
		})
	}
	// The next window starts from nothing under the new share.
	f := newLocalFleet(t, 3)
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1200, Period: time.Second}
	for range 400 {
		_, _ = localAllow(t, f.nodes[0], limit)
	}
	f.views[0].n = 4
	f.clock.Advance(time.Second)
	if d, _ := localAllow(t, f.nodes[0], limit); !d.Allowed || d.Remaining != 299 {
		t.Fatalf("next window: %+v, want allowed with 299 left of 300", d)
	}
}

func TestLocalSmallLimitsAndRemainders(t *testing.T) {
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 2, Period: time.Second}
	tests := []struct {
		name    string
		members Members
		allowed bool
		limit   int64
	}{
		{"rank 0 of 3 gets one of the remainder", &localView{"a", 3, 0}, true, 1},
		{"rank 2 of 3 gets nothing", &localView{"c", 3, 2}, false, 0},
		{"without ranks the remainder is dropped", StaticMembers{Name: "a", Nodes: 3}, false, 0},
		{"alone a node has the whole limit", StaticMembers{Name: "a", Nodes: 1}, true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLocal(LocalConfig{Members: tt.members, Clock: floodgate.NewManualClock(localEpoch)})
			if err != nil {
				t.Fatal(err)
			}
			d, err := localAllow(t, l, limit)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != tt.allowed || d.Limit != tt.limit {
				t.Fatalf("got %+v, want allowed=%v limit=%d", d, tt.allowed, tt.limit)
			}
			if !d.Allowed && d.RetryAfter != limit.Period {
				t.Fatalf("an empty share answers RetryAfter %s, want the Period", d.RetryAfter)
			}
		})
	}
}

func TestLocalRejectsBadInput(t *testing.T) {
	if _, err := NewLocal(LocalConfig{}); !errors.Is(err, ErrInvalidLocalConfig) {
		t.Errorf("no Members: %v, want ErrInvalidLocalConfig", err)
	}
	if _, err := NewLocal(LocalConfig{Members: StaticMembers{Nodes: 1}, MaxKeys: -1}); !errors.Is(err, ErrInvalidLocalConfig) {
		t.Errorf("negative MaxKeys: %v, want ErrInvalidLocalConfig", err)
	}
	l, err := NewLocal(LocalConfig{Members: StaticMembers{Name: "a", Nodes: 2}})
	if err != nil {
		t.Fatal(err)
	}
	good := floodgate.PerSecond(10)
	tests := []struct {
		name  string
		key   string
		limit floodgate.Limit
		cost  int64
		want  error
	}{
		{"zero rate", "k", floodgate.Limit{Algorithm: floodgate.TokenBucket, Period: time.Second}, 1, floodgate.ErrInvalidLimit},
		{"unknown algorithm", "k", floodgate.Limit{Algorithm: "magic", Rate: 1, Period: time.Second}, 1, floodgate.ErrInvalidLimit},
		{"empty key", "", good, 1, floodgate.ErrInvalidKey},
		{"negative cost", "k", good, -1, floodgate.ErrInvalidCost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := l.AllowN(t.Context(), tt.key, tt.limit, tt.cost); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want an error wrapping %v", err, tt.want)
			}
		})
	}
}

// Over a real Membership the share follows the live count and the rank:
// two nodes split 101 as 51 + 50; when one leaves the other takes it all.
func TestLocalFollowsMembership(t *testing.T) {
	a := membershipStart(t, "node-a", MembershipConfig{})
	b := membershipStart(t, "node-b", MembershipConfig{}, a.Addr())
	membershipEventually(t, 3*time.Second, "2 members", func() bool { return a.Count() == 2 && b.Count() == 2 })
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 101, Period: time.Minute}
	clock := floodgate.NewManualClock(localEpoch)
	la, err := NewLocal(LocalConfig{Members: a, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := NewLocal(LocalConfig{Members: b, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := la.Share(limit)
	sb, _ := lb.Share(limit)
	if sa.Rate != 51 || sb.Rate != 50 {
		t.Fatalf("shares %d and %d, want 51 (rank 0) and 50", sa.Rate, sb.Rate)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	membershipEventually(t, 2*time.Second, "node-a alone", func() bool { return a.Count() == 1 })
	if d, err := localAllow(t, la, limit); err != nil || d.Limit != 101 {
		t.Fatalf("alone: %+v, %v; want the whole limit of 101", d, err)
	}
}
