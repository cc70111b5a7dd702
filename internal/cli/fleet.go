package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/config"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/redisstore"
)

// fleetFlags say how this node shares its limits with the rest of a fleet.
type fleetFlags struct {
	strategy     string
	nodeName     string
	clusterBind  string
	clusterJoin  []string
	nodes        int
	syncInterval time.Duration
	sampleOneIn  int64
	outageAfter  time.Duration
	// maxKeys bounds the keys each strategy holds in memory: serve's and
	// proxy's --max-keys, which they give with withMaxKeys (0: unbounded;
	// gossip then keeps its own default, cluster.GossipDefaultMaxKeys).
	maxKeys int
}

// withMaxKeys returns f with the strategies' in-memory state bounded to n
// keys each (--max-keys).
func (f fleetFlags) withMaxKeys(n int) fleetFlags {
	f.maxKeys = n
	return f
}

// fleetFlagNames are the flags register adds.
var fleetFlagNames = []string{"strategy", "node-name", "cluster-bind", "cluster-join", "nodes", "sync-interval", "sample-one-in", "outage-after"}

func (f *fleetFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.strategy, "strategy", string(config.StrategyExact), "how limits without their own strategy are shared between nodes: exact, local, leased, synced, sampled or gossip")
	fl.StringVar(&f.nodeName, "node-name", "", "this node's name in the cluster, unique (default: the host name and a random suffix)")
	fl.StringVar(&f.clusterBind, "cluster-bind", "", "host:port for the cluster's gossip (memberlist), e.g. 127.0.0.1:7946 (empty: no membership; the fleet is --nodes nodes)")
	fl.StringSliceVar(&f.clusterJoin, "cluster-join", nil, "host:port of members already running, comma-separated")
	fl.IntVar(&f.nodes, "nodes", 1, "the fleet's size, for local and leased shares, when there is no --cluster-bind")
	fl.DurationVar(&f.syncInterval, "sync-interval", 100*time.Millisecond, "T: how often leased, synced and gossip sync with the fleet (for gossip: memberlist's gossip interval)")
	fl.Int64Var(&f.sampleOneIn, "sample-one-in", 10, "sampled: the shared counter is updated for 1 in this many admitted requests")
	fl.DurationVar(&f.outageAfter, "outage-after", 0, "leased: how long a lease renewal may go unanswered before Redis counts as down and the limit's failure_mode applies past the lease; a slower answer only denies (0: the longer of 1s and 2·sync-interval)")
}

// fleet holds this node's cluster strategies, each built only if some
// limit or the default uses it.
type fleet struct {
	defaultStrategy config.Strategy
	members         cluster.Members
	membership      *cluster.Membership
	// limiters are the strategies by name and parameters, and for those
	// that reach Redis one failure-policy wrapper per mode.
	limiters map[strategyKey]map[failover.Mode]floodgate.Limiter
	closers  []func()
}

// strategyKey names one strategy instance: limits that pick the same
// strategy with the same parameters share it.
type strategyKey struct {
	name   config.Strategy
	params config.StrategyParams
}

// openFleet builds the strategies the policies and the default name, on
// the Redis store when there is one. exact is not among them: it is the
// store itself.
func openFleet(ctx context.Context, f fleetFlags, policies *config.Set, rs *redisstore.Limiter, storeTimeout time.Duration, log *slog.Logger) (*fleet, error) {
	strategy, err := config.ParseStrategy(f.strategy)
	if err != nil {
		return nil, fmt.Errorf("--strategy %q: %w", f.strategy, err)
	}
	fl := &fleet{defaultStrategy: strategy, limiters: map[strategyKey]map[failover.Mode]floodgate.Limiter{}}
	needed := fl.needed(policies)
	if err := fl.joinMembership(ctx, f, needed, log); err != nil {
		return nil, err
	}
	gossips := 0
	for _, k := range needed {
		if k.name == config.StrategyGossip {
			gossips++
		}
	}
	if gossips > 1 {
		return nil, errors.New("strategy gossip is used with several intervals: a node gossips at one interval, give them all the same")
	}
	for _, k := range needed {
		if err := fl.open(ctx, k, f, rs, storeTimeout, log); err != nil {
			fl.close()
			return nil, err
		}
	}
	if fl.membership != nil {
		if err := fl.membership.Join(ctx, f.clusterJoin); err != nil {
			fl.close()
			return nil, fmt.Errorf("--cluster-join %s: %w", strings.Join(f.clusterJoin, ","), err)
		}
	}
	return fl, nil
}

