package failover

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
	"go.uber.org/goleak"
)

// The redis-server helper keeps one goroutine locked to the thread that
// starts servers (see internal/testkit); everything else must be gone.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/floodgate-io/floodgate/internal/testkit.spawner"))
}

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	threshold = 3
	coolDown  = 250 * time.Millisecond
)

// newLimiter wraps store under a manual clock and a discarded log; cfg's
// zero fields take the test defaults.
func newLimiter(t testing.TB, store floodgate.Limiter, cfg Config) (*core, *floodgate.ManualClock) {
	t.Helper()
	clock := floodgate.NewManualClock(epoch)
	cfg.Clock = clock
	cfg.FailureThreshold = orDefault(cfg.FailureThreshold, threshold)
	cfg.CoolDown = orDefault(cfg.CoolDown, coolDown)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	lim, err := New(store, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(lim.Close)
	return coreOf(lim), clock
}

// decide is Decide with a background context, failing the test on error.
func decide(t testing.TB, l *core, key string, limit floodgate.Limit, cost int64) result {
	t.Helper()
	r, err := l.decide(context.Background(), key, limit, cost)
	if err != nil {
		t.Fatalf("Decide(%q, %v, %d): %v", key, limit, cost, err)
	}
	return r
}

// openBreaker makes the store fail until the breaker opens.
func openBreaker(t testing.TB, l *core, f *fakeStore) {
	t.Helper()
	f.set(failUnavailable)
	for range l.cfg.FailureThreshold {
		decide(t, l, "open", floodgate.PerSecond(1), 1)
	}
	if got := l.State(); got != Open {
		t.Fatalf("after %d failures the breaker is %v, want open", l.cfg.FailureThreshold, got)
	}
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Mode
		wantErr bool
	}{
		{"fail_open", FailOpen, false},
		{"fail_closed", FailClosed, false},
		{"fail_local", FailLocal, false},
		{"", "", true},
		{"fail-open", "", true},
		{"FAIL_OPEN", "", true},
	} {
		got, err := ParseMode(tc.in)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("ParseMode(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err == nil {
			continue
		}
		msg := err.Error()
		for _, part := range []string{`"` + tc.in + `"`, "fail_open", "fail_closed", "fail_local"} {
			if !strings.Contains(msg, part) {
				t.Errorf("ParseMode(%q) error %q does not name %s", tc.in, msg, part)
			}
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("ParseMode(%q) error does not wrap ErrInvalidConfig", tc.in)
		}
	}
}

func TestNewValidates(t *testing.T) {
	store := newFake(succeed)
	for _, tc := range []struct {
		name  string
		store floodgate.Limiter
		cfg   Config
	}{
		{"nil store", nil, Config{Mode: FailOpen}},
		{"no mode", store, Config{}},
		{"unknown mode", store, Config{Mode: "fail_maybe"}},
		{"negative timeout", store, Config{Mode: FailOpen, Timeout: -time.Second}},
		{"negative cool-down", store, Config{Mode: FailOpen, CoolDown: -time.Second}},
		{"negative nodes", store, Config{Mode: FailLocal, Nodes: -1}},
		{"negative threshold", store, Config{Mode: FailOpen, FailureThreshold: -1}},
		{"negative max keys", store, Config{Mode: FailOpen, MaxLocalKeys: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.store, tc.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New = %v, want an error wrapping ErrInvalidConfig", err)
			}
		})
	}
	t.Run("defaults", func(t *testing.T) {
		l, err := New(store, Config{Mode: FailLocal})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		want := Config{Mode: FailLocal, Timeout: DefaultTimeout, Nodes: 1,
			FailureThreshold: DefaultFailureThreshold, CoolDown: DefaultCoolDown}
		if got := coreOf(l).cfg; !reflect.DeepEqual(got, want) {
			t.Fatalf("config = %+v, want %+v", got, want)
		}
	})
}

