package metrics_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate-io/floodgate/cmd/internal/metrics"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
)

const testPolicy = `
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: tenant
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {name: sustained, unit: minute, requests_per_unit: 5}
  - key: report
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 7}
  - key: path
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 7}
`

func policies(t *testing.T) *policy.Set {
	t.Helper()
	return servicetest.Policies(t, testPolicy)
}

func desc(k, v string) policy.Descriptor {
	return policy.Descriptor{Entries: []policy.Entry{{Key: k, Value: v}}}
}

func match(t *testing.T, set *policy.Set, d policy.Descriptor) []policy.Rule {
	t.Helper()
	rules, ok := set.Match("api", d)
	if !ok {
		t.Fatalf("%v does not match", d)
	}
	return rules
}

func TestLabels(t *testing.T) {
	set := policies(t)
	m := metrics.New(prometheus.NewRegistry())
	if got := metrics.DomainLabel(set, "api"); got != "api" {
		t.Errorf("known domain: %s", got)
	}
	if got := metrics.DomainLabel(set, "user-chosen"); got != metrics.Unknown {
		t.Errorf("unknown domain: %s", got)
	}
	if got := metrics.DomainLabel(nil, "api"); got != metrics.Unknown {
		t.Errorf("nil set: %s", got)
	}
	for _, tc := range []struct {
		d    policy.Descriptor
		want []string
	}{
		{desc("user", "42"), []string{"api.user"}},
		{desc("tenant", "acme"), []string{"api.tenant#0", "sustained"}},
		{desc("report", "q3"), []string{"api.report_q3"}},
		{desc("path", "/x"), []string{"api.path_/x"}},
	} {
		rules := match(t, set, tc.d)
		for i, r := range rules {
			if got := m.LimitLabel(r, tc.d); got != tc.want[i] {
				t.Errorf("%v rule %d: %s, want %s", tc.d, i, got, tc.want[i])
			}
		}
	}
	if got := m.LimitLabel(policy.Rule{Domain: "api"}, desc("x", "y")); got != metrics.Override {
		t.Errorf("override: %s", got)
	}
}

// The label of a rule without per-value metrics is built from nothing
// per decision: it is the rule's name or path.
func TestPlainLabelsAllocateNothing(t *testing.T) {
	set := policies(t)
	m := metrics.New(prometheus.NewRegistry())
	d := desc("user", "42")
	r := match(t, set, d)[0]
	if n := testing.AllocsPerRun(100, func() { _ = m.LimitLabel(r, d) }); n != 0 {
		t.Fatalf("%.0f allocations per label of a plain rule, want 0", n)
	}
}

func TestDetailedLabelsAreCapped(t *testing.T) {
	set := policies(t)
	m := metrics.New(prometheus.NewRegistry())
	seen := map[string]bool{}
	for i := range 3 * metrics.MaxDetailed {
		d := desc("report", fmt.Sprint(i))
		seen[m.LimitLabel(match(t, set, d)[0], d)] = true
	}
	if len(seen) != metrics.MaxDetailed+1 || !seen[metrics.Other] {
		t.Fatalf("%d labels, other %v", len(seen), seen[metrics.Other])
	}
	// A value seen before the cap keeps its label.
	d := desc("report", "7")
	if got := m.LimitLabel(match(t, set, d)[0], d); got != "api.report_7" {
		t.Fatalf("got %s", got)
	}
	// Plain rules are not affected by the cap.
	d = desc("user", "new")
	if got := m.LimitLabel(match(t, set, d)[0], d); got != "api.user" {
		t.Fatalf("got %s", got)
	}
}

