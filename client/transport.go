package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/floodgate-io/floodgate/internal/headers"
)

// ErrThrottled is wrapped by the error of a request that adaptive
// throttling rejected locally: it was not sent.
var ErrThrottled = errors.New("client: throttled locally")

// NewTransport wraps base (nil: http.DefaultTransport) so that 429/503 answers are
// retried the way the server asks (Retry-After, RateLimit fields), with backoff and
// jitter when it says nothing; idempotent requests only, unless configured.
//
// Without options it retries a request up to 3 times, waits at most 30 s
// for the server, keeps retries within DefaultBudget and throttles with
// DefaultThrottle; see the package documentation for the whole behaviour.
// An invalid option makes every RoundTrip fail with an error wrapping
// ErrInvalidOption (see Validate).
func NewTransport(base http.RoundTripper, opts ...Option) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base, cfg: newConfig(opts)}
}

type transport struct {
	base  http.RoundTripper
	cfg   config
	peers peers
}

// The canonical forms of the fields read, so that reading them does not
// canonicalise (and allocate) on every response.
var (
	retryAfterKey     = http.CanonicalHeaderKey(headers.RetryAfterField)
	limitKey          = http.CanonicalHeaderKey(headers.LimitField)
	policyKey         = http.CanonicalHeaderKey(headers.PolicyField)
	legacyResetKey    = http.CanonicalHeaderKey(headers.LegacyResetField)
	legacyRemainKey   = http.CanonicalHeaderKey(headers.LegacyRemainingField)
	idempotencyKey    = http.CanonicalHeaderKey("Idempotency-Key")
	xIdempotencyKey   = http.CanonicalHeaderKey("X-Idempotency-Key")
	dateKey           = http.CanonicalHeaderKey("Date")
	errNotReplayable  = errors.New("a body without GetBody")
	errNotIdempotent  = errors.New("not idempotent")
	errBudgetExceeded = errors.New("retry budget exhausted")
)

// maxDrain bounds what is read from a discarded response's body so that its
// connection can be reused; a longer body is closed unread past it.
const maxDrain = 64 << 10

// RoundTrip sends req, and again while the server refuses it with 429 or
// 503 (or the connection fails) and the policy allows.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.cfg.err != nil {
		closeBody(req)
		return nil, t.cfg.err
	}
	p := t.peers.get(req.URL.Host, &t.cfg)
	if err := t.pause(req, p); err != nil {
		closeBody(req)
		return nil, err
	}
	if err := t.admit(req, p, t.cfg.clock.Now()); err != nil {
		return nil, err
	}
	why := t.notRetryable(req)
	r := req
	for n := 0; ; n++ {
		p.sent.Add(1)
		resp, err := t.base.RoundTrip(r)
		asked, source, retry := t.observe(r, p, resp, err)
		if !retry || !t.mayRetry(why, err) {
			return resp, err
		}
		d, werr := t.decide(r, p, n, asked, source, err)
		if werr != nil {
			return t.giveUp(resp, err, werr)
		}
		if resp != nil {
			discard(resp)
		}
		t.cfg.logger.LogAttrs(r.Context(), slog.LevelDebug, "client: retrying",
			slog.String("method", r.Method), slog.String("host", r.URL.Host), slog.Int("retry", n+1),
			slog.Duration("wait", d), slog.String("asked_by", source), slog.Any("error", err))
		if err := t.cfg.sleep(r.Context(), d); err != nil {
			return nil, fmt.Errorf("client: %s %s: waiting %v before retry %d: %w", r.Method, r.URL.Host, d, n+1, err)
		}
		if r, err = replay(req); err != nil {
			return nil, err
		}
	}
}

// CloseIdleConnections closes the base transport's idle connections, when it
// has any to close.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// notRetryable says why req may not be retried on a refusal, nil when it
// may: its method is not idempotent (and it carries no Idempotency-Key), or
// its body cannot be read again.
func (t *transport) notRetryable(req *http.Request) error {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return errNotReplayable
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return nil
	}
	if req.Header[idempotencyKey] != nil || req.Header[xIdempotencyKey] != nil {
		return nil
	}
	return errNotIdempotent
}