func TestPassThrough(t *testing.T) {
	for _, mode := range Modes() {
		t.Run(string(mode), func(t *testing.T) {
			l, _ := newLimiter(t, newFake(succeed), Config{Mode: mode})
			r := decide(t, l, "k", floodgate.PerSecond(1), 1)
			if r != (result{Decision: answered}) {
				t.Fatalf("Decide = %+v, want the store's answer %+v, not degraded", r, answered)
			}
		})
	}
}

// TestPolicyWhenStoreFails checks each policy's first degraded decision on
// a fresh key, for each way a store can fail.
func TestPolicyWhenStoreFails(t *testing.T) {
	limit := floodgate.PerSecond(10).WithBurst(20)
	failures := []behaviour{failUnavailable, failNet, hangCtx}
	for _, tc := range []struct {
		mode Mode
		want floodgate.Decision
	}{
		{FailOpen, floodgate.Decision{Allowed: true, Limit: 20, Remaining: 19, ResetAfter: 100 * time.Millisecond}},
		{FailClosed, floodgate.Decision{Limit: 20, RetryAfter: coolDown}},
		{FailLocal, floodgate.Decision{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: 200 * time.Millisecond}},
	} {
		for _, b := range failures {
			t.Run(string(tc.mode)+"/"+b.String(), func(t *testing.T) {
				l, _ := newLimiter(t, newFake(b), Config{Mode: tc.mode, Nodes: 2, Timeout: 5 * time.Millisecond})
				r := decide(t, l, "k", limit, 1)
				if r.Decision != tc.want {
					t.Errorf("decision = %+v, want %+v", r.Decision, tc.want)
				}
				if !r.degraded() || !errors.Is(r.cause, floodgate.ErrStoreUnavailable) {
					t.Errorf("Degraded = %v, Cause = %v; want degraded with a cause wrapping ErrStoreUnavailable", r.degraded(), r.cause)
				}
				if b == hangCtx && !errors.Is(r.cause, context.DeadlineExceeded) {
					t.Errorf("Cause = %v, want it to wrap context.DeadlineExceeded", r.cause)
				}
				d, err := l.AllowN(context.Background(), "other", limit, 1)
				if err != nil || d != tc.want {
					t.Errorf("AllowN = %+v, %v; want %+v, nil", d, err, tc.want)
				}
			})
		}
	}
}

func (b behaviour) String() string {
	return [...]string{"succeed", "unavailable", "net_error", "hang", "hang_ignoring_ctx", "block", "bad_limit", "panic", "at_deadline"}[b]
}

func TestFailOpenAllowsAndCounts(t *testing.T) {
	l, _ := newLimiter(t, newFake(failUnavailable), Config{Mode: FailOpen})
	limit := floodgate.PerSecond(3)
	for i, want := range []int64{2, 1, 0, 0, 0} {
		r := decide(t, l, "k", limit, 1)
		if !r.Allowed || r.Remaining != want || r.Limit != 3 || r.RetryAfter != 0 {
			t.Errorf("decision %d = %+v, want allowed with Limit 3, Remaining %d, no RetryAfter", i, r.Decision, want)
		}
	}
}

func TestFailLocalEnforcesNodeShare(t *testing.T) {
	l, clock := newLimiter(t, newFake(failUnavailable), Config{Mode: FailLocal, Nodes: 3})
	limit := floodgate.PerSecond(10).WithBurst(20) // share: 4/s, burst 7
	for i := range 7 {
		if r := decide(t, l, "k", limit, 1); !r.Allowed || r.Limit != 7 {
			t.Fatalf("decision %d = %+v, want allowed within the share's burst of 7", i, r.Decision)
		}
	}
	r := decide(t, l, "k", limit, 1)
	if r.Allowed || r.RetryAfter != 250*time.Millisecond {
		t.Fatalf("8th decision = %+v, want denied until a 4/s share refills (250ms)", r.Decision)
	}
	clock.Advance(250 * time.Millisecond)
	if r := decide(t, l, "k", limit, 1); !r.Allowed {
		t.Fatalf("after 250ms = %+v, want allowed", r.Decision)
	}
}

