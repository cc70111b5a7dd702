// Package listen serves Floodgate's listeners (floodgate serve's HTTP,
// gRPC and admin, floodgate proxy's HTTP) with bounded connections and,
// when asked, TLS whose certificate is re-read as its files change
// (LoadTLS), and takes them
// down on shutdown in the order a load balancer needs: readiness fails
// first, the listeners keep serving for a grace period with every HTTP
// response saying Connection: close, then they close and in-flight
// requests get a bounded time to finish. It is the one drain both
// commands share; it knows nothing of rate limits.
package listen

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
)

// The defaults of Options, which are also the defaults of the commands'
// flags. The proxy's differ where it streams an upstream's bodies.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultProxyReadTimeout  = 60 * time.Second // a body forwarded upstream as it arrives
	DefaultWriteTimeout      = 30 * time.Second
	// DefaultProxyWriteTimeout is off: a bound on the whole response would
	// cut streamed responses (server-sent events, downloads). The proxy
	// bounds a silent upstream (--upstream-timeout) and a client that stops
	// reading (DefaultProxySendTimeout) instead.
	DefaultProxyWriteTimeout = time.Duration(0)
	// DefaultProxySendTimeout is the proxy's SendTimeout, as nginx's
	// send_timeout; serve's whole-response WriteTimeout bounds it already.
	DefaultProxySendTimeout = 60 * time.Second
	DefaultIdleTimeout      = 60 * time.Second
	DefaultMaxHeaderBytes   = 64 << 10
	// DefaultShutdownDelay is the commands' grace period: long enough for
	// a load balancer to see readiness fail and for keep-alive clients to
	// get one Connection: close each.
	DefaultShutdownDelay = 5 * time.Second
	// DefaultShutdownTimeout with DefaultShutdownDelay stays under
	// Kubernetes' default terminationGracePeriodSeconds (30s), so the
	// process ends on its own before it is killed.
	DefaultShutdownTimeout = 20 * time.Second
)

// gRPC keepalive: how often the server pings a quiet client, how long it
// waits for the answer, and how often a client may ping it.
const (
	grpcPingInterval  = 2 * time.Minute
	grpcPingTimeout   = 20 * time.Second
	grpcMinClientPing = 10 * time.Second
)

// Options bound a listener's connections and the drain that ends it.
// A duration of 0 turns its bound off, as in net/http.
type Options struct {
	// ReadHeaderTimeout bounds reading a request's line and headers; on
	// gRPC it bounds the connection's HTTP/2 handshake
	// (grpc.ConnectionTimeout), so a connection that sends only the
	// preface, or nothing, is closed.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, its body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of a request's headers to
	// the end of its response.
	WriteTimeout time.Duration
	// SendTimeout bounds each write of a response: a client that takes
	// nothing of the response for this long is cut, however long the
	// response runs. It bounds a client that stops reading where a whole
	// response cannot be bounded (a proxy's streams). 0: off.
	SendTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that waits this long for
	// its next request; on gRPC a connection without calls
	// (keepalive MaxConnectionIdle, a GOAWAY the client follows).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and headers (0: net/http's 1 MiB).
	MaxHeaderBytes int
	// ShutdownDelay is the grace period: once the context ends, readiness
	// fails at once but the listeners keep serving this long, each HTTP
	// response with Connection: close, so that load balancers and
	// keep-alive clients move away before anything closes.
	ShutdownDelay time.Duration
	// ShutdownTimeout is how long in-flight requests may finish once the
	// listeners have closed; what still runs then is closed and logged.
	ShutdownTimeout time.Duration
	// TLS, when not nil, serves every listener over TLS (1.2 at least)
	// with its certificate, reloaded when its files change; with a client
	// CA, the HTTP and gRPC listeners require client certificates it
	// signed, the admin listener not (see Drain.AdminHTTPServer).
	TLS *TLS
}

// Defaults are floodgate serve's bounds with no grace period: a library
// caller's Serve stops accepting as soon as its context ends. The command
// adds DefaultShutdownDelay.
func Defaults() Options {
	return Options{
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout:       DefaultReadTimeout,
		WriteTimeout:      DefaultWriteTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
		ShutdownTimeout:   DefaultShutdownTimeout,
	}
}

// GRPCOptions are the server options that apply o to gRPC: the handshake
// bound, idle connections closed, quiet clients pinged, pings from a
// client more often than every 10s answered with GOAWAY, and TLS.
func (o Options) GRPCOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle: o.IdleTimeout,
			Time:              grpcPingInterval,
			Timeout:           grpcPingTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             grpcMinClientPing,
			PermitWithoutStream: true, // Envoy pings its idle connection to the service
		}),
	}
	if o.ReadHeaderTimeout > 0 {
		opts = append(opts, grpc.ConnectionTimeout(o.ReadHeaderTimeout))
	}
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(o.TLS.config(grpcProtos, true))))
	}
	return opts
}
