// Package httplimit is net/http middleware that puts rate limits in front
// of a handler, over any floodgate.Limiter (in memory, Redis, failover).
//
// Each Rule names a limit, how a request maps to a key (client address, API
// key, tenant header, path, or several at once) and what a request costs.
// The rules of one request are decided together: when the limiter is a
// floodgate.BatchLimiter, all or nothing (a rule that denies consumes
// nothing of the others). Otherwise they are decided one by one with
// AllowN, which is not atomic: when a later rule denies, the units the
// earlier rules took stay taken (the middleware gives units back only to
// correct a reconciled rule, see below).
//
// A denied request gets 429 Too Many Requests with
//
//	Retry-After: 17
//	RateLimit-Policy: "per-ip";q=100;w=60, "per-key";q=1000;w=3600
//	RateLimit: "per-ip";r=0;t=17, "per-key";r=412;t=2950
//	Content-Type: application/problem+json
//
//	{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded",
//	 "title":"Request cannot be satisfied as assigned quota has been exceeded",
//	 "status":429,"violated-policies":["per-ip"]}
//
// in the syntax of draft-ietf-httpapi-ratelimit-headers-10. An admitted
// request gets the same two RateLimit fields before the handler runs, so
// that well-behaved clients can slow down before they are refused.
//
// In RateLimit, r is the units that could still pass now and t the seconds
// until the policy's quota is whole again, except for a policy that denied
// the request: there t is the wait after which this request would pass, so
// that a client that honours t is never early and Retry-After (the longest
// such wait) is never earlier than any t of a violated policy.
//
// In RateLimit-Policy a window limit (fixed_window, sliding_log,
// sliding_window) is q=Rate;w=Period; a bucket (token_bucket, leaky_bucket)
// is q=Burst;w=the time the bucket takes to refill from empty, the largest
// amount a client can send at once and how long it takes to earn it back.
//
// # Costs known only after the response
//
// An LLM endpoint learns what a call cost (tokens) only once it has
// answered. A Rule with Actual reserves its Cost as an estimate when the
// request is decided and, after the handler returns, reads the actual
// amount from the response (a header, a trailer sent after a streamed body,
// or any ActualFunc) and corrects the key by the difference with
// floodgate.Adjuster: an overrun is charged even past the limit (the work
// was done; how much debt a key carries is the store's to say), and an
// over-estimate is given back, never beyond the key's full quota. The RateLimit fields of a response report the estimate;
// the next response reports the correction. The correction is made before
// the middleware returns, so a client's next request sees it, and with a
// context that outlives the client, so a client that leaves mid-stream is
// still charged. A response without a usable amount keeps the estimate and
// is reported to Options.OnReconcileError (or logged on Options.Logger).
//
// # Plans
//
// Options.Tiers gives each plan (free, pro, enterprise) its own rules. A
// request's plan comes from a header set by a trusted proxy, from a static
// API key table, or from a PlanFunc; its rules apply in addition to
// Options.Rules. A plan's rules are named plan/name ("pro/per-key") in the
// RateLimit fields and in the keys, so the counters of different plans
// never meet in a shared store.
//
// # Concurrency limits and load shedding
//
// Rate limits protect the handler from its callers. Concurrency puts an
// adaptive.Limiter in front of it instead, to protect it from itself: it
// admits a request while fewer than the limiter's (learned) limit are in
// flight, sheds the rest by priority class (X-Priority: critical, default,
// sheddable) with 503 Service Unavailable and Retry-After, and tells the
// limiter how each admitted request ended. ConcurrencyGate is the same with
// the limiter chosen per request (one per route: bulkheads).
package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/excerpt"
	"github.com/floodgate-io/floodgate/internal/headers"
	"github.com/floodgate-io/floodgate/internal/problem"
	"github.com/floodgate-io/floodgate/observe"
)

// ErrInvalidOptions is wrapped by every error New returns for bad options.
var ErrInvalidOptions = errors.New("httplimit: invalid options")

// Rule is one limit applied to the requests that pass the middleware.
type Rule struct {
	// Name identifies the policy in the RateLimit fields and in the keys
	// (each key is Name+":"+value). Default: derived from the limit, as
	// "100-per-1m0s". Names must be unique and must not contain ':', so
	// that the keys of different rules never meet in a shared store.
	Name string
	// Limit is the rate limit; it must be valid (floodgate.Limit.Validate).
	Limit floodgate.Limit
	// Key maps a request to the value it is counted under. Required.
	Key KeyFunc
	// Cost is how many units a request takes; nil means 1. An error or a
	// negative cost answers 400 with the error's text. With Actual set it
	// is the estimate reserved before the handler runs.
	Cost CostFunc
	// Actual, when set, reads what the request really cost from its
	// response once the handler has returned; the key is then adjusted by
	// actual - estimate (see the package doc). It needs a limiter that
	// implements floodgate.Adjuster.
	Actual ActualFunc
}

