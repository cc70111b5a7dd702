package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/internal/faults"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

// This file drives a fleet of a counter strategy (synced, sampled) on one
// ManualClock while the calls to the shared Counter fail now and then —
// applied by the store with the reply lost (a timeout after the fact, a
// connection reset), or never applied — and checks each window against
// the bound the strategy states for a store that is slow: its T (synced)
// or its gap g (sampled) becomes the time between calls that succeeded.

// counterFault is what happens to one call to the Counter.
type counterFault int

const (
	counterCallOK  counterFault = iota
	counterNoReply              // applied by the store; the caller sees an error
	counterNotSent              // never reaches the store
	counterLate                 // the caller sees an error; the store applies it later, newest first
)

// counterFaults are the faults a probe draws from.
var counterFaults = []counterFault{counterNoReply, counterNotSent, counterLate}

// errCounterFault is what a call that the test makes fail returns.
var errCounterFault = fmt.Errorf("test fault: %w", floodgate.ErrStoreUnavailable)

// counterDrawFaults draws the share of calls that fail, and returns each
// node's faults: each call fails with that chance, in a way drawn from
// counterFaults.
func counterDrawFaults(t *rapid.T) func(int) func() counterFault {
	lost := rapid.Float64Range(0, 0.7).Draw(t, "share of failed calls")
	return func(int) func() counterFault {
		return func() counterFault {
			if rapid.Float64Range(0, 1).Draw(t, "fails") >= lost {
				return counterCallOK
			}
			return rapid.SampledFrom(counterFaults).Draw(t, "fault")
		}
	}
}

// counterDrawArrivals draws each of n nodes' arrivals per step, up to most.
func counterDrawArrivals(t *rapid.T, n int, most int64) func(s, i int) int64 {
	perNode := make([]int64, n)
	for i := range perNode {
		perNode[i] = rapid.Int64Range(0, most).Draw(t, "arrivals per step")
	}
	return func(_, i int) int64 { return perNode[i] }
}

// counterProbe is one node's way to the shared Counter. It logs when each
// call succeeded (by step, and by event, to order it against decisions),
// and the largest count sent for each window; with fault set, it makes
// calls fail. A call that fails, by fault or on its own (a real timeout),
// is not logged.
type counterProbe struct {
	cluster.Counter
	fleet *counterFaultFleet
	fault func() counterFault // nil: calls go through

	mu    sync.Mutex
	steps []int           // steps of the successful calls, from the run's start
	seqs  []int64         // their events
	sent  map[int64]int64 // the largest count sent for each window
	held  [][]cluster.CounterAdd
}

func (p *counterProbe) Add(ctx context.Context, adds []cluster.CounterAdd) ([]cluster.CounterRead, error) {
	p.mu.Lock()
	for _, a := range adds {
		p.sent[a.Window] = max(p.sent[a.Window], a.Count)
		p.sent[a.Window-1] = max(p.sent[a.Window-1], a.PrevCount)
	}
	p.mu.Unlock()
	f := counterCallOK
	if p.fault != nil {
		f = p.fault()
	}
	switch f {
	case counterNotSent:
		return nil, errCounterFault
	case counterLate:
		p.mu.Lock()
		p.held = append(p.held, adds)
		p.mu.Unlock()
		return nil, errCounterFault
	}
	p.mu.Lock()
	held := p.held
	p.held = nil
	p.mu.Unlock()
	for k := len(held) - 1; k >= 0; k-- {
		_, _ = p.Counter.Add(ctx, held[k])
	}
	reads, err := p.Counter.Add(ctx, adds)
	if err == nil && f == counterNoReply {
		err = errCounterFault
	}
	if err == nil {
		p.mark()
	}
	return reads, err
}

// mark logs a success that made no call.
func (p *counterProbe) mark() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.steps = append(p.steps, int(p.fleet.step.Load()))
	p.seqs = append(p.seqs, p.fleet.seq.Add(1))
}

// successes returns how many calls have succeeded.
func (p *counterProbe) successes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.steps)
}

