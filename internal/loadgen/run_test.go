package loadgen

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Every run must close its connections and stop its workers.
	goleak.VerifyTestMain(m)
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
	r, err := Run(t.Context(), Config{Target: TargetGRPC, Addr: addr, Concurrency: 8, Requests: 300})
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

func TestGRPCSpreadsOverConns(t *testing.T) {
	srv, addr := startGRPC(t)
	r, err := Run(t.Context(), Config{Target: TargetGRPC, Addr: addr, Concurrency: 6, Conns: 3, Requests: 60})
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
	r, err := Run(t.Context(), Config{Target: TargetGRPC, Addr: addr, Concurrency: 2, Requests: 30,
		Domain: "edge", DescriptorKey: "client_id", Keys: 5, Cost: 7})
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.Errors != 0 || r.Calls != 30 {
		t.Fatalf("calls %d errors %d, first %q", r.Calls, r.Errors, r.FirstError)
	}
}

func TestHTTPPolicyCountsAndKeepsAlive(t *testing.T) {
	srv := &allowServer{}
	addr := startHTTP(t, srv)
	const conc = 8
	r, err := Run(t.Context(), Config{Target: TargetHTTP, Addr: addr, Concurrency: conc, Requests: 201})
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.Calls != 201 || r.Allowed != 100 || r.Denied != 100 || r.Errors != 1 {
		t.Fatalf("calls/allowed/denied/errors = %d/%d/%d/%d, want 201/100/100/1 (first error %q)",
			r.Calls, r.Allowed, r.Denied, r.Errors, r.FirstError)
	}
	if !strings.Contains(r.FirstError, "500") || !strings.Contains(r.FirstError, "store unavailable") {
		t.Errorf("first error %q does not carry the status and body", r.FirstError)
	}
	if got := srv.newConns.Load(); got > conc {
		t.Errorf("%d connections for %d workers: keep-alive is not working", got, conc)
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
	r, err := Run(t.Context(), Config{Target: TargetHTTP, Addr: "http://" + addr + "/", Concurrency: 3,
		Requests: 21, Limit: lim.String(), Cost: 2})
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.Calls != 21 || r.Allowed != 10 || r.Denied != 10 || r.Errors != 1 {
		t.Fatalf("calls/allowed/denied/errors = %d/%d/%d/%d, want 21/10/10/1 (first error %q)",
			r.Calls, r.Allowed, r.Denied, r.Errors, r.FirstError)
	}
}

func TestHTTPTimeoutIsAnError(t *testing.T) {
	srv := &allowServer{delay: time.Second}
	addr := startHTTP(t, srv)
	start := time.Now()
	r, err := Run(t.Context(), Config{Target: TargetHTTP, Addr: addr, Concurrency: 2, Requests: 4, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.Errors != 4 || !strings.Contains(r.FirstError, "Timeout") {
		t.Errorf("errors %d, first %q; want 4 timeouts", r.Errors, r.FirstError)
	}
	if el := time.Since(start); el > 800*time.Millisecond {
		t.Errorf("4 calls timing out at 50ms took %v", el)
	}
}

func TestUnreachableTargetCountsErrors(t *testing.T) {
	for _, target := range []Target{TargetGRPC, TargetHTTP} {
		t.Run(string(target), func(t *testing.T) {
			r, err := Run(t.Context(), Config{Target: target, Addr: closedAddr(t), Concurrency: 2, Requests: 5, Timeout: time.Second})
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

func TestDurationStopsRun(t *testing.T) {
	_, addr := startGRPC(t)
	const d = 300 * time.Millisecond
	start := time.Now()
	r, err := Run(t.Context(), Config{Target: TargetGRPC, Addr: addr, Concurrency: 4, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	checkSums(t, r)
	if r.Stopped != StopDuration || r.Calls == 0 || r.Errors != 0 {
		t.Fatalf("stopped %q after %d calls, %d errors (%q)", r.Stopped, r.Calls, r.Errors, r.FirstError)
	}
	if r.Elapsed < d || el > d+time.Second {
		t.Errorf("run of %v reported %v and took %v", d, r.Elapsed, el)
	}
}

func TestRequestsStopsRunBeforeDuration(t *testing.T) {
	_, addr := startGRPC(t)
	start := time.Now()
	r, err := Run(t.Context(), Config{Target: TargetGRPC, Addr: addr, Concurrency: 4, Requests: 50, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.Calls != 50 || r.Stopped != StopRequests {
		t.Fatalf("calls %d stopped %q; want 50, %q", r.Calls, r.Stopped, StopRequests)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("50 calls took %v", el)
	}
}

func TestOpenLoopKeepsRate(t *testing.T) {
	srv, addr := startGRPC(t)
	const rate, d = 200.0, time.Second
	// Enough workers that a stalled call or two cannot hold back the schedule.
	r, err := Run(t.Context(), Config{Target: TargetGRPC, Addr: addr, Concurrency: 16, Rate: rate, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	// The upper bound is what matters (an open loop never runs ahead of its
	// schedule); the lower one only tolerates a starved machine stalling the
	// process near the end of the run.
	want := rate * d.Seconds()
	if got := float64(r.Calls); got < 0.5*want || got > 1.2*want {
		t.Fatalf("%d calls in %v at %v/s, want %v (-50%%, +20%%); report %+v", r.Calls, d, rate, want, r)
	}
	if r.Stopped != StopDuration || r.Errors != 0 {
		t.Errorf("stopped %q with %d errors (%q)", r.Stopped, r.Errors, r.FirstError)
	}
	// The calls must be spread over the run, not sent in a burst: the first
	// half of the run should have seen about half of them.
	times := srv.arrivals()
	start := times[0]
	var firstHalf int
	for _, at := range times {
		if at.Sub(start) < d/2 {
			firstHalf++
		}
	}
	if f, n := float64(firstHalf), float64(len(times)); f < 0.25*n || f > 0.75*n {
		t.Errorf("%d of %d calls arrived in the first half of the run, want about half", firstHalf, len(times))
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
	start := time.Now()
	r, err := Run(ctx, Config{Target: TargetGRPC, Addr: addr, Concurrency: 4, Duration: time.Minute})
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
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("cancelled run took %v", el)
	}
}

func TestContextDeadlineStopsRun(t *testing.T) {
	// A deadline on the caller's context is a cancellation too, although
	// gRPC reports it as DeadlineExceeded, possibly a moment before the
	// context's own timer fires: no error may be counted for it.
	_, addr := startGRPC(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	r, err := Run(ctx, Config{Target: TargetGRPC, Addr: addr, Concurrency: 4, Duration: time.Minute})
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