// CostFunc says how many units a request costs (tokens, bytes, rows).
type CostFunc func(r *http.Request) (int64, error)

// CostFromHeader reads the cost from a request header holding a
// non-negative decimal integer. A missing or malformed header is an error
// that names the header, so the client is told what to fix (400). Trust
// the header only when a component you control sets it.
func CostFromHeader(name string) CostFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (int64, error) {
		return parseCount("header "+name, r.Header.Values(name))
	}
}

// FixedCost costs every request n units: a fixed estimate for a rule with
// Actual ("reserve 1,000 tokens"). A negative n answers 400 naming the
// rule, as any negative cost does.
func FixedCost(n int64) CostFunc {
	return func(*http.Request) (int64, error) {
		if n < 0 {
			return 0, fmt.Errorf("fixed cost %d is negative", n)
		}
		return n, nil
	}
}

// parseCount reads the one non-negative decimal integer of a field (named
// as "header X-Tokens" in errors) given as values.
func parseCount(field string, vs []string) (int64, error) {
	if len(vs) == 0 {
		return 0, fmt.Errorf("missing %s", field)
	}
	if len(vs) > 1 {
		return 0, fmt.Errorf("%s given %d times, want once", field, len(vs))
	}
	v := strings.TrimSpace(vs[0])
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || v[0] == '+' {
		return 0, fmt.Errorf("%s must be a non-negative integer, got %s", field, excerpt.Quote(vs[0]))
	}
	return n, nil
}

// Missing says what to do with a request that has no value for a rule's key.
type Missing int

const (
	// Deny answers 400 Bad Request naming the rule: the request lacks what
	// the service requires (an API key, a tenant header).
	Deny Missing = iota
	// Pass skips the rule for that request.
	Pass
	// Shared counts all such requests of a rule in one bucket of their own.
	Shared
)

// DefaultMaxDelay is the default of Options.MaxDelay.
const DefaultMaxDelay = 10 * time.Second

// DefaultReconcileTimeout is the default of Options.ReconcileTimeout.
const DefaultReconcileTimeout = 2 * time.Second

// Options configures the middleware.
type Options struct {
	// Rules are the limits every request is subject to. There must be at
	// least one rule here or in Tiers.
	Rules []Rule
	// Tiers, when set, adds the rules of the request's plan to Rules.
	Tiers *Tiers
	// Missing is what to do when a rule's KeyFunc has no value, in Rules
	// and in plans alike.
	Missing Missing
	// LegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (seconds) for the rule with the least remaining,
	// for clients that predate the RateLimit fields.
	LegacyHeaders bool
	// NoShaping passes admitted requests on at once, ignoring the Delay a
	// leaky_bucket limit asks for. By default the middleware holds a
	// request for its Delay, so that requests reach the handler spaced as
	// the limit says. A client that goes away while held (its request's
	// context is done) is dropped: the handler is not called and nothing is
	// written, and when the limiter can give units back
	// (floodgate.Adjuster) its place in the queue is released for the
	// requests after it; otherwise it stays consumed.
	NoShaping bool
	// MaxDelay is the longest a request is held; a request that would wait
	// longer is refused with 429 and a Retry-After of its delay, and its
	// place is released as above. 0 means DefaultMaxDelay. Give leaky
	// buckets a Burst small enough that Delay stays below it.
	MaxDelay time.Duration
	// OnError answers a request the limiter could not decide (the store is
	// down, a context was cancelled). nil answers 503 with a problem+json
	// body that does not reveal the error. Wrap the limiter in
	// failover.New to decide by policy instead.
	OnError func(w http.ResponseWriter, r *http.Request, err error)
	// OnReconcileError is told, with a *ReconcileError, when a rule with
	// Actual keeps its estimate because the response gave no usable amount
	// (errors.Is ErrBadActual), or when its adjustment failed (the store's
	// error). The response has been sent by then: this is for metrics and
	// logs. nil logs the error on Logger at level Warn.
	OnReconcileError func(r *http.Request, err error)
	// Logger receives reconciliation errors when OnReconcileError is nil;
	// nil is slog.Default().
	Logger *slog.Logger
	// Name is the policy name the middleware reports its decisions under
	// (observe.Event.Policy), so that metrics and logs can tell several
	// middlewares of one process apart; "" is "http".
	Name string
	// Observer, when set, is told of every rule's decision
	// (observe.Report): metrics (telemetry/metrics), traces
	// (telemetry/tracing), decision logs (observe/decisionlog), top
	// consumers (observe/insight); observe.Multi combines several. The
	// event's Client is the connection's peer address. Above
	// observe.DefaultFullRate decisions a second, most are reported
	// untimed (observe.SampleByDefault); wrap the Observer with
	// observe.Sample to choose.
	Observer observe.Observer
	// ReconcileTimeout bounds the adjustments of one response. They run
	// after the handler, on a context that the client leaving does not
	// cancel (the work has been done), so this is all that bounds them.
	// 0 means DefaultReconcileTimeout.
	ReconcileTimeout time.Duration
}

