package assemble

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/redisstore"
)

// FleetConfig says how this node shares its limits with the rest of a
// fleet: the cluster flags of serve and proxy.
type FleetConfig struct {
	// Strategy is how limits without their own strategy are shared
	// (--strategy).
	Strategy policy.Strategy
	// NodeName is this node's name in the cluster, unique (--node-name;
	// empty: the host name and a random suffix).
	NodeName string
	// ClusterBind is the host:port of the cluster's gossip (--cluster-bind;
	// empty: no membership, the fleet is Nodes nodes).
	ClusterBind string
	// ClusterJoin lists members already running (--cluster-join).
	ClusterJoin []string
	// Nodes is the fleet's size without ClusterBind (--nodes), at least 1.
	Nodes int
	// SyncInterval is how often leased, synced and gossip sync with the
	// fleet (--sync-interval), unless a limit gives its own.
	SyncInterval time.Duration
	// SampleOneIn is sampled's 1 in N (--sample-one-in), unless a limit
	// gives its own.
	SampleOneIn int64
	// OutageAfter is how long a lease renewal may go unanswered before
	// Redis counts as down (--outage-after; 0: cluster.DefaultOutageAfter).
	OutageAfter time.Duration
}

// fleet holds this node's cluster strategies, each built only if some
// limit or the default uses it.
type fleet struct {
	settings        FleetConfig // what the node was started with, to check reloads
	defaultStrategy policy.Strategy
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
	name   policy.Strategy
	params policy.StrategyParams
}

// openFleet builds the strategies the policies and the default name, on
// the Redis store when there is one. exact is not among them: it is the
// store itself. On failure it closes what it built.
func openFleet(ctx context.Context, cfg Config, policies *policy.Set, rs *redisstore.Limiter, log *slog.Logger) (_ *fleet, err error) {
	f := cfg.Fleet
	strategy, err := policy.ParseStrategy(string(f.Strategy))
	if err != nil {
		return nil, fmt.Errorf("--strategy %q: %w", f.Strategy, err)
	}
	if policies != nil {
		if err := CheckStrategies(f, policies); err != nil {
			return nil, err
		}
	}
	fl := &fleet{settings: f, defaultStrategy: strategy, limiters: map[strategyKey]map[failover.Mode]floodgate.Limiter{}}
	defer func() {
		if err != nil {
			fl.close()
		}
	}()
	needed := fl.needed(policies)
	if err := fl.joinMembership(ctx, f, needed, log); err != nil {
		return nil, err
	}
	gossips := 0
	for _, k := range needed {
		if k.name == policy.StrategyGossip {
			gossips++
		}
	}
	if gossips > 1 {
		return nil, errors.New("strategy gossip is used with several intervals: a node gossips at one interval, give them all the same")
	}
	for _, k := range needed {
		if err := fl.open(ctx, k, cfg, rs, log); err != nil {
			return nil, err
		}
	}
	if fl.membership != nil {
		if err := fl.membership.Join(ctx, f.ClusterJoin); err != nil {
			return nil, fmt.Errorf("--cluster-join %s: %w", strings.Join(f.ClusterJoin, ","), err)
		}
	}
	return fl, nil
}

