// Package server is Floodgate's service: the HTTP API (POST /v1/allow,
// POST /v1/adjust, Envoy's POST /json, /healthz, /readyz, /metrics,
// /admin, /debug/pprof/, the last three on an admin listener of their own
// when asked) and the gRPC
// services (envoy.service.ratelimit.v3.RateLimitService, grpc.health.v1,
// reflection), all over one decision engine.
//
// Every surface records its decisions in the metrics, answers bad input
// with 400 or InvalidArgument naming the problem, and survives a panic in
// the code under it (500 or Internal, logged with its stack).
package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/listen"
	"github.com/floodgate-io/floodgate/cmd/internal/observers"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/observe"
)

// DefaultMaxBodyBytes bounds request bodies when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 1 << 20

// ExplicitPrefix namespaces the keys of explicit limits (POST /v1/allow
// with a key) in the store, apart from the keys of policies.
const ExplicitPrefix = "explicit/"

// Options configures New.
type Options struct {
	// Engine decides policy lookups; nil decides them against no policy
	// (every request allowed, nothing counted).
	Engine *engine.Engine
	// Limiter decides the explicit limits of POST /v1/allow (keys
	// namespaced ExplicitPrefix+key) and answers the reads of
	// POST /admin/inspect; nil answers those with 501.
	Limiter floodgate.Limiter
	// Observers are told of every decision (New makes Engine report to
	// them) and serve /metrics and the admin's views of them; nil is
	// observers.New's defaults (metrics and insight).
	Observers *observers.Set
	// Status describes the server on GET /admin/status.
	Status observers.Server
	// Logger receives errors and panics; nil is slog.Default().
	Logger *slog.Logger
	// Ready reports readiness for /readyz and grpc.health.v1: nil error is
	// ready. A nil Ready is always ready.
	Ready func() error
	// AdminToken is the bearer token of /admin; "" turns /admin off (404).
	AdminToken string
	// Reload reloads the policies for POST /admin/reload; nil answers 501.
	// It records the reload in the metrics itself.
	Reload func() error
	// Reset forgets one store key for POST /admin/reset; nil answers 501.
	Reset func(ctx context.Context, key string) error
	// Headers adds RateLimit-Policy, RateLimit and (when a wait is known)
	// Retry-After to the response_headers_to_add of the Envoy surfaces.
	Headers bool
	// EnvoyHeaders, when not nil, adds envoyproxy/ratelimit's headers
	// (LIMIT_RESPONSE_HEADERS_ENABLED) to the response_headers_to_add of the
	// Envoy surfaces in place of those of Headers.
	EnvoyHeaders *EnvoyHeaders
	// AtomicRLS makes the requests of the Envoy surfaces (gRPC, /json) all
	// or nothing across descriptors; false decides each descriptor on its
	// own, as Envoy's reference service does.
	AtomicRLS bool
	// CountDeniedHits makes the Envoy surfaces (gRPC, /json) count the hits
	// a limit denies, as Envoy's reference service does
	// (engine.Request.CountDenied); /v1/allow never does.
	CountDeniedHits bool
	// Modes are envoyproxy/ratelimit's global SHADOW_MODE and QUOTA_MODE,
	// applied to the answers as it applies them (see Modes).
	Modes Modes
	// MaxBodyBytes bounds request bodies and gRPC messages (default 1 MiB).
	MaxBodyBytes int64
	// Clock is the time Envoy's duration_until_reset is measured on when
	// nothing has been counted in a window yet; nil is the system clock.
	// Give the stores' clock in tests.
	Clock floodgate.Clock
	// Listen bounds the connections of both listeners and the drain of
	// Serve; nil is listen.Defaults() (no grace period).
	Listen *listen.Options
	// GraceTimer, when set, times the grace period of the drain instead of
	// a real timer: tests end it by hand.
	GraceTimer func(time.Duration) <-chan time.Time
}

// Modes change what every answer says, whatever the policy: serve's
// --shadow-mode and --quota-mode, envoyproxy/ratelimit's global
// SHADOW_MODE and QUOTA_MODE. They act where it applies them, on the
// answer, not on the limits: the descriptors' statuses stay what the
// limits said.
type Modes struct {
	// Shadow answers a request over the limit as allowed: Envoy's overall
	// code OK (its descriptors' statuses still say OVER_LIMIT), /v1/allow's
	// allowed with 200 and no Retry-After.
	Shadow bool
	// Quota makes every descriptor of Envoy's requests but the unlimited
	// ones a quota, including those no limit matches and the request's own
	// limits: the request is over the limit only when all of them are.
	Quota bool
}

