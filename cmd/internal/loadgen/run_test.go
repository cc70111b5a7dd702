package loadgen

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

func TestMain(m *testing.M) {
	// Every run must close its connections and stop its workers.
	goleak.VerifyTestMain(m)
}

// patient gives a run that stops after Requests calls a Duration and a
// per-call Timeout that only a hang reaches, so that a busy machine cannot
// cut it short or turn a slow call into an error.
func patient(c Config) Config {
	c.Duration, c.Timeout = timing.Patience, timing.Patience
	return c
}

// checkSums asserts the invariants every report keeps.
func checkSums(t *testing.T, r Report) {
	t.Helper()
	if r.Calls != r.Allowed+r.Denied+r.Errors {
		t.Errorf("calls %d != allowed %d + denied %d + errors %d", r.Calls, r.Allowed, r.Denied, r.Errors)
	}
	if r.Allowed+r.Denied > 0 {
		if !(0 < r.Min && r.Min <= r.P50 && r.P50 <= r.P90 && r.P90 <= r.P99 && r.P99 <= r.Max && r.Min <= r.Mean && r.Mean <= r.Max) {
			t.Errorf("latencies out of order: min %v mean %v p50 %v p90 %v p99 %v max %v", r.Min, r.Mean, r.P50, r.P90, r.P99, r.Max)
		}
	}
	if (r.Errors == 0) != (r.FirstError == "") {
		t.Errorf("errors %d but first error %q", r.Errors, r.FirstError)
	}
}

func TestGRPCCountsEveryAnswer(t *testing.T) {
	srv, addr := startGRPC(t)
	r, err := Run(t.Context(), patient(Config{Target: TargetGRPC, Addr: addr, Concurrency: 8, Requests: 300}))
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.Calls != 300 || r.Allowed != 200 || r.Denied != 100 || r.Errors != 0 {
		t.Fatalf("calls/allowed/denied/errors = %d/%d/%d/%d, want 300/200/100/0 (first error %q)",
			r.Calls, r.Allowed, r.Denied, r.Errors, r.FirstError)
	}
	if got := srv.calls.Load(); got != 300 {
		t.Errorf("server answered %d calls, want 300", got)
	}
	if r.Stopped != StopRequests || r.Target != TargetGRPC || r.Addr != addr || r.Concurrency != 8 {
		t.Errorf("report header %+v", r)
	}
}

// Worker i calls over connection i mod Conns. The server holds the first
// six calls until all six have arrived, so each of the six workers has
// made one, whatever order the scheduler ran them in.
func TestGRPCSpreadsOverConns(t *testing.T) {
	srv, addr := startGRPC(t)
	srv.gather(6)
	r, err := Run(t.Context(), patient(Config{Target: TargetGRPC, Addr: addr, Concurrency: 6, Conns: 3, Requests: 60}))
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.Errors != 0 {
		t.Fatalf("%d errors, first %q", r.Errors, r.FirstError)
	}
	if got := srv.peerCount(); got != 3 {
		t.Errorf("server saw %d client connections, want 3", got)
	}
}

func TestGRPCHonoursRequestFields(t *testing.T) {
	srv, addr := startGRPC(t)
	srv.domain, srv.key, srv.keys, srv.hits = "edge", "client_id", 5, 7
	r, err := Run(t.Context(), patient(Config{Target: TargetGRPC, Addr: addr, Concurrency: 2, Requests: 30,
		Domain: "edge", DescriptorKey: "client_id", Keys: 5, Cost: 7}))
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.Errors != 0 || r.Calls != 30 {
		t.Fatalf("calls %d errors %d, first %q", r.Calls, r.Errors, r.FirstError)
	}
}

// Workers keep their connections alive: the server sees one per worker,
// except that net/http drops a connection when it has not seen its
// request's write finish 50ms after the response came
// (maxWriteWaitBeforeConnReuse), so a scheduler that late can cost each
// worker a connection, once per 50ms of lateness the probe measured.
func TestHTTPPolicyCountsAndKeepsAlive(t *testing.T) {
	srv := &allowServer{}
	addr := startHTTP(t, srv)
	const conc = 8
	probe := timing.StartProbe(t)
	start := time.Now()
	r, err := Run(t.Context(), patient(Config{Target: TargetHTTP, Addr: addr, Concurrency: conc, Requests: 201}))
	if err != nil {
		t.Fatal(err)
	}
	late := probe.Late(start, time.Now())
	checkSums(t, r)
	if r.Calls != 201 || r.Allowed != 100 || r.Denied != 100 || r.Errors != 1 {
		t.Fatalf("calls/allowed/denied/errors = %d/%d/%d/%d, want 201/100/100/1 (first error %q)",
			r.Calls, r.Allowed, r.Denied, r.Errors, r.FirstError)
	}
	if !strings.Contains(r.FirstError, "500") || !strings.Contains(r.FirstError, "store unavailable") {
		t.Errorf("first error %q does not carry the status and body", r.FirstError)
	}
	if got, allowed := srv.newConns.Load(), int64(conc*(1+late/(50*time.Millisecond))); got > allowed {
		t.Errorf("%d connections for %d workers, more than the %d a scheduler %v late allows: keep-alive is not working; %v",
			got, conc, allowed, late, probe)
	}
}

