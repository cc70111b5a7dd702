package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// membershipFastTiming is a LAN on loopback: failures are noticed in well
// under a second.
var membershipFastTiming = MembershipTiming{
	ProbeInterval:    100 * time.Millisecond,
	ProbeTimeout:     50 * time.Millisecond,
	GossipInterval:   20 * time.Millisecond,
	PushPullInterval: 200 * time.Millisecond,
	SuspicionMult:    2,
	LeaveTimeout:     time.Second,
}

// membershipStart starts a node on a free loopback port, joined to seeds,
// and stops it at the end of the test.
func membershipStart(t *testing.T, name string, cfg MembershipConfig, seeds ...string) *Membership {
	t.Helper()
	cfg.Name, cfg.BindAddr, cfg.Join = name, "127.0.0.1:0", seeds
	cfg.Timing = membershipFastTiming
	cfg.Logger = membershipTestLogger(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	m, err := NewMembership(ctx, cfg)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// membershipTestWriter passes log lines to the test's output until the test
// ends, and drops them after: memberlist's timers may still fire then.
type membershipTestWriter struct {
	mu   sync.Mutex
	out  io.Writer
	done bool
}

func (w *membershipTestWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	return w.out.Write(p)
}

// membershipTestLogger logs into the test's output (shown with -v or on
// failure). Register it before the nodes, so that its cleanup runs after
// theirs.
func membershipTestLogger(t *testing.T) *slog.Logger {
	w := &membershipTestWriter{out: t.Output()}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, nil))
}

// membershipEventually polls cond until it holds or the bound passes: the
// nodes run on real time and a real network, so there is no clock to move.
func membershipEventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// membershipEvents records the events a node reports.
type membershipEvents struct {
	mu     sync.Mutex
	events []MemberEvent
}

func (r *membershipEvents) record(ev MemberEvent) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *membershipEvents) saw(kind MemberEventKind, node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.events, func(ev MemberEvent) bool { return ev.Kind == kind && ev.Node == node })
}

func TestMembershipJoinLeaveAndFailure(t *testing.T) {
	var events membershipEvents
	a := membershipStart(t, "node-a", MembershipConfig{OnChange: events.record})
	b := membershipStart(t, "node-b", MembershipConfig{}, a.Addr())
	c := membershipStart(t, "node-c", MembershipConfig{}, a.Addr())

	nodes := []*Membership{a, b, c}
	membershipEventually(t, 3*time.Second, "every node counts 3", func() bool {
		return a.Count() == 3 && b.Count() == 3 && c.Count() == 3
	})
	for i, m := range nodes {
		if got, want := m.Names(), []string{"node-a", "node-b", "node-c"}; !slices.Equal(got, want) {
			t.Errorf("%s: Names() = %v, want %v", m.Self(), got, want)
		}
		if m.Rank() != i {
			t.Errorf("%s: Rank() = %d, want %d", m.Self(), m.Rank(), i)
		}
	}
	if !events.saw(MemberJoined, "node-c") {
		t.Errorf("node-a reported no join of node-c")
	}

	// A graceful leave is gossiped: the others drop node-c at once.
	if err := c.Close(); err != nil {
		t.Fatalf("close node-c: %v", err)
	}
	membershipEventually(t, 2*time.Second, "node-a and node-b count 2 after node-c left", func() bool {
		return a.Count() == 2 && b.Count() == 2
	})
	if !events.saw(MemberLeft, "node-c") {
		t.Errorf("node-a reported no leave of node-c")
	}

	// A crash is not announced: node-a's failure detector must notice it.
	if err := b.Shutdown(); err != nil {
		t.Fatalf("shut down node-b: %v", err)
	}
	took := membershipEventually(t, 5*time.Second, "node-a counts 1 after node-b stopped", func() bool {
		return a.Count() == 1
	})
	t.Logf("failure of node-b noticed after %s", took.Round(time.Millisecond))
	if a.Rank() != 0 || !slices.Equal(a.Names(), []string{"node-a"}) {
		t.Errorf("alone, node-a has rank %d and names %v", a.Rank(), a.Names())
	}
}

// membershipRecorder is a MembershipHook that keeps what it receives and
// offers a fixed state.
type membershipRecorder struct {
	state  []byte
	mu     sync.Mutex
	msgs   []string
	merged []string
}

