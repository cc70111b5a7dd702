package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/adaptive"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/httplimit"
	"github.com/floodgate-io/floodgate/internal/breaker"
	"github.com/floodgate-io/floodgate/internal/headers"
	"github.com/floodgate-io/floodgate/internal/problem"
)

// The defaults of BreakerOptions for --upstream-breaker-failures and
// --upstream-breaker-cool-down: a handful of failures in a row is an
// outage rather than bad luck, and a few seconds is long enough for a
// restarting upstream not to be probed by every request.
const (
	DefaultBreakerFailures = 5
	DefaultBreakerCoolDown = 5 * time.Second
)

// UnroutedName names the bulkhead and breaker of the requests no route
// matches, in metrics and logs.
const UnroutedName = "(unrouted)"

// ErrBreakerOpen is wrapped by the error of an upstream call that a
// route's open circuit breaker refused; the client gets 503.
var ErrBreakerOpen = errors.New("proxy: upstream circuit breaker open")

// BreakerOptions configure the circuit breaker put in front of the
// upstream of each route (one for the one-line proxy).
type BreakerOptions struct {
	// Failures is how many upstream failures in a row (a 5xx answer, no
	// answer, the upstream timeout) open the breaker; 0 turns it off.
	Failures int
	// CoolDown is how long it stays open before one probe request goes
	// upstream; required (> 0) with Failures.
	CoolDown time.Duration
}

// Protection configures what stands between the clients and the
// upstream besides the rate limits: a bulkhead (an adaptive.Limiter) and
// a circuit breaker per route.
type Protection struct {
	// Concurrency is the bulkhead of every route without a concurrency
	// block of its own, each route its own; nil: none.
	Concurrency *policy.Concurrency
	// Gate answers the requests the bulkheads shed and tells them how
	// admitted ones ended; required when any route has a limit.
	Gate *httplimit.ConcurrencyGate
	// Breaker is the circuit breaker of each route's upstream.
	Breaker BreakerOptions
	// Clock times the limiters and breakers; nil is the system clock.
	Clock floodgate.Clock
}

func (p Protection) check() error {
	b := p.Breaker
	switch {
	case b.Failures < 0:
		return fmt.Errorf("%w: breaker failures %d is negative", ErrInvalidOptions, b.Failures)
	case b.Failures > 0 && b.CoolDown <= 0:
		return fmt.Errorf("%w: a breaker (failures %d) needs a positive cool-down, got %s", ErrInvalidOptions, b.Failures, b.CoolDown)
	}
	if c := p.Concurrency; c != nil {
		if err := c.Check(); err != nil {
			return fmt.Errorf("%w: concurrency: %w", ErrInvalidOptions, err)
		}
	}
	return nil
}

// NewLimiter builds the adaptive.Limiter of a bulkhead, or nil when c is
// off. A fixed limit is adaptive.NewFixed; adaptive ones start from the
// algorithm's defaults (see adaptive.DefaultInitialLimit and its kin).
func NewLimiter(c policy.Concurrency, clock floodgate.Clock) (*adaptive.Limiter, error) {
	if c.Off {
		return nil, nil
	}
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("%w: concurrency: %w", ErrInvalidOptions, err)
	}
	var alg adaptive.Algorithm
	var err error
	switch {
	case c.Limit > 0:
		alg, err = adaptive.NewFixed(c.Limit)
	case c.Algorithm == "aimd":
		alg, err = adaptive.NewAIMD(adaptive.AIMDOptions{})
	case c.Algorithm == "vegas":
		alg, err = adaptive.NewVegas(adaptive.VegasOptions{})
	default:
		alg, err = adaptive.NewGradient2(adaptive.Gradient2Options{})
	}
	if err != nil {
		return nil, fmt.Errorf("%w: concurrency: %w", ErrInvalidOptions, err)
	}
	return adaptive.NewLimiter(adaptive.LimiterOptions{Algorithm: alg, Clock: clock, MaxQueue: c.Queue, MaxWait: c.MaxWait})
}

// guard is the protection of one route: its bulkhead and its upstream's
// breaker, and the reverse proxy that goes through that breaker.
type guard struct {
	name     string
	conc     policy.Concurrency // what limiter was built from
	limiter  *adaptive.Limiter  // nil: no bulkhead
	brk      *breaker.Breaker   // nil: no breaker
	forward  http.Handler
	openBody []byte // the 503 body while brk is open
}