// mayRetry reports whether a request that notRetryable judged why may be
// retried after a refusal (err nil) or a transport error.
func (t *transport) mayRetry(why, err error) bool {
	switch why {
	case nil:
		return true
	case errNotIdempotent:
		return err == nil && t.cfg.nonIdempotent
	}
	return false
}

// admit passes a first attempt through the throttle and the budget's
// deposit; a request the throttle rejects is closed and an error. Retries
// pass neither: the throttle counts the caller's requests (SRE's
// "requests attempted by the application layer"), the budget bounds the
// retries.
func (t *transport) admit(r *http.Request, p *peer, now time.Time) error {
	if p.throttle != nil {
		if ok, prob := p.throttle.Admit(now, t.cfg.random); !ok {
			closeBody(r)
			return fmt.Errorf("client: %s %s not sent: the server refused most recent requests, so it was rejected locally with probability %.2f: %w",
				r.Method, r.URL.Host, prob, ErrThrottled)
		}
	}
	if p.budget != nil {
		p.budget.Deposit(now)
	}
	return nil
}

// observe records an attempt's outcome (the throttle's accepts, the
// RateLimit pauses) and, for a refusal or a retryable transport error,
// reports retry and the wait the server asked for: asked ≥ 0 with the field
// it came from in source, or -1 when it asked for none.
func (t *transport) observe(r *http.Request, p *peer, resp *http.Response, err error) (asked time.Duration, source string, retry bool) {
	now := t.cfg.clock.Now()
	if err != nil {
		return -1, "", retryableError(r.Context(), err)
	}
	refused := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
	if !refused && p.throttle != nil {
		p.throttle.Accept(now)
	}
	limit := fieldValue(resp.Header, limitKey)
	quotas := t.quotas(limit, resp.Header, p, refused)
	p.hear(limit, refused, now)
	p.record(quotas, now)
	if !refused {
		return 0, "", false
	}
	asked, source = t.serverWait(r.Context(), resp.Header, quotas, now)
	return asked, source, true
}

// quotas reads the RateLimit fields of a response (limit is its RateLimit
// field): always on a refusal, otherwise only when some policy may be at
// r=0, some pause may end or a margin was learned, so that an ordinary
// answer costs no parsing.
func (t *transport) quotas(limit string, h http.Header, p *peer, refused bool) []headers.Quota {
	if limit == "" || !refused && !strings.Contains(limit, "r=0") && !p.Active() && !p.Learning() {
		return nil
	}
	qs, err := headers.ParseQuotas(limit, fieldValue(h, policyKey))
	if err != nil {
		t.cfg.logger.Debug("client: ignoring a malformed RateLimit field", "error", err)
	}
	return qs
}

// serverWait is the longest wait a refusal asks for, among Retry-After,
// the t of every RateLimit policy at r=0, and X-RateLimit-Reset when
// X-RateLimit-Remaining is 0 or absent; -1 when none says anything usable.
func (t *transport) serverWait(ctx context.Context, h http.Header, quotas []headers.Quota, now time.Time) (time.Duration, string) {
	asked, source := time.Duration(-1), ""
	ask := func(d time.Duration, from string) {
		if d > asked {
			asked, source = d, from
		}
	}
	date := fieldValue(h, dateKey)
	if v := fieldValue(h, retryAfterKey); v != "" {
		d, err := headers.ParseRetryAfter(v, date, now)
		t.note(ctx, err, func() { ask(d, "Retry-After") })
	}
	for _, q := range quotas {
		if q.Remaining == 0 {
			ask(q.Reset, fmt.Sprintf("RateLimit %q t", q.Name))
		}
	}
	if v := fieldValue(h, legacyResetKey); v != "" {
		if rem := fieldValue(h, legacyRemainKey); rem == "" || strings.TrimSpace(rem) == "0" {
			d, err := headers.ParseLegacyReset(v, date, now)
			t.note(ctx, err, func() { ask(d, headers.LegacyResetField) })
		}
	}
	return asked, source
}

// note runs ok when err is nil, and logs a malformed field otherwise: a
// server's bad field makes the transport fall back to backoff, not fail.
func (t *transport) note(ctx context.Context, err error, ok func()) {
	if err != nil {
		t.cfg.logger.DebugContext(ctx, "client: ignoring a malformed field", "error", err)
		return
	}
	ok()
}