func TestDecisionSeriesAreCapped(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	for i := range metrics.MaxSeries + 500 {
		m.Decision("api", fmt.Sprint(i), metrics.Allowed, 0)
	}
	if n := count(t, reg, "floodgate_decisions_total"); n != metrics.MaxSeries+1 {
		t.Fatalf("%d series", n)
	}
	for i := range 2 * metrics.MaxDomains {
		m.Latency(fmt.Sprint(i), time.Millisecond)
	}
	for i := range 2 * metrics.MaxKinds {
		m.StoreError(fmt.Sprint(i))
	}
	if got := value(t, reg, "floodgate_store_errors_total", "kind", metrics.Other); got != metrics.MaxKinds {
		t.Fatalf("other kinds %v", got)
	}
}

// count is the number of series of a metric.
func count(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// value is the value of the counter or gauge series with label=value.
func value(t *testing.T, reg *prometheus.Registry, name, label, v string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == v {
					if c := mt.GetCounter(); c != nil {
						return c.GetValue()
					}
					return mt.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, v)
	return 0
}

func TestExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.Decision("api", "api.user", metrics.Allowed, 30*time.Microsecond)
	m.Decision("api", "api.user", metrics.Denied, 0)
	m.Decision("api", "sustained", metrics.ShadowDenied, 0)
	m.Decision(metrics.Unknown, metrics.None, metrics.Error, 2*time.Second)
	m.StoreError("unavailable")
	m.ConfigReload(true)
	m.ConfigReload(false)
	m.SetBreakerState("open")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`floodgate_decisions_total{domain="api",limit="api.user",result="allowed"} 1`,
		`floodgate_decisions_total{domain="api",limit="api.user",result="denied"} 1`,
		`floodgate_decisions_total{domain="api",limit="sustained",result="shadow_denied"} 1`,
		`floodgate_decisions_total{domain="_unknown",limit="_none",result="error"} 1`,
		`floodgate_decision_duration_seconds_bucket{domain="api",le="5e-05"} 1`,
		`floodgate_decision_duration_seconds_bucket{domain="api",le="1e-05"} 0`,
		`floodgate_decision_duration_seconds_bucket{domain="_unknown",le="1"} 0`,
		`floodgate_decision_duration_seconds_count{domain="api"} 1`,
		`floodgate_store_errors_total{kind="unavailable"} 1`,
		`floodgate_config_reloads_total{result="success"} 1`,
		`floodgate_config_reloads_total{result="failure"} 1`,
		`floodgate_breaker_state{state="open"} 1`,
		`floodgate_breaker_state{state="closed"} 0`,
		`floodgate_breaker_state{state="half_open"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %s", want)
		}
	}
	if strings.Contains(text, `state="_other"`) {
		t.Error("an other breaker state without an unknown state")
	}
	m.SetBreakerState("weird")
	m.SetBreakerState("closed")
	if got := value(t, reg, "floodgate_breaker_state", "state", metrics.Other); got != 0 {
		t.Errorf("other after closed: %v", got)
	}
}

func TestBuckets(t *testing.T) {
	b := metrics.Buckets()
	if b[0] != 1e-5 || b[len(b)-1] != 1 {
		t.Fatalf("%v", b)
	}
	for i := 1; i < len(b); i++ {
		if b[i] <= b[i-1] {
			t.Fatalf("not increasing: %v", b)
		}
	}
}

func TestNewTwiceOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := metrics.New(reg), metrics.New(reg)
	a.StoreError("x")
	b.StoreError("x")
	if got := value(t, reg, "floodgate_store_errors_total", "kind", "x"); got != 2 {
		t.Fatalf("%v", got)
	}
	metrics.New(nil).StoreError("x") // its own registry
}

// Recording a decision in a series that already exists, once per request,
// allocates nothing: the label lookups are on the hot path of every surface.
func TestKnownSeriesRecordWithoutAllocating(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry())
	record := func() {
		m.Decision("api", "api.user", metrics.Allowed, time.Millisecond)
		m.StoreError("unavailable")
	}
	record() // create the series
	if n := testing.AllocsPerRun(100, record); n != 0 {
		t.Errorf("recording in known series: %v allocations, want 0", n)
	}
}
