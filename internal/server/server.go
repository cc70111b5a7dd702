// Package server is Floodgate's service: the HTTP API (POST /v1/allow,
// POST /v1/adjust, Envoy's POST /json, /healthz, /readyz, /metrics,
// /admin) and the gRPC
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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/config"
	"github.com/floodgate-io/floodgate/internal/engine"
	"github.com/floodgate-io/floodgate/internal/metrics"
)

// DefaultMaxBodyBytes bounds request bodies when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 1 << 20

// ShutdownTimeout is how long Serve lets in-flight requests finish once its
// context is done; then it closes what is left.
const ShutdownTimeout = 10 * time.Second

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
	// Metrics records decisions; nil records them in a registry of its own,
	// served at /metrics with the Go and process collectors.
	Metrics *metrics.Metrics
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
	// AtomicRLS makes the requests of the Envoy surfaces (gRPC, /json) all
	// or nothing across descriptors; false decides each descriptor on its
	// own, as Envoy's reference service does.
	AtomicRLS bool
	// MaxBodyBytes bounds request bodies and gRPC messages (default 1 MiB).
	MaxBodyBytes int64
}

// Server serves the HTTP and gRPC surfaces. Create it with New.
type Server struct {
	opts    Options
	engine  *engine.Engine
	metrics *metrics.Metrics
	log     *slog.Logger
	handler http.Handler
	grpc    *grpc.Server
	health  *healthServer

	stopOnce sync.Once
	stopping chan struct{} // closed when Serve starts to shut down
}

// New returns a server for opts.
func New(opts Options) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	s := &Server{opts: opts, engine: opts.Engine, metrics: opts.Metrics, log: opts.Logger, stopping: make(chan struct{})}
	if s.engine == nil {
		empty, _ := config.NewSet()
		s.engine = engine.New(empty, engine.OneStore{})
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.metrics == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		s.metrics = metrics.New(reg)
	}
	s.handler = s.routes()
	s.health = &healthServer{s: s, poll: time.Second}
	s.grpc = s.newGRPC()
	return s
}

// Handler returns every HTTP route.
func (s *Server) Handler() http.Handler { return s.handler }

// GRPC returns the gRPC server: RateLimitService, grpc.health.v1 (serving
// while Ready says so) and reflection. Serve serves it; a caller that
// serves it on its own stops it on its own.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

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
// ctx is done; then it stops accepting, reports not ready, lets in-flight
// requests finish for up to ShutdownTimeout, closes what is left and
// returns nil. When a listener fails first, Serve stops the other the same
// way and returns that error. Serve may be called once.
func (s *Server) Serve(ctx context.Context, httpLn, grpcLn net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 2)
	running := 0
	if httpLn != nil {
		running++
		go func() {
			err := hs.Serve(httpLn)
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			errc <- err
		}()
	}
	if grpcLn != nil {
		running++
		go func() {
			err := s.grpc.Serve(grpcLn)
			if errors.Is(err, grpc.ErrServerStopped) { // ctx was done before Serve began
				err = nil
			}
			errc <- err
		}()
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
		running--
		if first == nil {
			first = errors.New("server: a listener stopped serving")
		}
	}
	s.shutdown(hs)
	for ; running > 0; running-- {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// shutdown stops both servers gracefully, at most ShutdownTimeout each.
func (s *Server) shutdown(hs *http.Server) {
	s.stopOnce.Do(func() { close(s.stopping) })
	var wg sync.WaitGroup
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		if err := hs.Shutdown(ctx); err != nil {
			s.log.Warn("server: HTTP requests still running after the shutdown timeout; closing", "timeout", ShutdownTimeout)
			hs.Close()
		}
	})
	wg.Go(func() {
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		t := time.NewTimer(ShutdownTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			s.log.Warn("server: gRPC calls still running after the shutdown timeout; closing", "timeout", ShutdownTimeout)
			s.grpc.Stop()
			<-done
		}
	})
	wg.Wait()
}
