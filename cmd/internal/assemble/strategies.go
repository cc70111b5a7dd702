package assemble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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
	// serves says whether the strategy can enforce a limit, given sampled's
	// 1 in N (the cluster package's Serves functions); nil for exact, the
	// store itself, which serves every limit the policy language accepts.
	serves func(limit floodgate.Limit, oneIn int64) error
}

// strategies is every strategy a policy or --strategy may name (those of
// policy.Strategies), by name.
var strategies = map[policy.Strategy]strategyRow{
	policy.StrategyExact:   {},
	policy.StrategyLocal:   {open: openLocal, serves: ignoreOneIn(cluster.LocalServes)},
	policy.StrategyGossip:  {open: openGossip, serves: ignoreOneIn(cluster.GossipServes)},
	policy.StrategyLeased:  {open: openLeased, redis: true, serves: ignoreOneIn(cluster.LeasedServes)},
	policy.StrategySynced:  {open: openSynced, redis: true, serves: ignoreOneIn(cluster.SyncedServes)},
	policy.StrategySampled: {open: openSampled, redis: true, serves: cluster.SampledServes},
}

func ignoreOneIn(serves func(floodgate.Limit) error) func(floodgate.Limit, int64) error {
	return func(l floodgate.Limit, _ int64) error { return serves(l) }
}

// CheckStrategies refuses a policy with a limit that its strategy (its
// own strategy:, else f.Strategy) cannot serve, such as a token_bucket
// limit under --strategy leased: serve refuses it when it starts and when
// it reloads, and config check with the same flags, so that it is never
// found at the first request. Each refusal is a *policy.Error at the
// limit's file and line wrapping floodgate.ErrInvalidLimit; all are
// joined. Unlimited limits and those of rate 0 reach no strategy.
func CheckStrategies(f FleetConfig, set *policy.Set) error {
	def, err := policy.ParseStrategy(string(f.Strategy))
	if err != nil {
		return fmt.Errorf("--strategy %q: %w", f.Strategy, err)
	}
	var errs []error
	for _, domain := range set.Domains() {
		p, _ := set.Policy(domain)
		for _, r := range p.Rules() {
			if err := checkRule(r, def, f.SampleOneIn); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// checkRule asks the rule's strategy whether it serves the rule's limit.
func checkRule(r policy.Rule, def policy.Strategy, oneIn int64) error {
	if r.Unlimited || r.DeniesAll() {
		return nil
	}
	name, from := r.Strategy, "its strategy:"
	if name == "" {
		name, from = def, "--strategy"
	}
	if r.StrategyParams.OneIn > 0 {
		oneIn = r.StrategyParams.OneIn
	}
	row := strategies[name]
	if row.serves == nil {
		return nil
	}
	err := row.serves(r.Limit, oneIn)
	if err == nil {
		return nil
	}
	return &policy.Error{File: r.File, Line: r.Line, Err: err,
		Msg: fmt.Sprintf("limit %s (%s) cannot be shared by strategy %s (%s): %v", ruleName(r), r.Path, name, from, err)}
}

// ruleName is the rule's name, or its position among its descriptor's
// limits when it has none.
func ruleName(r policy.Rule) string {
	if r.Name != "" {
		return strconv.Quote(r.Name)
	}
	return "#" + strconv.Itoa(r.Index)
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
