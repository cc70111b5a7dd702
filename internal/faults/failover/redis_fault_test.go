package failover_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/internal/faults"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
	"github.com/floodgate-io/floodgate/redisstore"
)

// Faults with real parts: a redis-server killed and started again, stopped
// with SIGSTOP, and a proxy between client and server that resets
// connections, delays replies, swallows them or cuts the bandwidth
// (faults.All). For every failure policy, under load:
//
//   - every decision comes back within the store timeout, plus how late the
//     machine ran this process then (measured, timing.Probe), plus
//     timing.Slack;
//   - the policy decides while the store is away;
//   - the breaker follows its state machine back: after the store is back,
//     it closes at the first probe the store answers, and probes come a
//     CoolDown apart (see checkRecovery);
//   - the store's counts are right.

const (
	storeTimeout = 50 * time.Millisecond
	coolDown     = failover.DefaultCoolDown
	// loadSpacing is how long each caller of the load sleeps between
	// decisions.
	loadSpacing = 2 * time.Millisecond
)

func TestRedisFaultsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real faults for several seconds")
	}
	for _, mode := range failover.Modes() {
		for _, f := range faults.All() {
			t.Run(fmt.Sprintf("%s/%s", mode, f.Name), func(t *testing.T) { runFault(t, mode, f) })
		}
	}
}

// result is what one decision of the load got.
type result struct {
	allowed, degraded bool
	asked             bool // the decision asked the store (the breaker did not skip it)
	cause             error
}

// run is one fault's timeline and what was measured beside it.
type run struct {
	faults.FaultRun[result]
	events *breakerLog
	probe  *timing.Probe
	path   *testkit.Pinger // the path to the store, apart from the client
}

func runFault(t *testing.T, mode failover.Mode, f faults.Fault) {
	srv := testkit.StartServer(t)
	proxy := faults.StartProxy(t, srv.Addr())
	// As floodgate serve wires them: one timeout for both, the rest default.
	redis, err := redisstore.New(redisstore.Config{Addrs: []string{proxy.Addr()}, Timeout: storeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer redis.Close()
	store := recordingStore{redis}
	r := run{events: &breakerLog{}, probe: timing.StartProbe(t)}
	r.probe.Watch(srv.Pid)
	r.path = testkit.StartPinger(t, proxy.Addr())
	lim, err := failover.New(store, failover.Config{Mode: mode, Timeout: storeTimeout, CoolDown: coolDown, Nodes: 2, Logger: slog.New(r.events)})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	// A window of 1000 hours: no boundary resets the count during the test.
	limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1_000_000, Period: 1000 * time.Hour}
	key := fmt.Sprintf("fault:%s:%d", mode, time.Now().UnixNano())

	load := faults.Load{Callers: 8, Spacing: loadSpacing, Warm: 300 * time.Millisecond, During: time.Second, After: 2 * time.Second}
	r.FaultRun = faults.RunFault(t, f, srv, proxy, load, func(int) result {
		d, cause, err := explain(lim, key, limit)
		if err != nil {
			t.Errorf("decision failed instead of degrading: %v", err)
		}
		return result{allowed: d.Allowed, degraded: cause != nil, asked: !errors.Is(cause, failover.ErrBreakerOpen), cause: cause}
	})
	r.probe.Stop()

	checkBound(t, f, r)
	checkPolicy(t, mode, f, r)
	checkRecovery(t, r)
	if !f.Forgets {
		checkCounts(t, srv, key, limit, r.Calls)
	}
}

// recordingStore is the Redis store, with every capability it has, that
// also tells the decision whose context carries a storeCall what the
// store answered it. The Redis store returns by its context's deadline, so
// the failover Limiter calls it on the caller's goroutine and the record
// is complete when the decision returns.
type recordingStore struct{ *redisstore.Limiter }

// storeCall is what the store did for one decision: whether it was asked
// (the breaker did not skip it) and its error.
type storeCall struct {
	asked bool
	err   error
}

type storeCallKey struct{}

func (s recordingStore) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	d, err := s.Limiter.AllowN(ctx, key, limit, cost)
	if c, ok := ctx.Value(storeCallKey{}).(*storeCall); ok {
		c.asked, c.err = true, err
	}
	return d, err
}

