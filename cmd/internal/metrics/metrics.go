// Package metrics exposes Floodgate's Prometheus metrics with bounded label
// cardinality: no label ever takes a value straight from a request unless the
// policy asks for it (detailed_metric, value_to_metric), and then at most
// MaxDetailed distinct values, each cut to MaxLabelBytes; the rest are
// counted under Other.
//
// The metrics:
//
//	floodgate_decisions_total{domain, limit, result}       counter
//	floodgate_decision_duration_seconds{domain}            histogram, 10µs to 1s
//	floodgate_store_errors_total{kind}                     counter
//	floodgate_config_reloads_total{result}                 counter (success, failure)
//	floodgate_config_last_reload_success_timestamp_seconds gauge
//	floodgate_breaker_state{state}                         gauge, 1 for the current state
package metrics

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// Result is the outcome of one decision.
type Result string

// The results.
const (
	Allowed      Result = "allowed"
	Denied       Result = "denied"
	ShadowDenied Result = "shadow_denied" // a shadow- or quota-mode limit would have denied
	Error        Result = "error"
)

// Label values that stand for many.
const (
	// Unknown is the domain label of a domain that no policy defines.
	Unknown = "_unknown"
	// Other is the label of whatever is past a cardinality bound.
	Other = "_other"
	// None is the limit label of a request no limit applied to.
	None = "_none"
	// Override is the limit label of a limit given in the request
	// (Envoy's per-descriptor override).
	Override = "_override"
	// Explicit is the domain label of requests that carry their own limit
	// (POST /v1/allow with a key); their limit label is the algorithm.
	Explicit = "_explicit"
)

// Bounds on label values.
const (
	// MaxDetailed is how many distinct per-value limit labels the rules with
	// detailed_metric or value_to_metric may create, all domains together.
	MaxDetailed = 1000
	// MaxSeries bounds the (domain, limit, result) combinations of
	// floodgate_decisions_total, whatever the callers pass.
	MaxSeries = 10000
	// MaxDomains bounds the domain label values of the histogram.
	MaxDomains = 1000
	// MaxKinds bounds the kind label values of store errors.
	MaxKinds = 32
	// MaxLabelBytes bounds a per-value limit label: a longer one keeps its
	// first bytes and ends with "…" and a hash of the whole value (see
	// Truncate), so that distinct long values stay distinct series. With
	// MaxDetailed, it bounds what detailed_metric adds to a scrape to about
	// MaxDetailed × MaxLabelBytes per series kind.
	MaxLabelBytes = 128
)

// hashHex is how many hex digits of a value's SHA-256 a truncated label
// keeps: 64 bits, so that among MaxDetailed values a collision is
// vanishingly unlikely.
const hashHex = 16

// The circuit breaker states SetBreakerState knows; another is counted as Other.
var breakerStates = []string{"closed", "open", "half_open"}

// Metrics records Floodgate's metrics. It is safe for concurrent use.
type Metrics struct {
	gatherer prometheus.Gatherer

	decisions   *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	storeErrors *prometheus.CounterVec
	reloads     *prometheus.CounterVec
	lastReload  prometheus.Gauge
	breaker     *prometheus.GaugeVec

	breakerOther atomic.Bool // the Other state has been set once

	series   labelSet[seriesKey] // decisions: (domain, limit, result) -> prometheus.Counter
	domains  labelSet[string]    // latency: domain -> prometheus.Observer
	kinds    labelSet[string]    // store errors: kind -> prometheus.Counter
	detailed labelSet[string]    // per-value limit labels handed out
}

// labelSet remembers up to max label combinations and what they map to.
// Its keys are typed, not boxed in an interface as a sync.Map's are, so
// that looking up a known combination, once per decision, allocates
// nothing.
type labelSet[K comparable] struct {
	mu sync.RWMutex
	m  map[K]any
}

// get returns the value stored for key, creating it with make when the set
// is below max; ok is false when the set is full and key is not in it.
func (s *labelSet[K]) get(key K, max int64, make func() any) (any, bool) {
	s.mu.RLock()
	v, ok := s.m[key]
	s.mu.RUnlock()
	if ok {
		return v, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[key]; ok {
		return v, true
	}
	if int64(len(s.m)) >= max {
		return nil, false
	}
	if s.m == nil {
		s.m = map[K]any{}
	}
	v = make()
	s.m[key] = v
	return v, true
}

// New registers the metrics with reg and returns them. When reg is also a
// prometheus.Gatherer (a *prometheus.Registry is), Handler serves what it
// gathers; nil is a new registry. Metrics that reg already has (New called
// twice on one registry) are shared.
func New(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{gatherer: prometheus.DefaultGatherer}
	if g, ok := reg.(prometheus.Gatherer); ok {
		m.gatherer = g
	}
	m.decisions = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_decisions_total",
		Help: "Decisions, one per limit decided, by domain, limit (rule name or path) and result.",
	}, []string{"domain", "limit", "result"}))
	m.latency = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "floodgate_decision_duration_seconds",
		Help:    "Time to answer a decision request, by domain.",
		Buckets: Buckets(),
	}, []string{"domain"}))
	m.storeErrors = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_store_errors_total",
		Help: "Store calls that failed, by kind.",
	}, []string{"kind"}))
	m.reloads = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_config_reloads_total",
		Help: "Policy reloads, by result (success, failure).",
	}, []string{"result"}))
	m.lastReload = register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "floodgate_config_last_reload_success_timestamp_seconds",
		Help: "When the policies were last loaded successfully, in Unix seconds.",
	}))
	m.breaker = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "floodgate_breaker_state",
		Help: "The store's circuit breaker: 1 for the current state, 0 for the others.",
	}, []string{"state"}))
	for _, r := range []string{"success", "failure"} {
		m.reloads.WithLabelValues(r)
	}
	return m
}

