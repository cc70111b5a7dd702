// Package assemble is the service's composition root: from a plain Config
// (what the flags of serve and proxy carry) it builds where the service
// counts — the memory store or the Redis store behind one failure policy
// per mode — and the cluster strategies the policies name, and it owns
// their lifecycle. Open builds and starts everything; Close stops it all.
//
// The result, Stores, is what the engine asks for a rule's store
// (engine.Stores), what readiness checks, what feeds the breaker metrics
// and what the admin API resets keys in. It is not a library: errors name
// the settings by their flags, the operator's name for them.
package assemble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/redisstore"
	"github.com/redis/rueidis"
)

// Config says where the service counts and how the fleet shares limits.
type Config struct {
	// Redis holds the Redis address, or several seeds of a Redis Cluster,
	// or the Sentinels' addresses (--redis): each host:port or a
	// redis:// or rediss:// URL; empty: count in memory.
	Redis []string
	// RedisAuth holds the credentials, TLS and Sentinel settings of Redis.
	RedisAuth RedisAuth
	// RedisPrefix is the prefix of every Redis key (--redis-prefix).
	RedisPrefix string
	// StoreTimeout is the longest a decision waits for Redis
	// (--store-timeout); past it the limit's failure mode decides.
	StoreTimeout time.Duration
	// FailureMode is the failure policy of limits without their own
	// (--failure-mode); it must be valid when Redis is given.
	FailureMode failover.Mode
	// MaxKeys bounds the keys held in memory by the memory store, the
	// failure policies' local state and each strategy (--max-keys; 0:
	// unbounded, and gossip keeps its own default,
	// cluster.GossipDefaultMaxKeys).
	MaxKeys int
	// Fleet says how this node shares its limits with the others.
	Fleet FleetConfig
	// WrapRedis, when set, wraps the Redis client (redisstore's
	// Config.WrapClient): tracing makes its commands spans.
	WrapRedis func(rueidis.Client) rueidis.Client
}

// Stores is where the service counts: memory, or Redis behind a failure
// policy per mode, and the cluster strategies. It implements
// engine.Stores. Build it with Open; Close releases it.
type Stores struct {
	name        string
	memory      *floodgate.Memory
	redis       *redisstore.Limiter
	byMode      map[failover.Mode]failover.Limiter
	defaultMode failover.Mode
	fleet       *fleet // nil only in tests that build Stores by hand
}