// explain decides one request through lim and says why the failure
// policy decided, if it did (cause, nil when the store did): the store
// skipped by the open breaker (failover.ErrBreakerOpen), or its error, as
// the policy sees it (wrapping floodgate.ErrStoreUnavailable). The load
// gives no bad input and never gives up, so every store error degrades.
func explain(lim failover.Limiter, key string, limit floodgate.Limit) (d floodgate.Decision, cause, err error) {
	var c storeCall
	d, err = lim.AllowN(context.WithValue(context.Background(), storeCallKey{}, &c), key, limit, 1)
	switch {
	case err != nil:
	case !c.asked:
		cause = failover.ErrBreakerOpen
	case c.err != nil:
		cause = fmt.Errorf("%w: %w", floodgate.ErrStoreUnavailable, c.err)
	}
	return d, cause, err
}

// checkBound: no decision took longer than the timeout, the scheduler's
// lateness during it and timing.Slack.
func checkBound(t *testing.T, f faults.Fault, r run) {
	t.Helper()
	var all, asked []time.Duration
	for _, o := range r.Calls {
		all = append(all, o.Took)
		if o.Result.asked {
			asked = append(asked, o.Took)
		}
	}
	t.Logf("%s: all decisions %s; those that asked the store %s", f.Name, timing.Summarize(all), timing.Summarize(asked))
	faults.CheckBound(t, r.probe, r.FaultRun, storeTimeout, f.Name)
}

// checkPolicy: the policy made the degraded decisions, and there were some
// while a fault that takes the store down lasted.
func checkPolicy(t *testing.T, mode failover.Mode, f faults.Fault, r run) {
	t.Helper()
	during := 0
	for _, o := range r.Calls {
		if !o.Result.degraded {
			continue
		}
		if o.Start.After(r.FaultAt) && o.Start.Before(r.HealAt) {
			during++
		}
		switch {
		case mode == failover.FailClosed && o.Result.allowed:
			t.Errorf("fail_closed allowed a request %v after the fault", o.Start.Sub(r.FaultAt))
		case mode != failover.FailClosed && !o.Result.allowed:
			t.Errorf("%s denied a request %v after the fault (the limit is far away)", mode, o.Start.Sub(r.FaultAt))
		}
	}
	if f.Down && during == 0 {
		t.Errorf("no degraded decision while the store was down")
	}
}

// checkCounts: the store counted every request it admitted; requests whose
// reply was lost or came too late (latency, reset, a caller that stopped
// waiting) may have been counted too, never more.
func checkCounts(t *testing.T, srv *testkit.Server, key string, limit floodgate.Limit, outcomes []faults.Timed[result]) {
	t.Helper()
	store, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	d, err := store.AllowN(context.Background(), key, limit, 0)
	if err != nil {
		t.Fatal(err)
	}
	counted := limit.Rate - d.Remaining
	var admitted, degraded int64
	for _, o := range outcomes {
		if o.Result.degraded {
			degraded++
		} else if o.Result.allowed {
			admitted++
		}
	}
	if counted < admitted || counted > admitted+degraded {
		t.Errorf("Redis counted %d; the store admitted %d and %d decisions were degraded", counted, admitted, degraded)
	}
}

// breakerLog is a slog.Handler that keeps the failover's messages, which
// mark the breaker's transitions, with their times and causes.
type breakerLog struct {
	mu     sync.Mutex
	events []breakerEvent
}

type breakerEvent struct {
	at    time.Time
	msg   string
	cause string
}

// The failover's messages at the breaker's transitions.
const (
	probing  = "failover: probing the store"
	opened   = "failover: store unavailable, circuit breaker open"
	reopened = "failover: probe failed, circuit breaker open again"
	closed   = "failover: store is back, circuit breaker closed"
)

func (b *breakerLog) Enabled(context.Context, slog.Level) bool { return true }
func (b *breakerLog) WithAttrs([]slog.Attr) slog.Handler       { return b }
func (b *breakerLog) WithGroup(string) slog.Handler            { return b }
func (b *breakerLog) Handle(_ context.Context, r slog.Record) error {
	e := breakerEvent{at: r.Time, msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "cause" {
			e.cause = a.Value.String()
		}
		return true
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, e)
	return nil
}

