// Package redisstore keeps rate-limit state in Redis, so that every node of
// a fleet enforces one exact global limit: the central counter strategy.
// Each decision is one Lua script call (EVALSHA) that reads the key's state,
// decides with the same integer arithmetic as the in-memory store, and
// writes it back, atomically; concurrent callers share pipelined connections
// (rueidis), so throughput is bounded by Redis, not by round trips.
//
// Time comes from the Redis server (TIME) unless Config.Clock is set, so
// the clocks of the nodes do not matter. Every key expires when its state is
// back to full, so idle keys cost nothing. Standalone Redis and Redis
// Cluster both work; scripts reach every node by EVALSHA with an EVAL
// fallback.
//
// Every call returns within Config.Timeout (or its context's deadline, if
// sooner), plus the time the machine takes to run the caller again: the
// caller waits on its own timer while the calls to Redis run on other
// goroutines, so neither a hung server, a dial, a full pipeline nor a batch
// in flight can hold it longer. A store that cannot answer in time yields
// an error wrapping floodgate.ErrStoreUnavailable; wrap the Limiter with a
// failure policy (package failover) to decide what such requests get. A
// request abandoned at its deadline may still have been counted by Redis
// (it was on the wire), never twice: an outage errs towards admitting
// less.
package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/internal/algo"
	"github.com/floodgate-io/floodgate/internal/memo"
	"github.com/floodgate-io/floodgate/internal/rediserr"
)

// Config configures a Limiter.
type Config struct {
	// Addrs is one address (host:port), or several seeds of a Redis Cluster;
	// with Network "unix", the one path of Redis's Unix socket.
	Addrs []string
	// Network is how Addrs are reached: "tcp" (the default, also "") or
	// "unix", for a Redis on the same machine that listens on a Unix socket
	// (its unixsocket setting), which saves the TCP stack's work on every
	// round trip. A Unix socket is one standalone Redis: neither a Cluster
	// nor Sentinels, and no TLS.
	Network string
	// KeyPrefix is put before every key, e.g. "fg:".
	KeyPrefix string
	// Clock, when set, supplies the time of every decision instead of the
	// server's TIME: for tests and simulation. Keys then live ClockSlack
	// longer than their state needs, to absorb the difference between this
	// clock and the server's.
	Clock      floodgate.Clock
	ClockSlack time.Duration // default 1 minute; only with Clock

	// Timeout bounds every call (AllowN, AllowAll, Adjust), from the
	// caller's side: queueing, dialing and the round trip included
	// (default 50ms).
	Timeout time.Duration
	// DialTimeout bounds connecting (default 1s).
	DialTimeout time.Duration
	// DialInBackground makes New succeed when no address answers (see
	// Unreachable): the Limiter's calls then fail with
	// floodgate.ErrStoreUnavailable, so a failure policy decides them,
	// while it dials in the background until Redis answers. Errors that
	// waiting does not mend (a wrong password, a certificate that does
	// not verify) still fail New.
	DialInBackground bool
	// OnDial, when set, hears each background dial: its error, or nil
	// once Redis answered (then it is called no more). For the logs.
	OnDial func(error)

	Username string
	Password string
	DB       int
	TLS      *tls.Config

	// Sentinel, when its MasterSet is set, makes Addrs the addresses of
	// Redis Sentinels: the Limiter asks them for the master of that set and
	// follows it when they fail over. Username, Password, DB and TLS then
	// apply to the master; Sentinel's own Username and Password to the
	// Sentinels, which are reached with the same TLS.
	Sentinel Sentinel

	// Connections is how many pipelined connections to open per node
	// (rounded down to a power of two; default 1). Redis runs scripts one at
	// a time, so one connection carrying every caller's commands, pipelined,
	// is both the fastest and the lightest; more help only over long links.
	Connections int

	// MaxBatch is the most requests sent to Redis in one script call: the
	// requests that arrive while earlier ones are in flight are decided
	// together, each exactly as alone (see coalesce.go), which multiplies
	// what one Redis can decide per second. Default DefaultMaxBatch; 1
	// sends every request in a call of its own.
	MaxBatch int

	// WrapClient, when set, is applied to the Redis client New connects
	// (and to the one a background dial connects): to instrument its
	// commands, e.g. with OpenTelemetry's rueidisotel, whose spans then
	// nest in the span of the request being decided (telemetry/tracing's
	// WrapClient does this). With it set, each call to Redis carries the
	// values of its first caller's context (not its cancellation), which
	// costs one allocation per call; without it, none.
	WrapClient func(rueidis.Client) rueidis.Client
}

