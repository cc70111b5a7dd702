package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/telemetry/metrics"
)

var ctx = context.Background()

func newObserver(t testing.TB, opts metrics.Options) (*metrics.Observer, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o, err := metrics.New(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return o, reg
}

// scrape fetches the exposition over a real listener, as Prometheus does.
func scrape(t *testing.T, o *metrics.Observer) string {
	t.Helper()
	srv := httptest.NewServer(o.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s: %s", resp.Status, body)
	}
	return string(body)
}

// series counts the series of a metric family in a scrape.
func series(text, name string) int {
	return strings.Count(text, "\n"+name+"{")
}

// event is an allowed decision of limit under policy that leaves
// remaining of 10.
func event(policy, limit string, outcome observe.Outcome, remaining int64) observe.Event {
	return observe.Event{
		Surface: observe.SurfaceProxy, Policy: policy, Limit: limit, Key: "user-42", Outcome: outcome, Cost: 1,
		Decision: floodgate.Decision{Allowed: outcome == observe.Allowed, Limit: 10, Remaining: remaining},
	}
}

// What each kind of report becomes in the exposition, read as Prometheus
// reads it.
func TestExposition(t *testing.T) {
	o, _ := newObserver(t, metrics.Options{})
	report := func(s observe.Summary, events ...observe.Event) {
		c := observe.Begin(ctx, o, observe.SurfaceProxy, s.Policy)
		for _, e := range events {
			o.Observe(c, e)
		}
		observe.End(c, o, s)
	}
	report(observe.Summary{Policy: "api", Outcome: observe.Allowed, Latency: 30 * time.Microsecond, StoreTime: 20 * time.Microsecond},
		event("api", "per-user", observe.Allowed, 5), event("api", "per-tenant", observe.Allowed, 9))
	report(observe.Summary{Policy: "api", Outcome: observe.Allowed, Latency: 2 * time.Millisecond},
		event("api", "per-user", observe.Allowed, 2)) // 80% used: near the limit
	report(observe.Summary{Policy: "api", Outcome: observe.Denied, Latency: time.Millisecond},
		event("api", "per-user", observe.Denied, 0))
	report(observe.Summary{Policy: "api", Outcome: observe.ShadowDenied}, event("api", "per-tenant", observe.ShadowDenied, 0))
	degraded := event("api", "per-user", observe.Allowed, 0)
	degraded.Degraded, degraded.Err = true, fmt.Errorf("redisstore: %w: connection refused", floodgate.ErrStoreUnavailable)
	report(observe.Summary{Policy: "api", Degraded: true}, degraded)
	report(observe.Summary{Outcome: observe.Shed, Latency: time.Second}, event("", "", observe.Shed, 0))
	o.ConfigReload(true)
	o.WatchBreaker(func() failover.BreakerState { return failover.Open })

	text := scrape(t, o)
	for _, want := range []string{
		`floodgate_decisions_total{limit="per-user",policy="api",result="allowed"} 3`,
		`floodgate_decisions_total{limit="per-user",policy="api",result="denied"} 1`,
		`floodgate_decisions_total{limit="per-tenant",policy="api",result="allowed"} 1`,
		`floodgate_decisions_total{limit="per-tenant",policy="api",result="shadow_denied"} 1`,
		`floodgate_decisions_total{limit="_none",policy="_explicit",result="shed"} 1`,
		// 8 of 10 used and all 10 used (the degraded one) are near; 5 is not.
		`floodgate_near_limit_total{limit="per-user",policy="api"} 2`,
		`floodgate_degraded_decisions_total{policy="api",result="allowed"} 1`,
		`floodgate_store_errors_total{kind="connection"} 1`,
		`floodgate_store_errors_total{kind="timeout"} 0`,
		// Latency once per request, not per limit: 3 of api's 5 requests had one.
		`floodgate_decision_duration_seconds_count{policy="api"} 3`,
		`floodgate_decision_duration_seconds_bucket{policy="api",le="5e-05"} 1`,
		`floodgate_decision_duration_seconds_count{policy="_explicit"} 1`,
		`floodgate_store_duration_seconds_count{policy="api"} 1`,
		`floodgate_breaker_state{state="open"} 1`,
		`floodgate_breaker_state{state="closed"} 0`,
		`floodgate_breaker_state{state="half_open"} 0`,
		`floodgate_config_reloads_total{result="success"} 1`,
		`floodgate_config_reloads_total{result="failure"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("the scrape lacks %s", want)
		}
	}
	for _, absent := range []string{
		`floodgate_near_limit_total{limit="per-tenant"`,                              // never near
		`floodgate_decisions_total{limit="per-tenant",policy="api",result="denied"}`, // never denied: no series
		"user-42", // never a key
	} {
		if strings.Contains(text, absent) {
			t.Errorf("the scrape has %s", absent)
		}
	}
}

// The breaker gauge follows the watched function at each scrape, and has
// no series while nothing is watched.
func TestBreakerState(t *testing.T) {
	o, _ := newObserver(t, metrics.Options{})
	if n := series(scrape(t, o), "floodgate_breaker_state"); n != 0 {
		t.Fatalf("%d breaker series with no breaker watched, want 0", n)
	}
	state := failover.Closed
	o.WatchBreaker(func() failover.BreakerState { return state })
	for _, s := range []failover.BreakerState{failover.Closed, failover.Open, failover.HalfOpen} {
		state = s
		if text := scrape(t, o); !strings.Contains(text, `floodgate_breaker_state{state="`+s.String()+`"} 1`) {
			t.Errorf("breaker %s: the scrape shows\n%s", s, grep(text, "floodgate_breaker_state{"))
		}
	}
	o.WatchBreaker(nil)
	if n := series(scrape(t, o), "floodgate_breaker_state"); n != 0 {
		t.Fatalf("%d breaker series after WatchBreaker(nil), want 0", n)
	}
}

func grep(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Each store error lands in its kind; what is not the store's failure is
// not counted.
func TestStoreErrorKinds(t *testing.T) {
	timedOut := fmt.Errorf("redisstore: %w: no answer within 50ms: %w", floodgate.ErrStoreUnavailable, context.DeadlineExceeded)
	for _, c := range []struct {
		name string
		err  error
		kind string // "" for not counted
	}{
		{"no error", nil, ""},
		{"the store's timeout", timedOut, "timeout"},
		{"the caller's deadline", fmt.Errorf("key: %w", context.DeadlineExceeded), "timeout"},
		{"a net timeout", fmt.Errorf("dial: %w", netTimeout{}), "timeout"},
		{"connection refused", fmt.Errorf("%w: dial tcp: connection refused", floodgate.ErrStoreUnavailable), "connection"},
		{"another failure", errors.New("unexpected reply"), "other"},
		{"the caller gave up", fmt.Errorf("key: %w", context.Canceled), ""},
		{"a bad key", fmt.Errorf("x: %w", floodgate.ErrInvalidKey), ""},
		{"a bad cost", floodgate.ErrInvalidCost, ""},
		{"a bad limit", floodgate.ErrInvalidLimit, ""},
		{"the breaker is open", failover.ErrBreakerOpen, ""},
		{"joined", errors.Join(errors.New("a"), fmt.Errorf("b: %w", netTimeout{})), "timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, _ := newObserver(t, metrics.Options{})
			e := event("api", "l", observe.Error, 0)
			e.Err = c.err
			o.Observe(ctx, e)
			text := scrape(t, o)
			for _, k := range []string{"timeout", "connection", "script", "other"} {
				want := 0
				if k == c.kind {
					want = 1
				}
				if line := fmt.Sprintf(`floodgate_store_errors_total{kind="%s"} %d`, k, want); !strings.Contains(text, line+"\n") {
					t.Errorf("%v: want %s, the scrape has\n%s", c.err, line, grep(text, "floodgate_store_errors_total{"))
				}
			}
		})
	}
}

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

// A million distinct limit names (a surface that puts a request's value in
// Limit) and thousands of policies still make a bounded scrape: past the
// bounds they count under _other, and nothing is lost from the totals.
func TestCardinalityIsBounded(t *testing.T) {
	const maxPolicies, maxLimits = 10, 50
	o, _ := newObserver(t, metrics.Options{MaxPolicies: maxPolicies, MaxLimits: maxLimits})
	const n = 20000
	for i := range n {
		o.Observe(ctx, event(fmt.Sprint("policy-", i%(3*maxPolicies)), fmt.Sprint("limit-", i), observe.Allowed, 9))
	}
	text := scrape(t, o)
	// Each policy has its own _other limit; the overflowed policies share
	// the _other policy's.
	if got, max := series(text, "floodgate_decisions_total"), maxLimits+maxPolicies+1; got > max {
		t.Fatalf("%d decision series, want at most %d", got, max)
	}
	if !strings.Contains(text, `floodgate_decisions_total{limit="_other",policy="_other",result="allowed"}`) {
		t.Error("no _other series for the policies past the bound")
	}
	total := 0.0
	for _, l := range strings.Split(grep(text, "floodgate_decisions_total{"), "\n") {
		var v float64
		fmt.Sscan(l[strings.LastIndex(l, " ")+1:], &v)
		total += v
	}
	if total != n {
		t.Errorf("the decision series add up to %v, want %d: nothing is dropped", total, n)
	}
}

// Long and invalid label values are cut (see Truncate), distinct ones
// stay distinct.
func TestLongLabelsAreCut(t *testing.T) {
	o, _ := newObserver(t, metrics.Options{})
	long := strings.Repeat("p", 1<<20)
	o.Observe(ctx, event(long+"a", "l", observe.Allowed, 9))
	o.Observe(ctx, event(long+"b", "l", observe.Allowed, 9))
	o.Observe(ctx, event("api", "bad\xff", observe.Allowed, 9))
	text := scrape(t, o)
	if len(text) > 64<<10 {
		t.Fatalf("a scrape of %d bytes after three decisions with long labels", len(text))
	}
	if n := series(text, "floodgate_decisions_total"); n != 3 {
		t.Fatalf("%d decision series, want 3 (distinct long values stay distinct)", n)
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  metrics.Options
		names string // what the error must name
	}{
		{"ratio above 1", metrics.Options{NearLimitRatio: 1.5}, "NearLimitRatio"},
		{"negative ratio", metrics.Options{NearLimitRatio: -0.1}, "NearLimitRatio"},
		{"negative policies", metrics.Options{MaxPolicies: -1}, "MaxPolicies"},
		{"negative limits", metrics.Options{MaxLimits: -1}, "MaxLimits"},
		{"unordered buckets", metrics.Options{Buckets: []float64{1, 0.5}}, "Buckets"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := metrics.New(prometheus.NewRegistry(), c.opts)
			if !errors.Is(err, metrics.ErrInvalidOptions) || !strings.Contains(fmt.Sprint(err), c.names) {
				t.Fatalf("New(%+v) = %v, want ErrInvalidOptions naming %s", c.opts, err, c.names)
			}
		})
	}
}

// Two observers on one registry (a process with two surfaces) share the
// series; a registry holding another metric of the same name is an error,
// not a panic.
func TestRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := metrics.New(reg, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.Observe(ctx, event("api", "l", observe.Denied, 0))
	b.Observe(ctx, event("api", "l", observe.Denied, 0))
	if text := scrape(t, a); !strings.Contains(text, `floodgate_decisions_total{limit="l",policy="api",result="denied"} 2`) {
		t.Errorf("two observers on one registry: %s", grep(text, "floodgate_decisions_total{"))
	}

	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "floodgate_decisions_total", Help: "not ours"}))
	if _, err := metrics.New(clash, metrics.Options{}); err == nil || !strings.Contains(err.Error(), "floodgate_decisions_total") {
		t.Fatalf("New on a registry with a clashing metric: %v, want an error naming it", err)
	}
	if o, err := metrics.New(nil, metrics.Options{}); err != nil || o == nil {
		t.Fatalf("New(nil): %v", err)
	}
}

// Reporting to known series, once per limit and once per request,
// allocates nothing: it runs inside every request's latency.
func TestKnownSeriesRecordWithoutAllocating(t *testing.T) {
	o, _ := newObserver(t, metrics.Options{})
	allowed, near := event("api", "per-user", observe.Allowed, 5), event("api", "per-user", observe.Allowed, 1)
	failed := event("api", "per-user", observe.Allowed, 1)
	failed.Degraded = true
	failed.Err = fmt.Errorf("%w: %w", floodgate.ErrStoreUnavailable, context.DeadlineExceeded)
	sum := observe.Summary{Policy: "api", Latency: time.Millisecond, StoreTime: time.Microsecond}
	record := func() {
		o.Observe(ctx, allowed)
		o.Observe(ctx, near)
		o.Observe(ctx, failed)
		o.End(ctx, sum)
	}
	record() // create the series
	if n := testing.AllocsPerRun(200, record); n != 0 {
		t.Errorf("recording in known series: %v allocations, want 0", n)
	}
}

// Concurrent reports, some creating series, lose no count.
func TestConcurrentReports(t *testing.T) {
	o, _ := newObserver(t, metrics.Options{MaxLimits: 20})
	const goroutines, each = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				o.Observe(ctx, event("api", fmt.Sprint("l", (g*each+i)%40), observe.Denied, 0))
			}
		})
	}
	wg.Wait()
	text := scrape(t, o)
	total := 0.0
	for _, l := range strings.Split(grep(text, "floodgate_decisions_total{"), "\n") {
		var v float64
		fmt.Sscan(l[strings.LastIndex(l, " ")+1:], &v)
		total += v
	}
	if total != goroutines*each {
		t.Fatalf("%v decisions counted, want %d", total, goroutines*each)
	}
	if n := series(text, "floodgate_decisions_total"); n != 21 {
		t.Fatalf("%d series, want 20 limits and _other", n)
	}
}

// BenchmarkObserve is the cost a surface pays per limit decided (a
// request of one limit: Observe and End).
func BenchmarkObserve(b *testing.B) {
	o, _ := newObserver(b, metrics.Options{})
	e := event("api", "per-user", observe.Allowed, 5)
	sum := observe.Summary{Policy: "api", Latency: time.Millisecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			o.Observe(ctx, e)
			o.End(ctx, sum)
		}
	})
}

// Under sampling the counters count every decision and the histograms the
// timed requests alone: an untimed request has no latency to observe.
func TestUntimedDecisionsAreCountedNotTimed(t *testing.T) {
	o, _ := newObserver(t, metrics.Options{})
	ctx := context.Background()
	for i := range 10 {
		e := event("api", "per-user", observe.Allowed, 5)
		sum := observe.Summary{Policy: "api", Outcome: observe.Allowed, Limits: 1, Latency: time.Millisecond, StoreTime: time.Millisecond, Weight: 5}
		if i > 0 { // one timed request in ten
			e.Untimed, sum.Untimed, sum.Weight, sum.Latency, sum.StoreTime = true, true, 0, 0, 0
		}
		o.Observe(ctx, e)
		o.End(ctx, sum)
	}
	text := scrape(t, o)
	for _, want := range []string{
		`floodgate_decisions_total{limit="per-user",policy="api",result="allowed"} 10`,
		`floodgate_decision_duration_seconds_count{policy="api"} 1`,
		`floodgate_store_duration_seconds_count{policy="api"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s:\n%s", want, grep(text, "floodgate_d"))
		}
	}
}