func (b *breakerLog) all() []breakerEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.events)
}

// checkRecovery checks the way back against the breaker's state machine,
// with the scheduler's lateness measured, not guessed:
//
//   - after each opening, the next probe goes once CoolDown has passed, as
//     soon as a decision comes (within loadSpacing, plus the lateness then);
//   - once the store is back, a probe fails, and a closed breaker's call
//     fails, only when the machine held it up for at least half the timeout
//     (a margin of two on what is measured): this process's threads and
//     timers and the redis-server waited for a CPU that long
//     (timing.Lateness.Chain), or a PING of a connection of its own through
//     the same proxy (testkit.Pinger) took that long, during the call. A
//     defect of the client (a connection it broke, a reconnection it
//     botched) is not excused: the PINGs are fast. Every other probe closes
//     the breaker.
//
// Together: the store decides again within CoolDown + 2 timeouts +
// loadSpacing of coming back (a probe in flight then may fail), plus
// CoolDown + a timeout for each probe the machine made miss the timeout.
func checkRecovery(t *testing.T, r run) {
	t.Helper()
	events := r.events.all()
	excused := func(from, to time.Time) bool {
		return max(r.probe.Measure(from, to).Chain(), r.path.Slowest(from, to)) >= storeTimeout/2
	}
	why := func(from, to time.Time) string {
		return fmt.Sprintf("the scheduler was late %v; the slowest PING then took %v", r.probe.Measure(from, to), r.path.Slowest(from, to))
	}
	var recovered time.Duration = -1
	for i, e := range events {
		switch e.msg {
		case opened, reopened:
			next := slices.IndexFunc(events[i+1:], func(e breakerEvent) bool { return e.msg == probing })
			due := e.at.Add(coolDown)
			if next < 0 {
				if end := r.Calls[len(r.Calls)-1].Start; end.Sub(due) > loadSpacing+r.probe.Late(due, end)+timing.Slack {
					t.Errorf("no probe after the breaker opened at %v (heal at 0), until the end at %v",
						e.at.Sub(r.HealAt).Round(time.Millisecond), end.Sub(r.HealAt).Round(time.Millisecond))
				}
				continue
			}
			p := events[i+1+next].at
			if late := p.Sub(due); late > loadSpacing+r.probe.Late(due, p)+timing.Slack {
				t.Errorf("the breaker opened at %v (heal at 0) and probed at %v, %v after its CoolDown (the scheduler was late %v then)",
					e.at.Sub(r.HealAt).Round(time.Millisecond), p.Sub(r.HealAt).Round(time.Millisecond), late, r.probe.Measure(due, p))
			}
		case probing:
			if e.at.Before(r.HealAt) || i+1 == len(events) {
				continue
			}
			end := events[i+1]
			if end.msg == closed {
				if recovered < 0 {
					recovered = end.at.Sub(r.HealAt)
				}
				continue
			}
			if !excused(e.at, end.at) {
				t.Errorf("a probe %v after the store came back failed (%s): %s: %s",
					e.at.Sub(r.HealAt).Round(time.Millisecond), end.msg, why(e.at, end.at), end.cause)
			}
		}
	}
	if recovered >= 0 {
		for _, o := range r.Calls {
			if o.Result.asked && o.Result.degraded && o.Start.After(r.HealAt.Add(recovered)) && !excused(o.Start, o.Start.Add(o.Took)) {
				t.Errorf("the store failed a decision %v after it came back and the breaker closed (it took %v; %s): %v",
					o.Start.Sub(r.HealAt).Round(time.Millisecond), o.Took, why(o.Start, o.Start.Add(o.Took)), o.Result.cause)
			}
		}
	}
	var excuses []string
	for _, e := range events {
		if e.at.After(r.HealAt) && e.msg != probing {
			excuses = append(excuses, fmt.Sprintf("%v %s", e.at.Sub(r.HealAt).Round(time.Millisecond), strings.TrimPrefix(e.msg, "failover: ")))
		}
	}
	t.Logf("after the heal: %s", strings.Join(excuses, "; "))
}