// last returns the step of the last successful call.
func (p *counterProbe) last() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.steps[len(p.steps)-1]
}

// counterFaultFleet is N nodes, each reaching the shared Counter through
// its own probe.
type counterFaultFleet struct {
	clock  *floodgate.ManualClock
	store  cluster.Counter // the shared Counter itself, read at window ends
	nodes  []floodgate.Limiter
	probes []*counterProbe
	// round runs node i's sync round; nil for sampled.
	round func(ctx context.Context, i int) error
	// stale is how long after its last successful call a node decides
	// before it may fail (synced: T + Period; sampled: the Period, after
	// which a decision first tries a call of its own); 0: not checked.
	stale time.Duration
	// failsWhenStale: a node fails every decision past stale (synced).
	failsWhenStale bool

	step atomic.Int64 // the step being played
	seq  atomic.Int64 // events: decisions and successful calls, in order
}

// probe makes the next node's probe, on counter.
func (f *counterFaultFleet) probe(counter cluster.Counter) *counterProbe {
	p := &counterProbe{Counter: counter, fleet: f, steps: []int{0}, seqs: []int64{0}, // nothing was admitted before the start
		sent: map[int64]int64{}}
	f.probes = append(f.probes, p)
	return p
}

// counterFaultRun is one run: steps of length step, rounds on every node
// every `every` steps (synced), arrivals(s, i) unit requests at node i in
// step s, and before(s) called before each step to turn faults on and off.
type counterFaultRun struct {
	limit    floodgate.Limit
	step     time.Duration
	every    int
	steps    int
	arrivals func(s, i int) int64
	before   func(s int)
}

// counterFaultWindow is what the fleet did in one window.
type counterFaultWindow struct {
	first, last      int // its steps
	admitted, denied int64
	failed           int64 // decisions that failed (the store unavailable for too long)
	lastNode         int   // the node of the window's last admission
	stale            int   // the most steps any decision in it was made after its node's last successful call
	lastAdmit        []int64
	stored           int64 // the store's count of the window, read at the end of the next one
	read             bool
}

// counterFaultResult is a run's measurements.
type counterFaultResult struct {
	windows map[int64]*counterFaultWindow
	order   []int64
	maxStep []int64 // per node, the most arrivals in one step
	probes  []*counterProbe
}

// play runs the fleet; within a step the nodes take turns, one request
// each. A decision that fails must wrap ErrStoreUnavailable and come only
// once its node has gone stale.
func (f *counterFaultFleet) play(t counterT, key string, r counterFaultRun) counterFaultResult {
	t.Helper()
	ctx := context.Background()
	n := len(f.nodes)
	res := counterFaultResult{windows: map[int64]*counterFaultWindow{}, maxStep: make([]int64, n), probes: f.probes}
	period := r.limit.Period.Microseconds()
	left := make([]int64, n)
	for s := range r.steps {
		f.step.Store(int64(s))
		if r.before != nil {
			r.before(s)
		}
		w := f.clock.Now().UnixMicro() / period
		win := res.windows[w]
		if win == nil {
			win = &counterFaultWindow{first: s, lastAdmit: make([]int64, n)}
			res.windows[w] = win
			res.order = append(res.order, w)
		}
		win.last = s
		if f.round != nil && s%r.every == 0 {
			for i, p := range f.probes {
				before := p.successes()
				// A round with nothing to send succeeds without a call.
				if err := f.round(ctx, i); err == nil && p.successes() == before {
					p.mark()
				}
			}
		}
		for i := range left {
			left[i] = r.arrivals(s, i)
			res.maxStep[i] = max(res.maxStep[i], left[i])
		}
		counterTakeTurns(left, func(i int) {
			okStep := f.probes[i].last()
			win.stale = max(win.stale, s-okStep)
			seq := f.seq.Add(1)
			d, err := f.nodes[i].AllowN(ctx, key, r.limit, 1)
			since := time.Duration(s-okStep) * r.step
			switch {
			case err != nil && !errors.Is(err, floodgate.ErrStoreUnavailable):
				t.Fatalf("step %d node %d: %v, want an error wrapping ErrStoreUnavailable", s, i, err)
			case err != nil && f.stale > 0 && since <= f.stale:
				t.Fatalf("step %d node %d: failed %s after its last successful call, within %s: %v", s, i, since, f.stale, err)
			case err == nil && f.failsWhenStale && since > f.stale:
				t.Fatalf("step %d node %d: decided %s after its last successful call, beyond %s", s, i, since, f.stale)
			case err != nil:
				win.failed++
			case d.Allowed:
				win.admitted++
				win.lastNode = i
				win.lastAdmit[i] = seq
			default:
				win.denied++
			}
		})
		// At a window's last step, the one before it is final: read its count.
		if f.clock.Now().Add(r.step).UnixMicro()/period != w {
			if prev := res.windows[w-1]; prev != nil {
				read := []cluster.CounterAdd{{Key: key, Period: r.limit.Period, Node: "reader", Window: w}}
				reads, err := f.store.Add(ctx, read)
				for try := 0; try < 3 && errors.Is(err, floodgate.ErrStoreUnavailable); try++ {
					reads, err = f.store.Add(ctx, read) // a connection broken by a restart
				}
				if err != nil {
					t.Fatalf("reading the store at the end of window %d: %v", w, err)
				}
				prev.stored, prev.read = reads[0].Previous, reads[0].Window == w
			}
		}
		f.clock.Advance(r.step)
	}
	return res
}

