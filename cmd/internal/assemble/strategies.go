package assemble

import (
	"context"
	"log/slog"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/redisstore"
)

// strategyRow is how this node builds one strategy.
type strategyRow struct {
	// open builds an instance; nil for exact, which is the store itself.
	open func(instance) (built, error)
	// redis: the strategy keeps its shared state in Redis, so it needs the
	// Redis store and sits behind one failure policy per mode, as the
	// store does. The others have no store to lose.
	redis bool
}

// strategies is every strategy a policy or --strategy may name (those of
// policy.Strategies), by name.
var strategies = map[policy.Strategy]strategyRow{
	policy.StrategyExact:   {},
	policy.StrategyLocal:   {open: openLocal},
	policy.StrategyGossip:  {open: openGossip},
	policy.StrategyLeased:  {open: openLeased, redis: true},
	policy.StrategySynced:  {open: openSynced, redis: true},
	policy.StrategySampled: {open: openSampled, redis: true},
}

// instance is what one strategy instance is built from: its settings
// (the limit's parameters, else the service's) and what the node's
// instances share.
type instance struct {
	name       policy.Strategy
	interval   time.Duration
	oneIn      int64
	cfg        Config
	members    cluster.Members
	membership *cluster.Membership // nil without --cluster-bind
	redis      *redisstore.Limiter // nil without --redis
	log        *slog.Logger
}

// built is a strategy instance: the fleet closes it with the node, and
// starts it first when start is set.
type built struct {
	limiter floodgate.Limiter
	close   func()
	start   func(context.Context) error
}

func openLocal(in instance) (built, error) {
	l, err := cluster.NewLocal(cluster.LocalConfig{Members: in.members, MaxKeys: in.cfg.MaxKeys})
	if err != nil {
		return built{}, err
	}
	return built{limiter: l, close: l.Close}, nil
}

func openGossip(in instance) (built, error) {
	g, err := cluster.NewGossip(cluster.GossipConfig{Members: in.members, Transport: in.membership,
		Interval: in.interval, MaxKeys: in.cfg.MaxKeys, Logger: in.log})
	if err != nil {
		return built{}, err
	}
	in.membership.Attach(g)
	return built{limiter: g, close: g.Close, start: g.Start}, nil
}

// openLeased: a request waits at most the store timeout for a renewal;
// the renewal itself may take until Redis counts as down, and past the
// lease the limit's failure policy decides.
func openLeased(in instance) (built, error) {
	lc := cluster.LeasedConfig{Members: in.members, Interval: in.interval, Timeout: in.cfg.StoreTimeout,
		OutageAfter: in.cfg.Fleet.OutageAfter, ReportUnavailable: true, MaxKeys: in.cfg.MaxKeys, Logger: in.log}
	if lc.OutageAfter == 0 {
		lc.OutageAfter = cluster.DefaultOutageAfter(in.interval, in.cfg.StoreTimeout)
	}
	c, err := cluster.NewRedisCoordinator(cluster.RedisCoordinatorConfig{Client: in.redis.Client(),
		KeyPrefix: in.redis.KeyPrefix() + "lease:", Timeout: lc.OutageAfter})
	if err != nil {
		return built{}, err
	}
	lc.Coordinator = c
	l, err := cluster.NewLeased(lc)
	if err != nil {
		return built{}, err
	}
	return built{limiter: l, close: l.Close, start: l.Start}, nil
}

// counter is the shared counter of synced and sampled, under a prefix of
// the strategy's own.
func counter(in instance) (*cluster.RedisCounter, error) {
	return cluster.NewRedisCounter(cluster.RedisCounterConfig{Client: in.redis.Client(),
		KeyPrefix: in.redis.KeyPrefix() + string(in.name) + ":", Timeout: in.cfg.StoreTimeout})
}

func openSynced(in instance) (built, error) {
	c, err := counter(in)
	if err != nil {
		return built{}, err
	}
	s, err := cluster.NewSynced(cluster.SyncedConfig{Counter: c, Interval: in.interval, Logger: in.log})
	if err != nil {
		return built{}, err
	}
	return built{limiter: s, close: s.Close, start: s.Start}, nil
}

func openSampled(in instance) (built, error) {
	c, err := counter(in)
	if err != nil {
		return built{}, err
	}
	s, err := cluster.NewSampled(cluster.SampledConfig{Counter: c, OneIn: in.oneIn})
	if err != nil {
		return built{}, err
	}
	return built{limiter: s, close: s.Close}, nil
}
