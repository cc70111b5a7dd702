package loadgen

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"strings"
	"time"
)

// Target names the protocol a run speaks.
type Target string

// The targets.
const (
	// TargetGRPC calls envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit.
	TargetGRPC Target = "grpc"
	// TargetHTTP posts to /v1/allow.
	TargetHTTP Target = "http"
	// TargetGubernator calls gubernator's pb.gubernator.V1/GetRateLimits,
	// for comparing Floodgate with it on the same load.
	TargetGubernator Target = "gubernator"
)

// targetChoices lists the targets for error messages.
const targetChoices = `"grpc", "http" or "gubernator"`

// Defaults applied by [Run] to zero fields of [Config]; exported so that the
// command line can show them in its flag help.
const (
	DefaultConcurrency   = 16
	DefaultConns         = 1
	DefaultDuration      = 10 * time.Second
	DefaultKeys          = 1000
	DefaultDomain        = "example" // serve's built-in policy, whose "user" limit the default descriptor matches
	DefaultDescriptorKey = "user"
	DefaultCost          = 1
	DefaultTimeout       = 5 * time.Second
)

// MaxConcurrency bounds Config.Concurrency: each worker owns a histogram of
// about 16 KiB, and far fewer workers already saturate one client machine.
const MaxConcurrency = 10000

// Config describes one run. The zero value of every field but Target and
// Addr means its default.
type Config struct {
	// Target is the protocol: TargetGRPC, TargetHTTP or TargetGubernator.
	Target Target
	// Addr is host:port for gRPC; for HTTP either host:port or a base URL
	// such as http://host:port/prefix, to which /v1/allow is appended.
	Addr string
	// Concurrency is the number of workers, each with at most one call in
	// flight (default 16).
	Concurrency int
	// Conns is the number of gRPC connections the workers are spread over
	// (default 1). One HTTP/2 connection multiplexes every call, which can
	// make a single connection, not the server, the bottleneck. HTTP/1.1
	// needs no such knob: it keeps up to Concurrency connections alive.
	Conns int
	// Duration bounds the run (default 10s): no call starts after it, so the
	// run ends at most one call latency later.
	Duration time.Duration
	// Requests, when positive, also bounds the run by the number of calls.
	Requests int64
	// Rate, when positive, makes the run open loop at Rate calls per second
	// (see the package documentation); 0 runs closed loop.
	Rate float64
	// Keys is the number of distinct descriptor values or keys (default 1000).
	Keys int
	// Domain is the rate-limit domain of policy lookups (default "example",
	// that of serve's built-in policy).
	Domain string
	// DescriptorKey is the descriptor entry key, and the key prefix of
	// explicit-limit HTTP calls (default "user").
	DescriptorKey string
	// Limit, for the HTTP target, sends this explicit limit with every
	// call instead of asking the server to look up a policy; see ParseLimit
	// for its syntax. The gubernator target requires it (gubernator takes
	// the limit from each call) and accepts token_bucket without a burst of
	// its own and leaky_bucket, with a period of whole milliseconds.
	Limit string
	// Cost is the units each call consumes: hits_addend for gRPC, cost for
	// HTTP (default 1).
	Cost int64
	// Timeout bounds each call (default 5s); a call that exceeds it is an error.
	Timeout time.Duration
	// CallLog, when set, receives every call once the run has ended, in
	// the order the calls started, one line each: its start (Unix ns), its
	// latency (ns) and its outcome (allowed, denied or error). Where the
	// percentiles say how slow the slow calls were, the log says when they
	// were: a pause of the service shows as a burst of slow calls that
	// started together. The calls are held in memory until the end, up to
	// MaxCallLog of them.
	CallLog io.Writer
}

// ConfigError reports a Config field [Run] cannot use. Field is the name of
// the Go field (such as "Concurrency"), so that the command line can map it
// back to the flag the user typed.
type ConfigError struct {
	Field string
	Err   error
}

// Error names the field and what is wrong with it.
func (e *ConfigError) Error() string { return "loadgen: invalid " + e.Field + ": " + e.Err.Error() }

// Unwrap returns the underlying error, which for Limit is ParseLimit's.
func (e *ConfigError) Unwrap() error { return e.Err }

func badField(field, format string, args ...any) error {
	return &ConfigError{Field: field, Err: fmt.Errorf(format, args...)}
}

// plan is a validated Config with its defaults applied and its derived
// values computed once.
type plan struct {
	Config
	url   string // HTTP: the full /v1/allow URL
	limit *Limit // HTTP, gubernator: the parsed explicit limit, nil for policy lookups
}

