package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
)

// leasedChaos is a coordinator behind a network that does its worst
// without ever being down for good: each renewal is, by a plan drawn in
// advance, answered, applied with its answer lost, lost before it arrives,
// or held back and applied later, out of order with the node's later
// renewals. Lost answers surface as the store unavailable, as a client
// that gave up would report them.
type leasedChaos struct {
	inner Coordinator

	mu   sync.Mutex
	plan []int // per renewal: 0 lost answer, 1 lost request, 2 late, 3 deliver held-back ones first; else answered
	held []LeaseRequest
}

func (c *leasedChaos) next() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.plan) == 0 {
		return 9
	}
	v := c.plan[0]
	c.plan = c.plan[1:]
	return v
}

func (c *leasedChaos) Renew(ctx context.Context, req LeaseRequest) (LeaseGrant, error) {
	lost := fmt.Errorf("chaos: no answer: %w", floodgate.ErrStoreUnavailable)
	switch c.next() {
	case 0:
		_, _ = c.inner.Renew(ctx, req)
		return LeaseGrant{}, lost
	case 1:
		return LeaseGrant{}, lost
	case 2:
		c.mu.Lock()
		c.held = append(c.held, req)
		c.mu.Unlock()
		return LeaseGrant{}, lost
	case 3:
		c.mu.Lock()
		held := c.held
		c.held = nil
		c.mu.Unlock()
		for i := len(held) - 1; i >= 0; i-- { // newest first: the worst order
			_, _ = c.inner.Renew(ctx, held[i])
		}
	}
	return c.inner.Renew(ctx, req)
}

// TestLeasedNeverOvershootsWhateverTheDelivery: with the failure policy
// deciding past a lease (ReportUnavailable, as floodgate serve runs it;
// fail_closed then denies), no window admits more than R however the
// coordinator's answers are lost, delayed or reordered: a renewal whose
// answer never came may still have been applied, so the node keeps to
// what both outcomes cover, and a late one cannot undo a later grant.
func TestLeasedNeverOvershootsWhateverTheDelivery(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nodes := rapid.IntRange(1, 4).Draw(rt, "nodes")
		rate := rapid.Int64Range(1, 100).Draw(rt, "rate")
		period := time.Duration(rapid.IntRange(1, 10).Draw(rt, "period_100ms")) * 100 * time.Millisecond
		interval := period / time.Duration(rapid.IntRange(1, 8).Draw(rt, "intervals_per_period"))
		limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: period}
		clock := floodgate.NewManualClock(leasedEpoch)
		mem, err := NewMemoryCoordinator(clock)
		if err != nil {
			rt.Fatal(err)
		}
		chaos := &leasedChaos{inner: mem, plan: rapid.SliceOfN(rapid.IntRange(0, 6), 0, 300).Draw(rt, "delivery")}
		var ls []*Leased
		for i := range nodes {
			l, err := NewLeased(LeasedConfig{
				Coordinator: chaos, Members: StaticMembers{Name: fmt.Sprintf("n%d", i), Nodes: nodes},
				Clock: clock, Interval: interval, ReportUnavailable: true, WaitForRenewals: true,
			})
			if err != nil {
				rt.Fatal(err)
			}
			defer l.Close()
			ls = append(ls, l)
		}
		ctx := context.Background()
		admitted := map[int64]int64{}
		for range rapid.IntRange(1, 200).Draw(rt, "events") {
			node := ls[rapid.IntRange(0, nodes-1).Draw(rt, "node")]
			switch rapid.IntRange(0, 9).Draw(rt, "event") {
			case 0:
				_ = node.Sync(ctx)
			case 1:
				clock.Advance(time.Duration(rapid.Int64Range(0, int64(period)).Draw(rt, "advance")))
			default:
				cost := rapid.Int64Range(1, 3).Draw(rt, "cost")
				d, err := node.AllowN(ctx, "k", limit, cost)
				switch {
				case errors.Is(err, floodgate.ErrStoreUnavailable): // the failure policy's to decide
				case err != nil:
					rt.Fatalf("AllowN: %v", err)
				case d.Allowed:
					admitted[leasedWindowOf(clock.Now(), period)] += cost
				}
				clock.Advance(time.Duration(rapid.Int64Range(0, int64(period/10)).Draw(rt, "tick")))
			}
			if leased := mem.Leased("k"); leased > rate {
				rt.Fatalf("leases outstanding %d > R = %d", leased, rate)
			}
		}
		for w, n := range admitted {
			if n > rate {
				rt.Fatalf("window %d admitted %d > R = %d", w, n, rate)
			}
		}
	})
}