// needed lists the cluster strategies in use: the default and every rule's.
func (fl *fleet) needed(policies *config.Set) []strategyKey {
	seen := map[strategyKey]bool{}
	var out []strategyKey
	add := func(k strategyKey) {
		if k.name != config.StrategyExact && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	add(fl.keyOf(config.Rule{}))
	for _, domain := range policies.Domains() {
		p, _ := policies.Policy(domain)
		for _, r := range p.Rules() {
			add(fl.keyOf(r))
		}
	}
	return out
}

// keyOf is the strategy instance a rule counts in.
func (fl *fleet) keyOf(rule config.Rule) strategyKey {
	if rule.Strategy == "" {
		return strategyKey{name: fl.defaultStrategy}
	}
	return strategyKey{name: rule.Strategy, params: rule.StrategyParams}
}

// joinMembership starts memberlist when --cluster-bind asks for it (the
// join itself comes after the strategies, so that gossip's state rides on
// the join's exchange); otherwise the fleet is a static --nodes.
func (fl *fleet) joinMembership(ctx context.Context, f fleetFlags, needed []strategyKey, log *slog.Logger) error {
	name := f.nodeName
	if name == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-name not given and no host name: %w", err)
		}
		// Nodes are told apart by name (leases, gossip slots), and several
		// may run on one host.
		name = host + "-" + rand.Text()[:8]
	}
	if f.clusterBind == "" {
		if f.nodes < 1 {
			return fmt.Errorf("--nodes %d: want at least 1", f.nodes)
		}
		for _, k := range needed {
			if k.name == config.StrategyGossip {
				return errors.New("strategy gossip needs --cluster-bind (and --cluster-join for every node but the first)")
			}
		}
		fl.members = cluster.StaticMembers{Name: name, Nodes: f.nodes}
		return nil
	}
	cfg := cluster.MembershipConfig{Name: name, BindAddr: f.clusterBind, Logger: log}
	for _, k := range needed {
		if k.name == config.StrategyGossip {
			// gossip's T is how often its counts go out: memberlist's
			// gossip interval (its stated bound counts in rounds of it).
			cfg.Timing.GossipInterval = f.syncInterval
			if k.params.Interval > 0 {
				cfg.Timing.GossipInterval = k.params.Interval
			}
		}
	}
	m, err := cluster.NewMembership(ctx, cfg)
	if err != nil {
		return fmt.Errorf("--cluster-bind %s: %w", f.clusterBind, err)
	}
	fl.membership, fl.members = m, m
	fl.closers = append(fl.closers, func() { _ = m.Close() })
	log.Info("cluster membership", "node", name, "bind", m.Addr())
	return nil
}

