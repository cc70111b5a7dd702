package httplimit

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/adaptive"
	"github.com/floodgate-io/floodgate/internal/headers"
	"github.com/floodgate-io/floodgate/internal/problem"
	"github.com/floodgate-io/floodgate/observe"
)

// DefaultPriorityHeader is the request header the concurrency middleware
// reads a request's class from when ConcurrencyOptions.PriorityHeader is
// empty.
const DefaultPriorityHeader = "X-Priority"

// ConcurrencyLimit is the observe.Event.Limit of the requests the
// concurrency middleware sheds; the Event's Key is the request's class.
const ConcurrencyLimit = "concurrency"

// ConcurrencyOptions configures the concurrency middleware (Concurrency,
// NewConcurrencyGate).
type ConcurrencyOptions struct {
	// PriorityHeader names the request header that carries the request's
	// class: critical, default or sheddable, in any case. A missing header,
	// or a value that is none of the three, is Default: a client that sends
	// a class this server does not know is served as ordinary traffic, not
	// refused. "" is DefaultPriorityHeader. Trust the header only when a
	// component you control sets it (strip it from outside traffic at the
	// edge): a caller that may send "critical" itself takes the slots held
	// back for critical traffic.
	PriorityHeader string
	// Priority, when set, gives the request's class instead of the header.
	// A value that is not one of adaptive's classes answers 500 naming it:
	// that is a bug in the function, not the client's fault.
	Priority func(*http.Request) adaptive.Priority
	// Timeout, when positive, is the handler time past which a request
	// counts as dropped (overload) for the limiter, whatever its status.
	// The middleware does not stop the handler: bound it with a context
	// deadline or http.TimeoutHandler (whose 503 counts as dropped too).
	// 0 means no timeout.
	Timeout time.Duration
	// Clock times the handler for Timeout and the wait of a shed request
	// for the Observer; nil is the system clock. Give it the Limiter's.
	Clock floodgate.Clock
	// Name is the policy the middleware reports shed requests under
	// (observe.Event.Policy); "" is "http", as for New.
	Name string
	// Observer, when set, is told of every shed request: an Event with
	// Outcome observe.Shed, Limit ConcurrencyLimit and Key the request's
	// class, then End with its Summary. Admitted requests are not
	// reported (the Limiter's Stats count them).
	Observer observe.Observer
}

// ConcurrencyGate puts an adaptive.Limiter in front of a handler: it
// admits a request through the limiter, answers 503 to the ones the
// limiter sheds, and tells the limiter how each admitted request ended.
// Concurrency wraps one Limiter around a handler; a server that picks the
// Limiter per request (one per route, so that a slow route cannot take
// every slot) calls Serve itself. It is safe for concurrent use.
//
// A shed request gets
//
//	503 Service Unavailable
//	Retry-After: 1
//	Content-Type: application/problem+json
//
//	{"type":"https://github.com/floodgate-io/floodgate/blob/main/docs/adaptive.md#overloaded",
//	 "title":"Request shed because the server is overloaded","status":503,
//	 "detail":"this sheddable request was shed to protect the server; retry after Retry-After seconds"}
//
// 503 and not 429: the server is overloaded, the caller is not over its
// quota. Retry-After is adaptive.RetryAfter in whole seconds, rounded up,
// at least 1.
//
// An admitted request's token is released, once the handler returns, as
//   - Dropped when the handler took longer than Timeout;
//   - Ignore when the client went away (the request's context ended):
//     its end says nothing about the backend;
//   - Dropped when the status is 503, 504 or 429, the backend's signs of
//     overload;
//   - Ignore for any other 5xx (a bug or a broken upstream is not a
//     latency sample);
//   - Success otherwise (a handler that wrote nothing sent 200).
//
// and as Ignore when the handler panics (the panic goes on up).
type ConcurrencyGate struct {
	header  string
	pick    func(*http.Request) adaptive.Priority
	timeout time.Duration
	now     func() time.Time
	name    string
	obs     observe.Observer
	bodies  [adaptive.Critical + 1][]byte // the shed body of each class
	// writers recycles the statusWriters of admitted requests, so that
	// admission does not allocate.
	writers sync.Pool
}

// NewConcurrencyGate checks opts and returns a ConcurrencyGate, or an
// error wrapping ErrInvalidOptions that names the option at fault.
func NewConcurrencyGate(opts ConcurrencyOptions) (*ConcurrencyGate, error) {
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("%w: negative Timeout %s", ErrInvalidOptions, opts.Timeout)
	}
	header := cmp.Or(opts.PriorityHeader, DefaultPriorityHeader)
	if !isToken(header) {
		return nil, fmt.Errorf("%w: PriorityHeader %q is not a valid header name", ErrInvalidOptions, header)
	}
	g := &ConcurrencyGate{
		header:  http.CanonicalHeaderKey(header),
		pick:    opts.Priority,
		timeout: opts.Timeout,
		now:     time.Now,
		name:    cmp.Or(opts.Name, "http"),
		obs:     opts.Observer,
	}
	if opts.Clock != nil {
		g.now = opts.Clock.Now
	}
	for p := range g.bodies {
		g.bodies[p] = problem.Overloaded(fmt.Sprintf(
			"this %s request was shed to protect the server; retry after Retry-After seconds", adaptive.Priority(p))).Marshal()
	}
	return g, nil
}

