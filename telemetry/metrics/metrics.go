// Package metrics is the Prometheus observer of Floodgate's decisions: an
// observe.Spanner that floodgate serve, floodgate proxy, httplimit and
// grpclimit all report to, so that their metrics have the same names and
// labels everywhere.
//
// The metrics:
//
//	floodgate_decisions_total{policy, limit, result}        counter, one per limit decided
//	floodgate_near_limit_total{policy, limit}               counter, allowed decisions at NearLimitRatio of the limit or above
//	floodgate_degraded_decisions_total{policy, result}      counter, limits a failure policy decided for the store
//	floodgate_decision_duration_seconds{policy}             histogram, one per request, 10µs to 1s
//	floodgate_store_duration_seconds{policy}                histogram, one per request that waited for the store
//	floodgate_store_errors_total{kind}                      counter: timeout, connection, script, other
//	floodgate_breaker_state{state}                          gauge, 1 for the current state (WatchBreaker)
//	floodgate_config_reloads_total{result}                  counter (success, failure)
//	floodgate_config_last_reload_success_timestamp_seconds  gauge
//
// The counters count every decision. The two histograms observe the timed
// requests alone (observe.Sampler): below its FullRate decisions a second
// (default 10,000) every request is timed; above it they are a uniform
// sample of about FullRate requests a second, so their quantiles and
// averages hold but their _count is not the number of requests: take
// rates from floodgate_decisions_total.
//
// result is observe.Outcome.String(): allowed, denied, shadow_denied, shed
// or error, as envoyproxy/ratelimit's within_limit, over_limit and
// shadow_mode, plus what a proxy sheds and what could not be decided.
//
// Label cardinality is bounded whatever the callers report: no key ever
// becomes a label; policy and limit labels are cut to MaxLabelBytes (see
// Truncate); past Options.MaxPolicies distinct policies, and past
// Options.MaxLimits distinct (policy, limit) pairs, decisions are counted
// under Other. The series of a pair are made when first needed, so a
// limit that never denies has no denied series.
//
// Recording a decision in series that exist allocates nothing and takes no
// lock: an event's series are found in one lookup by its (policy, limit)
// pair, the first four pairs by comparing names, the others in a
// copy-on-write map read with an atomic load (at most MaxPolicies +
// MaxLimits pairs; past it, the policy and limit lookups that apply the
// bounds).
//
// This package does not serve HTTP by itself (Handler gives a handler to
// mount) nor keep per-key state: top consumers and near-limit keys are
// observe/insight's.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/floodgate-io/floodgate/observe"
)

// Defaults of Options.
const (
	// DefaultNearLimitRatio is envoyproxy/ratelimit's NEAR_LIMIT_RATIO.
	DefaultNearLimitRatio = 0.8
	// DefaultMaxPolicies bounds the policy label values.
	DefaultMaxPolicies = 256
	// DefaultMaxLimits bounds the (policy, limit) pairs, all policies
	// together; each pair has up to six series (five results and
	// near-limit).
	DefaultMaxLimits = 2000
)

// ErrInvalidOptions is wrapped by New's error for Options it cannot use.
var ErrInvalidOptions = errors.New("metrics: invalid options")

