package assemble

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// Every strategy a policy may name has its row in the table, and the
// table has no other.
func TestEveryStrategyHasARow(t *testing.T) {
	names := policy.Strategies()
	for _, name := range names {
		if _, ok := strategies[name]; !ok {
			t.Errorf("strategy %s has no row in the strategies table", name)
		}
	}
	for name := range strategies {
		if !slices.Contains(names, name) {
			t.Errorf("the strategies table has %s, which policy.Strategies does not list", name)
		}
	}
}

// Open refuses settings it cannot build, naming the flag, and leaves
// nothing running.
func TestOpenRefusesBadFleetSettings(t *testing.T) {
	for _, tc := range []struct {
		fleet FleetConfig
		want  string
	}{
		{FleetConfig{Strategy: "telepathy", Nodes: 1}, `--strategy "telepathy"`},
		{FleetConfig{Strategy: "", Nodes: 1}, `--strategy ""`},
		{FleetConfig{Strategy: policy.StrategySynced, Nodes: 1}, "strategy synced keeps its shared state in Redis: give --redis"},
		{FleetConfig{Strategy: policy.StrategyLeased, Nodes: 1}, "strategy leased keeps its shared state in Redis: give --redis"},
		{FleetConfig{Strategy: policy.StrategySampled, Nodes: 1}, "strategy sampled keeps its shared state in Redis: give --redis"},
		{FleetConfig{Strategy: policy.StrategyGossip, Nodes: 1}, "strategy gossip needs --cluster-bind"},
		{FleetConfig{Strategy: policy.StrategyLocal, Nodes: 0}, "--nodes 0: want at least 1"},
	} {
		tc.fleet.NodeName = "n"
		st, err := Open(context.Background(), Config{Fleet: tc.fleet}, nil, slog.New(slog.DiscardHandler))
		if err == nil {
			st.Close()
			t.Errorf("%+v: opened; want an error naming %q", tc.fleet, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want an error naming %q", tc.fleet, err, tc.want)
		}
	}
}

// Open refuses a negative MaxKeys before it builds anything.
func TestOpenRefusesNegativeMaxKeys(t *testing.T) {
	_, err := Open(context.Background(), Config{MaxKeys: -1, Fleet: FleetConfig{Strategy: policy.StrategyExact, Nodes: 1}}, nil, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "--max-keys -1: want 0 (unbounded) or a positive number of keys") {
		t.Fatalf("MaxKeys -1: %v; want an error naming --max-keys", err)
	}
}

// servesPolicy has one limit of each kind the strategies tell apart, one
// per line so that an error's line names it.
const servesPolicy = `domain: d
descriptors:
  - key: fixed
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: bucket
    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 10, burst: 20}
  - key: sliding
    rate_limit: {algorithm: sliding_window, unit: minute, requests_per_unit: 100}
  - key: pinned
    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 10, strategy: local}
  - key: huge
    rate_limit: {unit: second, requests_per_unit: 1000000000000, strategy: {name: sampled, one_in: 10000}}
  - key: open
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 0}
`

// CheckStrategies refuses each limit its strategy (its own, else
// --strategy) cannot serve, at the limit's line and with the reason, and
// passes the rest: a limit with a strategy of its own is judged by it,
// unlimited and rate-0 limits reach no strategy.
func TestCheckStrategiesNamesEachLimitItsStrategyCannotServe(t *testing.T) {
	set := parsePolicies(t, servesPolicy)
	huge := `policy.yaml:12: limit #0 (d.huge) cannot be shared by strategy sampled (its strategy:)`
	for _, tc := range []struct {
		strategy policy.Strategy
		want     []string // one error per entry, in order; none: the policy passes
	}{
		{policy.StrategyExact, []string{huge}},
		{policy.StrategyLocal, []string{huge}},
		{policy.StrategySynced, []string{
			`policy.yaml:6: limit #0 (d.bucket) cannot be shared by strategy synced (--strategy): ` +
				`cluster: synced: floodgate: invalid limit: it serves fixed_window and sliding_window (global window counts), not token_bucket`,
			huge}},
		{policy.StrategySampled, []string{`policy.yaml:6: limit #0 (d.bucket) cannot be shared by strategy sampled (--strategy)`, huge}},
		{policy.StrategyLeased, []string{
			`policy.yaml:6: limit #0 (d.bucket) cannot be shared by strategy leased (--strategy): ` +
				`floodgate: invalid limit: the leased strategy serves fixed_window only (a budget of Rate per window), not token_bucket`,
			`policy.yaml:8: limit #0 (d.sliding) cannot be shared by strategy leased (--strategy)`, huge}},
		{policy.StrategyGossip, []string{
			`policy.yaml:6: limit #0 (d.bucket) cannot be shared by strategy gossip (--strategy): ` +
				`floodgate: invalid limit: the gossip strategy serves fixed_window only, not token_bucket`,
			`policy.yaml:8: limit #0 (d.sliding) cannot be shared by strategy gossip (--strategy)`, huge}},
	} {
		err := CheckStrategies(FleetConfig{Strategy: tc.strategy, SampleOneIn: 10}, set)
		var got []error
		if err != nil {
			got = err.(interface{ Unwrap() []error }).Unwrap()
		}
		if len(got) != len(tc.want) {
			t.Errorf("--strategy %s: %d errors (%v); want %d", tc.strategy, len(got), err, len(tc.want))
			continue
		}
		for i, e := range got {
			var pe *policy.Error
			if !errors.As(e, &pe) || !errors.Is(e, floodgate.ErrInvalidLimit) || !strings.HasPrefix(e.Error(), tc.want[i]) {
				t.Errorf("--strategy %s: error %d is %q (a *policy.Error wrapping ErrInvalidLimit: %v, %v); want one beginning %q",
					tc.strategy, i, e, pe != nil, errors.Is(e, floodgate.ErrInvalidLimit), tc.want[i])
			}
		}
	}
	if err := CheckStrategies(FleetConfig{Strategy: "telepathy"}, set); err == nil || !strings.Contains(err.Error(), `--strategy "telepathy"`) {
		t.Errorf("--strategy telepathy: %v; want an error naming --strategy", err)
	}
}

// A node refuses at start-up a policy with a limit its strategy cannot
// serve, before it builds anything (here: before it would ask for
// --redis), and on reload (Check) it refuses one that its running
// strategies cannot serve, so that the policy in force stays.
func TestOpenAndCheckRefuseLimitsTheStrategyCannotServe(t *testing.T) {
	bad := parsePolicies(t, servesPolicy)
	log := slog.New(slog.DiscardHandler)
	_, err := Open(context.Background(), Config{Fleet: FleetConfig{Strategy: policy.StrategyLeased, Nodes: 1, NodeName: "n", SampleOneIn: 10}}, bad, log)
	if !errors.Is(err, floodgate.ErrInvalidLimit) || !strings.Contains(err.Error(), "policy.yaml:6: limit #0 (d.bucket) cannot be shared by strategy leased") {
		t.Fatalf("Open with --strategy leased: %v; want the token_bucket limit at policy.yaml:6 refused", err)
	}

	good := parsePolicies(t, "domain: d\ndescriptors:\n  - key: fixed\n    rate_limit: {unit: second, requests_per_unit: 10}\n")
	st, err := Open(context.Background(), Config{Fleet: FleetConfig{Strategy: policy.StrategyGossip, ClusterBind: "127.0.0.1:0",
		NodeName: "n", Nodes: 1, SyncInterval: time.Second, SampleOneIn: 10}}, good, log)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Check(good); err != nil {
		t.Errorf("Check of the fixed-window policy under gossip: %v; want nil", err)
	}
	if err := st.Check(bad); !errors.Is(err, floodgate.ErrInvalidLimit) || !strings.Contains(err.Error(), "policy.yaml:6: limit #0 (d.bucket) cannot be shared by strategy gossip") {
		t.Errorf("Check of a token_bucket limit under gossip: %v; want it refused at policy.yaml:6", err)
	}
}
