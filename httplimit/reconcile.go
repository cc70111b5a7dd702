package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/floodgate-io/floodgate"
)

// ErrBadActual is wrapped by the ReconcileError of a response that gave no
// usable actual amount (missing, malformed, negative): its rule keeps the
// estimate.
var ErrBadActual = errors.New("httplimit: no usable actual amount")

// Response is what a handler sent, as an ActualFunc reads it once the
// handler has returned and the body is complete.
type Response struct {
	// Request is the request the response answers.
	Request *http.Request
	// Status is the status code sent: 200 when the handler wrote a body or
	// nothing without calling WriteHeader.
	Status int
	// Header is the header section as sent, without trailers.
	Header http.Header
	// Trailer holds the trailer fields: those declared in the Trailer
	// header and set after the body, and those set with http.TrailerPrefix.
	Trailer http.Header
	// BodyBytes counts the body bytes the handler wrote.
	BodyBytes int64
}

// ActualFunc reads what a request really cost from its response. An error
// or a negative amount keeps the estimate (see Options.OnReconcileError).
type ActualFunc func(resp *Response) (int64, error)

// ActualFromHeader reads the actual amount from a response header holding
// a non-negative decimal integer, for handlers that know it before they
// write the body.
func ActualFromHeader(name string) ActualFunc {
	name = http.CanonicalHeaderKey(name)
	return func(resp *Response) (int64, error) {
		return parseCount("response header "+name, resp.Header.Values(name))
	}
}

// ActualFromTrailer reads the actual amount from a response trailer
// holding a non-negative decimal integer, for streaming handlers that know
// it only at the end. The handler declares the trailer before writing
// (w.Header().Set("Trailer", name)) and sets it after the body, or sets
// http.TrailerPrefix+name at any time.
func ActualFromTrailer(name string) ActualFunc {
	name = http.CanonicalHeaderKey(name)
	return func(resp *Response) (int64, error) {
		return parseCount("response trailer "+name, resp.Trailer.Values(name))
	}
}

// ReconcileError is what Options.OnReconcileError is given: a rule whose
// estimate could not be corrected.
type ReconcileError struct {
	// Rule is the policy's full name ("pro/tokens").
	Rule string
	// Estimate is the amount reserved when the request was decided.
	Estimate int64
	// Delta is the correction that failed (actual - estimate); 0 when the
	// actual amount could not be read.
	Delta int64
	// Err wraps ErrBadActual, or is the limiter's error from Adjust.
	Err error
}

// Error names the rule, its estimate and what went wrong.
func (e *ReconcileError) Error() string {
	if e.Delta == 0 {
		return fmt.Sprintf("httplimit: rate limit policy %q keeps its estimate %d: %v", e.Rule, e.Estimate, e.Err)
	}
	return fmt.Sprintf("httplimit: rate limit policy %q: adjusting its estimate %d by %+d failed: %v",
		e.Rule, e.Estimate, e.Delta, e.Err)
}

// Unwrap returns Err, so errors.Is finds ErrBadActual or the limiter's
// error.
func (e *ReconcileError) Unwrap() error { return e.Err }

// checkAdjuster refuses rules with Actual over a limiter that cannot
// adjust: their estimate would silently become the cost.
func (m *middleware) checkAdjuster() error {
	if m.adjuster != nil {
		return nil
	}
	sets := [][]rule{m.rules}
	if m.plans != nil {
		sets = append(sets, m.plans.sets()...)
	}
	for _, rs := range sets {
		for _, ru := range rs {
			if ru.Actual != nil {
				return fmt.Errorf("%w: rate limit policy %q reconciles its cost (Actual), but the limiter %T does not implement floodgate.Adjuster",
					ErrInvalidOptions, ru.Name, m.l)
			}
		}
	}
	return nil
}

// reconciles reports whether any applied rule reads an actual amount.
func reconciles(applied []*rule) bool {
	for _, ru := range applied {
		if ru.Actual != nil {
			return true
		}
	}
	return false
}