// Options tune an Observer. The zero value is the defaults.
type Options struct {
	// NearLimitRatio is the share of a limit (observe.Event.Used) at or
	// above which an allowed decision counts in floodgate_near_limit_total.
	// 0 means DefaultNearLimitRatio; else it must be in (0, 1].
	NearLimitRatio float64
	// MaxPolicies bounds the distinct policy labels; 0 means
	// DefaultMaxPolicies. Past it, policies are counted as Other.
	MaxPolicies int
	// MaxLimits bounds the distinct (policy, limit) label pairs; 0 means
	// DefaultMaxLimits. Past it, a policy's new limits are counted under
	// its Other limit.
	MaxLimits int
	// Buckets are the latency histograms' upper bounds in seconds,
	// increasing; nil means Buckets().
	Buckets []float64
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case math.IsNaN(o.NearLimitRatio) || o.NearLimitRatio < 0 || o.NearLimitRatio > 1:
		return o, fmt.Errorf("%w: NearLimitRatio %v: want a share in (0, 1], or 0 for %v", ErrInvalidOptions, o.NearLimitRatio, DefaultNearLimitRatio)
	case o.MaxPolicies < 0:
		return o, fmt.Errorf("%w: MaxPolicies %d is negative", ErrInvalidOptions, o.MaxPolicies)
	case o.MaxLimits < 0:
		return o, fmt.Errorf("%w: MaxLimits %d is negative", ErrInvalidOptions, o.MaxLimits)
	}
	for i := 1; i < len(o.Buckets); i++ {
		if !(o.Buckets[i] > o.Buckets[i-1]) {
			return o, fmt.Errorf("%w: Buckets %v do not increase", ErrInvalidOptions, o.Buckets)
		}
	}
	if o.NearLimitRatio == 0 {
		o.NearLimitRatio = DefaultNearLimitRatio
	}
	if o.MaxPolicies == 0 {
		o.MaxPolicies = DefaultMaxPolicies
	}
	if o.MaxLimits == 0 {
		o.MaxLimits = DefaultMaxLimits
	}
	if o.Buckets == nil {
		o.Buckets = Buckets()
	}
	return o, nil
}

// Buckets are the default latency buckets: 10µs to 1s, 1-2.5-5 per decade.
func Buckets() []float64 {
	var out []float64
	for decade := 1e-5; decade < 1; decade *= 10 {
		out = append(out, decade, 2.5*decade, 5*decade)
	}
	return append(out, 1)
}

// Observer records decisions in Prometheus metrics. It is an
// observe.Spanner: Begin does nothing, End observes the request's latency
// (once per request, whatever the number of its limits, and also for a
// request that no limit applied to). It is safe for concurrent use.
type Observer struct {
	opts     Options
	gatherer prometheus.Gatherer

	decisions   *prometheus.CounterVec
	nearLimit   *prometheus.CounterVec
	degraded    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	storeTime   *prometheus.HistogramVec
	storeErrors [numKinds]prometheus.Counter
	reloads     *prometheus.CounterVec
	lastReload  prometheus.Gauge
	breaker     *breakerCollector

	policies   *labelSet[string, *policySeries]
	nPolicies  atomic.Int64
	nLimits    atomic.Int64 // (policy, limit) pairs, all policies together
	overflowed *policySeries
	// pairs finds an event's series in one lookup: the (policy, limit)
	// names as reported, to the series policy and limit found for them,
	// Other's included. Bounded by MaxPolicies + MaxLimits pairs
	// (nPairs); past it, events take the two lookups.
	pairs  *labelSet[string, *pair]
	nPairs atomic.Int64
	// firstPairs are the first fewPairs pairs made, read before pairs:
	// a string comparison of names that usually share their bytes (a
	// rule's name) is cheaper than the hash of a map lookup, and most
	// configurations have few pairs.
	firstPairs atomic.Pointer[[]*pair]
}

// fewPairs is how many pairs firstPairs holds.
const fewPairs = 4

// pair is the series of a (policy, limit) pair of names, each as labelKey
// gives it, in pairs under the limit's name, with the other pairs of that
// limit name (next): a limit name is rarely under more than a few
// policies, and a string key takes the map's fastest path (a small map
// compares a short key without hashing it).
type pair struct {
	policy, limit string
	s             pairSeries
	next          *pair
}

// pairSeries are the series an event's (policy, limit) names record in.
type pairSeries struct {
	p *policySeries
	l *limitSeries
}

// policySeries are the series of one policy label.
type policySeries struct {
	label     string
	latency   lazy[prometheus.Observer]
	storeTime lazy[prometheus.Observer]
	degraded  [numResults]lazy[prometheus.Counter]
	limits    *labelSet[string, *limitSeries]
	other     lazy[*limitSeries] // the limits past MaxLimits
}

// limitSeries are the series of one (policy, limit) pair.
type limitSeries struct {
	label     string
	decisions [numResults]lazy[prometheus.Counter]
	near      lazy[prometheus.Counter]
}

// numResults is the size of an array indexed by observe.Outcome; index 0
// holds any outcome past the known ones ("unknown").
const numResults = int(observe.Error) + 1

func resultIndex(o observe.Outcome) int {
	if int(o) >= numResults {
		return 0
	}
	return int(o)
}