// Sentinel names the master set that Redis Sentinels watch, and how to
// authenticate to the Sentinels themselves (often not at all: their
// password is not the master's).
type Sentinel struct {
	MasterSet string
	Username  string
	Password  string
}

// Limiter is a floodgate.Limiter on Redis.
type Limiter struct {
	client  rueidis.Client
	cfg     Config
	scripts *scripts
	limits  memo.Cache[floodgate.Limit, *compiled]
	slack   string      // TTL slack in ms, as sent to the scripts
	cluster atomic.Bool // a Redis Cluster's: batch per slot (set once, at connection)

	batchers  [algo.SlidingWindow + 1]*batcher // standalone: one per algorithm
	slots     []atomic.Pointer[slotBatchers]   // cluster: per hash slot
	pendings  sync.Pool                        // of *pending, each with its done channel and timer
	timedOut  error                            // no answer within Timeout: wraps floodgate.ErrStoreUnavailable
	work      chan job                         // batches handed to idle senders
	closed    chan struct{}                    // closed by Close: idle senders end
	closeOnce sync.Once

	beforeTake func(yield bool) // test hook: a sender is about to take the batch it was asked for
}

// New connects to Redis. It fails if no address answers within
// DialTimeout, unless Config.DialInBackground says to keep dialing.
func New(cfg Config) (*Limiter, error) {
	if len(cfg.Addrs) == 0 {
		return nil, errors.New("redisstore: no address given")
	}
	if cfg.Timeout < 0 || cfg.DialTimeout < 0 || cfg.ClockSlack < 0 {
		return nil, errors.New("redisstore: timeouts must not be negative")
	}
	if err := checkNetwork(cfg); err != nil {
		return nil, err
	}
	cfg = withDefaults(cfg)
	opt := rueidis.ClientOption{
		InitAddress:       cfg.Addrs,
		DialCtxFn:         dialFn(cfg.Network),
		ForceSingleClient: cfg.Network == NetworkUnix,
		Username:          cfg.Username,
		Password:          cfg.Password,
		SelectDB:          cfg.DB,
		TLSConfig:         cfg.TLS,
		Dialer:            net.Dialer{Timeout: cfg.DialTimeout},
		ConnWriteTimeout:  cfg.Timeout + cfg.DialTimeout,
		DisableCache:      true,
		DisableRetry:      true, // a script that may have run is never sent twice
		PipelineMultiplex: multiplex(cfg.Connections),
		Sentinel:          sentinelOption(cfg),
	}
	client, err := newClient(cfg, opt)
	var later *swapClient // the client when dialing in the background
	switch {
	case err != nil && cfg.DialInBackground && Unreachable(err):
		later = newSwapClient(standIn(opt))
		client = later
	case err != nil:
		return nil, fmt.Errorf("redisstore: connecting to %v: %w: %w", cfg.Addrs, floodgate.ErrStoreUnavailable, err)
	}
	l := &Limiter{client: client, cfg: cfg, scripts: loadScripts()}
	l.pendings.New = newPending
	l.work, l.closed = make(chan job), make(chan struct{})
	l.timedOut = fmt.Errorf("%w: no answer within %s: %w", floodgate.ErrStoreUnavailable, cfg.Timeout, context.DeadlineExceeded)
	for k := range l.batchers {
		l.batchers[k] = &batcher{l: l, script: l.scripts.many[k]}
	}
	if client.Mode() == rueidis.ClientModeCluster {
		l.slots = make([]atomic.Pointer[slotBatchers], 16384)
		l.cluster.Store(true)
	}
	if cfg.Clock != nil {
		l.slack = strconv.FormatInt(cfg.ClockSlack.Milliseconds(), 10)
	} else {
		l.slack = "0"
	}
	if later != nil {
		go l.dialInBackground(opt, later)
	}
	return l, nil
}

// newClient connects a client with opt and applies Config.WrapClient to it.
func newClient(cfg Config, opt rueidis.ClientOption) (rueidis.Client, error) {
	c, err := rueidis.NewClient(opt)
	if err != nil || cfg.WrapClient == nil {
		return c, err
	}
	return cfg.WrapClient(c), nil
}

