package assemble

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

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
