package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
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
// that gave up would report them, or as a connection's timeout, which the
// node retries.
type leasedChaos struct {
	inner Coordinator

	mu   sync.Mutex
	plan []int // per renewal: 0 lost answer, 1 lost request, 2 late, 3 deliver held-back ones first, 4 answer timed out (retried); else answered
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
	case 4:
		_, _ = c.inner.Renew(ctx, req)
		return LeaseGrant{}, fmt.Errorf("chaos: %w: %w", floodgate.ErrStoreUnavailable, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded})
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
		mem := leaseNewMemory(clock)
		chaos := &leasedChaos{inner: mem, plan: rapid.SliceOfN(rapid.IntRange(0, 7), 0, 300).Draw(rt, "delivery")}
		var ls []*Leased
		for i := range nodes {
			l, err := NewLeased(LeasedConfig{
				Coordinator: chaos, Members: StaticMembers{Name: fmt.Sprintf("n%d", i), Nodes: nodes},
				Clock: clock, Interval: interval, ReportUnavailable: true, WaitForRenewals: true,
				Timeout: 10 * time.Microsecond, // retries of timed-out answers come a µs apart
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
	mem := leaseNewMemory(clock)
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
			mem := leaseNewMemory(clock)
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
	mem := leaseNewMemory(clock)
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

// TestLeaseRetriedRenewalIsNotChargedAcrossAWindow: a renewal whose
// answers are lost and that is sent again after the window turned creates
// the node's grant of the new window with its first attempt; the later
// attempts, which still report the old window, are not charged that grant
// as used, since the node's last answer is older than it. A node with no
// answer to show (a restart) is.
func TestLeaseRetriedRenewalIsNotChargedAcrossAWindow(t *testing.T) {
	clock := floodgate.NewManualClock(leasedEpoch)
	ctx := context.Background()
	base := LeaseRequest{Key: "k", Node: "a", Rate: 100, Period: time.Second, Lease: 150 * time.Millisecond, Nodes: 2, Demand: 40}
	cases := []struct {
		name     string
		answered int64
		wantUsed bool
	}{
		{"retries of one renewal", 1, false},
		{"a node without answers (restart)", 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := leaseNewMemory(clock)
			first := base
			first.Window, first.Seq = -1, 1
			g0, err := mem.Renew(ctx, first) // answered: the node knows window w
			if err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Second) // window w+1; the renewal's answers get lost
			var last LeaseGrant
			for seq := int64(2); seq <= 4; seq++ {
				r := base
				r.Window, r.Used, r.Seq, r.Answered = g0.Window, 3, seq, c.answered
				if last, err = mem.Renew(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			if charged := last.Used == last.Granted; charged != c.wantUsed {
				t.Errorf("after three attempts: %+v; want the grant charged as used: %v", last, c.wantUsed)
			}
		})
	}
}

// TestLeasedRetriesALostAnswerUntilOutageAfter: a renewal whose answer is
// lost on the way (a connection timed out or reset mid-call) is sent
// again, so a store that is only slow or briefly unreachable never makes
// the coordinator unreachable; a refused connection does at once.
func TestLeasedRetriesALostAnswerUntilOutageAfter(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		name            string
		failure         error
		wantUnreachable bool
	}{
		{"timeouts", timeout, false},
		{"resets", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, false},
		{"connection refused", refused, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := floodgate.NewManualClock(leasedEpoch)
			mem := leaseNewMemory(clock)
			flaky := &leasedFlaky{inner: mem, failures: 3, err: fmt.Errorf("redis: %w: %w", floodgate.ErrStoreUnavailable, c.failure)}
			l, err := NewLeased(LeasedConfig{Coordinator: flaky, Members: StaticMembers{Name: "a", Nodes: 1}, Clock: clock,
				Interval: 10 * time.Millisecond, OutageAfter: time.Hour, ReportUnavailable: true, WaitForRenewals: true})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			lim := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 100, Period: time.Second}
			d, err := l.AllowN(context.Background(), "k", lim, 1)
			if c.wantUnreachable {
				if !errors.Is(err, floodgate.ErrStoreUnavailable) || flaky.calls() != 1 {
					t.Errorf("%+v, %v after %d calls; want ErrStoreUnavailable after 1", d, err, flaky.calls())
				}
				return
			}
			if err != nil || !d.Allowed || flaky.calls() != 4 {
				t.Errorf("%+v, %v after %d calls; want admitted after 4", d, err, flaky.calls())
			}
		})
	}
}