// Concurrency returns middleware that admits requests through l (see
// ConcurrencyGate), or an error wrapping ErrInvalidOptions. It is separate
// from the rate limits of New and composes with them: put New outside,
//
//	h = rate(Concurrency(handler))
//
// so that a caller over its quota is refused before it takes a slot.
func Concurrency(l *adaptive.Limiter, opts ConcurrencyOptions) (func(http.Handler) http.Handler, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: nil adaptive.Limiter", ErrInvalidOptions)
	}
	g, err := NewConcurrencyGate(opts)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.Serve(w, r, l, "", next) })
	}, nil
}

// Serve admits r through l and serves it with next, or answers it as shed.
// policy names it to the Observer ("" is Options.Name); a nil l serves r
// with next unlimited, for the routes that have no limiter.
func (g *ConcurrencyGate) Serve(w http.ResponseWriter, r *http.Request, l *adaptive.Limiter, policy string, next http.Handler) {
	if l == nil {
		next.ServeHTTP(w, r)
		return
	}
	p := g.Priority(r)
	start := g.now()
	tok, err := l.Acquire(r.Context(), p)
	if err != nil {
		g.refuse(w, r, cmp.Or(policy, g.name), p, g.now().Sub(start), err)
		return
	}
	sw, _ := g.writers.Get().(*statusWriter)
	if sw == nil {
		sw = new(statusWriter)
	}
	sw.w, sw.status = w, 0
	defer tok.Ignore() // a no-op once released; releases it on a panic
	admitted := g.now()
	next.ServeHTTP(sw, r)
	g.release(tok, sw.status, r, g.now().Sub(admitted))
	sw.w = nil
	g.writers.Put(sw)
}

// Priority is r's class: Options.Priority's, or its header's (Default when
// missing or unknown).
func (g *ConcurrencyGate) Priority(r *http.Request) adaptive.Priority {
	if g.pick != nil {
		return g.pick(r)
	}
	p, _ := adaptive.ParsePriority(r.Header.Get(g.header)) // Default when unknown
	return p
}

// release tells the limiter how the admitted request ended (see
// ConcurrencyGate).
func (g *ConcurrencyGate) release(tok adaptive.Token, status int, r *http.Request, took time.Duration) {
	switch {
	case g.timeout > 0 && took > g.timeout:
		tok.Dropped()
	case r.Context().Err() != nil:
		tok.Ignore()
	case status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout || status == http.StatusTooManyRequests:
		tok.Dropped()
	case status >= 500:
		tok.Ignore()
	default:
		tok.Success()
	}
}

// refuse answers a request the limiter did not admit: 503 when it was
// shed, nothing when its client left while it waited, 500 for a class the
// Priority function made up.
func (g *ConcurrencyGate) refuse(w http.ResponseWriter, r *http.Request, policy string, p adaptive.Priority, waited time.Duration, err error) {
	switch {
	case errors.Is(err, adaptive.ErrShed):
		w.Header().Set(headers.RetryAfterField, headers.RetryAfter(max(adaptive.RetryAfter(err), time.Second)))
		problem.WriteBody(w, http.StatusServiceUnavailable, g.bodies[p])
		g.report(r, policy, p, waited)
	case r.Context().Err() != nil:
		// The client left while queued: nobody to answer.
	default:
		writeProblem(w, http.StatusInternalServerError, "concurrency limit: "+err.Error())
	}
}

// report tells the Observer of a shed request.
func (g *ConcurrencyGate) report(r *http.Request, policy string, p adaptive.Priority, waited time.Duration) {
	if g.obs == nil {
		return
	}
	observe.ReportShed(r.Context(), g.obs, observe.Event{
		Surface: observe.SurfaceHTTP, Policy: policy, Limit: ConcurrencyLimit, Key: p.String(),
		Client: peer(r), Cost: 1, Latency: waited,
	})
}

// isToken says whether s is an RFC 9110 token, what a field name must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !ok && strings.IndexByte("!#$%&'*+-.^_`|~", c) < 0 {
			return false
		}
	}
	return true
}

// statusWriter passes a response through and remembers its final status.
// It flushes (streaming) and unwraps for http.ResponseController.
type statusWriter struct {
	w      http.ResponseWriter
	status int // 0 until the header is sent
}

func (s *statusWriter) Header() http.Header { return s.w.Header() }

func (s *statusWriter) WriteHeader(code int) {
	// 1xx responses other than 101 are interim: the final one follows.
	if s.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		s.status = code
	}
	s.w.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.w.Write(p)
}

// FlushError sends what has been written so far (http.ResponseController
// calls it).
func (s *statusWriter) FlushError() error {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return http.NewResponseController(s.w).Flush()
}

// Flush implements http.Flusher for handlers that assert it.
func (s *statusWriter) Flush() { _ = s.FlushError() }

// Unwrap gives http.ResponseController the writer underneath, for
// deadlines, full duplex and hijacking.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.w }