func TestNodeShare(t *testing.T) {
	for _, tc := range []struct {
		name        string
		rate, burst int64
		nodes       int
		wantRate    int64
		wantBurst   int64
	}{
		{"one node", 10, 20, 1, 10, 20},
		{"divides evenly", 10, 20, 2, 5, 10},
		{"rounds up", 10, 20, 3, 4, 7},
		{"at least one", 2, 3, 10, 1, 1},
		{"burst 0 stays the rate's", 10, 0, 3, 4, 0},
		{"huge", 1<<62 - 1, 1<<62 - 1, 7, (1<<62-1)/7 + 1, (1<<62-1)/7 + 1},
		{"invalid rate left to reject", 0, -1, 4, 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nodeShare(floodgate.PerSecond(tc.rate).WithBurst(tc.burst), tc.nodes)
			if got.Rate != tc.wantRate || got.Burst != tc.wantBurst || got.Period != time.Second {
				t.Fatalf("nodeShare(%d/s burst %d, %d) = %v, want %d/s burst %d",
					tc.rate, tc.burst, tc.nodes, got, tc.wantRate, tc.wantBurst)
			}
		})
	}
	for _, a := range floodgate.Algorithms() { // every algorithm's share is still valid
		share := nodeShare(floodgate.Limit{Algorithm: a, Rate: 100, Period: time.Minute, Burst: 150}, 7)
		if err := share.Validate(); err != nil {
			t.Errorf("%s share %v: %v", a, share, err)
		}
	}
}

func TestFailClosedRetryAfter(t *testing.T) {
	l, clock := newLimiter(t, newFake(failUnavailable), Config{Mode: FailClosed, FailureThreshold: 2})
	limit := floodgate.PerSecond(5)
	step := func(advance, want time.Duration) {
		t.Helper()
		clock.Advance(advance)
		r := decide(t, l, "k", limit, 1)
		if r.Allowed || r.RetryAfter != want || r.Limit != 5 || r.Remaining != 0 {
			t.Fatalf("decision = %+v, want denied, Limit 5, RetryAfter %s", r.Decision, want)
		}
	}
	step(0, coolDown)                                // closed, one failure: no probe scheduled
	step(0, coolDown)                                // this failure opens the breaker: the probe is a cool-down away
	step(100*time.Millisecond, 150*time.Millisecond) // skipped: the probe comes closer
	step(150*time.Millisecond, coolDown)             // the probe fails: another cool-down
}

func TestBadInputPassesThrough(t *testing.T) {
	storeErrs := []error{errBadLimit, errors.New("redis: WRONGTYPE Operation against a key holding the wrong kind of value")}
	for _, want := range storeErrs {
		t.Run(want.Error(), func(t *testing.T) {
			f := newFake(succeed)
			l, _ := newLimiter(t, errStore{f, want}, Config{Mode: FailClosed})
			for range 3 * threshold {
				if _, err := l.decide(context.Background(), "k", floodgate.PerSecond(1), 1); err != want {
					t.Fatalf("Decide error = %v, want the store's error unchanged", err)
				}
			}
			if l.State() != Closed || l.Stats() != (Stats{}) {
				t.Fatalf("state %v, stats %+v; want closed and nothing counted", l.State(), l.Stats())
			}
		})
	}
	// While the policy decides, it rejects bad input as the store would.
	for _, mode := range Modes() {
		t.Run("degraded/"+string(mode), func(t *testing.T) {
			f := newFake(succeed)
			l, _ := newLimiter(t, f, Config{Mode: mode})
			openBreaker(t, l, f)
			for _, tc := range []struct {
				key   string
				limit floodgate.Limit
				cost  int64
				want  error
			}{
				{"", floodgate.PerSecond(1), 1, floodgate.ErrInvalidKey},
				{"k", floodgate.PerSecond(1), -1, floodgate.ErrInvalidCost},
				{"k", floodgate.PerSecond(0), 1, floodgate.ErrInvalidLimit},
			} {
				if _, err := l.decide(context.Background(), tc.key, tc.limit, tc.cost); !errors.Is(err, tc.want) {
					t.Errorf("Decide(%q, %v, %d) error = %v, want %v", tc.key, tc.limit, tc.cost, err, tc.want)
				}
			}
		})
	}
}