// open builds one strategy instance: the limit's parameters, else the
// service's.
func (fl *fleet) open(ctx context.Context, k strategyKey, f fleetFlags, rs *redisstore.Limiter, storeTimeout time.Duration, log *slog.Logger) error {
	s, interval, oneIn := k.name, f.syncInterval, f.sampleOneIn
	if k.params.Interval > 0 {
		interval = k.params.Interval
	}
	if k.params.OneIn > 0 {
		oneIn = k.params.OneIn
	}
	if rs == nil && (s == config.StrategyLeased || s == config.StrategySynced || s == config.StrategySampled) {
		return fmt.Errorf("strategy %s keeps its shared state in Redis: give --redis", s)
	}
	var l floodgate.Limiter
	var closeIt func()
	var start func(context.Context) error
	var err error
	switch s {
	case config.StrategyLocal:
		var local *cluster.Local
		local, err = cluster.NewLocal(cluster.LocalConfig{Members: fl.members, MaxKeys: f.maxKeys})
		l, closeIt = local, local.Close
	case config.StrategyGossip:
		var g *cluster.Gossip
		g, err = cluster.NewGossip(cluster.GossipConfig{Members: fl.members, Transport: fl.membership, Interval: interval, MaxKeys: f.maxKeys, Logger: log})
		if err == nil {
			fl.membership.Attach(g)
		}
		l, closeIt, start = g, g.Close, g.Start
	case config.StrategyLeased:
		// A request waits at most the store timeout for a renewal; the
		// renewal itself may take until Redis counts as down, and past the
		// lease the limit's failure policy decides.
		lc := cluster.LeasedConfig{Members: fl.members, Interval: interval, Timeout: storeTimeout,
			OutageAfter: f.outageAfter, ReportUnavailable: true, MaxKeys: f.maxKeys, Logger: log}
		if lc.OutageAfter == 0 {
			lc.OutageAfter = cluster.DefaultOutageAfter(interval, storeTimeout)
		}
		var c *cluster.RedisCoordinator
		c, err = cluster.NewRedisCoordinator(cluster.RedisCoordinatorConfig{Client: rs.Client(), KeyPrefix: rs.KeyPrefix() + "lease:", Timeout: lc.OutageAfter})
		if err == nil {
			lc.Coordinator = c
			var le *cluster.Leased
			le, err = cluster.NewLeased(lc)
			l, closeIt, start = le, le.Close, le.Start
		}
	case config.StrategySynced, config.StrategySampled:
		var c *cluster.RedisCounter
		c, err = cluster.NewRedisCounter(cluster.RedisCounterConfig{Client: rs.Client(), KeyPrefix: rs.KeyPrefix() + string(s) + ":", Timeout: storeTimeout})
		if err == nil && s == config.StrategySynced {
			var sy *cluster.Synced
			sy, err = cluster.NewSynced(cluster.SyncedConfig{Counter: c, Interval: interval, Logger: log})
			l, closeIt, start = sy, sy.Close, sy.Start
		} else if err == nil {
			var sa *cluster.Sampled
			sa, err = cluster.NewSampled(cluster.SampledConfig{Counter: c, OneIn: oneIn})
			l, closeIt = sa, sa.Close
		}
	default:
		return fmt.Errorf("unknown strategy %q", s)
	}
	if err != nil {
		return fmt.Errorf("strategy %s: %w", s, err)
	}
	fl.closers = append(fl.closers, closeIt)
	if start != nil {
		if err := start(ctx); err != nil {
			return fmt.Errorf("strategy %s: %w", s, err)
		}
	}
	var ping func(context.Context) error
	if rs != nil {
		ping = rs.Ping // the strategy's health is its Redis's, for readiness probes
	}
	return fl.wrap(k, l, ping, storeTimeout, f.maxKeys, log)
}

// wrap puts the strategies that reach Redis behind one failure policy per
// mode, as the exact store is; the others have no store to lose.
func (fl *fleet) wrap(k strategyKey, l floodgate.Limiter, ping func(context.Context) error, timeout time.Duration, maxKeys int, log *slog.Logger) error {
	byMode := map[failover.Mode]floodgate.Limiter{}
	fl.limiters[k] = byMode
	if ping == nil || k.name == config.StrategyLocal || k.name == config.StrategyGossip {
		byMode[""] = l
		return nil
	}
	for _, mode := range failover.Modes() {
		w, err := failover.New(l, failover.Config{Mode: mode, Timeout: timeout, Fleet: fl.members, MaxLocalKeys: maxKeys, Logger: log, Ping: ping})
		if err != nil {
			return err
		}
		byMode[mode] = w
		fl.closers = append(fl.closers, w.Close)
	}
	return nil
}

// For returns the limiter of a rule's strategy (the default when the rule
// names none), or nil for exact: the store itself.
func (fl *fleet) For(rule config.Rule, mode failover.Mode) floodgate.Limiter {
	byMode, ok := fl.limiters[fl.keyOf(rule)]
	if !ok {
		return nil
	}
	if l, ok := byMode[""]; ok {
		return l
	}
	return byMode[mode]
}

// check reports policies that name a strategy this node did not build
// (a reload that brings in a new one needs a restart).
func (fl *fleet) check(policies *config.Set) error {
	for _, k := range fl.needed(policies) {
		if _, ok := fl.limiters[k]; !ok {
			return fmt.Errorf("the policies use strategy %s %+v, which this node did not start with: restart it to add one", k.name, k.params)
		}
	}
	return nil
}

func (fl *fleet) close() {
	for i := len(fl.closers) - 1; i >= 0; i-- {
		fl.closers[i]()
	}
}