// log reports each window: admitted, the bound, the stalest decision and
// the store's count.
func (r counterFaultResult) log(t interface{ Logf(string, ...any) }, rate int64) {
	for k, w := range r.order {
		win := r.windows[w]
		t.Logf("window %d: admitted %d (bound R + %d), denied %d, failed %d; stalest decision %d steps after a successful call; store %d",
			k, win.admitted, r.bound(win, rate), win.denied, win.failed, win.stale, win.stored)
	}
}

// counterT is what the checks need of *testing.T and *rapid.T.
type counterT interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// gap returns the longest run of steps between two successful calls of a
// node (the last run still open at until) among those that reach from
// `from` to until.
func (p *counterProbe) gap(from, until int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	longest := 0
	for k, b := range p.steps {
		next := until
		if k+1 < len(p.steps) {
			next = min(p.steps[k+1], until)
		}
		if b <= until && next >= from {
			longest = max(longest, next-b)
		}
	}
	return longest
}

// largestSent returns the largest count the node sent for window w.
func (p *counterProbe) largestSent(w int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent[w]
}

// syncedSince reports whether the node made a successful call after event
// seq (its last admission of a window) and no later than step until (the
// end of the next window).
func (p *counterProbe) syncedSince(seq int64, until int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, s := range p.seqs {
		if s > seq && p.steps[k] <= until {
			return true
		}
	}
	return false
}

// bound is the overshoot the strategies state for a slow store, in steps:
// a node's view of the others is as old as its last successful call
// (stale, at most), and that call saw node j's count as of j's last
// successful call before it (at most gap_j steps earlier), so per window
//
//	overshoot ≤ Σ_{j≠i} min(λ_j·(stale + gap_j + 1), R)
//
// with λ_j node j's most arrivals in a step. A store that answers every
// call gives synced's 2T and sampled's g/λ_i + D at p = 1.
func (r counterFaultResult) bound(win *counterFaultWindow, rate int64) int64 {
	var b int64
	for j, p := range r.probes {
		if j == win.lastNode {
			continue
		}
		g := p.gap(win.first-win.stale-1, win.last)
		b += min(r.maxStep[j]*int64(win.stale+g+1), rate)
	}
	return b
}