// errStore answers every call with err once the fake has counted it.
type errStore struct {
	f   *fakeStore
	err error
}

func (s errStore) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	s.f.AllowN(ctx, key, limit, cost)
	return floodgate.Decision{}, s.err
}

// TestBreaker walks the breaker through its states, one decision a step.
func TestBreaker(t *testing.T) {
	type step struct {
		store     behaviour
		advance   time.Duration
		wantCall  bool // the decision asked the store
		wantState BreakerState
	}
	failures := func(n int) []step {
		s := make([]step, n)
		for i := range s {
			s[i] = step{store: failUnavailable, wantCall: true, wantState: Closed}
		}
		s[n-1].wantState = Open
		return s
	}
	opened := failures(threshold)
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"opens after the threshold", opened},
		{"successes reset the count", append(append(failures(threshold)[:threshold-1],
			step{store: succeed, wantCall: true, wantState: Closed}),
			failures(threshold)...)},
		{"skips the store while open", append(opened,
			step{store: succeed, wantState: Open},
			step{store: succeed, advance: coolDown - time.Microsecond, wantState: Open})},
		{"a good probe closes", append(opened,
			step{store: succeed, advance: coolDown, wantCall: true, wantState: Closed},
			step{store: succeed, wantCall: true, wantState: Closed})},
		{"a failed probe reopens", append(opened,
			step{store: failNet, advance: coolDown, wantCall: true, wantState: Open},
			step{store: succeed, advance: coolDown - time.Microsecond, wantState: Open},
			step{store: succeed, advance: time.Microsecond, wantCall: true, wantState: Closed})},
		{"a probe with bad input hands the probe on", append(opened,
			step{store: badLimit, advance: coolDown, wantCall: true, wantState: Open},
			step{store: succeed, wantCall: true, wantState: Closed})},
		{"a timed-out probe reopens", append(opened,
			step{store: hangCtx, advance: coolDown, wantCall: true, wantState: Open},
			step{store: succeed, wantState: Open})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(succeed)
			// A timeout long enough that a store answering at once never
			// misses it, even on a loaded machine.
			l, clock := newLimiter(t, f, Config{Mode: FailOpen, Timeout: 100 * time.Millisecond})
			for i, s := range tc.steps {
				f.set(s.store)
				clock.Advance(s.advance)
				before := f.calls.Load()
				_, err := l.decide(context.Background(), "k", floodgate.PerSecond(100), 1)
				if err != nil && !errors.Is(err, floodgate.ErrInvalidLimit) {
					t.Fatalf("step %d: %v", i, err)
				}
				if called := f.calls.Load() > before; called != s.wantCall {
					t.Fatalf("step %d: store called = %v, want %v", i, called, s.wantCall)
				}
				if got := l.State(); got != s.wantState {
					t.Fatalf("step %d: state %v, want %v", i, got, s.wantState)
				}
			}
		})
	}
}

func TestHalfOpenLetsOneProbeThrough(t *testing.T) {
	f := newFake(succeed)
	l, clock := newLimiter(t, f, Config{Mode: FailLocal, Timeout: 10 * time.Second})
	openBreaker(t, l, f)
	f.set(block)
	clock.Advance(coolDown)
	calls := f.calls.Load()

	var wg sync.WaitGroup
	results := make(chan result, 100)
	for range 100 {
		wg.Go(func() {
			r, err := l.decide(context.Background(), "k", floodgate.PerSecond(1000), 1)
			if err != nil {
				t.Error(err)
			}
			results <- r
		})
	}
	<-f.entered // the probe is in the store
	for range 99 {
		if r := <-results; !r.degraded() {
			t.Errorf("a decision during the probe asked the store: %+v", r)
		}
	}
	if got := f.calls.Load() - calls; got != 1 || l.State() != HalfOpen {
		t.Errorf("%d store calls in half-open, state %v; want 1 probe, half_open", got, l.State())
	}
	close(f.unblock)
	wg.Wait()
	if r := <-results; r.degraded() || l.State() != Closed {
		t.Fatalf("probe = %+v, state %v; want the store's answer and closed", r, l.State())
	}
}