// leasedGate is a coordinator that, while closed, holds every renewal
// until it is opened (then applies it), as a stalled Redis does.
type leasedGate struct {
	inner Coordinator

	mu     sync.Mutex
	closed chan struct{} // nil while open
	held   int
}

func (g *leasedGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = make(chan struct{})
}

func (g *leasedGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed != nil {
		close(g.closed)
		g.closed = nil
	}
}

func (g *leasedGate) heldCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

func (g *leasedGate) Renew(ctx context.Context, req LeaseRequest) (LeaseGrant, error) {
	g.mu.Lock()
	wait := g.closed
	if wait != nil {
		g.held++
	}
	g.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return LeaseGrant{}, fmt.Errorf("gate: %w: %w", floodgate.ErrStoreUnavailable, ctx.Err())
		}
	}
	return g.inner.Renew(ctx, req)
}

// leasedFlightOf returns the renewal in flight on key, if any.
func leasedFlightOf(l *Leased, key string) *leaseFlight {
	v, ok := l.entries.Load(key)
	if !ok {
		return nil
	}
	e := v.(*leasedEntry)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.flight
}

// leasedSettle waits for the renewal in flight on key, if any.
func leasedSettle(l *Leased, key string) {
	if f := leasedFlightOf(l, key); f != nil {
		<-f.done
	}
}