// refused answers r with 503 when the route's breaker is open, before the
// request costs the caller any quota or takes a slot.
func (g *guard) refused(w http.ResponseWriter) bool {
	if g.brk == nil {
		return false
	}
	d, refused := g.brk.Refuses()
	if refused {
		g.writeOpen(w, d)
	}
	return refused
}

func (g *guard) writeOpen(w http.ResponseWriter, retryAfter time.Duration) {
	w.Header().Set(headers.RetryAfterField, headers.RetryAfter(max(retryAfter, time.Second)))
	problem.WriteBody(w, http.StatusServiceUnavailable, g.openBody)
}

// serve sends r through the bulkhead to next, which forwards it.
func (g *guard) serve(gate *httplimit.ConcurrencyGate, w http.ResponseWriter, r *http.Request, next http.Handler) {
	if g.limiter == nil {
		next.ServeHTTP(w, r)
		return
	}
	gate.Serve(w, r, g.limiter, g.name, next)
}

// bulkheads holds the guards of the routes of the policy set in force,
// rebuilt when it changes (a reload). A route whose name and settings
// stay keeps its guard, so its learned limit and its breaker survive the
// reload.
type bulkheads struct {
	prot       Protection
	log        *slog.Logger
	newForward func() *httputil.ReverseProxy

	mu  sync.Mutex // serialises rebuilds
	cur atomic.Pointer[guardSet]
}

// guardSet is the guards of one policy set.
type guardSet struct {
	set      *policy.Set // nil for the one-line proxy
	byRoute  map[*policy.Route]*guard
	unrouted *guard
	all      []*guard // in route order, unrouted last, for the metrics
}

func newBulkheads(upstream *url.URL, fw Forwarding, prot Protection) (*bulkheads, error) {
	if err := prot.check(); err != nil {
		return nil, err
	}
	if fw.Logger == nil {
		fw.Logger = slog.New(slog.DiscardHandler)
	}
	if fw.Transport == nil {
		fw.Transport = NewTransport() // one pool of connections for every route
	}
	b := &bulkheads{prot: prot, log: fw.Logger}
	b.newForward = func() *httputil.ReverseProxy {
		return NewReverseProxy(upstream, Forwarding{Transport: fw.Transport, UpstreamTimeout: fw.UpstreamTimeout, Logger: fw.Logger})
	}
	return b, nil
}

// lookup returns the guard of route (nil: the unrouted requests) of set.
func (b *bulkheads) lookup(set *policy.Set, route *policy.Route) (*guard, error) {
	s := b.cur.Load()
	if s == nil || s.set != set {
		var err error
		if s, err = b.rebuild(set); err != nil {
			return nil, err
		}
	}
	if route == nil {
		return s.unrouted, nil
	}
	return s.byRoute[route], nil
}

// rebuild makes the guards of set, keeping those whose route and
// settings are unchanged.
func (b *bulkheads) rebuild(set *policy.Set) (*guardSet, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.cur.Load()
	if old != nil && old.set == set {
		return old, nil
	}
	kept := map[string]*guard{}
	if old != nil {
		for _, g := range old.all {
			kept[g.name] = g
		}
	}
	s := &guardSet{set: set, byRoute: map[*policy.Route]*guard{}}
	taken := map[string]bool{UnroutedName: true}
	var routes []*policy.Route
	if set != nil {
		routes = set.Routes()
	}
	for _, rt := range routes {
		name := rt.Name
		if taken[name] { // routes[0] of two files
			name = fmt.Sprintf("%s (%s:%d)", rt.Name, rt.File, rt.Line)
		}
		taken[name] = true
		c := b.prot.Concurrency
		if rt.Concurrency != nil {
			c = rt.Concurrency
		}
		g, err := b.guard(name, c, kept[name])
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", rt.Name, err)
		}
		s.byRoute[rt] = g
		s.all = append(s.all, g)
	}
	g, err := b.guard(UnroutedName, b.prot.Concurrency, kept[UnroutedName])
	if err != nil {
		return nil, err
	}
	s.unrouted = g
	s.all = append(s.all, g)
	b.cur.Store(s)
	return s, nil
}