// TestTimeoutBound checks that a hanging store never holds a decision past
// Timeout, whether or not it heeds its context: beyond it, only as long as
// the scheduler was measured to be late then, plus timing.Slack.
func TestTimeoutBound(t *testing.T) {
	const timeout = 20 * time.Millisecond
	for _, b := range []behaviour{hangCtx, hangIgnoringCtx} {
		t.Run(b.String(), func(t *testing.T) {
			probe := timing.StartProbe(t)
			f := newFake(b)
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			defer close(f.release) // the store's goroutines end when it returns
			l, _ := newLimiter(t, f, Config{Mode: FailOpen, Timeout: timeout, FailureThreshold: 100})
			var wg sync.WaitGroup
			for range 10 {
				wg.Go(func() {
					start := time.Now()
					r, err := l.decide(context.Background(), "k", floodgate.PerSecond(100), 1)
					took := time.Since(start)
					if over := probe.Over(start, took, timeout); over > timing.Slack {
						t.Errorf("decision took %s: %s over the timeout (%s) and the scheduler's lateness then (%s)",
							took, over, timeout, probe.Measure(start, start.Add(took)))
					}
					if err != nil || !r.degraded() || !errors.Is(r.cause, context.DeadlineExceeded) {
						t.Errorf("Decide = %+v, %v; want degraded by the timeout", r, err)
					}
				})
			}
			wg.Wait()
			if s := l.Stats(); s.StoreErrors != 10 {
				t.Errorf("StoreErrors = %d, want 10 timeouts", s.StoreErrors)
			}
		})
	}
}

func TestCallerContext(t *testing.T) {
	probe := timing.StartProbe(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	const gaveUp = 5 * time.Millisecond
	for _, tc := range []struct {
		name    string
		store   behaviour
		aware   bool // the store is DeadlineAware: called inline
		open    bool // the breaker is open
		timeout time.Duration
		ctx     func() (context.Context, context.CancelFunc)
		bound   time.Duration // when the caller has given up
		want    error
	}{
		{"cancelled before", succeed, false, false, time.Second,
			func() (context.Context, context.CancelFunc) { return cancelled, func() {} }, 0, context.Canceled},
		{"cancelled before, breaker open", succeed, false, true, time.Second,
			func() (context.Context, context.CancelFunc) { return cancelled, func() {} }, 0, context.Canceled},
		{"cancelled while the store hangs", hangCtx, false, false, time.Second,
			func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(gaveUp, cancel)
				return ctx, cancel
			}, gaveUp, context.Canceled},
		{"caller's deadline before the timeout", hangIgnoringCtx, false, false, time.Second,
			func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), gaveUp)
			}, gaveUp, context.DeadlineExceeded},
		{"caller's deadline before the timeout, deadline-aware store", hangCtx, true, false, time.Second,
			func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), gaveUp)
			}, gaveUp, context.DeadlineExceeded},
		// The store's timer for the caller's deadline may fire before the
		// context's own: the timeout is still the caller's.
		{"caller's deadline, store returns at it first", atDeadline, true, false, time.Second,
			func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), gaveUp)
			}, gaveUp, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(succeed)
			defer close(f.release)
			var store floodgate.Limiter = f
			if tc.aware {
				store = deadlineAware{f, nil}
			}
			l, _ := newLimiter(t, store, Config{Mode: FailOpen, Timeout: tc.timeout})
			if tc.open {
				openBreaker(t, l, f)
			}
			f.set(tc.store)
			before := l.Stats()
			ctx, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			r, err := l.decide(ctx, "k", floodgate.PerSecond(1), 1)
			if !errors.Is(err, tc.want) || r != (result{}) {
				t.Fatalf("Decide = %+v, %v; want no decision and %v", r, err, tc.want)
			}
			if took := time.Since(start); probe.Over(start, took, tc.bound) > timing.Slack {
				t.Errorf("took %s; the caller gave up after %s (the scheduler was late %s)", took, tc.bound, probe.Measure(start, start.Add(took)))
			}
			if l.Stats() != before {
				t.Errorf("stats moved from %+v to %+v: the caller's giving up is not the store's failure", before, l.Stats())
			}
		})
	}
}

