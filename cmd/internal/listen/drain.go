package listen

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// errStopped is what Serve returns when a listener stops serving on its own.
var errStopped = errors.New("listen: a listener stopped serving")

// Drain serves listeners until a context ends and then drains them:
//
//  1. Draining is closed: readiness checks that watch it fail at once;
//  2. for ShutdownDelay the listeners keep serving, and every HTTP response
//     (of a handler wrapped by Handler) carries Connection: close, so a
//     keep-alive client opens a new connection, elsewhere, for its next
//     request instead of reusing one that is about to close;
//  3. the listeners close; in-flight requests get ShutdownTimeout to finish
//     (HTTP Shutdown, gRPC GracefulStop);
//  4. what still runs is closed and logged.
//
// Idle connections are not closed early during the grace period: a client
// may be writing its next request on one at that moment, and would see EOF.
type Drain struct {
	opts     Options
	log      *slog.Logger
	after    func(time.Duration) <-chan time.Time
	draining atomic.Bool
	once     sync.Once
	started  chan struct{}
}

// NewDrain returns a drain for listeners bound by opts; log (nil: discard)
// receives what had to be closed.
func NewDrain(opts Options, log *slog.Logger) *Drain {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Drain{opts: opts, log: log, after: time.After, started: make(chan struct{})}
}

// WithGrace replaces the grace period's timer: the grace period ends when
// the returned channel receives. Tests end it by hand.
func (d *Drain) WithGrace(after func(time.Duration) <-chan time.Time) *Drain {
	d.after = after
	return d
}

// Draining is closed when the drain begins.
func (d *Drain) Draining() <-chan struct{} { return d.started }

// begin starts the drain; it may be called more than once.
func (d *Drain) begin() {
	d.once.Do(func() {
		d.draining.Store(true)
		close(d.started)
	})
}

// Handler wraps h so that its responses carry Connection: close once the
// drain has begun (net/http then closes the connection after the
// response), and each of its writes is bounded by SendTimeout.
func (d *Drain) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		if d.opts.SendTimeout > 0 {
			sw := &sendDeadline{ResponseWriter: w, rc: http.NewResponseController(w), d: d.opts.SendTimeout}
			sw.extend()       // a stale deadline of the connection's last request must not cut a 100-continue
			defer sw.extend() // the final flush, after h returns
			w = sw
		}
		h.ServeHTTP(w, r)
	})
}

// sendDeadline moves the connection's write deadline SendTimeout ahead of
// each write, so that a slow but steady reader is served and a stalled one
// is cut.
type sendDeadline struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (s *sendDeadline) extend() { _ = s.rc.SetWriteDeadline(time.Now().Add(s.d)) }

func (s *sendDeadline) WriteHeader(code int) {
	s.extend()
	s.ResponseWriter.WriteHeader(code)
}