// check holds each window to the bound, to (N−1)·R, and to undershoot 0
// for unit requests; and the store's count of each window to at most what
// the fleet admitted (no unit counted twice), and exactly that when every
// node synced after its last admission (none lost). exact is false for
// sampled with p < 1, whose store counts are estimates: the store's count
// is then held to the sum of the largest counts the nodes sent, and each
// window to (N−1)·R. It returns the largest overshoot and the bound it was
// held to.
func (r counterFaultResult) check(t counterT, rate int64, exact bool) (worst, worstBound int64) {
	t.Helper()
	n := int64(len(r.probes))
	for _, w := range r.order {
		win := r.windows[w]
		over := win.admitted - rate
		if over > (n-1)*rate {
			t.Errorf("window %d: admitted %d, beyond R + (N−1)·R", w, win.admitted)
		}
		if !exact {
			if over > worst {
				worst, worstBound = over, (n-1)*rate
			}
			var claimed int64
			for _, p := range r.probes {
				claimed += p.largestSent(w)
			}
			if win.read && win.stored > claimed {
				t.Errorf("window %d: the store counts %d, more than the %d the nodes claimed: a claim was taken twice", w, win.stored, claimed)
			}
			continue
		}
		if b := r.bound(win, rate); over > b {
			t.Errorf("window %d: admitted %d, overshoot %d above the bound %d (stalest decision %d steps after a successful call)",
				w, win.admitted, over, b, win.stale)
		} else if over > worst {
			worst, worstBound = over, b
		}
		if win.denied > 0 && win.admitted < rate {
			t.Errorf("window %d: denied %d with only %d of %d admitted: a count was taken twice", w, win.denied, win.admitted, rate)
		}
		if !win.read {
			continue
		}
		if win.stored > win.admitted {
			t.Errorf("window %d: the store counts %d, more than the %d admitted: a count was taken twice", w, win.stored, win.admitted)
		}
		next := r.windows[w+1]
		all := next != nil
		for i, p := range r.probes {
			all = all && (win.lastAdmit[i] == 0 || p.syncedSince(win.lastAdmit[i], next.last))
		}
		if all && win.stored != win.admitted {
			t.Errorf("window %d: the store counts %d, every node synced since, and %d were admitted", w, win.stored, win.admitted)
		}
	}
	return worst, worstBound
}

// The timings of the Redis tests, in wall time. A request's call meets a
// slow link's latency, longer than the store timeout, and fails (applied
// all the same); a synced round waits for it. A healthy call that misses
// the store timeout on a busy machine is a failed call like any other,
// which the checks allow for.
const (
	counterLinkTimeout = 100 * time.Millisecond // RedisCounterConfig.Timeout
	counterLinkLatency = 150 * time.Millisecond // of a slow link
	counterRoundWait   = 2 * time.Second        // SyncedConfig.Timeout: far above the latency
)

// counterRedisLink is one node's connection to Redis, through a fault
// proxy of its own, with a RedisCounter whose windows follow a virtual
// clock. The faults, each in effect until the next set:
//
//	slow   replies come counterLinkLatency late: a request's call times
//	       out, applied; a round's succeeds
//	cut    each call's connection is closed while its reply is on its way
//	       back: a reset after Redis applied it (or, on a busy machine,
//	       before: both happen)
//	reset  connections are reset as data arrives: calls fail, not applied
//	hang   the link swallows everything: calls time out, not applied
type counterRedisLink struct {
	tb      testing.TB
	proxy   *faults.Proxy
	counter *cluster.RedisCounter
	fault   string
}

// counterRedisLinks connects n nodes to srv, each through its own proxy.
func counterRedisLinks(t *testing.T, srv *testkit.Server, n int, clock floodgate.Clock) []*counterRedisLink {
	t.Helper()
	links := make([]*counterRedisLink, n)
	for i := range links {
		p := faults.StartProxy(t, srv.Addr())
		links[i] = &counterRedisLink{tb: t, proxy: p, counter: counterNewRedis(t, cluster.RedisCounterConfig{
			Client: counterRedisClient(t, p.Addr()), Clock: clock, Timeout: counterLinkTimeout})}
	}
	return links
}