// decide is the wait before retry n, or why there is none; it spends a
// token of the budget only when it will retry.
func (t *transport) decide(r *http.Request, p *peer, n int, asked time.Duration, source string, cause error) (time.Duration, error) {
	now := t.cfg.clock.Now()
	left := timeLeft(r.Context(), now)
	d, err := t.cfg.policy.Wait(n, asked, asked >= 0, left, t.cfg.random())
	switch {
	case errors.Is(err, ErrPastDeadline) && asked >= 0:
		return 0, fmt.Errorf("client: %s %s: the server asked to wait %v (%s), beyond the context's deadline in %v: %w (%w)",
			r.Method, r.URL.Host, asked, source, left, ErrPastDeadline, context.DeadlineExceeded)
	case errors.Is(err, ErrPastDeadline):
		return 0, fmt.Errorf("client: %s %s: retry %d's backoff (up to %v) ends after the context's deadline in %v: %w (%w)",
			r.Method, r.URL.Host, n+1, t.cfg.policy.Backoff.Window(n), left, ErrPastDeadline, context.DeadlineExceeded)
	case err != nil:
		return 0, err
	case p.budget != nil && !p.budget.Withdraw(now):
		return 0, errBudgetExceeded
	}
	return d, nil
}

// giveUp ends a request that will not be retried because of why: the last
// response goes back to the caller as it is, except past the deadline,
// where the caller gets an error saying what the server asked.
func (t *transport) giveUp(resp *http.Response, err, why error) (*http.Response, error) {
	if errors.Is(why, ErrPastDeadline) {
		if resp != nil {
			discard(resp)
		}
		if err != nil {
			return nil, fmt.Errorf("%w (after %w)", why, err)
		}
		return nil, why
	}
	if err != nil && errors.Is(why, errBudgetExceeded) {
		return nil, fmt.Errorf("client: not retried, %w: %w", why, err)
	}
	return resp, err
}

// pause holds req while a RateLimit field said r=0 for one of its host's
// policies (Policy.Pause says how long; a pause longer than MaxWait is not
// kept, one past the context's deadline fails at once).
func (t *transport) pause(req *http.Request, p *peer) error {
	if !p.Active() {
		return nil
	}
	now := t.cfg.clock.Now()
	d := p.Left(now)
	ctx := req.Context()
	left := timeLeft(ctx, now)
	wait, err := t.cfg.policy.Pause(d, left, t.cfg.random())
	if err != nil {
		return fmt.Errorf("client: %s %s: a RateLimit field said r=0 for the next %v, beyond the context's deadline in %v: %w (%w)",
			req.Method, req.URL.Host, d, left, err, context.DeadlineExceeded)
	}
	if wait == 0 {
		return nil
	}
	if err := t.cfg.sleep(ctx, wait); err != nil {
		return fmt.Errorf("client: %s %s: pausing %v for a RateLimit field at r=0: %w", req.Method, req.URL.Host, wait, err)
	}
	return nil
}

// replay is a copy of req to send again, with its body read anew.
func replay(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
		body, err := req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("client: %s %s: GetBody for a retry: %w", req.Method, req.URL.Host, err)
		}
		r.Body = body
	}
	return r, nil
}

// retryableError reports whether a transport error is one a retry can
// cure: the connection was refused, reset or aborted, or it timed out; never
// the caller's own cancellation or deadline.
func retryableError(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE, io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// timeLeft is the time until ctx's deadline, on the transport's clock.
func timeLeft(ctx context.Context, now time.Time) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return d.Sub(now)
	}
	return noDeadline
}

// fieldValue is a field's lines joined by ", ", the way a list field's
// lines combine; "" when absent.
func fieldValue(h http.Header, key string) string {
	switch v := h[key]; len(v) {
	case 0:
		return ""
	case 1:
		return v[0]
	default:
		return strings.Join(v, ", ")
	}
}