// NetworkUnix is the Config.Network of a Redis reached over a Unix socket.
const NetworkUnix = "unix"

// ErrNotSocket marks a Unix socket path that names something else: a
// file or directory, never a Redis that is down (that is
// floodgate.ErrStoreUnavailable).
var ErrNotSocket = errors.New("not a Unix socket")

// checkNetwork refuses a Network and Addrs that cannot work together.
func checkNetwork(cfg Config) error {
	switch cfg.Network {
	case "", "tcp":
		return nil
	case NetworkUnix:
	default:
		return fmt.Errorf("redisstore: network %q: want tcp or unix", cfg.Network)
	}
	switch {
	case len(cfg.Addrs) != 1:
		return fmt.Errorf("redisstore: a Unix socket is one path, not %d addresses", len(cfg.Addrs))
	case cfg.Sentinel.MasterSet != "":
		return errors.New("redisstore: Sentinels are reached over TCP, not a Unix socket")
	case cfg.TLS != nil:
		return errors.New("redisstore: no TLS over a Unix socket (it never leaves the machine)")
	}
	// A missing socket is a Redis that is not up (yet): the dial says so.
	// Anything else at the path is a mistake that no retry mends.
	if fi, err := os.Stat(cfg.Addrs[0]); err == nil && fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("redisstore: %s: %w (it is a %s)", cfg.Addrs[0], ErrNotSocket, fileKind(fi.Mode()))
	}
	return nil
}

func fileKind(m fs.FileMode) string {
	if m.IsDir() {
		return "directory"
	}
	if m.IsRegular() {
		return "regular file"
	}
	return m.Type().String()
}

// dialFn is rueidis's dialer for network: nil (its own, TCP) but for
// Unix sockets.
func dialFn(network string) func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error) {
	if network != NetworkUnix {
		return nil
	}
	return func(ctx context.Context, path string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
		return d.DialContext(ctx, NetworkUnix, path)
	}
}

// sentinelOption is rueidis's Sentinel setting: zero (no Sentinel) unless
// a master set is named.
func sentinelOption(cfg Config) rueidis.SentinelOption {
	s := cfg.Sentinel
	if s.MasterSet == "" {
		return rueidis.SentinelOption{}
	}
	return rueidis.SentinelOption{
		MasterSet: s.MasterSet,
		Username:  s.Username,
		Password:  s.Password,
		TLSConfig: cfg.TLS,
		Dialer:    net.Dialer{Timeout: cfg.DialTimeout},
	}
}