func TestHTTPExplicitLimit(t *testing.T) {
	lim, err := ParseLimit("token_bucket:1000/1s:burst=1000")
	if err != nil {
		t.Fatal(err)
	}
	srv := &allowServer{limit: &lim, cost: 2}
	addr := startHTTP(t, srv)
	// A base URL with a trailing slash must still reach /v1/allow.
	r, err := Run(t.Context(), patient(Config{Target: TargetHTTP, Addr: "http://" + addr + "/", Concurrency: 3,
		Requests: 21, Limit: lim.String(), Cost: 2}))
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.Calls != 21 || r.Allowed != 10 || r.Denied != 10 || r.Errors != 1 {
		t.Fatalf("calls/allowed/denied/errors = %d/%d/%d/%d, want 21/10/10/1 (first error %q)",
			r.Calls, r.Allowed, r.Denied, r.Errors, r.FirstError)
	}
}

// A call that outlasts Timeout is an error. The server answers only when
// its client leaves, so every call ends by the client's timeout; a run that
// ignored Timeout would wait for ctx (timing.Patience) and count nothing.
func TestHTTPTimeoutIsAnError(t *testing.T) {
	srv := &allowServer{delay: time.Hour}
	addr := startHTTP(t, srv)
	ctx, cancel := context.WithTimeout(t.Context(), timing.Patience)
	defer cancel()
	r, err := Run(ctx, Config{Target: TargetHTTP, Addr: addr, Concurrency: 2, Requests: 4, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.Errors != 4 || !strings.Contains(r.FirstError, "Timeout") {
		t.Errorf("errors %d, first %q; want 4 timeouts", r.Errors, r.FirstError)
	}
}

func TestUnreachableTargetCountsErrors(t *testing.T) {
	for _, target := range []Target{TargetGRPC, TargetHTTP} {
		t.Run(string(target), func(t *testing.T) {
			r, err := Run(t.Context(), Config{Target: target, Addr: closedAddr(t), Concurrency: 2, Requests: 5, Duration: timing.Patience, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			checkSums(t, r)
			if r.Calls != 5 || r.Errors != 5 || r.FirstError == "" {
				t.Errorf("calls %d errors %d first %q; want 5 errors", r.Calls, r.Errors, r.FirstError)
			}
			var buf strings.Builder
			if err := r.WriteText(&buf); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), "first error: ") {
				t.Errorf("text report hides the error:\n%s", buf.String())
			}
		})
	}
}

// A run stops sending at Duration and waits for the calls in flight: it
// lasts at least Duration, and at most Duration and its slowest call but
// for the lateness of the scheduler, which a probe measures.
func TestDurationStopsRun(t *testing.T) {
	_, addr := startGRPC(t)
	const d = 300 * time.Millisecond
	probe := timing.StartProbe(t)
	start := time.Now()
	r, err := Run(t.Context(), Config{Target: TargetGRPC, Addr: addr, Concurrency: 4, Duration: d, Timeout: timing.Patience})
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	checkSums(t, r)
	if r.Stopped != StopDuration || r.Calls == 0 || r.Errors != 0 {
		t.Fatalf("stopped %q after %d calls, %d errors (%q)", r.Stopped, r.Calls, r.Errors, r.FirstError)
	}
	if r.Elapsed < d {
		t.Errorf("a run of %v reported %v", d, r.Elapsed)
	}
	if late := probe.Late(start, end); r.Elapsed-d-r.Max-late > timing.Slack {
		t.Errorf("a run of %v lasted %v: beyond it, its slowest call (%v) and the scheduler's lateness (%v) by more than %v; %v",
			d, r.Elapsed, r.Max, late, timing.Slack, probe)
	}
}

func TestRequestsStopsRunBeforeDuration(t *testing.T) {
	_, addr := startGRPC(t)
	r, err := Run(t.Context(), Config{Target: TargetGRPC, Addr: addr, Concurrency: 4, Requests: 50, Duration: timing.Patience, Timeout: timing.Patience})
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.Calls != 50 || r.Stopped != StopRequests || r.Elapsed >= timing.Patience {
		t.Fatalf("calls %d stopped %q after %v; want 50, %q, before the Duration", r.Calls, r.Stopped, r.Elapsed, StopRequests)
	}
}

// An open loop sends call i at i/Rate into the run, never sooner: the k-th
// call the server sees arrives no sooner than k/Rate after the run began,
// and no more than Rate·Duration calls are sent. It falls short of them
// only by the calls due while the scheduler held the process back, or while
// a worker was in a call, at the end of the run: at most Rate·(lateness +
// the slowest call + timing.Slack) + 1.
func TestOpenLoopKeepsRate(t *testing.T) {
	srv, addr := startGRPC(t)
	const rate, d = 200.0, time.Second
	const interval = time.Duration(float64(time.Second) / rate)
	probe := timing.StartProbe(t)
	start := time.Now()
	// Enough workers that a stalled call or two cannot hold back the schedule.
	r, err := Run(t.Context(), Config{Target: TargetGRPC, Addr: addr, Concurrency: 16, Rate: rate, Duration: d, Timeout: timing.Patience})
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	checkSums(t, r)
	if r.Stopped != StopDuration || r.Errors != 0 {
		t.Errorf("stopped %q with %d errors (%q)", r.Stopped, r.Errors, r.FirstError)
	}
	want := int64(rate * d.Seconds())
	if r.Calls > want {
		t.Errorf("%d calls in %v at %v/s: ahead of the schedule's %d", r.Calls, d, rate, want)
	}
	late := probe.Late(start, end)
	if short, allowed := want-r.Calls, int64(rate*(late+r.Max+timing.Slack).Seconds())+1; short > allowed {
		t.Errorf("%d calls in %v at %v/s: %d short of %d, more than the %d due while the scheduler was late (%v) or a call was slow (%v); %v",
			r.Calls, d, rate, short, want, allowed, late, r.Max, probe)
	}
	times := srv.arrivals()
	slices.SortFunc(times, time.Time.Compare)
	for k, at := range times {
		if due := start.Add(time.Duration(k) * interval); at.Before(due) {
			t.Fatalf("call %d arrived %v into the run, before its time %v: the calls were not spread at %v/s",
				k, at.Sub(start), due.Sub(start), rate)
		}
	}
}

func TestCancelStopsRun(t *testing.T) {
	srv, addr := startGRPC(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		// Cancel mid-run, once calls flow, whatever the machine's speed.
		for srv.calls.Load() < 50 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	r, err := Run(ctx, Config{Target: TargetGRPC, Addr: addr, Concurrency: 4, Duration: timing.Patience, Timeout: timing.Patience})
	if err != nil {
		t.Fatalf("cancelled run returned %v, want its report and no error", err)
	}
	checkSums(t, r)
	// Calls the server answered but the client had not received when
	// cancelled are cut short, hence fewer client calls than server calls.
	if served := srv.calls.Load(); r.Stopped != StopCanceled || r.Calls == 0 || r.Calls > served || r.Errors != 0 {
		t.Errorf("stopped %q after %d calls (server: %d) with %d errors (%q); want canceled, cut-short calls not counted",
			r.Stopped, r.Calls, served, r.Errors, r.FirstError)
	}
	if r.Elapsed >= timing.Patience {
		t.Errorf("cancelled run ran its whole Duration, %v", r.Elapsed)
	}
}

func TestContextDeadlineStopsRun(t *testing.T) {
	// A deadline on the caller's context is a cancellation too, although
	// gRPC reports it as DeadlineExceeded, possibly a moment before the
	// context's own timer fires: no error may be counted for it.
	_, addr := startGRPC(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	r, err := Run(ctx, Config{Target: TargetGRPC, Addr: addr, Concurrency: 4, Duration: time.Minute, Timeout: timing.Patience})
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.Stopped != StopCanceled || r.Errors != 0 {
		t.Errorf("stopped %q with %d errors (%q), want canceled with none", r.Stopped, r.Errors, r.FirstError)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	_, err := Run(t.Context(), Config{Target: "udp", Addr: "127.0.0.1:1"})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "Target" {
		t.Fatalf("Run with target udp: %v, want a ConfigError for Target", err)
	}
}