// register registers c with reg, or returns the collector reg already has.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// Buckets are the latency histogram's buckets: 10µs to 1s, 1-2.5-5 per decade.
func Buckets() []float64 {
	var out []float64
	for decade := 1e-5; decade < 1; decade *= 10 {
		out = append(out, decade, 2.5*decade, 5*decade)
	}
	return append(out, 1)
}

// Handler serves the metrics of the registry New was given, in the
// Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

type seriesKey struct {
	domain, limit string
	result        Result
}

// Decision records one limit's decision. domain and limit are label values
// the caller has bounded (see DomainLabel and LimitLabel); past MaxSeries
// combinations they are counted as Other. took, when positive, is observed
// in the latency histogram: pass the request's latency with one decision
// of the request and 0 with the others, so that the histogram counts
// requests.
func (m *Metrics) Decision(domain, limit string, result Result, took time.Duration) {
	c, ok := m.series.get(seriesKey{domain, limit, result}, MaxSeries, func() any {
		return m.decisions.WithLabelValues(domain, limit, string(result))
	})
	if !ok {
		c, _ = m.series.get(seriesKey{Other, Other, result}, MaxSeries+8, func() any {
			return m.decisions.WithLabelValues(Other, Other, string(result))
		})
	}
	c.(prometheus.Counter).Inc()
	if took > 0 {
		m.Latency(domain, took)
	}
}

// Latency observes the time a request to domain took.
func (m *Metrics) Latency(domain string, took time.Duration) {
	o, ok := m.domains.get(domain, MaxDomains, func() any { return m.latency.WithLabelValues(domain) })
	if !ok {
		o, _ = m.domains.get(Other, MaxDomains+1, func() any { return m.latency.WithLabelValues(Other) })
	}
	o.(prometheus.Observer).Observe(took.Seconds())
}

// StoreError counts a failed store call of a kind such as "unavailable" or
// "timeout"; past MaxKinds distinct kinds, as Other.
func (m *Metrics) StoreError(kind string) {
	c, ok := m.kinds.get(kind, MaxKinds, func() any { return m.storeErrors.WithLabelValues(kind) })
	if !ok {
		c, _ = m.kinds.get(Other, MaxKinds+1, func() any { return m.storeErrors.WithLabelValues(Other) })
	}
	c.(prometheus.Counter).Inc()
}

// ConfigReload counts a reload of the policies, successful or not.
func (m *Metrics) ConfigReload(ok bool) {
	if !ok {
		m.reloads.WithLabelValues("failure").Inc()
		return
	}
	m.reloads.WithLabelValues("success").Inc()
	m.lastReload.SetToCurrentTime()
}

// SetBreakerState sets the breaker gauge: 1 for state ("closed", "open",
// "half_open", as failover.BreakerState.String spells them), 0 for the others.
func (m *Metrics) SetBreakerState(state string) {
	known := false
	for _, s := range breakerStates {
		v := 0.0
		if s == state {
			v, known = 1, true
		}
		m.breaker.WithLabelValues(s).Set(v)
	}
	if !known || m.breakerOther.Load() {
		m.breakerOther.Store(true)
		v := 1.0
		if known {
			v = 0
		}
		m.breaker.WithLabelValues(Other).Set(v)
	}
}

// DomainLabel is the domain label of a request: the domain when set defines
// it, Unknown otherwise (requests name any domain they like).
func DomainLabel(set *policy.Set, domain string) string {
	if set != nil {
		if _, ok := set.Policy(domain); ok {
			return domain
		}
	}
	return Unknown
}

// LimitLabel is the limit label of rule r matched for the request
// descriptor d: the rule's name, else its path (with "#index" when its
// descriptor has several limits); values from the request only when the
// policy asks for them (detailed_metric, value_to_metric: the rule's
// MetricKey), and then at most MaxDetailed distinct ones, Other past that.
// A rule without a path (a limit override in the request) is Override.
func (m *Metrics) LimitLabel(r policy.Rule, d policy.Descriptor) string {
	label, perValue := r.MetricLabel(d)
	if !perValue {
		return label
	}
	label = Truncate(label)
	if _, ok := m.detailed.get(label, MaxDetailed, func() any { return struct{}{} }); !ok {
		return Other
	}
	return label
}

// Truncate bounds a label value taken from a request to MaxLabelBytes of
// valid UTF-8 (Prometheus refuses any other). A value that fits and is
// valid is returned as is; any other keeps its first bytes, cut on a
// character boundary with invalid bytes replaced, then "…" and 16 hex
// digits of the SHA-256 of the whole value: two different values give two
// different labels (but for a 64-bit hash collision), and one value always
// the same label, in every process.
func Truncate(v string) string {
	if len(v) <= MaxLabelBytes && utf8.ValidString(v) {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	tail := "…" + hex.EncodeToString(sum[:hashHex/2])
	head := strings.ToValidUTF8(v[:min(len(v), MaxLabelBytes)], "\uFFFD")
	cut := MaxLabelBytes - len(tail)
	if len(head) > cut {
		head = head[:cut]
	}
	for len(head) > 0 && !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	return head + tail
}