func withDefaults(cfg Config) Config {
	if cfg.Timeout == 0 {
		cfg.Timeout = 50 * time.Millisecond
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.ClockSlack == 0 {
		cfg.ClockSlack = time.Minute
	}
	if cfg.Connections <= 0 {
		cfg.Connections = 1
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	return cfg
}

// multiplex turns a connection count into rueidis's exponent; -1 is how it
// is told "one connection" (0 means its default of four).
func multiplex(connections int) int {
	n := bits.Len(uint(connections)) - 1
	if n == 0 {
		return -1
	}
	return n
}

// HonorsDeadline reports that every call returns by its context's deadline
// (or Timeout, if sooner) on its own: the caller waits on its own timer,
// while the calls to Redis run on other goroutines. So a failure policy may
// call the Limiter on the caller's goroutine (see failover.DeadlineAware).
func (l *Limiter) HonorsDeadline() bool { return true }

// NeverDegrades reports true: a Limiter returns Redis's failures as
// errors and never decides in its place, so it never notes a decision
// degraded (observe.Undegradable); wrap it in failover for that. A surface
// reporting its decisions then skips the context that would carry a note.
func (l *Limiter) NeverDegrades() bool { return true }

// CallTimeout is Config.Timeout, the longest any call waits (see
// failover.SelfTimed): each waits on its own timer, for Timeout or its
// context's deadline, whichever comes first, and returns when its context
// is cancelled.
func (l *Limiter) CallTimeout() time.Duration { return l.cfg.Timeout }

// Client is the Limiter's connection to Redis, for other parts of the same
// process that keep their own state there (the cluster strategies), so that
// they share its pipelined connections instead of opening their own.
func (l *Limiter) Client() rueidis.Client { return l.client }

// KeyPrefix is the prefix of every key the Limiter writes.
func (l *Limiter) KeyPrefix() string { return l.cfg.KeyPrefix }

// Close closes the connections and ends the goroutines that send batches.
func (l *Limiter) Close() {
	l.closeOnce.Do(func() { close(l.closed) })
	l.client.Close()
}

// AllowN implements floodgate.Limiter. It returns by ctx's deadline or
// Timeout, whichever is first, whatever Redis is doing; when the store is
// the reason, the error wraps floodgate.ErrStoreUnavailable. A decision
// abandoned at its deadline may still have been counted by Redis (its
// request was on the wire), never twice: so an outage errs towards
// admitting less, never more.
func (l *Limiter) AllowN(ctx context.Context, key string, limit floodgate.Limit, cost int64) (floodgate.Decision, error) {
	c, err := l.prepare(key, limit, cost)
	if err != nil {
		return floodgate.Decision{}, err
	}
	full := l.cfg.KeyPrefix + key
	return l.batcherFor(c, full).decide(ctx, full, c, cost)
}

// call runs a one-key script on ctx, which bounds it, and reads its
// decision.
func (l *Limiter) call(ctx context.Context, script *rueidis.Lua, key string, args []string) (floodgate.Decision, int64, error) {
	reply, err := script.Exec(ctx, l.client, []string{l.cfg.KeyPrefix + key}, args).AsIntSlice()
	if err != nil {
		return floodgate.Decision{}, 0, l.storeError(ctx, key, err)
	}
	return decision(reply)
}

// prepare validates a request and compiles its limit.
func (l *Limiter) prepare(key string, limit floodgate.Limit, cost int64) (*compiled, error) {
	// The key-size policy (floodgate.MaxKeyBytes) is ValidateRequest's.
	if err := floodgate.ValidateRequest(key, cost); err != nil {
		return nil, err
	}
	return l.limits.Get(limit, func(lim floodgate.Limit) (*compiled, error) {
		p, err := algo.Compile(string(lim.Algorithm), lim.Rate, lim.Period, lim.Burst)
		if err != nil {
			return nil, err
		}
		return compile(p), nil
	})
}

// now returns the decision time to send: the client's clock in µs, or -1
// for the server's TIME.
func (l *Limiter) now() string {
	if l.cfg.Clock == nil {
		return "-1"
	}
	return strconv.FormatInt(l.cfg.Clock.Now().UnixMicro(), 10)
}

// args is the ARGV of the peek and refund scripts: now, cost, TTL slack and
// the whole compiled limit.
func (l *Limiter) args(c *compiled, cost int64) []string {
	args := make([]string, 0, 3+len(c.args)+1)
	args = append(args, l.now(), strconv.FormatInt(cost, 10), l.slack)
	return append(args, c.args[:]...)
}

// storeError classifies a failed call: the caller giving up is the caller's
// error; Redis answering with an error is a defect to report as is; no
// answer in time is the store being unavailable.
func (l *Limiter) storeError(ctx context.Context, key string, err error) error {
	return rediserr.Classify(ctx, fmt.Sprintf("redisstore: key %q", key), err)
}

// decision reads a script's reply: allowed, limit, remaining, retry_after,
// reset_after, delay (µs) and the time it decided at.
func decision(v []int64) (floodgate.Decision, int64, error) {
	if len(v) != 7 {
		return floodgate.Decision{}, 0, fmt.Errorf("redisstore: script replied %d values, want 7", len(v))
	}
	return floodgate.Decision{
		Allowed:    v[0] == 1,
		Limit:      v[1],
		Remaining:  v[2],
		RetryAfter: time.Duration(v[3]) * time.Microsecond,
		ResetAfter: time.Duration(v[4]) * time.Microsecond,
		Delay:      time.Duration(v[5]) * time.Microsecond,
	}, v[6], nil
}

// Ping asks Redis for its PONG within the store's timeout: a health check
// that decides nothing and stores nothing (failover.Limiter.Probe, for
// readiness). Its error wraps floodgate.ErrStoreUnavailable.
func (l *Limiter) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	if err := l.client.Do(ctx, l.client.B().Ping().Build()).Error(); err != nil {
		return fmt.Errorf("%w: ping: %w", floodgate.ErrStoreUnavailable, err)
	}
	return nil
}
