package cli

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/floodgate-io/floodgate/cmd/internal/listen"
	"github.com/floodgate-io/floodgate/cmd/internal/proxy"
	"github.com/floodgate-io/floodgate/cmd/internal/server"
)

// listenFlags are the listeners' timeouts, TLS, the drain on SIGTERM
// and serve's admin listener.
type listenFlags struct {
	opts            listen.Options
	tls             tlsFlags
	admin           string        // serve only
	upstreamTimeout time.Duration // proxy only
}

// register adds the flags; isProxy is true for floodgate proxy, whose
// defaults differ where it streams an upstream's bodies.
func (f *listenFlags) register(fl *pflag.FlagSet, isProxy bool) {
	o, h := &f.opts, helpFor(isProxy)
	durationVar(fl, &o.ReadHeaderTimeout, "read-header-timeout", listen.DefaultReadHeaderTimeout, true, h.readHeader)
	durationVar(fl, &o.ReadTimeout, "read-timeout", h.readDefault, true, "the longest a client may take to send a whole request, its body included (0: off)")
	durationVar(fl, &o.WriteTimeout, "write-timeout", h.writeDefault, true, h.write)
	durationVar(fl, &o.IdleTimeout, "idle-timeout", listen.DefaultIdleTimeout, true, h.idle)
	o.MaxHeaderBytes = listen.DefaultMaxHeaderBytes
	fl.Var(positiveInt{&o.MaxHeaderBytes}, "max-header-bytes", "the largest request line and headers, in bytes")
	durationVar(fl, &o.ShutdownDelay, "shutdown-delay", listen.DefaultShutdownDelay, true, h.delay)
	durationVar(fl, &o.ShutdownTimeout, "shutdown-timeout", listen.DefaultShutdownTimeout, true,
		"on SIGTERM, once the listeners close: how long in-flight requests may finish before they are cut (0: cut at once)")
	f.tls.register(fl, isProxy)
	if !isProxy {
		fl.StringVar(&f.admin, "admin", "",
			"listen address of an admin listener serving /admin, /metrics and /debug/pprof/ (off the HTTP listener) and /healthz, /readyz (default: none, all on --http)")
	}
	if isProxy {
		durationVar(fl, &o.SendTimeout, "send-timeout", listen.DefaultProxySendTimeout, true,
			"the longest a client may take nothing of a response before it is cut, however long the response runs (0: off)")
		durationVar(fl, &f.upstreamTimeout, "upstream-timeout", proxy.DefaultUpstreamTimeout, false,
			"the longest the upstream may stay silent: before its response headers (then 504) and between reads of a body (then the exchange is cut)")
	}
}

// listenHelp is what differs between serve's listener flags (HTTP and
// gRPC, with readiness) and the proxy's (HTTP only, streaming).
type listenHelp struct {
	readHeader, write, idle, delay string
	readDefault, writeDefault      time.Duration
}

func helpFor(isProxy bool) listenHelp {
	if isProxy {
		return listenHelp{
			readHeader: "the longest a client may take to send a request's headers (0: off)",
			write: "the longest from the end of a request's headers to the end of its response (0: off); off by default so that " +
				"streamed responses (server-sent events, downloads) are not cut: --upstream-timeout cuts a silent upstream " +
				"and --send-timeout a client that stops reading",
			idle:         "how long a keep-alive connection may wait for its next request (0: off)",
			delay:        "on SIGTERM: how long the listener still serves, with Connection: close on every response, before it closes (0: none)",
			readDefault:  listen.DefaultProxyReadTimeout,
			writeDefault: listen.DefaultProxyWriteTimeout,
		}
	}
	return listenHelp{
		readHeader:   "the longest a client may take to send a request's headers (on gRPC: the connection's HTTP/2 handshake) (0: off)",
		write:        "the longest from the end of a request's headers to the end of its response (0: off)",
		idle:         "how long a keep-alive connection (on gRPC: a connection without calls) may wait for its next request (0: off)",
		delay:        "on SIGTERM: how long /readyz and gRPC health fail while the listeners still serve, with Connection: close on every HTTP response, before they close (0: none)",
		readDefault:  listen.DefaultReadTimeout,
		writeDefault: listen.DefaultWriteTimeout,
	}
}

// options are the listeners' options, with TLS read from its files (log
// receives its reloads); the other flags were checked as they were set.
func (f *listenFlags) options(log *slog.Logger) (*listen.Options, error) {
	o := f.opts
	t, err := f.tls.load(log)
	if err != nil {
		return nil, err
	}
	o.TLS = t
	return &o, nil
}

// durationVar is a duration flag that refuses negative values, and zero
// unless zero is allowed, naming the flag in its error.
func durationVar(fl *pflag.FlagSet, p *time.Duration, name string, value time.Duration, zero bool, usage string) {
	*p = value
	fl.Var(&boundedDuration{p: p, zero: zero}, name, usage)
}

type boundedDuration struct {
	p    *time.Duration
	zero bool
}

func (d *boundedDuration) String() string { return d.p.String() }
func (d *boundedDuration) Type() string   { return "duration" }

func (d *boundedDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return fmt.Errorf("want a duration such as 30s: %w", err)
	case v < 0, v == 0 && !d.zero:
		if d.zero {
			return fmt.Errorf("%s: want 0 (off) or a positive duration", s)
		}
		return fmt.Errorf("%s: want a positive duration", s)
	}
	*d.p = v
	return nil
}

// positiveInt is an int flag that refuses 0 and negative values.
type positiveInt struct{ p *int }

func (n positiveInt) String() string { return strconv.Itoa(*n.p) }
func (n positiveInt) Type() string   { return "int" }

func (n positiveInt) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return fmt.Errorf("%q: want a positive whole number", s)
	}
	*n.p = v
	return nil
}

// bind opens serve's listeners: HTTP, gRPC and, with --admin, the admin
// listener. On an error it closes what it opened and names the flag.
func (f *listenFlags) bind(httpAddr, grpcAddr string) (server.Listeners, error) {
	var l server.Listeners
	binds := []struct {
		flag, addr string
		ln         *net.Listener
	}{{"--http", httpAddr, &l.HTTP}, {"--grpc", grpcAddr, &l.GRPC}, {"--admin", f.admin, &l.Admin}}
	for _, b := range binds {
		if b.addr == "" && b.flag == "--admin" {
			continue
		}
		ln, err := net.Listen("tcp", b.addr)
		if err != nil {
			closeListeners(l)
			return server.Listeners{}, fmt.Errorf("%s %s: %w", b.flag, b.addr, err)
		}
		*b.ln = ln
	}
	return l, nil
}

// closeListeners closes the listeners bind opened, when serve stops
// before serving them.
func closeListeners(l server.Listeners) {
	for _, ln := range []net.Listener{l.HTTP, l.GRPC, l.Admin} {
		if ln != nil {
			ln.Close()
		}
	}
}

// listenerAddrs are the listeners' addresses for serve's start-up log.
func listenerAddrs(l server.Listeners) []any {
	attrs := []any{"http", l.HTTP.Addr().String(), "grpc", l.GRPC.Addr().String()}
	if l.Admin != nil {
		attrs = append(attrs, "admin", l.Admin.Addr().String())
	}
	return attrs
}