// New registers the metrics with reg and returns an Observer that records
// in them. nil reg is a new registry. When reg is also a
// prometheus.Gatherer (a *prometheus.Registry is), Handler serves what it
// gathers. Metrics that reg already has from another Observer (New called
// twice on one registry) are shared; any other registration conflict is an
// error.
func New(reg prometheus.Registerer, opts Options) (*Observer, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	o := &Observer{opts: opts, gatherer: prometheus.DefaultGatherer}
	if g, ok := reg.(prometheus.Gatherer); ok {
		o.gatherer = g
	}
	r := registrar{reg: reg}
	o.decisions = register(&r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_decisions_total",
		Help: "Decisions, one per limit decided, by policy, limit and result (allowed, denied, shadow_denied, shed, error).",
	}, []string{"policy", "limit", "result"}))
	o.nearLimit = register(&r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_near_limit_total",
		Help: fmt.Sprintf("Allowed decisions that left the key at %v of its limit or more, by policy and limit.", opts.NearLimitRatio),
	}, []string{"policy", "limit"}))
	o.degraded = register(&r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_degraded_decisions_total",
		Help: "Decisions that a failure policy made because the store did not answer, by policy and result.",
	}, []string{"policy", "result"}))
	o.latency = register(&r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "floodgate_decision_duration_seconds",
		Help:    "Time to decide a request, all its limits together, by policy. Above the observe full rate (10,000/s by default) a uniform sample of the requests; floodgate_decisions_total counts them all.",
		Buckets: opts.Buckets,
	}, []string{"policy"}))
	o.storeTime = register(&r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "floodgate_store_duration_seconds",
		Help:    "Time a request's decision waited for the store, by policy. Sampled as floodgate_decision_duration_seconds.",
		Buckets: opts.Buckets,
	}, []string{"policy"}))
	storeErrors := register(&r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_store_errors_total",
		Help: "Limits the store failed to decide, by kind (timeout, connection, script, other).",
	}, []string{"kind"}))
	for k := range o.storeErrors {
		o.storeErrors[k] = storeErrors.WithLabelValues(kind(k).String())
	}
	o.reloads = register(&r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "floodgate_config_reloads_total",
		Help: "Policy reloads, by result (success, failure).",
	}, []string{"result"}))
	o.lastReload = register(&r, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "floodgate_config_last_reload_success_timestamp_seconds",
		Help: "When the policies were last loaded successfully, in Unix seconds.",
	}))
	for _, res := range []string{"success", "failure"} {
		o.reloads.WithLabelValues(res)
	}
	o.breaker = register(&r, newBreakerCollector())
	if r.err != nil {
		return nil, r.err
	}
	o.policies = newLabelSet[string, *policySeries](&o.nPolicies, opts.MaxPolicies)
	o.overflowed = o.newPolicy(Other)
	o.pairs = newLabelSet[string, *pair](&o.nPairs, opts.MaxPolicies+opts.MaxLimits)
	return o, nil
}

// registrar registers collectors until the first error, which it keeps.
type registrar struct {
	reg prometheus.Registerer
	err error
}

// register registers c with r's registry, or returns the collector of the
// same type it already has.
func register[C prometheus.Collector](r *registrar, c C) C {
	if r.err != nil {
		return c
	}
	err := r.reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	r.err = fmt.Errorf("metrics: registering: %w", err)
	return c
}

