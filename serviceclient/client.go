package serviceclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
)

// The defaults of Options.
const (
	// DefaultTimeout bounds one call to the service: long enough for a round
	// trip in a data centre under load, short enough to add little to a
	// request when the service is gone.
	DefaultTimeout = 100 * time.Millisecond
	// DefaultCacheSize is the number of over-limit keys the cache holds.
	DefaultCacheSize = 4096
	// DefaultBatchWait is how long a batch waits for company.
	DefaultBatchWait = time.Millisecond
	// MaxBatchDescriptors is the most descriptors one ShouldRateLimit may
	// carry: the service's own bound.
	MaxBatchDescriptors = 64
	// DefaultLearnedLimits is the number of descriptors whose limits the
	// client remembers from the service's answers for FailLocal.
	DefaultLearnedLimits = 4096
)

// ErrInvalidOptions is wrapped by every error New returns for bad Options.
var ErrInvalidOptions = errors.New("serviceclient: invalid options")

// ErrRejected is wrapped by the error of a request the service refused as
// malformed (HTTP 4xx other than 429, gRPC InvalidArgument): the message
// names the problem. It is not an outage: no fallback decides it.
var ErrRejected = errors.New("serviceclient: the service refused the request")

// ErrNoHTTP is the error of an explicit decision on a client without
// Options.HTTP: Envoy's gRPC API can state only fixed windows of whole
// units, so explicit limits go over HTTP.
var ErrNoHTTP = errors.New("serviceclient: explicit limits need Options.HTTP (the gRPC API cannot state them)")

// ErrNoLocalLimit is wrapped, with floodgate.ErrStoreUnavailable, by the
// error of a policy decision that FailLocal cannot make: the service did
// not answer, and the client neither was given (Options.PolicyLimits) nor
// has learned the limits of one of its descriptors, and
// Options.UnknownLimit does not say what to do then.
var ErrNoLocalLimit = errors.New("serviceclient: no local limit for the descriptor")

// Options configures New. Give HTTP, or GRPC or GRPCAddr, or both (then
// policy decisions use gRPC and explicit ones HTTP).
type Options struct {
	// HTTP is the service's HTTP base URL, such as http://127.0.0.1:8080.
	HTTP string
	// HTTPClient sends the HTTP calls; nil: a client on
	// http.DefaultTransport. Its own Timeout, if any, applies as well.
	HTTPClient *http.Client
	// GRPC is a connection to the service's gRPC listener that the caller
	// owns (TLS, balancing, interceptors are its own); Close leaves it open.
	GRPC grpc.ClientConnInterface
	// GRPCAddr, when GRPC is nil, is the address to dial, in plaintext; the
	// client owns that connection and Close closes it.
	GRPCAddr string
	// Timeout bounds each call to the service (default DefaultTimeout).
	Timeout time.Duration
	// Fallback decides when the service does not answer within Timeout;
	// its Mode empty means none: the error is returned. Its Timeout, zero,
	// is Options.Timeout; its Clock, nil, is Options.Clock. Every decision,
	// explicit or policy, goes through one failover.New with it: one
	// circuit breaker, one local Memory, Nodes. A policy decision under
	// FailLocal enforces its descriptors' limits divided by Nodes: the
	// limits PolicyLimits gives, else those learned from the service's
	// answers (see LearnedLimits), else UnknownLimit decides.
	Fallback failover.Config
	// PolicyLimits, when set, gives the limits of a policy descriptor for
	// FailLocal, as the caller's copy of the service's policy states them;
	// ok false: the caller does not know them (the learned ones, if any,
	// apply). ok true with no limits: the policy does not limit it. It is
	// asked before each policy decision under FailLocal, so it must be
	// quick and safe for concurrent use.
	PolicyLimits func(domain string, d Descriptor) (limits []floodgate.Limit, ok bool)
	// LearnedLimits is the number of descriptors whose limits the client
	// remembers from the service's answers, for FailLocal (default
	// DefaultLearnedLimits); negative learns none. An answer states each
	// limit as q units per window w (gRPC: requests_per_unit per unit;
	// HTTP: the RateLimit-Policy field), learned as a token bucket of q
	// per w. Only used under FailLocal.
	LearnedLimits int
	// UnknownLimit is what FailLocal decides for a policy decision with a
	// descriptor whose limits are neither given nor learned: FailOpen
	// allows that descriptor (the others are still enforced locally),
	// FailClosed denies the decision; empty returns an error wrapping
	// ErrNoLocalLimit and floodgate.ErrStoreUnavailable. Only with
	// Fallback.Mode FailLocal.
	UnknownLimit failover.Mode
	// CacheSize is the number of slots of the over-limit cache (default
	// DefaultCacheSize); negative turns the cache off.
	CacheSize int
	// Batch, when set, gathers concurrent policy decisions of one domain
	// into one gRPC call (see the package doc).
	Batch *Batch
	// Clock is read by the cache (and by Fallback, unless it has its
	// own); nil is the system clock.
	Clock floodgate.Clock
	// Logger receives the fallback's state changes; nil is slog.Default().
	Logger *slog.Logger
}