// discard drains (boundedly) and closes a response that the caller will not
// see.
func discard(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	_ = resp.Body.Close()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// peer is what the transport knows of one host.
type peer struct {
	budget   *BudgetState   // nil without a budget
	throttle *ThrottleState // nil without a throttle
	sent     atomic.Int64   // attempts sent to the host
	heard    heard
	Pauses
}

// record updates the pauses from a response's RateLimit quotas.
func (p *peer) record(quotas []headers.Quota, now time.Time) {
	for _, q := range quotas {
		p.Note(q.Name, q.Remaining, q.Reset, now)
	}
}

// heard is the fewest units any policy had left in the last response that
// said, and when: what the next answer's r is compared with (peer.hear).
type heard struct {
	mu        sync.Mutex
	remaining int64 // -1: the last response had no r
	sent      int64 // peer.sent then
}

// hear reads the smallest r of a response's RateLimit field (limit),
// without allocating, and learns from it what other clients took.
//
// Between the previous answer that said r and this one, the server's
// units can only have gone to this client's requests sent since (k, this
// one included, which took nothing when it was refused) or to others, and
// time only gives units back: so others took at least r_prev − k − r_now.
// For a client alone that is never above 0. When it is, the quota is
// shared and the r a client hears is gone before it sends again:
// Pauses.Learn keeps the most others took as the margin, halved each t (the
// policy's time back to full) without a larger lesson.
func (p *peer) hear(limit string, refused bool, now time.Time) {
	r, reset := leastRemaining(limit)
	sent := p.sent.Load()
	p.heard.mu.Lock()
	prev, own := p.heard.remaining, sent-p.heard.sent
	p.heard.remaining, p.heard.sent = r, sent
	p.heard.mu.Unlock()
	if refused {
		own--
	}
	if prev > 0 && r >= 0 {
		p.Learn(prev-own-r, reset, now)
	}
}

// leastRemaining is the smallest r parameter among a RateLimit field's
// items and that item's t, r -1 when there is none: a scan that skips
// quoted names and allocates nothing, so that every answer can be read. A
// parameter that is not a plain non-negative integer is skipped
// (ParseQuotas reports it when the field is parsed).
func leastRemaining(limit string) (least int64, reset time.Duration) {
	least = -1
	r, t, quoted := int64(-1), int64(0), false
	for i := 0; i <= len(limit); i++ {
		if i == len(limit) || !quoted && limit[i] == ',' {
			if r >= 0 && (least < 0 || r < least) {
				least, reset = r, time.Duration(t)*time.Second
			}
			r, t = -1, 0
			continue
		}
		switch c := limit[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ';':
			key, n, next := param(limit, i+1)
			switch key {
			case 'r':
				r = n
			case 't':
				t = max(n, 0)
			}
			i = next - 1
		}
	}
	return least, reset
}

// param reads a one-letter parameter with a plain integer value at s[i:]
// (after its ';'): its key, its value (-1 when not a plain non-negative
// integer) and where the scan goes on; key 0 for any other parameter.
func param(s string, i int) (key byte, n int64, next int) {
	for i < len(s) && s[i] == ' ' {
		i++
	}
	if i+1 >= len(s) || s[i+1] != '=' {
		return 0, -1, i
	}
	key, n = s[i], -1
	for i += 2; i < len(s) && s[i] >= '0' && s[i] <= '9' && n < 1e15; i++ {
		n = max(n, 0)*10 + int64(s[i]-'0')
	}
	return key, n, i
}

// peers is a copy-on-write map of hosts to peers: reads take no lock and
// allocate nothing; a new host copies the map. It grows with the number of
// distinct hosts a transport talks to and is never trimmed.
type peers struct {
	m  atomic.Pointer[map[string]*peer]
	mu sync.Mutex
}

func (ps *peers) get(host string, cfg *config) *peer {
	if m := ps.m.Load(); m != nil {
		if p, ok := (*m)[host]; ok {
			return p
		}
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	old := ps.m.Load()
	if old != nil {
		if p, ok := (*old)[host]; ok {
			return p
		}
	}
	p := cfg.newPeer()
	m := make(map[string]*peer, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[host] = p
	ps.m.Store(&m)
	return p
}

func lenOf(m *map[string]*peer) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// newPeer is a peer with a full budget and an empty throttle; the options
// were validated, so neither fails.
func (c *config) newPeer() *peer {
	p := &peer{}
	if c.budget != nil {
		p.budget, _ = c.budget.NewState(c.clock.Now())
	}
	if c.throttle != nil {
		p.throttle, _ = c.throttle.NewState()
	}
	return p
}