// rule is a validated Rule; its Name is the policy's full name ("pro/tokens"
// for a plan's rule).
type rule struct{ Rule }

// New returns middleware that limits requests with l under opts, or an
// error wrapping ErrInvalidOptions (and floodgate.ErrInvalidLimit for a bad
// limit) that names the faulty rule or plan.
func New(l floodgate.Limiter, opts Options) (func(http.Handler) http.Handler, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: nil limiter", ErrInvalidOptions)
	}
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	names := map[string]string{} // full rule name -> where it was given
	rules, err := compileRules(opts.Rules, "", names)
	if err != nil {
		return nil, err
	}
	plans, err := compileTiers(opts.Tiers, rules, names)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no rules", ErrInvalidOptions)
	}
	opts.Observer = observe.SampleByDefault(opts.Observer)
	m := &middleware{l: l, rules: rules, plans: plans, opts: opts}
	m.batch, _ = l.(floodgate.BatchLimiter)
	m.adjuster, _ = l.(floodgate.Adjuster)
	if err := m.checkAdjuster(); err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}, nil
}

// defaults checks the options that are not rules and fills in defaults.
func (opts *Options) defaults() error {
	if opts.Missing < Deny || opts.Missing > Shared {
		return fmt.Errorf("%w: unknown Missing %d", ErrInvalidOptions, opts.Missing)
	}
	if opts.MaxDelay < 0 {
		return fmt.Errorf("%w: negative MaxDelay %s", ErrInvalidOptions, opts.MaxDelay)
	}
	if opts.ReconcileTimeout < 0 {
		return fmt.Errorf("%w: negative ReconcileTimeout %s", ErrInvalidOptions, opts.ReconcileTimeout)
	}
	if opts.MaxDelay == 0 {
		opts.MaxDelay = DefaultMaxDelay
	}
	if opts.ReconcileTimeout == 0 {
		opts.ReconcileTimeout = DefaultReconcileTimeout
	}
	if opts.OnError == nil {
		opts.OnError = defaultOnError
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Name == "" {
		opts.Name = "http"
	}
	return nil
}

// compileRules validates rs, the rules of plan ("" for Options.Rules), and
// names them in full. names holds the full names taken so far, with where
// they were given, so that no two rules anywhere share a name (and a key).
func compileRules(rs []Rule, plan string, names map[string]string) ([]rule, error) {
	out := make([]rule, len(rs))
	for i, r := range rs {
		where := fmt.Sprintf("rule %d", i)
		if plan != "" {
			where = fmt.Sprintf("plan %q rule %d", plan, i)
		}
		if r.Name == "" {
			r.Name = fmt.Sprintf("%d-per-%s", r.Limit.Rate, r.Limit.Period)
		}
		if err := r.Limit.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %s (%q): %w", ErrInvalidOptions, where, r.Name, err)
		}
		if r.Key == nil {
			return nil, fmt.Errorf("%w: %s (%q): nil Key", ErrInvalidOptions, where, r.Name)
		}
		if strings.Contains(r.Name, ":") {
			return nil, fmt.Errorf("%w: %s: name %q contains ':'", ErrInvalidOptions, where, r.Name)
		}
		if plan != "" {
			r.Name = plan + "/" + r.Name
		}
		if prev, dup := names[r.Name]; dup {
			return nil, fmt.Errorf("%w: %s and %s are both named %q; give them distinct Names",
				ErrInvalidOptions, prev, where, r.Name)
		}
		names[r.Name] = where
		out[i] = rule{Rule: r}
	}
	return out, nil
}