// resolve applies the defaults and validates every field, naming the first
// bad one.
func (c Config) resolve() (plan, error) {
	p := plan{Config: c}
	setDefault(&p.Concurrency, DefaultConcurrency)
	setDefault(&p.Conns, DefaultConns)
	setDefault(&p.Duration, DefaultDuration)
	setDefault(&p.Keys, DefaultKeys)
	setDefault(&p.Domain, DefaultDomain)
	setDefault(&p.DescriptorKey, DefaultDescriptorKey)
	setDefault(&p.Cost, DefaultCost)
	setDefault(&p.Timeout, DefaultTimeout)

	switch p.Target {
	case TargetGRPC, TargetHTTP, TargetGubernator:
	case "":
		return p, badField("Target", "empty; want %s", targetChoices)
	default:
		return p, badField("Target", "%q; want %s", string(p.Target), targetChoices)
	}
	if strings.TrimSpace(p.Addr) == "" {
		return p, badField("Addr", "empty; want host:port")
	}
	switch {
	case p.Concurrency < 0:
		return p, badField("Concurrency", "must be positive, got %d", p.Concurrency)
	case p.Concurrency > MaxConcurrency:
		return p, badField("Concurrency", "%d exceeds the maximum %d", p.Concurrency, MaxConcurrency)
	case p.Conns < 0:
		return p, badField("Conns", "must be positive, got %d", p.Conns)
	case p.Conns > 1 && p.Target == TargetHTTP:
		return p, badField("Conns", "applies only to the gRPC targets, %s and %s (HTTP keeps one connection per worker alive)", TargetGRPC, TargetGubernator)
	case p.Conns > p.Concurrency:
		// Workers are spread round-robin over the connections, so the
		// surplus would never carry a call.
		return p, badField("Conns", "%d exceeds Concurrency %d: the extra connections would stay idle", p.Conns, p.Concurrency)
	case p.Duration < 0:
		return p, badField("Duration", "must be positive, got %s", p.Duration)
	case p.Requests < 0:
		return p, badField("Requests", "must not be negative, got %d", p.Requests)
	case math.IsNaN(p.Rate) || math.IsInf(p.Rate, 0) || p.Rate < 0:
		return p, badField("Rate", "must be a finite number of calls per second ≥ 0, got %v", p.Rate)
	case p.Keys < 0:
		return p, badField("Keys", "must be positive, got %d", p.Keys)
	case strings.TrimSpace(p.DescriptorKey) == "":
		return p, badField("DescriptorKey", "must not be blank")
	case strings.TrimSpace(p.Domain) == "":
		return p, badField("Domain", "must not be blank")
	case p.Cost < 0:
		return p, badField("Cost", "must be positive, got %d", p.Cost)
	case p.Cost > math.MaxUint32:
		// gRPC carries it in the uint32 hits_addend; HTTP is held to the
		// same bound so that both targets accept the same configurations.
		return p, badField("Cost", "%d exceeds the maximum %d", p.Cost, uint32(math.MaxUint32))
	case p.Timeout < 0:
		return p, badField("Timeout", "must be positive, got %s", p.Timeout)
	}

	switch p.Target {
	case TargetGRPC:
		if p.Limit != "" {
			return p, badField("Limit", "applies only to the %s and %s targets; RateLimitService looks the limit up by Domain and descriptor", TargetHTTP, TargetGubernator)
		}
		if err := checkHostPort(p.Addr); err != nil {
			return p, err
		}
	case TargetGubernator:
		if err := checkHostPort(p.Addr); err != nil {
			return p, err
		}
		if p.Limit == "" {
			return p, badField("Limit", "required by the %s target: gubernator takes the limit from each call (e.g. token_bucket:1000000/1m)", TargetGubernator)
		}
		l, err := ParseLimit(p.Limit)
		if err == nil {
			_, err = guberLimit(l)
		}
		if err != nil {
			return p, &ConfigError{Field: "Limit", Err: err}
		}
		p.limit = &l
	case TargetHTTP:
		u, err := allowURL(p.Addr)
		if err != nil {
			return p, &ConfigError{Field: "Addr", Err: err}
		}
		p.url = u
		if p.Limit != "" {
			l, err := ParseLimit(p.Limit)
			if err != nil {
				return p, &ConfigError{Field: "Limit", Err: err}
			}
			p.limit = &l
		}
	}
	return p, nil
}

// checkHostPort accepts the host:port a gRPC target dials.
func checkHostPort(addr string) error {
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return badField("Addr", "%q is not host:port", addr)
	}
	return nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// allowURL turns host:port or a base URL into the URL of /v1/allow.
func allowURL(addr string) (string, error) {
	addr = strings.TrimSpace(addr)
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("%q is neither host:port nor a URL: %w", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: scheme must be http or https, got %q", addr, u.Scheme)
	}
	if u.Host == "" {
		return "", errors.New("URL " + addr + " has no host")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q: a base URL takes no query or fragment", addr)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/allow"
	u.RawPath = ""
	return u.String(), nil
}