func TestStorePanicReachesCaller(t *testing.T) {
	l, _ := newLimiter(t, newFake(panics), Config{Mode: FailOpen})
	defer func() {
		p, ok := recover().(*StorePanic)
		if !ok || p.Value != "store bug" || len(p.Stack) == 0 {
			t.Fatalf("recovered %v, want a *StorePanic carrying the store's panic", p)
		}
	}()
	l.decide(context.Background(), "k", floodgate.PerSecond(1), 1)
	t.Fatal("Decide returned; want the store's panic")
}

func TestStats(t *testing.T) {
	f := newFake(succeed)
	l, clock := newLimiter(t, f, Config{Mode: FailLocal, FailureThreshold: 2})
	limit := floodgate.PerSecond(100)
	run := func(b behaviour, advance time.Duration, n int) {
		f.set(b)
		clock.Advance(advance)
		for range n {
			l.decide(context.Background(), "k", limit, 1)
		}
	}
	run(succeed, 0, 1)         // 1 decision
	run(failUnavailable, 0, 2) // 2 degraded, 2 store errors, opens
	run(failUnavailable, 0, 3) // 3 degraded by the open breaker
	run(failNet, coolDown, 1)  // failed probe: degraded, store error, opens again
	run(succeed, coolDown, 1)  // good probe
	run(badLimit, 0, 1)        // an error, not a decision
	want := Stats{Decisions: 8, Degraded: 6, StoreErrors: 3, BreakerOpens: 2}
	if got := l.Stats(); got != want {
		t.Fatalf("Stats = %+v, want %+v", got, want)
	}
}

func TestLogsStateChangesOnly(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	f := newFake(failUnavailable)
	l, clock := newLimiter(t, f, Config{Mode: FailOpen, Logger: log})
	for range 10 * threshold {
		decide(t, l, "k", floodgate.PerSecond(1), 1)
	}
	for range 3 { // failed probes
		clock.Advance(coolDown)
		decide(t, l, "k", floodgate.PerSecond(1), 1)
	}
	f.set(succeed)
	clock.Advance(coolDown)
	decide(t, l, "k", floodgate.PerSecond(1), 1)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "circuit breaker open") ||
		!strings.Contains(lines[1], "level=INFO") || !strings.Contains(lines[1], "closed") {
		t.Fatalf("log:\n%s\nwant one warning when the breaker opens and one note when it closes", buf.String())
	}
}

func TestRecoveryForgetsLocalCounts(t *testing.T) {
	f := newFake(succeed)
	l, clock := newLimiter(t, f, Config{Mode: FailLocal})
	limit := floodgate.PerHour(2)
	spend := func() {
		t.Helper()
		for i, want := range []bool{true, true, false} {
			if r := decide(t, l, "k", limit, 1); r.Allowed != want || !r.degraded() {
				t.Fatalf("outage decision %d = %+v, want degraded, allowed %v", i, r, want)
			}
		}
	}
	openBreaker(t, l, f)
	spend()
	f.set(succeed)
	clock.Advance(coolDown)
	decide(t, l, "k", limit, 1) // the probe closes the breaker
	openBreaker(t, l, f)
	spend() // from a full share again, not from the last outage's count
}