// Handler serves the metrics of the registry New was given, in the
// Prometheus exposition formats.
func (o *Observer) Handler() http.Handler {
	return promhttp.HandlerFor(o.gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Observe implements observe.Observer: it counts the limit's decision,
// and its near-limit, degraded and store-error series when they apply.
func (o *Observer) Observe(_ context.Context, e observe.Event) {
	s := o.series(e.Policy, e.Limit)
	p, l := s.p, s.l
	i := resultIndex(e.Outcome)
	l.decisions[i].get(func() prometheus.Counter {
		return o.decisions.WithLabelValues(p.label, l.label, observe.Outcome(i).String())
	}).Inc()
	if e.Outcome == observe.Allowed && e.Decision.Limit > 0 && e.Used() >= o.opts.NearLimitRatio {
		l.near.get(func() prometheus.Counter { return o.nearLimit.WithLabelValues(p.label, l.label) }).Inc()
	}
	if e.Degraded {
		p.degraded[i].get(func() prometheus.Counter {
			return o.degraded.WithLabelValues(p.label, observe.Outcome(i).String())
		}).Inc()
	}
	if k, ok := classify(e.Err); ok {
		o.storeErrors[k].Inc()
	}
}

// Begin implements observe.Spanner; it returns ctx as is.
func (o *Observer) Begin(ctx context.Context, _, _ string) context.Context { return ctx }

// End implements observe.Spanner: it observes the request's latency, and
// its store time when it waited for the store, when the request was timed
// (not observe.Summary.Untimed).
func (o *Observer) End(_ context.Context, s observe.Summary) {
	if s.Untimed {
		return // sampled out: the histograms are a uniform sample of the timed
	}
	p := o.policy(s.Policy)
	if s.Latency > 0 {
		p.latency.get(func() prometheus.Observer { return o.latency.WithLabelValues(p.label) }).Observe(s.Latency.Seconds())
	}
	if s.StoreTime > 0 {
		p.storeTime.get(func() prometheus.Observer { return o.storeTime.WithLabelValues(p.label) }).Observe(s.StoreTime.Seconds())
	}
}

// ConfigReload counts a reload of the policies, successful or not.
func (o *Observer) ConfigReload(ok bool) {
	if !ok {
		o.reloads.WithLabelValues("failure").Inc()
		return
	}
	o.reloads.WithLabelValues("success").Inc()
	o.lastReload.SetToCurrentTime()
}

// policy returns the series of a policy name, Other's past MaxPolicies.
func (o *Observer) policy(name string) *policySeries {
	if name == "" {
		name = Explicit
	}
	p, ok := o.policies.get(labelKey(name), func() *policySeries { return o.newPolicy(Truncate(name)) })
	if !ok {
		return o.overflowed
	}
	return p
}

// series returns the series of a (policy, limit) pair of names, found
// once by policy and limit (the cardinality bounds apply there) and then
// in one lookup.
func (o *Observer) series(policy, limit string) pairSeries {
	pk, lk := labelKey(policy), labelKey(limit)
	if first := o.firstPairs.Load(); first != nil {
		for _, c := range *first {
			if c.limit == lk && c.policy == pk {
				return c.s
			}
		}
	}
	head, _ := o.pairs.find(lk)
	for c := head; c != nil; c = c.next {
		if c.policy == pk {
			return c.s
		}
	}
	p := o.policy(policy)
	s := pairSeries{p: p, l: o.limit(p, limit)}
	o.pairs.put(lk, func(next *pair) *pair {
		// The names as reported, not copies: the next events of a rule
		// usually carry the same strings, which compare without
		// reading their bytes.
		c := &pair{policy: pk, limit: lk, s: s, next: next}
		o.remember(c)
		return c
	})
	return s
}

// remember adds c to firstPairs while they are fewer than fewPairs. It
// runs under pairs' lock.
func (o *Observer) remember(c *pair) {
	var first []*pair
	if p := o.firstPairs.Load(); p != nil {
		first = *p
	}
	if len(first) < fewPairs {
		first = append(first[:len(first):len(first)], c)
		o.firstPairs.Store(&first)
	}
}

// labelKey is the key a name's series are found by: the name itself when
// it is short (checking it is valid UTF-8 is left to the series' making,
// once), its label when it is long, so that a set never holds a long
// string.
func labelKey(name string) string {
	if len(name) <= MaxLabelBytes {
		return name
	}
	return Truncate(name)
}

func (o *Observer) newPolicy(label string) *policySeries {
	return &policySeries{label: label, limits: newLabelSet[string, *limitSeries](&o.nLimits, o.opts.MaxLimits)}
}

// limit returns the series of a limit name under p, p's Other limit's
// past MaxLimits.
func (o *Observer) limit(p *policySeries, name string) *limitSeries {
	if name == "" {
		name = None
	}
	l, ok := p.limits.get(labelKey(name), func() *limitSeries { return &limitSeries{label: Truncate(name)} })
	if !ok {
		return p.other.get(func() *limitSeries { return &limitSeries{label: Other} })
	}
	return l
}