// TestLeasedSlowCoordinatorIsNotAnOutage: a renewal that takes longer than
// the Timeout denies the request that triggered it, on time and without
// an error, and the node admits nothing past what its lease covers, even
// once the lease has ended, while the renewal is unanswered and shorter
// than OutageAfter; the answer, when it comes, is applied, and the window
// never admits more than R across the nodes.
func TestLeasedSlowCoordinatorIsNotAnOutage(t *testing.T) {
	ctx := context.Background()
	clock := floodgate.NewManualClock(leasedEpoch)
	mem, err := NewMemoryCoordinator(clock)
	if err != nil {
		t.Fatal(err)
	}
	gate := &leasedGate{inner: mem}
	lim := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 100, Period: time.Second}
	const interval = 100 * time.Millisecond
	a, err := NewLeased(LeasedConfig{Coordinator: gate, Members: StaticMembers{Name: "a", Nodes: 2}, Clock: clock,
		Interval: interval, Timeout: time.Millisecond, OutageAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewLeased(LeasedConfig{Coordinator: mem, Members: StaticMembers{Name: "b", Nodes: 2}, Clock: clock,
		Interval: interval, WaitForRenewals: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var admitted int64
	allow := func(l *Leased) floodgate.Decision {
		t.Helper()
		d, err := l.AllowN(ctx, "k", lim, 1)
		if err != nil {
			t.Fatalf("AllowN: %v", err)
		}
		if d.Allowed {
			admitted++
		}
		return d
	}
	// a's first lease: its request may give up waiting on a busy machine,
	// so wait for the renewal before counting on the lease.
	if d := allow(a); !d.Allowed {
		leasedSettle(a, "k")
		if d := allow(a); !d.Allowed {
			t.Fatalf("a's request once its first renewal was answered: %+v", d)
		}
	}

	gate.close()
	// a uses up its lease; the request that finds it exhausted renews, and
	// is denied once the Timeout passes, with a time to retry.
	for range lim.Rate {
		if d := allow(a); !d.Allowed {
			break
		}
	}
	clock.Advance(interval / 4) // EarlyRenewal: the next request may renew
	d := allow(a)
	if d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("the request whose renewal is unanswered: %+v, want a denial with RetryAfter > 0", d)
	}
	f := leasedFlightOf(a, "k")
	if f == nil || gate.heldCount() == 0 {
		t.Fatal("no renewal held at the coordinator")
	}
	// Past the lease's end, still unanswered: no safe capacity, only denials.
	clock.Advance(2 * interval)
	for range 20 {
		if d := allow(a); d.Allowed {
			t.Fatalf("a admitted past its lease while its renewal was only slow: %+v", d)
		}
	}
	// b takes what is left of the window.
	for range lim.Rate {
		allow(b)
		clock.Advance(time.Millisecond)
	}

	gate.open()
	<-f.done
	for range lim.Rate {
		allow(a)
	}
	if admitted > lim.Rate {
		t.Errorf("the window admitted %d > R = %d", admitted, lim.Rate)
	}
	if leased := mem.Leased("k"); leased > lim.Rate {
		t.Errorf("leases outstanding %d > R", leased)
	}
	a.Close()
}

// TestLeasedUnansweredForOutageAfterIsAnOutage: a renewal that stays
// unanswered for OutageAfter makes the coordinator unreachable: past its
// lease the node serves the safe capacity, or reports the store
// unavailable for a failure policy to decide.
func TestLeasedUnansweredForOutageAfterIsAnOutage(t *testing.T) {
	for _, report := range []bool{false, true} {
		t.Run(fmt.Sprintf("ReportUnavailable=%v", report), func(t *testing.T) {
			ctx := context.Background()
			clock := floodgate.NewManualClock(leasedEpoch)
			mem, err := NewMemoryCoordinator(clock)
			if err != nil {
				t.Fatal(err)
			}
			gate := &leasedGate{inner: mem}
			lim := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 100, Period: time.Second}
			l, err := NewLeased(LeasedConfig{Coordinator: gate, Members: StaticMembers{Name: "a", Nodes: 4}, Clock: clock,
				Interval: 100 * time.Millisecond, Timeout: time.Millisecond, OutageAfter: 5 * time.Millisecond, ReportUnavailable: report})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			_, _ = l.AllowN(ctx, "k", lim, 1)
			leasedSettle(l, "k")
			gate.close()
			defer gate.open()
			clock.Advance(time.Second) // a new window; the lease is over
			var admitted, want int64
			if !report {
				want = lim.Rate / 4 // S = R/N
			}
			// The first request renews; it is denied at the Timeout, or, on a
			// machine so busy that OutageAfter passes first, decided as the
			// rest.
			d, err := l.AllowN(ctx, "k", lim, 1)
			if err != nil && !(report && errors.Is(err, floodgate.ErrStoreUnavailable)) {
				t.Fatalf("the request whose renewal is unanswered: %v", err)
			}
			if d.Allowed {
				admitted++
			}
			if gate.heldCount() != 1 {
				t.Fatalf("%d renewals held, want 1", gate.heldCount())
			}
			leasedSettle(l, "k") // OutageAfter passes without an answer
			for range 50 {
				d, err := l.AllowN(ctx, "k", lim, 1)
				if report {
					if !errors.Is(err, floodgate.ErrStoreUnavailable) {
						t.Fatalf("after OutageAfter without an answer: %+v, %v; want ErrStoreUnavailable", d, err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
			}
			if admitted != want {
				t.Errorf("admitted %d once unreachable, want %d", admitted, want)
			}
		})
	}
}

// TestLeaseStaleRenewalChangesNothing: a renewal older than one the
// coordinator applied for the same node is answered as stale and changes
// nothing, in both coordinators alike; Seq 0 asks for no order.
func TestLeaseStaleRenewalChangesNothing(t *testing.T) {
	clock := floodgate.NewManualClock(leasedEpoch)
	mem, err := NewMemoryCoordinator(clock)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := LeaseRequest{Key: "k", Node: "a", Rate: 100, Period: time.Second, Lease: 150 * time.Millisecond,
		Window: -1, Nodes: 2, Demand: 10}
	renew := func(seq int64, mutate func(*LeaseRequest)) LeaseGrant {
		t.Helper()
		r := req
		r.Seq = seq
		if mutate != nil {
			mutate(&r)
		}
		g, err := mem.Renew(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	first := renew(5, nil)
	later := renew(7, func(r *LeaseRequest) { r.Window, r.Used, r.Demand = first.Window, first.Granted, 100 })
	stale := renew(6, func(r *LeaseRequest) { r.Window, r.Used, r.Demand = first.Window, 0, 0 })
	if !stale.Stale || stale.Valid != 0 || stale.Granted != later.Granted {
		t.Errorf("renewal 6 after 7: %+v; want stale, no validity, the grant of 7 (%d)", stale, later.Granted)
	}
	if leased := mem.Leased("k"); leased != later.Granted {
		t.Errorf("leased %d after the stale renewal, want %d", leased, later.Granted)
	}
	if again := renew(7, nil); !again.Stale {
		t.Errorf("renewal 7 twice: %+v, want stale", again)
	}
	if unordered := renew(0, func(r *LeaseRequest) { r.Window, r.Used = later.Window, later.Granted }); unordered.Stale {
		t.Errorf("Seq 0: %+v, want applied", unordered)
	}
	if _, err := mem.Renew(ctx, LeaseRequest{Key: "k", Node: "a", Rate: 1, Period: time.Second, Lease: time.Second, Nodes: 1, Seq: -1}); !errors.Is(err, ErrInvalidLeaseRequest) {
		t.Errorf("Seq -1: err = %v, want ErrInvalidLeaseRequest", err)
	}
}