// serveReconciled runs the handler on a writer that records the response,
// then corrects each reconciled rule by what the response reported. It
// returns only after the corrections, so the client's next request sees
// them.
func (m *middleware) serveReconciled(w http.ResponseWriter, r *http.Request, next http.Handler, applied []*rule, reqs []floodgate.Request) {
	resp := ServeRecorded(w, r, next)
	// The work is done whether or not the client is still there: charge
	// for it on a context its leaving does not cancel.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.opts.ReconcileTimeout)
	defer cancel()
	for i, ru := range applied {
		if ru.Actual == nil {
			continue
		}
		if err := m.adjust(ctx, ru, reqs[i], resp); err != nil {
			m.reportReconcile(r, err)
		}
	}
}

// adjust corrects one rule's key by its actual amount minus the estimate.
func (m *middleware) adjust(ctx context.Context, ru *rule, rq floodgate.Request, resp *Response) error {
	actual, err := ru.Actual(resp)
	if err == nil && actual < 0 {
		err = fmt.Errorf("negative amount %d", actual)
	}
	if err != nil {
		return &ReconcileError{Rule: ru.Name, Estimate: rq.Cost, Err: fmt.Errorf("%w: %w", ErrBadActual, err)}
	}
	delta := actual - rq.Cost // both non-negative: cannot overflow
	if delta == 0 {
		return nil
	}
	if err := m.adjuster.Adjust(ctx, rq.Key, rq.Limit, delta); err != nil {
		return &ReconcileError{Rule: ru.Name, Estimate: rq.Cost, Delta: delta, Err: err}
	}
	return nil
}

func (m *middleware) reportReconcile(r *http.Request, err error) {
	if m.opts.OnReconcileError != nil {
		m.opts.OnReconcileError(r, err)
		return
	}
	m.opts.Logger.WarnContext(r.Context(), "httplimit: cost not reconciled", "err", err)
}

// recorder passes a response through to w and remembers what an
// ActualFunc reads: the status and header section as sent, and the body's
// size. It flushes (streaming) and unwraps for http.ResponseController.
type recorder struct {
	w       http.ResponseWriter
	status  int
	sent    http.Header // the header section when it went out; nil before
	written int64
}

func (rec *recorder) Header() http.Header { return rec.w.Header() }

func (rec *recorder) WriteHeader(code int) {
	// 1xx responses other than 101 are interim: the final one follows.
	if rec.sent == nil && (code >= 200 || code == http.StatusSwitchingProtocols) {
		rec.status, rec.sent = code, rec.w.Header().Clone()
	}
	rec.w.WriteHeader(code)
}

func (rec *recorder) Write(p []byte) (int, error) {
	rec.commit()
	n, err := rec.w.Write(p)
	rec.written += int64(n)
	return n, err
}

// commit records the header section that a write or a flush sends with an
// implicit 200.
func (rec *recorder) commit() {
	if rec.sent == nil {
		rec.status, rec.sent = http.StatusOK, rec.w.Header().Clone()
	}
}

// FlushError sends what has been written so far (http.ResponseController
// calls it).
func (rec *recorder) FlushError() error {
	rec.commit()
	return http.NewResponseController(rec.w).Flush()
}

// Flush implements http.Flusher for handlers that assert it.
func (rec *recorder) Flush() { _ = rec.FlushError() }

// Unwrap gives http.ResponseController the writer underneath, for
// deadlines, full duplex and hijacking.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.w }

// response is the finished response; called after the handler returned.
func (rec *recorder) response(r *http.Request) *Response {
	rec.commit() // a handler that wrote nothing sends its header now
	final := rec.w.Header()
	resp := &Response{Request: r, Status: rec.status, Header: rec.sent.Clone(), Trailer: http.Header{}, BodyBytes: rec.written}
	for _, v := range rec.sent.Values("Trailer") {
		for name := range strings.SplitSeq(v, ",") {
			name = http.CanonicalHeaderKey(strings.TrimSpace(name))
			if vs, ok := final[name]; ok {
				resp.Trailer[name] = vs
			}
		}
	}
	for k, vs := range final {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			name = http.CanonicalHeaderKey(name)
			resp.Trailer[name] = append(resp.Trailer[name], vs...)
			delete(resp.Header, k) // never sent in the header section
		}
	}
	return resp
}

// ServeRecorded serves r with next, passing everything through to w
// (flushes included, for streams), and returns what was sent, trailers
// included, for an ActualFunc to read: for handlers and proxies that
// reconcile a cost themselves.
func ServeRecorded(w http.ResponseWriter, r *http.Request, next http.Handler) *Response {
	rec := &recorder{w: w}
	next.ServeHTTP(rec, r)
	return rec.response(r)
}