func TestAllowAll(t *testing.T) {
	reqs := []floodgate.Request{
		{Key: "tenant", Limit: floodgate.PerSecond(10).WithBurst(20), Cost: 1},
		{Key: "user", Limit: floodgate.PerSecond(4), Cost: 3},
	}
	for _, tc := range []struct {
		mode Mode
		want []floodgate.Decision
	}{
		{FailOpen, []floodgate.Decision{
			{Allowed: true, Limit: 20, Remaining: 19, ResetAfter: 100 * time.Millisecond},
			{Allowed: true, Limit: 4, Remaining: 1, ResetAfter: 750 * time.Millisecond}}},
		{FailClosed, []floodgate.Decision{{Limit: 20, RetryAfter: coolDown}, {Limit: 4, RetryAfter: coolDown}}},
		{FailLocal, []floodgate.Decision{ // shares 5/s burst 10, and 2/s: the user's cost of 3 cannot pass
			{Limit: 10, Remaining: 10},
			{Limit: 2, Remaining: 2, RetryAfter: -time.Microsecond}}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			f := newFake(succeed)
			l, _ := newLimiter(t, f, Config{Mode: tc.mode, Nodes: 2})
			got, err := l.decideAll(context.Background(), reqs)
			if err != nil || got.degraded() || len(got.decisions) != 2 || got.decisions[0] != answered {
				t.Fatalf("healthy store: %+v, %v; want its answers", got, err)
			}
			f.set(failUnavailable)
			got, err = l.decideAll(context.Background(), reqs)
			if err != nil || !got.degraded() || !errors.Is(got.cause, floodgate.ErrStoreUnavailable) {
				t.Fatalf("failing store: %+v, %v; want degraded", got, err)
			}
			for i := range tc.want {
				if got.decisions[i] != tc.want[i] {
					t.Errorf("decision %d = %+v, want %+v", i, got.decisions[i], tc.want[i])
				}
			}
			bad := []floodgate.Request{reqs[0], {Key: "", Limit: reqs[1].Limit, Cost: 1}}
			if _, err := l.decideAll(context.Background(), bad); !errors.Is(err, floodgate.ErrInvalidKey) {
				t.Errorf("degraded batch with an empty key: %v, want ErrInvalidKey", err)
			}
			if s := l.Stats(); s.Decisions != 4 || s.Degraded != 2 {
				t.Errorf("stats %+v, want 4 decisions of which 2 degraded", s)
			}
		})
	}
}

// A Limiter has exactly its store's capabilities: a caller that finds
// AllowAll or Adjust by a type assertion can use it, and one whose store
// lacks them does not find them (rather than meeting ErrUnsupported).
func TestCapabilitiesFollowTheStore(t *testing.T) {
	for _, tc := range []struct {
		name          string
		store         floodgate.Limiter
		batch, adjust bool
	}{
		{"one request at a time", singleStore{newFake(succeed)}, false, false},
		{"batches", newFake(succeed), true, false},
		{"adjusts", singleAdjusting{newAdjustingStore(succeed)}, false, true},
		{"batches and adjusts", newAdjustingStore(succeed), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New(tc.store, Config{Mode: FailOpen})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			_, batch := l.(floodgate.BatchLimiter)
			_, adjust := l.(floodgate.Adjuster)
			if batch != tc.batch || adjust != tc.adjust {
				t.Fatalf("BatchLimiter %v, Adjuster %v; want %v, %v", batch, adjust, tc.batch, tc.adjust)
			}
		})
	}
}