type middleware struct {
	l        floodgate.Limiter
	batch    floodgate.BatchLimiter
	adjuster floodgate.Adjuster // nil when l cannot adjust
	rules    []rule             // Options.Rules
	plans    *planTable         // nil without Tiers
	opts     Options
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	rules := m.rules
	if m.plans != nil {
		var status int
		var detail string
		if rules, status, detail = m.plans.pick(r); status != 0 {
			writeProblem(w, status, detail)
			return
		}
	}
	applied, reqs, ok := m.requests(w, r, rules)
	if !ok {
		return
	}
	if len(reqs) == 0 {
		next.ServeHTTP(w, r)
		return
	}
	var rep observe.Reporting
	ctx := rep.Start(r.Context(), m.opts.Observer, observe.Decided{
		Surface: observe.SurfaceHTTP, Policy: m.opts.Name, Client: peer(r), Requests: reqs, Limiter: m.l})
	name := func(i int) string { return applied[i].Name }
	ds, err := m.decide(ctx, reqs)
	rep.Decided()
	if err != nil {
		rep.Report(nil, err, name)
		m.opts.OnError(w, r, err)
		return
	}
	c := floodgate.Combine(ds)
	if !c.Allowed {
		rep.Report(ds, nil, name)
		m.deny(w, applied, ds, c, violated(ds))
		return
	}
	if c.Delay > 0 && !m.opts.NoShaping && !m.hold(w, r, applied, ds, c) {
		rep.Report(ds, nil, name) // as held: refused when its delay was too long
		m.release(r, reqs)
		return
	}
	rep.Report(ds, nil, name)
	m.setHeaders(w.Header(), applied, ds, nil, c)
	if !reconciles(applied) {
		next.ServeHTTP(w, r)
		return
	}
	m.serveReconciled(w, r, next, applied, reqs)
}

// peer is the host of the connection's peer, or "" when it cannot be read.
func peer(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	return host
}

// requests maps r to one request per rule that applies to it. It answers
// 400 and returns false when r lacks a key (under Deny) or its cost cannot
// be read.
func (m *middleware) requests(w http.ResponseWriter, r *http.Request, rules []rule) ([]*rule, []floodgate.Request, bool) {
	applied := make([]*rule, 0, len(rules))
	reqs := make([]floodgate.Request, 0, len(rules))
	for i := range rules {
		ru := &rules[i]
		v, ok := ru.Key(r)
		key := ru.Name + ":" + v
		if !ok {
			switch m.opts.Missing {
			case Pass:
				continue
			case Shared:
				key = ru.Name // no ':', so no value's key can be this one
			default:
				writeProblem(w, http.StatusBadRequest, "missing key for rate limit policy "+strconv.Quote(ru.Name))
				return nil, nil, false
			}
		}
		if err := floodgate.CheckLength("key", key, floodgate.MaxKeyBytes); err != nil {
			// The request made the key (a header, a path): its fault,
			// answered before any store is asked, whatever the store.
			writeProblem(w, http.StatusBadRequest, "rate limit policy "+strconv.Quote(ru.Name)+": "+err.Error())
			return nil, nil, false
		}
		cost := int64(1)
		if ru.Cost != nil {
			c, err := ru.Cost(r)
			if err == nil && c < 0 {
				err = fmt.Errorf("negative cost %d", c)
			}
			if err != nil {
				writeProblem(w, http.StatusBadRequest, "rate limit policy "+strconv.Quote(ru.Name)+": "+err.Error())
				return nil, nil, false
			}
			cost = c
		}
		applied = append(applied, ru)
		reqs = append(reqs, floodgate.Request{Key: key, Limit: ru.Limit, Cost: cost})
	}
	return applied, reqs, true
}

// hold keeps an admitted request for its Delay (shaping). It returns false
// when the request must not be served: its delay is beyond MaxDelay (it is
// refused) or its client left while held.
func (m *middleware) hold(w http.ResponseWriter, r *http.Request, applied []*rule, ds []floodgate.Decision, c floodgate.Decision) bool {
	if c.Delay > m.opts.MaxDelay {
		// Report the hold as the wait: after it this request's place
		// has left the queue, so a retry then is not held as long.
		late := make([]bool, len(ds))
		for i := range ds {
			if ds[i].Delay > m.opts.MaxDelay {
				late[i], ds[i].Allowed, ds[i].RetryAfter = true, false, ds[i].Delay
			}
		}
		m.deny(w, applied, ds, c, late)
		return false
	}
	t := time.NewTimer(c.Delay)
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		t.Stop()
		return false // the client left: nobody to answer, nothing to serve
	}
}