// needed lists the cluster strategies in use: the default and every
// rule's (policies nil: the default only).
func (fl *fleet) needed(policies *policy.Set) []strategyKey {
	seen := map[strategyKey]bool{}
	var out []strategyKey
	add := func(k strategyKey) {
		if row, ok := strategies[k.name]; ok && row.open == nil {
			return // the store itself
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	add(fl.keyOf(policy.Rule{}))
	if policies == nil {
		return out
	}
	for _, domain := range policies.Domains() {
		p, _ := policies.Policy(domain)
		for _, r := range p.Rules() {
			add(fl.keyOf(r))
		}
	}
	return out
}

// keyOf is the strategy instance a rule counts in.
func (fl *fleet) keyOf(rule policy.Rule) strategyKey {
	if rule.Strategy == "" {
		return strategyKey{name: fl.defaultStrategy}
	}
	return strategyKey{name: rule.Strategy, params: rule.StrategyParams}
}

// joinMembership starts memberlist when ClusterBind asks for it (the join
// itself comes after the strategies, so that gossip's state rides on the
// join's exchange); otherwise the fleet is a static Nodes.
func (fl *fleet) joinMembership(ctx context.Context, f FleetConfig, needed []strategyKey, log *slog.Logger) error {
	name := f.NodeName
	if name == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-name not given and no host name: %w", err)
		}
		// Nodes are told apart by name (leases, gossip slots), and several
		// may run on one host.
		name = host + "-" + rand.Text()[:8]
	}
	if f.ClusterBind == "" {
		if f.Nodes < 1 {
			return fmt.Errorf("--nodes %d: want at least 1", f.Nodes)
		}
		for _, k := range needed {
			if k.name == policy.StrategyGossip {
				return errors.New("strategy gossip needs --cluster-bind (and --cluster-join for every node but the first)")
			}
		}
		fl.members = cluster.StaticMembers{Name: name, Nodes: f.Nodes}
		return nil
	}
	cfg := cluster.MembershipConfig{Name: name, BindAddr: f.ClusterBind, Logger: log}
	for _, k := range needed {
		if k.name == policy.StrategyGossip {
			// gossip's T is how often its counts go out: memberlist's
			// gossip interval (its stated bound counts in rounds of it).
			cfg.Timing.GossipInterval = f.SyncInterval
			if k.params.Interval > 0 {
				cfg.Timing.GossipInterval = k.params.Interval
			}
		}
	}
	m, err := cluster.NewMembership(ctx, cfg)
	if err != nil {
		return fmt.Errorf("--cluster-bind %s: %w", f.ClusterBind, err)
	}
	fl.membership, fl.members = m, m
	fl.closers = append(fl.closers, func() { _ = m.Close() })
	log.Info("cluster membership", "node", name, "bind", m.Addr())
	return nil
}

// open builds one strategy instance from its row of the strategies
// table, with the limit's parameters, else the service's, and starts it.
func (fl *fleet) open(ctx context.Context, k strategyKey, cfg Config, rs *redisstore.Limiter, log *slog.Logger) error {
	row, ok := strategies[k.name]
	if !ok || row.open == nil {
		return fmt.Errorf("unknown strategy %q", k.name)
	}
	if rs == nil && row.redis {
		return fmt.Errorf("strategy %s keeps its shared state in Redis: give --redis", k.name)
	}
	in := instance{name: k.name, interval: cfg.Fleet.SyncInterval, oneIn: cfg.Fleet.SampleOneIn, cfg: cfg,
		members: fl.members, membership: fl.membership, redis: rs, log: log}
	if k.params.Interval > 0 {
		in.interval = k.params.Interval
	}
	if k.params.OneIn > 0 {
		in.oneIn = k.params.OneIn
	}
	s, err := row.open(in)
	if err != nil {
		return fmt.Errorf("strategy %s: %w", k.name, err)
	}
	fl.closers = append(fl.closers, s.close)
	if s.start != nil {
		if err := s.start(ctx); err != nil {
			return fmt.Errorf("strategy %s: %w", k.name, err)
		}
	}
	if !row.redis {
		fl.limiters[k] = map[failover.Mode]floodgate.Limiter{"": s.limiter}
		return nil
	}
	// The strategy's health is its Redis's, for readiness probes.
	return fl.wrap(k, s.limiter, rs.Ping, cfg.StoreTimeout, cfg.MaxKeys, log)
}

// wrap puts a strategy that reaches Redis behind one failure policy per
// mode, as the exact store is.
func (fl *fleet) wrap(k strategyKey, l floodgate.Limiter, ping func(context.Context) error, timeout time.Duration, maxKeys int, log *slog.Logger) error {
	byMode := map[failover.Mode]floodgate.Limiter{}
	fl.limiters[k] = byMode
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
func (fl *fleet) For(rule policy.Rule, mode failover.Mode) floodgate.Limiter {
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
// (a reload that brings in a new one needs a restart), or with a limit
// its strategy cannot serve.
func (fl *fleet) check(policies *policy.Set) error {
	if err := CheckStrategies(fl.settings, policies); err != nil {
		return err
	}
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