// Server serves the HTTP and gRPC surfaces. Create it with New.
type Server struct {
	opts     Options
	engine   *engine.Engine
	obs      *observers.Set
	observer observe.Observer // obs.Observer
	log      *slog.Logger
	handler  http.Handler
	health   *healthServer
	drain    *listen.Drain
	replies  replyPool // the gRPC answers' replies, reused once written

	stopping <-chan struct{} // closed when Serve starts to drain
}

// New returns a server for opts.
func New(opts Options) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Listen == nil {
		d := listen.Defaults()
		opts.Listen = &d
	}
	s := &Server{opts: opts, engine: opts.Engine, obs: opts.Observers, log: opts.Logger}
	if s.engine == nil {
		empty, _ := policy.NewSet()
		s.engine = engine.New(empty, engine.OneStore{})
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.obs == nil {
		var err error
		if s.obs, err = observers.New(context.Background(), observers.Config{Logger: s.log}); err != nil {
			panic(err) // the defaults are valid
		}
	}
	s.observer = s.obs.Observer
	s.engine.Observe(observe.SurfaceServe, s.observer)
	if s.opts.Status.Surface == "" {
		s.opts.Status.Surface = observe.SurfaceServe
	}
	if s.opts.Status.Policies == nil {
		s.opts.Status.Policies = s.engine.Policies
	}
	s.drain = listen.NewDrain(*opts.Listen, s.log)
	if opts.GraceTimer != nil {
		s.drain.WithGrace(opts.GraceTimer)
	}
	s.stopping = s.drain.Draining()
	s.handler = s.obs.WrapHTTP(s.routes(true), "floodgate serve")
	s.health = &healthServer{s: s, poll: time.Second}
	return s
}

// Handler returns every HTTP route.
func (s *Server) Handler() http.Handler { return s.handler }

// ready is nil when the service should receive traffic.
func (s *Server) ready() error {
	select {
	case <-s.stopping:
		return errors.New("shutting down")
	default:
	}
	if s.opts.Ready == nil {
		return nil
	}
	return s.opts.Ready()
}

// Serve serves HTTP on httpLn and gRPC on grpcLn (either may be nil) until
// ctx is done; then it drains them (see listen.Drain): /readyz and
// grpc.health.v1 report not ready at once, the listeners serve on for
// Listen.ShutdownDelay with Connection: close on every HTTP response, then
// close; in-flight requests get Listen.ShutdownTimeout to finish, what is
// left is closed, and Serve returns nil. When a listener fails first, Serve
// stops the other at once and returns that error. Serve may be called once.
func (s *Server) Serve(ctx context.Context, httpLn, grpcLn net.Listener) error {
	return s.ServeListeners(ctx, Listeners{HTTP: httpLn, GRPC: grpcLn})
}

// Listeners are the listeners of ServeListeners; any may be nil.
type Listeners struct {
	HTTP, GRPC net.Listener
	// Admin, when not nil, serves /admin, /metrics and /debug/pprof/ in
	// place of HTTP, and /healthz and /readyz as HTTP does. It drains
	// with the others; over TLS it asks for no client certificate
	// (listen.Drain.AdminHTTPServer).
	Admin net.Listener
}

// ServeListeners is Serve with an admin listener.
func (s *Server) ServeListeners(ctx context.Context, l Listeners) error {
	var servers []listen.Server
	handler := s.handler
	if l.Admin != nil {
		handler = s.obs.WrapHTTP(s.routes(false), "floodgate serve")
		servers = append(servers, listen.HTTP(s.drain.AdminHTTPServer(s.adminListener()), l.Admin))
	}
	if l.HTTP != nil {
		servers = append(servers, listen.HTTP(s.drain.HTTPServer(handler), l.HTTP))
	}
	if l.GRPC != nil {
		// built here, not in New: its stream workers run until it stops,
		// which only Serve does
		servers = append(servers, listen.GRPC(s.newGRPC(), l.GRPC))
	}
	return s.drain.Serve(ctx, servers...)
}