// release gives back what a request that will not be served took, when the
// limiter can: its place in a leaky bucket's queue goes to the requests
// after it. It runs on a context that the client's leaving does not cancel.
func (m *middleware) release(r *http.Request, reqs []floodgate.Request) {
	if m.adjuster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.opts.ReconcileTimeout)
	defer cancel()
	for _, rq := range reqs {
		if rq.Cost == 0 {
			continue
		}
		if err := m.adjuster.Adjust(ctx, rq.Key, rq.Limit, -rq.Cost); err != nil {
			m.opts.Logger.WarnContext(ctx, "httplimit: a request that was not served kept its place", "key", rq.Key, "err", err)
		}
	}
}

// decide runs the requests all or nothing when the limiter can, else one
// by one (see the package doc). A denied sequence reads the rules it did
// not reach with cost 0, so that the headers still report them.
func (m *middleware) decide(ctx context.Context, reqs []floodgate.Request) ([]floodgate.Decision, error) {
	if m.batch != nil {
		ds, err := m.batch.AllowAll(ctx, reqs)
		if err == nil && len(ds) != len(reqs) {
			err = fmt.Errorf("httplimit: limiter gave %d decisions for %d requests", len(ds), len(reqs))
		}
		return ds, err
	}
	ds := make([]floodgate.Decision, len(reqs))
	denied := false
	for i, rq := range reqs {
		if denied {
			rq.Cost = 0
		}
		d, err := m.l.AllowN(ctx, rq.Key, rq.Limit, rq.Cost)
		if err != nil {
			return nil, err
		}
		if denied {
			d.Allowed, d.RetryAfter, d.Delay = false, 0, 0
		} else if !d.Allowed {
			denied = true
		}
		ds[i] = d
	}
	return ds, nil
}

// violated marks the decisions that caused a denial (floodgate.Violated).
func violated(ds []floodgate.Decision) []bool {
	out := make([]bool, len(ds))
	for i, d := range ds {
		out[i] = floodgate.Violated(d, ds)
	}
	return out
}

func (m *middleware) deny(w http.ResponseWriter, applied []*rule, ds []floodgate.Decision, c floodgate.Decision, bad []bool) {
	h := w.Header()
	m.setHeaders(h, applied, ds, bad, c)
	// The longest wait of the violated policies; never if one can never
	// pass. At least a second: a denied client told 0 would come right back.
	wait, never := time.Duration(0), false
	names := make([]string, 0, len(ds))
	for i, d := range ds {
		if !bad[i] {
			continue
		}
		names = append(names, applied[i].Name)
		if d.RetryAfter < 0 {
			never = true
		}
		wait = max(wait, d.RetryAfter)
	}
	if !never {
		h.Set(headers.RetryAfterField, headers.RetryAfter(max(wait, time.Second)))
	}
	problem.Write(w, problem.QuotaExceeded(names))
}

// setHeaders writes the RateLimit fields (and the legacy ones if asked).
// bad marks the violated policies, whose t is their wait (see the package
// doc); nil for an admitted request.
func (m *middleware) setHeaders(h http.Header, applied []*rule, ds []floodgate.Decision, bad []bool, c floodgate.Decision) {
	qs := make([]headers.Quota, len(ds))
	for i, d := range ds {
		qs[i] = headers.QuotaOf(applied[i].Name, applied[i].Limit, d)
		if bad != nil && bad[i] && d.RetryAfter > 0 {
			qs[i].Reset = d.RetryAfter
		}
	}
	headers.Set(h, qs)
	if m.opts.LegacyHeaders {
		h.Set("X-RateLimit-Limit", strconv.FormatInt(max(c.Limit, 0), 10))
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(max(c.Remaining, 0), 10))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(headers.Seconds(c.ResetAfter), 10))
	}
}

// writeProblem answers a generic problem (type about:blank, the status's
// text as title).
func writeProblem(w http.ResponseWriter, status int, detail string) {
	problem.Write(w, problem.Generic(status, detail))
}

func defaultOnError(w http.ResponseWriter, _ *http.Request, _ error) {
	writeProblem(w, http.StatusServiceUnavailable, "the rate limiter could not decide; retry later")
}
