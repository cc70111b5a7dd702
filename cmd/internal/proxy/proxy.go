package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/httplimit"
)

// ErrInvalidOptions is wrapped by every error New returns for bad options.
var ErrInvalidOptions = errors.New("proxy: invalid options")

// DefaultMaxDelay is the default of Options.MaxDelay.
const DefaultMaxDelay = 10 * time.Second

// Options configures a Proxy.
type Options struct {
	// Upstream is the backend's base URL, http or https. Required.
	Upstream *url.URL
	// Engine decides; its policy set's routes say which requests it
	// limits. Reload the engine to change them. Required.
	Engine *engine.Engine
	// Logger receives upstream and store failures; nil discards them.
	Logger *slog.Logger
	// Transport reaches the upstream; nil means NewTransport().
	Transport http.RoundTripper
	// MaxDelay is the longest a request is held for a leaky_bucket limit;
	// one that would wait longer is refused with 429 (its place in the
	// queue is given back, as for a client that leaves while held). 0 means
	// DefaultMaxDelay.
	MaxDelay time.Duration
	// UpstreamTimeout is how long the upstream may stay silent: before its
	// response headers (the client then gets 504) and between reads of the
	// request or response body (the exchange is cut). 0 means
	// DefaultUpstreamTimeout.
	UpstreamTimeout time.Duration
	// Protection puts a bulkhead and an upstream circuit breaker in front
	// of each route (and one of each for the requests no route matches);
	// the zero value puts neither.
	Protection Protection
}

// Forwarding configures NewReverseProxy.
type Forwarding struct {
	// Transport reaches the upstream; nil means NewTransport().
	Transport http.RoundTripper
	// UpstreamTimeout is Options.UpstreamTimeout; 0 or less means
	// DefaultUpstreamTimeout.
	UpstreamTimeout time.Duration
	// Logger receives upstream failures; nil discards them.
	Logger *slog.Logger
}

// Proxy is an http.Handler that limits and forwards requests. It is safe
// for concurrent use.
type Proxy struct {
	engine   *engine.Engine
	guards   *bulkheads
	gate     *httplimit.ConcurrencyGate
	log      *slog.Logger
	maxDelay time.Duration
	bodies   quotaBodies
}

// New returns a proxy, or an error wrapping ErrInvalidOptions that names
// the bad option.
func New(opts Options) (*Proxy, error) {
	u := opts.Upstream
	switch {
	case u == nil:
		return nil, fmt.Errorf("%w: no upstream", ErrInvalidOptions)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return nil, fmt.Errorf("%w: upstream %q: want an http:// or https:// URL with a host", ErrInvalidOptions, u.String())
	case opts.Engine == nil:
		return nil, fmt.Errorf("%w: no engine", ErrInvalidOptions)
	case opts.MaxDelay < 0:
		return nil, fmt.Errorf("%w: negative MaxDelay %s", ErrInvalidOptions, opts.MaxDelay)
	case opts.UpstreamTimeout < 0:
		return nil, fmt.Errorf("%w: negative UpstreamTimeout %s", ErrInvalidOptions, opts.UpstreamTimeout)
	}
	p := &Proxy{engine: opts.Engine, log: opts.Logger, maxDelay: opts.MaxDelay}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.maxDelay == 0 {
		p.maxDelay = DefaultMaxDelay
	}
	var err error
	fw := Forwarding{Transport: opts.Transport, UpstreamTimeout: opts.UpstreamTimeout, Logger: p.log}
	if p.guards, err = newBulkheads(u, fw, opts.Protection); err != nil {
		return nil, err
	}
	if _, err := p.guards.lookup(opts.Engine.Policies(), nil); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	p.gate = opts.Protection.Gate
	return p, nil
}

// NewReverseProxy is the forwarding half of the proxy, without limits:
// httputil's single-host reverse proxy (the client's Host header kept,
// X-Forwarded-For appended) that streams bodies as they come. The
// benchmark's bare proxy is this same value, so that the two differ only
// by the limiting. An upstream that stays silent for fw.UpstreamTimeout
// is cut; one that fails or is cut before its headers is answered with a
// problem+json 502 or 504.
func NewReverseProxy(upstream *url.URL, fw Forwarding) *httputil.ReverseProxy {
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.FlushInterval = -1 // flush every write: server-sent events and long downloads flow
	if fw.Transport == nil {
		fw.Transport = NewTransport()
	}
	if fw.UpstreamTimeout <= 0 {
		fw.UpstreamTimeout = DefaultUpstreamTimeout
	}
	if fw.Logger == nil {
		fw.Logger = slog.New(slog.DiscardHandler)
	}
	rp.Transport = &silenceTransport{base: fw.Transport, d: fw.UpstreamTimeout}
	rp.ErrorHandler = upstreamFailed(fw.Logger)
	rp.ErrorLog = slog.NewLogLogger(fw.Logger.Handler(), slog.LevelWarn)
	// Without a pool httputil allocates 32 KiB per request to copy the body.
	rp.BufferPool = &bufferPool{pool: sync.Pool{New: func() any { return new([32 << 10]byte) }}}
	return rp
}

// bufferPool is an httputil.BufferPool over sync.Pool.
type bufferPool struct{ pool sync.Pool }

func (b *bufferPool) Get() []byte  { return b.pool.Get().(*[32 << 10]byte)[:] }
func (b *bufferPool) Put(p []byte) { b.pool.Put((*[32 << 10]byte)(p)) }

// ServeHTTP limits r by its route, then forwards it: the route's open
// breaker answers 503 first, then its rate limits 429, then its bulkhead
// 503 when it sheds r.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if hasDotSegment(r.URL.Path) {
		// The upstream may resolve "/public/../admin" to "/admin", a path
		// whose route this request did not take.
		writeProblem(w, http.StatusBadRequest, "the path has \".\" or \"..\" segments; send it resolved")
		return
	}
	set := p.engine.Policies()
	route := set.RouteFor(r)
	g, err := p.guards.lookup(set, route)
	if err != nil { // a reloaded set whose bulkheads cannot be built
		p.log.Error("route protection", "error", err)
		writeProblem(w, http.StatusInternalServerError, "the proxy's bulkheads could not be built; see its log")
		return
	}
	if g.refused(w) {
		return
	}
	a, ok := p.admit(w, r, route)
	if !ok {
		return
	}
	if r.ContentLength != 0 {
		// An HTTP/1 server otherwise drains the request body before the
		// first byte of the response, which stalls a stream that answers as
		// it reads. HTTP/2 is full duplex already and answers ErrNotSupported.
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	if a.route == nil || !a.route.Reconciles() {
		g.serve(p.gate, w, r, g.forward)
		return
	}
	g.serve(p.gate, w, r, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.reconcile(r, a, httplimit.ServeRecorded(w, r, g.forward))
	}))
}

// upstreamFailed answers 504 when the upstream stayed silent too long
// and 502 when it could not be reached.
func upstreamFailed(log *slog.Logger) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() != nil {
			return // the client left; nobody to answer
		}
		var open *breakerOpenError
		if errors.As(err, &open) {
			open.g.writeOpen(w, open.retryAfter)
			return
		}
		log.Warn("upstream request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		if errors.Is(err, ErrUpstreamTimeout) {
			writeProblem(w, http.StatusGatewayTimeout, "the upstream did not answer in time")
			return
		}
		writeProblem(w, http.StatusBadGateway, "the upstream could not be reached")
	}
}

// hasDotSegment reports whether a path has a "." or ".." segment.
func hasDotSegment(path string) bool {
	for path != "" {
		var seg string
		seg, path, _ = strings.Cut(path, "/")
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}