// leasedFlaky fails its first calls with err, then passes them on.
type leasedFlaky struct {
	inner    Coordinator
	err      error
	mu       sync.Mutex
	failures int
	n        int
}

func (f *leasedFlaky) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *leasedFlaky) Renew(ctx context.Context, req LeaseRequest) (LeaseGrant, error) {
	f.mu.Lock()
	f.n++
	fail := f.n <= f.failures
	f.mu.Unlock()
	if fail {
		return LeaseGrant{}, f.err
	}
	return f.inner.Renew(ctx, req)
}

// leasedSwitch is a coordinator whose delivery a test sets renewal by
// renewal: answered, applied with the answer lost, or held back (its
// answer timed out, so the node sends it again) and applied later by
// deliver.
type leasedSwitch struct {
	inner Coordinator
	mode  string // "", "lose answer", "hold once"
	held  []LeaseRequest
}

func (s *leasedSwitch) Renew(ctx context.Context, req LeaseRequest) (LeaseGrant, error) {
	switch s.mode {
	case "lose answer":
		_, _ = s.inner.Renew(ctx, req)
		return LeaseGrant{}, fmt.Errorf("switch: answer lost: %w", floodgate.ErrStoreUnavailable)
	case "hold once":
		s.mode = ""
		s.held = append(s.held, req)
		return LeaseGrant{}, fmt.Errorf("switch: %w: %w", floodgate.ErrStoreUnavailable, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded})
	}
	return s.inner.Renew(ctx, req)
}

// deliver applies the held renewals.
func (s *leasedSwitch) deliver(ctx context.Context) {
	for _, req := range s.held {
		_, _ = s.inner.Renew(ctx, req)
	}
	s.held = nil
}

// TestLeasedShrunkGrantsAreNeverOverrun plays, step by step, the two ways
// a renewal can shrink a node's grant while the node counts on more: one
// applied with its answer lost, and one applied late, after a later
// renewal that was answered. Node a reports little demand in that
// renewal, so the coordinator shrinks a's grant and node b, which wants
// everything, takes the rest; a must not admit past the shrunk grant, or
// the window passes R.
func TestLeasedShrunkGrantsAreNeverOverrun(t *testing.T) {
	const ms = time.Millisecond
	cases := []struct {
		name  string
		spoil func(ctx context.Context, sw *leasedSwitch, a *Leased, clock *floodgate.ManualClock, busy func(*Leased, int))
	}{
		{"applied, answer lost", func(ctx context.Context, sw *leasedSwitch, a *Leased, _ *floodgate.ManualClock, _ func(*Leased, int)) {
			sw.mode = "lose answer"
			_ = a.Sync(ctx) // little demand reported: shrunk, and a does not know
			sw.mode = ""
		}},
		{"applied late, after a later renewal", func(ctx context.Context, sw *leasedSwitch, a *Leased, clock *floodgate.ManualClock, busy func(*Leased, int)) {
			sw.mode = "hold once"
			_ = a.Sync(ctx) // little demand reported; held, sent again, answered
			clock.Advance(ms)
			busy(a, 30)     // a wants more now,
			_ = a.Sync(ctx) // and is granted more
			sw.deliver(ctx) // the held renewal arrives
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			clock := floodgate.NewManualClock(leasedEpoch)
			mem := leaseNewMemory(clock)
			sw := &leasedSwitch{inner: mem}
			lim := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 100, Period: time.Second}
			node := func(name string) *Leased {
				l, err := NewLeased(LeasedConfig{Coordinator: sw, Members: StaticMembers{Name: name, Nodes: 2}, Clock: clock,
					Interval: 10 * ms, EarlyRenewal: ms, Timeout: ms, ReportUnavailable: true, WaitForRenewals: true})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(l.Close)
				return l
			}
			a, b := node("a"), node("b")
			var admitted int64
			busy := func(l *Leased, n int) {
				for range n {
					if d, err := l.AllowN(ctx, "k", lim, 1); err == nil && d.Allowed {
						admitted++
					}
				}
			}
			busy(a, 40) // t=0: a's lease; 40 of it used
			busy(b, 20) // b holds the rest
			clock.Advance(ms)
			_ = a.Sync(ctx) // a reports its 40; its lease now runs to t=16ms
			busy(b, 40)
			_ = b.Sync(ctx) // b reports all it wants
			clock.Advance(9 * ms)
			busy(a, 1) // a is nearly idle now
			c.spoil(ctx, sw, a, clock, busy)
			for range 3 { // b wants it all, renewing as often as it may
				busy(b, 40)
				clock.Advance(ms)
			}
			busy(a, 100) // a spends what it thinks it holds, its lease still valid
			if admitted > lim.Rate {
				t.Errorf("the window admitted %d > R = %d", admitted, lim.Rate)
			}
		})
	}
}