func (r *membershipRecorder) NotifyMsg(msg []byte) {
	r.mu.Lock()
	r.msgs = append(r.msgs, string(msg))
	r.mu.Unlock()
}

func (r *membershipRecorder) LocalState() []byte { return r.state }

func (r *membershipRecorder) MergeRemoteState(state []byte) {
	r.mu.Lock()
	r.merged = append(r.merged, string(state))
	r.mu.Unlock()
}

func (r *membershipRecorder) has(list *[]string, want string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(*list, want)
}

func TestMembershipHookCarriesBroadcastsAndState(t *testing.T) {
	ra := &membershipRecorder{state: []byte("state of a")}
	rb := &membershipRecorder{state: []byte("state of b")}
	a := membershipStart(t, "node-a", MembershipConfig{Hook: ra})
	b := membershipStart(t, "node-b", MembershipConfig{}, a.Addr())
	b.Attach(rb)
	membershipEventually(t, 3*time.Second, "both count 2", func() bool { return a.Count() == 2 && b.Count() == 2 })

	// A newer broadcast of the same name replaces the older while queued.
	b.Broadcast("slot", []byte("old"))
	b.Broadcast("slot", []byte("new"))
	membershipEventually(t, 3*time.Second, "node-a receives node-b's broadcast", func() bool {
		return ra.has(&ra.msgs, "new")
	})
	if ra.has(&ra.msgs, "old") {
		t.Errorf("the replaced broadcast was delivered too")
	}
	membershipEventually(t, 3*time.Second, "push/pull exchanges full state both ways", func() bool {
		return ra.has(&ra.merged, "state of b") && rb.has(&rb.merged, "state of a")
	})
}

func TestMembershipRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  MembershipConfig
	}{
		{"empty name", MembershipConfig{BindAddr: "127.0.0.1:0"}},
		{"address without port", MembershipConfig{Name: "n", BindAddr: "127.0.0.1"}},
		{"host name instead of IP", MembershipConfig{Name: "n", BindAddr: "localhost:0"}},
		{"port out of range", MembershipConfig{Name: "n", BindAddr: "127.0.0.1:70000"}},
		{"negative probe interval", MembershipConfig{Name: "n", BindAddr: "127.0.0.1:0",
			Timing: MembershipTiming{ProbeInterval: -time.Second}}},
		{"probe timeout not below interval", MembershipConfig{Name: "n", BindAddr: "127.0.0.1:0",
			Timing: MembershipTiming{ProbeInterval: time.Second, ProbeTimeout: time.Second}}},
		{"negative suspicion multiplier", MembershipConfig{Name: "n", BindAddr: "127.0.0.1:0",
			Timing: MembershipTiming{SuspicionMult: -1}}},
		{"negative queue bound", MembershipConfig{Name: "n", BindAddr: "127.0.0.1:0", MaxQueued: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMembership(t.Context(), tt.cfg)
			if err == nil {
				_ = m.Shutdown()
				t.Fatal("NewMembership accepted the config")
			}
			if !errors.Is(err, ErrInvalidMembership) {
				t.Fatalf("error %v does not wrap ErrInvalidMembership", err)
			}
		})
	}
}

// A node alone sends its broadcasts to nobody: the queue stays bounded.
func TestMembershipQueueIsBounded(t *testing.T) {
	m := membershipStart(t, "alone", MembershipConfig{MaxQueued: 8})
	for i := range 100 {
		m.Broadcast(fmt.Sprintf("slot-%d", i), []byte("x"))
	}
	if n := m.delegate.queue.NumQueued(); n != 8 {
		t.Fatalf("%d broadcasts queued, want the bound 8", n)
	}
}

func TestMembershipJoinFailsOnDeadSeed(t *testing.T) {
	// Nobody listens on the seed: start a node, note its address, stop it.
	gone := membershipStart(t, "gone", MembershipConfig{})
	addr := gone.Addr()
	_ = gone.Shutdown()

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	m, err := NewMembership(ctx, MembershipConfig{Name: "n", BindAddr: "127.0.0.1:0", Join: []string{addr},
		Timing: membershipFastTiming, Logger: membershipTestLogger(t)})
	if err == nil {
		_ = m.Shutdown()
		t.Fatal("joined a seed that is not running")
	}
}