// set ends the link's fault, if any, and starts fault ("": none).
func (l *counterRedisLink) set(fault string) {
	if fault == l.fault {
		return
	}
	l.proxy.Heal() // a swallowing link's connections close as it heals
	switch fault {
	case "slow":
		l.proxy.AddLatency(l.tb, int(counterLinkLatency/time.Millisecond))
	case "reset":
		l.proxy.AddResetPeer(l.tb)
	case "hang":
		l.proxy.AddTimeout(l.tb)
	}
	l.fault = fault
}

// Add implements cluster.Counter.
func (l *counterRedisLink) Add(ctx context.Context, adds []cluster.CounterAdd) ([]cluster.CounterRead, error) {
	if l.fault != "cut" {
		return l.counter.Add(ctx, adds)
	}
	l.proxy.AddLatency(l.tb, int(counterLinkLatency/time.Millisecond))
	cut := time.AfterFunc(counterLinkLatency/4, l.proxy.Cut)
	reads, err := l.counter.Add(ctx, adds)
	if !cut.Stop() {
		l.proxy.Restore(l.tb)
	}
	l.proxy.Heal()
	return reads, err
}

// counterFaultPlan says which fault each node's link has in each window of
// a run (by the window's index from the start), for the first `steps`
// steps of the window (0: all of it).
type counterFaultPlan map[int]struct {
	faults []string
	steps  int
}

// before returns the run's hook that sets the links' faults for step s.
func (plan counterFaultPlan) before(links []*counterRedisLink, stepsPerWindow int) func(s int) {
	return func(s int) {
		p, ok := plan[s/stepsPerWindow]
		for i, l := range links {
			fault := ""
			if ok && i < len(p.faults) && (p.steps == 0 || s%stepsPerWindow < p.steps) {
				fault = p.faults[i]
			}
			l.set(fault)
		}
	}
}

// counterThroughEveryFault runs a fleet of n nodes, all reaching one Redis
// through one proxy, through each fault of faults.All in turn: the
// fault starts in the second of four windows and lasts `lasts` steps, then
// heals. build makes the fleet on the nodes' counter (through the proxy)
// and the store's (direct); exact is as for check.
func counterThroughEveryFault(t *testing.T, n, every, lasts int, exact bool,
	build func(t *testing.T, counter func(i int) cluster.Counter, store cluster.Counter, clock *floodgate.ManualClock) *counterFaultFleet) {
	const rate, stepsPerWindow = 30, 10
	const period = time.Second
	step := period / stepsPerWindow
	for _, fault := range faults.All() {
		t.Run(fault.Name, func(t *testing.T) {
			t.Parallel()
			srv := testkit.StartServer(t)
			proxy := faults.StartProxy(t, srv.Addr())
			clock := floodgate.NewManualClock(counterEpoch)
			counters := make([]cluster.Counter, n)
			for i := range counters {
				counters[i] = counterNewRedis(t, cluster.RedisCounterConfig{Client: counterRedisClient(t, proxy.Addr()),
					Clock: clock, Timeout: counterLinkTimeout})
			}
			store := counterNewRedis(t, cluster.RedisCounterConfig{Client: counterRedisClient(t, srv.Addr()), Clock: clock, Timeout: time.Second})
			f := build(t, func(i int) cluster.Counter { return counters[i] }, store, clock)
			start := stepsPerWindow + 2
			res := f.play(t, "api", counterFaultRun{limit: floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: rate, Period: period},
				step: step, every: every, steps: 4 * stepsPerWindow, arrivals: func(_, _ int) int64 { return 2 },
				before: func(s int) {
					switch s {
					case start:
						fault.Inject(t, srv, proxy)
					case start + lasts:
						fault.Heal(t, srv, proxy)
					}
				}})
			res.log(t, rate)
			worst, bound := res.check(t, rate, exact)
			t.Logf("%s for %d steps: worst overshoot %d (bound %d for that window)", fault.Name, lasts, worst, bound)
		})
	}
}