// TestLeasedRenewalKeepsTheCapOfAnUnansweredOne: a renewal that gives
// units back may be applied although its answer is lost, and another node
// may then lease them. The next renewal, begun before any answer, must pin
// no more than the give-back left, or the fleet admits those units twice.
// (Found by TestLeasedNeverOvershootsWhateverTheDelivery.)
func TestLeasedRenewalKeepsTheCapOfAnUnansweredOne(t *testing.T) {
	clock := floodgate.NewManualClock(leasedEpoch)
	mem := leaseNewMemory(clock)
	// a's renewals in order: its first grant, a report, a give-back whose
	// answer is lost, a renewal lost on the way. b's are all answered.
	chaosA := &leasedChaos{inner: mem, plan: []int{9, 9, 0, 1}}
	ctx := context.Background()
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 10, Period: time.Second}
	var admitted int64
	node := func(name string, c Coordinator) func(cost int64) {
		l, err := NewLeased(LeasedConfig{
			Coordinator: c, Members: StaticMembers{Name: name, Nodes: 2},
			Clock: clock, Interval: 100 * time.Millisecond, ReportUnavailable: true, WaitForRenewals: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return func(cost int64) {
			t.Helper()
			if cost == 0 {
				_ = l.Sync(ctx)
				return
			}
			d, err := l.AllowN(ctx, "k", limit, cost)
			if err != nil && !errors.Is(err, floodgate.ErrStoreUnavailable) {
				t.Fatal(err)
			}
			if err == nil && d.Allowed {
				admitted += cost
			}
		}
	}
	a, b := node("a", chaosA), node("b", mem)
	a(1) // a's first grant
	a(1) // from the lease, so that a's next report has demand
	a(0) // answered
	for range 10 {
		b(1) // b takes what it can get and is denied the rest
	}
	b(0) // b reports its demand
	clock.Advance(time.Millisecond)
	a(0) // no demand since: a gives back what it does not use to b's demand; the answer is lost
	for range 10 {
		b(1) // denied: b's demand grows
	}
	b(0) // b leases what a gave back
	for range 10 {
		b(1)
	}
	a(1) // denied: the give-back's cap holds
	a(0) // demand again; lost on the way
	a(1) // must still be denied
	if admitted > limit.Rate {
		t.Fatalf("admitted %d > R = %d", admitted, limit.Rate)
	}
}