// Open builds the stores of cfg and the strategies that policies (nil:
// none) and cfg.Fleet.Strategy use, and starts the strategies that run
// in the background (syncing, leasing, gossip) and the cluster
// membership. They run until Close, which the caller owes on success;
// on failure Open has released what it built.
func Open(ctx context.Context, cfg Config, policies *policy.Set, log *slog.Logger) (*Stores, error) {
	s, err := openStores(cfg, log)
	if err != nil {
		return nil, err
	}
	if s.fleet, err = openFleet(ctx, cfg, policies, s.redis, log); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// openStores builds the store: memory, or Redis behind one failure policy
// per mode.
func openStores(cfg Config, log *slog.Logger) (*Stores, error) {
	if cfg.MaxKeys < 0 {
		return nil, fmt.Errorf("--max-keys %d: want 0 (unbounded) or a positive number of keys", cfg.MaxKeys)
	}
	if !cfg.UsesRedis() {
		m := floodgate.NewMemory(floodgate.WithMaxKeys(cfg.MaxKeys))
		return &Stores{name: "memory", memory: m}, nil
	}
	redis := maskRedis(strings.Join(cfg.Redis, ","))
	if cfg.RedisAuth.Sentinel != "" {
		redis = "sentinel " + cfg.RedisAuth.Sentinel
	}
	if _, err := failover.ParseMode(string(cfg.FailureMode)); err != nil {
		return nil, fmt.Errorf("--failure-mode: %w", err)
	}
	rc, err := redisConfig(cfg)
	if err != nil {
		return nil, err
	}
	rc.DialInBackground, rc.OnDial = true, dialLogger(log, redis)
	rs, err := redisstore.New(rc)
	if err != nil {
		return nil, fmt.Errorf("--redis %s: %w", redis, err)
	}
	s := &Stores{name: "redis " + redis, redis: rs, byMode: map[failover.Mode]failover.Limiter{}, defaultMode: cfg.FailureMode}
	for _, mode := range failover.Modes() {
		l, err := failover.New(rs, failover.Config{Mode: mode, Timeout: cfg.StoreTimeout, Fleet: s, MaxLocalKeys: cfg.MaxKeys, Logger: log})
		if err != nil {
			s.Close()
			return nil, err
		}
		s.byMode[mode] = l
	}
	return s, nil
}

// dialLogger logs the background dials of a Redis that was down at start:
// each new reason it stays unreachable (not every retry), and its coming
// up. Until then each limit follows its failure mode.
func dialLogger(log *slog.Logger, redis string) func(error) {
	last := ""
	return func(err error) {
		if err == nil {
			log.Info("redis is up: decisions are counted there", "redis", redis)
			return
		}
		if err.Error() != last {
			last = err.Error()
			log.Warn("redis unreachable: each limit follows its failure mode until it answers", "redis", redis, "err", err)
		}
	}
}

// Name says where the service counts, for the logs: "memory" or "redis"
// and the addresses.
func (s *Stores) Name() string { return s.name }

// Count is the fleet's size, which fail_local divides the limits by: the
// live members, or --nodes.
func (s *Stores) Count() int {
	if s.fleet == nil || s.fleet.members == nil {
		return 1
	}
	return s.fleet.members.Count()
}

// For implements engine.Stores: the rule's strategy (the default when it
// names none) under the rule's failure mode (the default when it names
// none), or the store itself for exact.
func (s *Stores) For(rule policy.Rule) floodgate.Limiter {
	mode := rule.FailureMode
	if mode == "" {
		mode = s.defaultMode
	}
	if s.fleet != nil {
		if l := s.fleet.For(rule, mode); l != nil {
			return l
		}
	}
	if s.memory != nil {
		return s.memory
	}
	return s.byMode[mode]
}

// Default is where requests that carry their own limit count: the
// default strategy under the default failure mode.
func (s *Stores) Default() floodgate.Limiter { return s.For(policy.Rule{}) }

// Check reports policies that name a strategy this node did not build (a
// reload that brings in a new one needs a restart), or with a limit its
// strategy cannot serve (CheckStrategies).
func (s *Stores) Check(policies *policy.Set) error {
	if s.fleet == nil {
		return nil
	}
	return s.fleet.check(policies)
}

// Ready is an error while Redis is down for limits that fail closed:
// from a start without Redis until it first answers, and then
// while a fail_closed breaker is open (decisions deny without asking
// Redis) and while it is half-open (one probe is out; every other
// decision still denies). Only a probe that succeeds closes a breaker, so
// readiness comes back with the store instead of flapping with each
// probe. The cluster strategies that reach Redis have fail_closed
// breakers of their own (fleet.wrap), which count the same way.
func (s *Stores) Ready() error {
	if s.memory != nil {
		return nil
	}
	if s.redis != nil && !s.redis.Connected() {
		return errors.New("redis has not answered since the start (it is dialled in the background) and fail_closed limits deny every request")
	}
	failClosed := []floodgate.Limiter{s.byMode[failover.FailClosed]}
	if s.fleet != nil {
		for _, byMode := range s.fleet.limiters {
			failClosed = append(failClosed, byMode[failover.FailClosed])
		}
	}
	for _, l := range failClosed {
		b, ok := l.(failover.Limiter)
		if !ok {
			continue
		}
		// A decision would probe the store, but an unready node gets none:
		// the readiness check sends the probe itself.
		if b.Probe(context.Background()) == nil {
			continue
		}
		if st := b.State(); st != failover.Closed {
			return fmt.Errorf("the store is unreachable (circuit breaker %s) and fail_closed limits deny every request", st)
		}
	}
	return nil
}

// Breaker is the worst state of the per-mode circuit breakers: open if
// any is open, else half-open if any is, else closed. The memory store has
// none (ok is false).
func (s *Stores) Breaker() (state failover.BreakerState, ok bool) {
	if s.memory != nil {
		return failover.Closed, false
	}
	worst := failover.Closed
	for _, l := range s.byMode {
		if st := l.State(); severity(st) > severity(worst) {
			worst = st
		}
	}
	return worst, true
}

func severity(s failover.BreakerState) int {
	switch s {
	case failover.Open:
		return 2
	case failover.HalfOpen:
		return 1
	}
	return 0
}

// Reset forgets key in the store (the admin API's reset).
func (s *Stores) Reset(ctx context.Context, key string) error {
	if s.memory != nil {
		return s.memory.Reset(ctx, key)
	}
	return s.redis.Reset(ctx, key)
}

// Close stops the strategies and the membership and closes the failure
// policies and the store, in the reverse of the order Open built them.
func (s *Stores) Close() {
	if s.fleet != nil {
		s.fleet.close()
	}
	for _, l := range s.byMode {
		l.Close()
	}
	if s.redis != nil {
		s.redis.Close()
	}
	if s.memory != nil {
		s.memory.Close()
	}
}
