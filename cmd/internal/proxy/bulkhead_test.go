package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/cmd/internal/proxy"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/httplimit"
	"github.com/floodgate-io/floodgate/internal/problem"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// bulkheadPolicy has a slow route with a bulkhead of one slot, a route
// exempt from the default bulkhead, and a catch-all route that takes it.
const bulkheadPolicy = `
domain: bh
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1000}
routes:
  - name: slow
    path_prefix: /slow
    descriptors: []
    concurrency: {limit: 1}
  - name: free
    path_prefix: /free
    descriptors: []
    concurrency: {limit: off}
  - name: rest
    descriptors: []
`

// protected runs upstream behind a proxy with prot, and returns its URL,
// the proxy and the clock of its breakers.
func protected(t *testing.T, upstream http.HandlerFunc, prot proxy.Protection) (string, *proxy.Proxy, *floodgate.ManualClock) {
	t.Helper()
	clock := floodgate.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	gate, err := httplimit.NewConcurrencyGate(httplimit.ConcurrencyOptions{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	prot.Gate, prot.Clock = gate, clock
	target, _ := url.Parse(up.URL)
	eng := engine.New(servicetest.Policies(t, bulkheadPolicy), engine.OneStore{Limiter: floodgate.NewMemory(floodgate.WithClock(clock))})
	p, err := proxy.New(proxy.Options{Upstream: target, Engine: eng, Protection: prot})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	return front.URL, p, clock
}

// fetch GETs u and reads the whole answer.
func fetch(t *testing.T, u string) (*http.Response, string) {
	t.Helper()
	resp, body, err := fetchErr(u)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func fetchErr(u string) (*http.Response, string, error) {
	client := &http.Client{Timeout: timing.Patience}
	resp, err := client.Get(u)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// One slow route fills its own bulkhead and is shed with 503, while the
// other routes keep their slots: each route has its own limiter.
func TestBulkheadsPerRoute(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	u, p, _ := protected(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow/report" {
			entered <- struct{}{}
			<-release
		}
	}, proxy.Protection{Concurrency: &policy.Concurrency{Limit: 1}})
	done := make(chan *http.Response)
	go func() {
		resp, _, _ := fetchErr(u + "/slow/report")
		done <- resp
	}()
	<-entered // the slow route's one slot is taken
	resp, body := fetch(t, u+"/slow/other")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(body, problem.OverloadedType) {
		t.Fatalf("second request of the full route: %d %v %s; want 503, Retry-After and an overload problem", resp.StatusCode, resp.Header, body)
	}
	for _, path := range []string{"/free/x", "/other", "/"} {
		if resp, body := fetch(t, u+path); resp.StatusCode != http.StatusOK {
			t.Errorf("%s while /slow is full: %d %s, want 200 (its own bulkhead)", path, resp.StatusCode, body)
		}
	}
	close(release)
	if resp := <-done; resp == nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the slow request: %v, want 200", resp)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p.Collector())
	want := `
# HELP floodgate_concurrency_limit The concurrency limit of a route's bulkhead: learned (--concurrency adaptive) or fixed.
# TYPE floodgate_concurrency_limit gauge
floodgate_concurrency_limit{route="(unrouted)"} 1
floodgate_concurrency_limit{route="rest"} 1
floodgate_concurrency_limit{route="slow"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "floodgate_concurrency_limit"); err != nil {
		t.Error(err)
	}
	if got := value(t, reg, "floodgate_shed_total", "route", "slow", "class", "default", "reason", "at_limit"); got != 1 {
		t.Errorf("floodgate_shed_total{route=slow,class=default,reason=at_limit} = %v, want 1", got)
	}
}

// The breaker of a route opens after its failures in a row, answers 503
// with the time to its probe without calling the upstream, and closes
// when the probe succeeds.
func TestUpstreamBreaker(t *testing.T) {
	var failing atomic.Bool
	var calls atomic.Int64
	failing.Store(true)
	u, p, clock := protected(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if failing.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
		}
	}, proxy.Protection{Breaker: proxy.BreakerOptions{Failures: 3, CoolDown: 10 * time.Second}})
	for i := range 3 {
		if resp, _ := fetch(t, u+"/rest"); resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("failure %d: %d, want the upstream's 500", i, resp.StatusCode)
		}
	}
	clock.Advance(4 * time.Second)
	resp, body := fetch(t, u+"/rest")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "6" || !strings.Contains(body, "circuit breaker is open") {
		t.Fatalf("with the breaker open: %d Retry-After %q %s; want 503, 6 (to the probe) and a problem", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, _ := fetch(t, u+"/slow"); resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("another route's upstream calls: %d, want the upstream's 500 (its own breaker)", resp.StatusCode)
	}
	if calls.Load() != 4 {
		t.Fatalf("the upstream saw %d calls, want 4: none while the breaker was open", calls.Load())
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p.Collector())
	if got := value(t, reg, "floodgate_upstream_breaker_state", "route", "rest", "state", "open"); got != 1 {
		t.Errorf("floodgate_upstream_breaker_state{route=rest,state=open} = %v, want 1", got)
	}
	failing.Store(false)
	clock.Advance(6 * time.Second)
	for i := range 2 {
		if resp, _ := fetch(t, u+"/rest"); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d after the cool-down: %d, want 200 (the probe closes the breaker)", i, resp.StatusCode)
		}
	}
}

// Bad protection settings are refused naming the setting.
func TestProtectionRejectsBadOptions(t *testing.T) {
	target, _ := url.Parse("http://127.0.0.1:1")
	eng := engine.New(servicetest.Policies(t, bulkheadPolicy), engine.OneStore{Limiter: floodgate.NewMemory()})
	for _, tc := range []struct {
		name string
		prot proxy.Protection
		want string
	}{
		{"negative failures", proxy.Protection{Breaker: proxy.BreakerOptions{Failures: -1}}, "breaker failures -1 is negative"},
		{"breaker without cool-down", proxy.Protection{Breaker: proxy.BreakerOptions{Failures: 2}}, "needs a positive cool-down"},
		{"bad default", proxy.Protection{Concurrency: &policy.Concurrency{Algorithm: "cubic"}}, `algorithm "cubic"`},
		{"limit without a gate", proxy.Protection{Concurrency: &policy.Concurrency{Limit: 3}}, "needs a Gate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := proxy.New(proxy.Options{Upstream: target, Engine: eng, Protection: tc.prot})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// value is the value of the metric name with labels (name, value pairs)
// in reg.
func value(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			match := true
			for i := 0; i+1 < len(labels); i += 2 {
				match = match && got[labels[i]] == labels[i+1]
			}
			if match {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return 0
}