// TestConcurrentFlappingStore runs decisions from many goroutines while the
// store flaps and the clock moves, for the race detector and the breaker's
// invariants.
func TestConcurrentFlappingStore(t *testing.T) {
	for _, mode := range Modes() {
		t.Run(string(mode), func(t *testing.T) {
			f := newFake(succeed)
			l, clock := newLimiter(t, f, Config{Mode: mode, Nodes: 3, Timeout: 2 * time.Millisecond})
			const workers, each = 16, 300
			stop := make(chan struct{})
			flapped := make(chan struct{})
			go func() {
				defer close(flapped)
				modes := []behaviour{succeed, failUnavailable, failNet, hangCtx, succeed}
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Microsecond):
					}
					f.set(modes[i%len(modes)])
					clock.Advance(coolDown / 2)
					_ = l.State()
				}
			}()
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						key := []string{"a", "b", "c"}[(w+i)%3]
						var err error
						if i%10 == 0 {
							_, err = l.decideAll(context.Background(), []floodgate.Request{{Key: key, Limit: floodgate.PerSecond(50), Cost: 1}})
						} else {
							_, err = l.AllowN(context.Background(), key, floodgate.PerSecond(50), 1)
						}
						if err != nil {
							t.Errorf("decision: %v", err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(stop)
			<-flapped
			s := l.Stats()
			if s.Decisions != workers*each || s.Degraded > s.Decisions || s.StoreErrors > uint64(f.calls.Load()) {
				t.Fatalf("stats %+v after %d decisions and %d store calls", s, workers*each, f.calls.Load())
			}
			// With a 2ms timeout a probe can miss it on a loaded machine, so
			// recovery gets a few cool-downs.
			f.set(succeed)
			for i := 0; l.State() != Closed; i++ {
				if i == 20 {
					t.Fatalf("state %v after the store came back, want closed", l.State())
				}
				clock.Advance(coolDown)
				decide(t, l, "k", floodgate.PerSecond(1), 1)
			}
		})
	}
}

func TestBreakerStateString(t *testing.T) {
	for s, want := range map[BreakerState]string{Closed: "closed", Open: "open", HalfOpen: "half_open", 7: "unknown"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), want)
		}
	}
}

func TestClose(t *testing.T) {
	for _, mode := range Modes() {
		t.Run(string(mode), func(t *testing.T) {
			// Goroutines that other tests left (the redis-server spawner)
			// are not this Limiter's.
			others := goleak.IgnoreCurrent()
			f := newFake(failUnavailable)
			l, err := New(f, Config{Mode: mode, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			l.AllowN(context.Background(), "k", floodgate.PerSecond(1), 1)
			l.Close()
			goleak.VerifyNone(t, others)
		})
	}
}

// A store that honours deadlines is called on the caller's goroutine, and
// the timeout still holds.
func TestDeadlineAwareStoreRunsInline(t *testing.T) {
	const timeout = 20 * time.Millisecond
	f := newFake(hangCtx)
	defer close(f.release)
	var calledOn atomic.Int64
	l, _ := newLimiter(t, deadlineAware{f, &calledOn}, Config{Mode: FailClosed, Timeout: timeout, FailureThreshold: 100})
	probe := timing.StartProbe(t)
	start := time.Now()
	r, err := l.decide(context.Background(), "k", floodgate.PerSecond(100), 1)
	if took := time.Since(start); probe.Over(start, took, timeout) > timing.Slack {
		t.Errorf("decision took %s with a %s timeout (the scheduler was late %s)", took, timeout, probe.Measure(start, start.Add(took)))
	}
	if err != nil || !r.degraded() || r.Allowed || !errors.Is(r.cause, context.DeadlineExceeded) {
		t.Fatalf("Decide = %+v, %v; want denied by fail_closed after the timeout", r, err)
	}
	if on, caller := calledOn.Load(), goroutineID(); on != caller {
		t.Errorf("the store was called on goroutine %d, the caller is %d: the call should run inline", on, caller)
	}
	ok := newFake(succeed)
	l2, _ := newLimiter(t, deadlineAware{ok, nil}, Config{Mode: FailClosed})
	if r, err := l2.decide(context.Background(), "k", floodgate.PerSecond(100), 1); err != nil || r.degraded() || !r.Allowed {
		t.Fatalf("healthy inline store: %+v, %v", r, err)
	}
}