func (s *sendDeadline) Write(p []byte) (int, error) {
	s.extend()
	return s.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach Flush, Hijack and the rest.
func (s *sendDeadline) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// HTTPServer returns a server of h (wrapped by Handler) with the drain's
// bounds and TLS, logging connection errors to its logger.
func (d *Drain) HTTPServer(h http.Handler) *http.Server {
	return d.httpServer(h, true)
}

// AdminHTTPServer is HTTPServer for the admin listener: over TLS when the
// others are, but it asks for no client certificate, since its bearer
// token guards it and what calls it (kubelet probes, Prometheus) often has
// none.
func (d *Drain) AdminHTTPServer(h http.Handler) *http.Server {
	return d.httpServer(h, false)
}

func (d *Drain) httpServer(h http.Handler, clientAuth bool) *http.Server {
	hs := &http.Server{
		Handler:           d.Handler(h),
		ReadHeaderTimeout: d.opts.ReadHeaderTimeout,
		ReadTimeout:       d.opts.ReadTimeout,
		WriteTimeout:      d.opts.WriteTimeout,
		IdleTimeout:       d.opts.IdleTimeout,
		MaxHeaderBytes:    d.opts.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	if d.opts.TLS != nil {
		hs.TLSConfig = d.opts.TLS.config(httpProtos, clientAuth)
	}
	return hs
}

// Server is one listener and what serves it, for Drain.Serve. Make one
// with HTTP or GRPC.
type Server interface {
	serve() error                       // until stopped; nil when stopped by shutdown or close
	shutdown(ctx context.Context) error // stop accepting, wait for in-flight requests until ctx ends
	close()                             // close what is left
	kind() string                       // for the log
}

// HTTP is hs serving ln.
func HTTP(hs *http.Server, ln net.Listener) Server { return &httpServer{hs, ln} }

// GRPC is g serving ln.
func GRPC(g *grpc.Server, ln net.Listener) Server {
	return &grpcServer{g: g, ln: ln, stopped: make(chan struct{})}
}

// Serve serves every server until ctx ends, then drains them (see Drain)
// and returns nil, whatever had to be closed. When a listener fails
// first, Serve drains the others at once, without a grace period, and
// returns that error. Serve may be called once.
func (d *Drain) Serve(ctx context.Context, servers ...Server) error {
	errc := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errc <- s.serve() }()
	}
	running := len(servers)
	var first error
	select {
	case <-ctx.Done():
		d.begin()
		first = d.grace(errc, &running)
	case first = <-errc:
		running--
		if first == nil {
			first = errStopped
		}
		d.begin()
	}
	d.stop(servers)
	for ; running > 0; running-- {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// grace waits out the grace period, unless a listener fails first (its
// error is returned; there is no point serving on).
func (d *Drain) grace(errc <-chan error, running *int) error {
	if d.opts.ShutdownDelay <= 0 {
		return nil
	}
	select {
	case <-d.after(d.opts.ShutdownDelay):
		return nil
	case err := <-errc:
		*running--
		if err == nil {
			err = errStopped
		}
		return err
	}
}

// stop shuts every server down within ShutdownTimeout, then closes what
// is left.
func (d *Drain) stop(servers []Server) {
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() {
			if err := s.shutdown(ctx); err != nil {
				d.log.Warn("listen: requests still running after the shutdown timeout; closing them",
					"server", s.kind(), "timeout", d.opts.ShutdownTimeout, "error", err)
				s.close()
			}
		})
	}
	wg.Wait()
}

type httpServer struct {
	hs *http.Server
	ln net.Listener
}

// serve serves TLS when hs has a TLSConfig (its certificates come from
// the config, not from files named here).
func (s *httpServer) serve() error {
	var err error
	if s.hs.TLSConfig != nil {
		err = s.hs.ServeTLS(s.ln, "", "")
	} else {
		err = s.hs.Serve(s.ln)
	}
	if !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *httpServer) shutdown(ctx context.Context) error { return s.hs.Shutdown(ctx) }
func (s *httpServer) close()                             { s.hs.Close() }
func (s *httpServer) kind() string                       { return "http " + s.ln.Addr().String() }

type grpcServer struct {
	g       *grpc.Server
	ln      net.Listener
	once    sync.Once
	stopped chan struct{} // closed when GracefulStop returns
}

func (s *grpcServer) serve() error {
	if err := s.g.Serve(s.ln); !errors.Is(err, grpc.ErrServerStopped) { // stopped before Serve began
		return err
	}
	return nil
}

func (s *grpcServer) shutdown(ctx context.Context) error {
	s.once.Do(func() {
		go func() { s.g.GracefulStop(); close(s.stopped) }()
	})
	select {
	case <-s.stopped:
		return nil
	case <-ctx.Done():
		select {
		case <-s.stopped: // both at once: it did stop
			return nil
		default:
			return ctx.Err()
		}
	}
}

// close stops g at once, which also ends a GracefulStop under way.
func (s *grpcServer) close() {
	s.g.Stop()
	<-s.stopped
}

func (s *grpcServer) kind() string { return "grpc " + s.ln.Addr().String() }
