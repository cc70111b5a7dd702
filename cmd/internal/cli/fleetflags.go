package cli

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/floodgate-io/floodgate/cmd/internal/assemble"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// fleetFlagNames are the flags registerFleet adds.
var fleetFlagNames = []string{"strategy", "node-name", "cluster-bind", "cluster-join", "nodes", "sync-interval", "sample-one-in", "outage-after"}

// registerFleet adds the flags that say how this node shares its limits
// with the rest of a fleet, parsed into f.
func registerFleet(fl *pflag.FlagSet, f *assemble.FleetConfig) {
	registerStrategy(fl, f)
	fl.StringVar(&f.NodeName, "node-name", "", "this node's name in the cluster, unique (default: the host name and a random suffix)")
	fl.StringVar(&f.ClusterBind, "cluster-bind", "", "host:port for the cluster's gossip (memberlist), e.g. 127.0.0.1:7946 (empty: no membership; the fleet is --nodes nodes)")
	fl.StringSliceVar(&f.ClusterJoin, "cluster-join", nil, "host:port of members already running, comma-separated")
	fl.IntVar(&f.Nodes, "nodes", 1, "the fleet's size, for local and leased shares, when there is no --cluster-bind")
	fl.DurationVar(&f.SyncInterval, "sync-interval", 100*time.Millisecond, "T: how often leased, synced and gossip sync with the fleet (for gossip: memberlist's gossip interval)")
	fl.DurationVar(&f.OutageAfter, "outage-after", 0, "leased: how long a lease renewal may go unanswered before Redis counts as down and the limit's failure_mode applies past the lease; a slower answer only denies (0: the longer of 1s and 2·sync-interval)")
}

// registerStrategy adds the flags that decide which limits a node can
// serve, which config check shares with serve and proxy so that a check
// gives the verdict the service would.
func registerStrategy(fl *pflag.FlagSet, f *assemble.FleetConfig) {
	fl.StringVar((*string)(&f.Strategy), "strategy", string(policy.StrategyExact), "how limits without their own strategy are shared between nodes: exact, local, leased, synced, sampled or gossip")
	fl.Int64Var(&f.SampleOneIn, "sample-one-in", 10, "sampled: the shared counter is updated for 1 in this many admitted requests")
}