// Batch configures batching of policy decisions over gRPC.
type Batch struct {
	// MaxWait is the longest a call waits for others to join its batch
	// (default DefaultBatchWait); a full batch leaves at once.
	MaxWait time.Duration
	// MaxDescriptors is the most descriptors one batch carries (default
	// and most MaxBatchDescriptors).
	MaxDescriptors int
}

// Client asks the Floodgate service for decisions. It is safe for
// concurrent use. Its AllowN makes it a floodgate.Limiter.
type Client struct {
	opts     Options
	base     string // HTTP base URL without a trailing slash; "" without HTTP
	http     *http.Client
	rls      rlsv3.RateLimitServiceClient // nil without gRPC
	conn     *grpc.ClientConn             // the connection the client dialled, closed by Close
	explicit floodgate.Limiter            // the HTTP store, behind failover when Fallback is set
	guarded  failover.Limiter             // nil without Fallback
	policies floodgate.BatchLimiter       // guarded's policy decisions (serviceStore.AllowAll); nil without Fallback
	learned  *learned                     // nil unless FailLocal learns
	cache    *overLimit                   // nil when off
	batch    *batcher                     // nil without Batch
}

var _ floodgate.Limiter = (*Client)(nil)

// New returns a client for the service Options name.
func New(opts Options) (*Client, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{opts: opts, base: strings.TrimSuffix(opts.HTTP, "/"), http: opts.HTTPClient}
	if c.http == nil {
		c.http = &http.Client{Transport: http.DefaultTransport}
	}
	if opts.CacheSize > 0 {
		c.cache = newOverLimit(opts.CacheSize, opts.Clock)
	}
	if err := c.dial(); err != nil {
		return nil, err
	}
	if opts.Batch != nil {
		c.batch = newBatcher(*opts.Batch, c.sendRLS)
	}
	if opts.Fallback.Mode == failover.FailLocal && opts.LearnedLimits > 0 {
		c.learned = newLearned(opts.LearnedLimits)
	}
	c.explicit = serviceStore{c}
	if opts.Fallback.Mode != "" {
		if c.guarded, err = failover.New(serviceStore{c}, opts.Fallback); err != nil {
			c.Close()
			return nil, fmt.Errorf("%w: fallback: %w", ErrInvalidOptions, err)
		}
		c.explicit = c.guarded
		c.policies = c.guarded.(floodgate.BatchLimiter) // serviceStore is one, so failover's Limiter is
	}
	return c, nil
}

func (c *Client) dial() error {
	switch {
	case c.opts.GRPC != nil:
		c.rls = rlsv3.NewRateLimitServiceClient(c.opts.GRPC)
	case c.opts.GRPCAddr != "":
		conn, err := grpc.NewClient(c.opts.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fmt.Errorf("%w: grpc address %q: %w", ErrInvalidOptions, c.opts.GRPCAddr, err)
		}
		c.conn, c.rls = conn, rlsv3.NewRateLimitServiceClient(conn)
	}
	return nil
}