// guard returns old when it was built from the same settings, else a new
// guard named name with the bulkhead c (nil: none).
func (b *bulkheads) guard(name string, c *policy.Concurrency, old *guard) (*guard, error) {
	conc := policy.Concurrency{Off: true}
	if c != nil {
		conc = *c
	}
	if old != nil && old.conc == conc {
		return old, nil
	}
	g := &guard{name: name, conc: conc}
	var err error
	if g.limiter, err = NewLimiter(conc, b.prot.Clock); err != nil {
		return nil, err
	}
	if g.limiter != nil && b.prot.Gate == nil {
		return nil, fmt.Errorf("%w: a concurrency limit needs a Gate", ErrInvalidOptions)
	}
	if old != nil && old.brk != nil {
		g.brk, g.forward, g.openBody = old.brk, old.forward, old.openBody // the upstream is the same
		return g, nil
	}
	if b.prot.Breaker.Failures == 0 {
		g.forward = b.newForward()
		return g, nil
	}
	now := time.Now
	if b.prot.Clock != nil {
		now = b.prot.Clock.Now
	}
	g.brk = breaker.New(b.prot.Breaker.Failures, b.prot.Breaker.CoolDown, now)
	g.openBody = problem.Generic(http.StatusServiceUnavailable, fmt.Sprintf(
		"the upstream of %s is failing and its circuit breaker is open; retry after Retry-After seconds", name)).Marshal()
	rp := b.newForward()
	rp.Transport = &breakerTransport{base: rp.Transport, g: g, log: b.log}
	g.forward = rp
	return g, nil
}

// breakerTransport counts the outcomes of a route's upstream calls in its
// breaker: a 5xx, no answer or the upstream timeout is a failure; a call
// whose client left without an answer says nothing.
type breakerTransport struct {
	base http.RoundTripper
	g    *guard
	log  *slog.Logger
}

// breakerOpenError is the error of a call the breaker refused.
type breakerOpenError struct {
	g          *guard
	retryAfter time.Duration
}

func (e *breakerOpenError) Error() string {
	return fmt.Sprintf("%v: route %s: retry in %s", ErrBreakerOpen, e.g.name, e.retryAfter)
}
func (e *breakerOpenError) Unwrap() error { return ErrBreakerOpen }

func (t *breakerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	brk := t.g.brk
	ph, ok := brk.Admit()
	if !ok { // another request took the probe since refused() looked
		return nil, &breakerOpenError{g: t.g, retryAfter: brk.RetryAfter()}
	}
	resp, err := t.base.RoundTrip(r)
	switch {
	case err != nil && r.Context().Err() != nil:
		brk.Abandon(ph)
	case err != nil || resp.StatusCode >= 500:
		if brk.Failed(ph) {
			t.log.Warn("upstream failing, circuit breaker open", "route", t.g.name, "cool_down", brk.RetryAfter(), "error", failure(resp, err))
		}
	default:
		if brk.Succeeded(ph) {
			t.log.Info("upstream is back, circuit breaker closed", "route", t.g.name)
		}
	}
	return resp, err
}

// failure describes a failed upstream call for the log.
func failure(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	return resp.Status
}

// Protected is the one-line proxy's forwarding (NewReverseProxy) behind
// one bulkhead and one upstream breaker, both named "proxy". It is an
// http.Handler; put the rate limits in front of it.
type Protected struct {
	b    *bulkheads
	g    *guard
	gate *httplimit.ConcurrencyGate
}

// OneLineName names the one-line proxy's bulkhead and breaker in metrics
// and logs.
const OneLineName = "proxy"

// NewProtected returns the one-line proxy's forwarding behind prot, or an
// error wrapping ErrInvalidOptions.
func NewProtected(upstream *url.URL, fw Forwarding, prot Protection) (*Protected, error) {
	b, err := newBulkheads(upstream, fw, prot)
	if err != nil {
		return nil, err
	}
	g, err := b.guard(OneLineName, prot.Concurrency, nil)
	if err != nil {
		return nil, err
	}
	b.cur.Store(&guardSet{unrouted: g, all: []*guard{g}})
	return &Protected{b: b, g: g, gate: prot.Gate}, nil
}

// ServeHTTP forwards r through the breaker and the bulkhead.
func (p *Protected) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.g.refused(w) {
		return
	}
	p.g.serve(p.gate, w, r, p.g.forward)
}
