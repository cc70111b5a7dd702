package faults

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// AddBandwidth passes replies from upstream at kbPerSecond kilobytes a
// second.
func (p *Proxy) AddBandwidth(tb testing.TB, kbPerSecond int) {
	// The bandwidth toxic logs its trace messages through zerolog's global
	// logger, to stderr; toxiproxy is zerolog's only user here.
	zerolog.SetGlobalLevel(zerolog.InfoLevel)
	p.add(tb, "bandwidth", "downstream", fmt.Sprintf(`{"rate": %d}`, kbPerSecond))
}

// A Fault is one way a Redis server fails, as its clients see it. Inject
// starts it; Heal ends it, and when Heal returns the server answers again
// (with a restart: once it accepts commands). Clients connect through the
// Proxy for the faults of the link.
type Fault struct {
	Name   string
	Inject func(tb testing.TB, s *testkit.Server, p *Proxy)
	Heal   func(tb testing.TB, s *testkit.Server, p *Proxy)
	// Down reports that the server answers nothing in time while the fault
	// lasts (SlowLatency is the one fault where some answers still come).
	Down bool
	// Forgets reports that the server loses its data (a restart).
	Forgets bool
}

// SlowLatency is the latency of the "slow" fault: below a 50 ms store
// timeout, so that answers come, but late enough that a request queued
// behind a call in flight would miss it if it waited for both.
const SlowLatency = 40

// All lists the faults a client of Redis must survive: the server
// killed (then started again on its port), stopped with SIGSTOP (then
// continued), and, through the proxy, connections reset, replies delayed by
// 300 ms, replies delayed by SlowLatency ms, a link that swallows
// everything, and replies cut to 1 KB/s.
func All() []Fault {
	heal := func(_ testing.TB, _ *testkit.Server, p *Proxy) { p.Heal() }
	return []Fault{
		{Name: "kill", Down: true, Forgets: true,
			Inject: func(_ testing.TB, s *testkit.Server, _ *Proxy) { s.Kill() },
			Heal:   func(tb testing.TB, s *testkit.Server, _ *Proxy) { s.Restart(tb) }},
		{Name: "sigstop", Down: true,
			Inject: func(tb testing.TB, s *testkit.Server, _ *Proxy) { s.Pause(tb) },
			Heal:   func(tb testing.TB, s *testkit.Server, _ *Proxy) { s.Resume(tb) }},
		{Name: "connection reset", Down: true, Heal: heal,
			Inject: func(tb testing.TB, _ *testkit.Server, p *Proxy) { p.AddResetPeer(tb) }},
		{Name: "latency", Down: true, Heal: heal,
			Inject: func(tb testing.TB, _ *testkit.Server, p *Proxy) { p.AddLatency(tb, 300) }},
		{Name: "slow", Heal: heal,
			Inject: func(tb testing.TB, _ *testkit.Server, p *Proxy) { p.AddLatency(tb, SlowLatency) }},
		{Name: "black hole", Down: true, Heal: heal,
			Inject: func(tb testing.TB, _ *testkit.Server, p *Proxy) { p.AddTimeout(tb) }},
		{Name: "bandwidth", Down: true, Heal: heal,
			Inject: func(tb testing.TB, _ *testkit.Server, p *Proxy) { p.AddBandwidth(tb, 1) }},
	}
}

// Load is a closed-loop load for RunFault: Callers goroutines each make a
// call, sleep Spacing and start again; the fault is injected after Warm,
// healed after During, and the load stops After that.
type Load struct {
	Callers                      int
	Spacing, Warm, During, After time.Duration
}

// Timed is one call of a load: when it started, how long it took and what
// it returned.
type Timed[T any] struct {
	Start  time.Time
	Took   time.Duration
	Result T
}

// FaultRun is what RunFault saw: every call, and when the fault began and
// when it was healed (the server answering again).
type FaultRun[T any] struct {
	FaultAt, HealAt time.Time
	Calls           []Timed[T]
}

// RunFault runs load against the server through the proxy while fault f
// comes and goes, and returns every call, timed. call is made from the
// load's goroutines with the caller's number.
func RunFault[T any](tb testing.TB, f Fault, s *testkit.Server, p *Proxy, load Load, call func(caller int) T) FaultRun[T] {
	tb.Helper()
	calls := make([][]Timed[T], load.Callers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range load.Callers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				r := call(g)
				calls[g] = append(calls[g], Timed[T]{Start: t0, Took: time.Since(t0), Result: r})
				time.Sleep(load.Spacing)
			}
		})
	}
	var run FaultRun[T]
	time.Sleep(load.Warm)
	run.FaultAt = time.Now()
	f.Inject(tb, s, p)
	time.Sleep(load.During)
	f.Heal(tb, s, p)
	run.HealAt = time.Now()
	time.Sleep(load.After)
	close(stop)
	wg.Wait()
	run.Calls = slices.Concat(calls...)
	return run
}

// CheckBound fails tb unless every call of run took at most bound plus
// the lateness p measured over it plus timing.Slack, and logs what p saw
// and the worst call's margin (negative: within).
func CheckBound[T any](tb testing.TB, p *timing.Probe, run FaultRun[T], bound time.Duration, name string) {
	tb.Helper()
	var worst Timed[T]
	worstOver := time.Duration(math.MinInt64)
	for _, c := range run.Calls {
		if over := p.Over(c.Start, c.Took, bound); over > worstOver {
			worst, worstOver = c, over
		}
	}
	tb.Logf("%s: %s; worst call %v beyond the bound and the lateness", name, p, worstOver)
	if worstOver > timing.Slack {
		tb.Errorf("%s: a call %v after the fault took %v: %v beyond its bound (%v) and the lateness measured then (%v); allowed %v",
			name, worst.Start.Sub(run.FaultAt).Round(time.Millisecond), worst.Took, worstOver, bound,
			p.Measure(worst.Start, worst.Start.Add(worst.Took)), timing.Slack)
	}
}