// withDefaults validates opts and fills in its zero values.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.HTTP == "" && o.GRPC == nil && o.GRPCAddr == "":
		return o, fmt.Errorf("%w: give the service's HTTP base URL, a gRPC connection or a gRPC address", ErrInvalidOptions)
	case o.Timeout < 0:
		return o, fmt.Errorf("%w: timeout must not be negative, got %s", ErrInvalidOptions, o.Timeout)
	case o.Batch != nil && o.GRPC == nil && o.GRPCAddr == "":
		return o, fmt.Errorf("%w: batching needs gRPC (HTTP decides a request's descriptors all or nothing)", ErrInvalidOptions)
	case o.UnknownLimit != "" && o.Fallback.Mode != failover.FailLocal:
		return o, fmt.Errorf("%w: unknown limit %q applies only to fallback mode %s, got mode %q", ErrInvalidOptions, o.UnknownLimit, failover.FailLocal, o.Fallback.Mode)
	case o.UnknownLimit != "" && o.UnknownLimit != failover.FailOpen && o.UnknownLimit != failover.FailClosed:
		return o, fmt.Errorf("%w: unknown limit %q: want %s, %s or empty (an error)", ErrInvalidOptions, o.UnknownLimit, failover.FailOpen, failover.FailClosed)
	}
	if o.HTTP != "" {
		u, err := url.Parse(o.HTTP)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return o, fmt.Errorf("%w: HTTP %q is not a base URL such as http://127.0.0.1:8080", ErrInvalidOptions, o.HTTP)
		}
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.LearnedLimits == 0 {
		o.LearnedLimits = DefaultLearnedLimits
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	if o.Batch != nil {
		b, err := o.Batch.withDefaults()
		if err != nil {
			return o, err
		}
		o.Batch = &b
	}
	if o.Fallback.Timeout == 0 {
		o.Fallback.Timeout = o.Timeout
	}
	if o.Fallback.Clock == nil {
		o.Fallback.Clock = o.Clock
	}
	if o.Fallback.Logger == nil {
		o.Fallback.Logger = o.Logger
	}
	return o, nil
}

func (b Batch) withDefaults() (Batch, error) {
	switch {
	case b.MaxWait < 0:
		return b, fmt.Errorf("%w: batch wait must not be negative, got %s", ErrInvalidOptions, b.MaxWait)
	case b.MaxDescriptors < 0 || b.MaxDescriptors > MaxBatchDescriptors:
		return b, fmt.Errorf("%w: batch size %d outside [1, %d]", ErrInvalidOptions, b.MaxDescriptors, MaxBatchDescriptors)
	}
	if b.MaxWait == 0 {
		b.MaxWait = DefaultBatchWait
	}
	if b.MaxDescriptors == 0 {
		b.MaxDescriptors = MaxBatchDescriptors
	}
	return b, nil
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Close releases what the client holds: the gRPC connection it dialled and
// the fallback's local state. It does not close Options.GRPC.
func (c *Client) Close() {
	if c.guarded != nil {
		c.guarded.Close()
	}
	if c.conn != nil {
		c.conn.Close()
	}
}

// AllowN asks the service whether cost units may pass for key under
// limit, and if so takes them (cost 0 only reads). A key the cache holds
// as over its limit for at least this cost is answered denied without a
// call. When the service does not answer within Options.Timeout, the
// error wraps floodgate.ErrStoreUnavailable, or, with a Fallback, its
// decision is returned with the cause noted in ctx (observe.NoteDegraded).
// Bad input is an error wrapping floodgate's (ErrInvalidKey, ErrInvalidCost,
// ErrInvalidLimit) or ErrRejected, never sent.
func (c *Client) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	if err := validate(key, limit, cost); err != nil {
		return floodgate.Decision{}, err
	}
	if c.base == "" {
		return floodgate.Decision{}, ErrNoHTTP
	}
	if d, ok := c.cache.explicit(key, limit, cost); ok {
		return d, nil
	}
	return c.explicit.AllowN(ctx, key, limit, cost)
}

// Allow is AllowN: the name the issue gives the explicit decision.
func (c *Client) Allow(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	return c.AllowN(ctx, key, limit, cost)
}

func validate(key string, limit floodgate.Limit, cost int64) error {
	if err := floodgate.ValidateRequest(key, cost); err != nil {
		return err
	}
	return limit.Validate()
}

// serviceStore is the service as a store that failover.New puts its
// policy and breaker around: AllowN is the explicit decision over HTTP,
// AllowAll a policy decision (see policyCall).
type serviceStore struct{ c *Client }

func (s serviceStore) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	d, err := s.c.allowHTTP(ctx, key, limit, cost)
	if err == nil && !d.Allowed {
		s.c.cache.denyExplicit(key, limit, cost, d)
	}
	return d, err
}

// HonorsDeadline tells failover that the calls return by their context's
// deadline (HTTP's and gRPC's do, and the batcher waits on the context):
// failover calls them on the caller's goroutine, which policyCall needs.
func (serviceStore) HonorsDeadline() bool { return true }

// unavailable wraps err as the service not answering.
func unavailable(err error) error {
	if errors.Is(err, floodgate.ErrStoreUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", floodgate.ErrStoreUnavailable, err)
}
