package assemble

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cluster"
	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/internal/testkit"
)

var _ engine.Stores = (*Stores)(nil)

// parsePolicies reads one policy file's text.
func parsePolicies(t *testing.T, text string) *policy.Set {
	t.Helper()
	p, err := config.Parse("policy.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	set, err := policy.NewSet(p)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// For gives each rule the instance its strategy and failure mode name,
// the defaults filling in what it leaves out: exact is the Redis store's
// failure policy of the rule's mode, local and gossip have no failure
// policy, and the strategies that reach Redis have one per mode of their
// own. Limits that name the same strategy with the same parameters share
// one instance.
func TestForPicksTheStrategyAndTheFailureMode(t *testing.T) {
	srv := testkit.StartServer(t)
	policies := parsePolicies(t, `domain: d
descriptors:
  - key: open
    rate_limit: {unit: hour, requests_per_unit: 1, failure_mode: fail_open}
  - key: local
    rate_limit: {unit: hour, requests_per_unit: 1, strategy: local}
  - key: sampled
    rate_limit: {unit: hour, requests_per_unit: 1, strategy: {name: sampled, one_in: 2}}
  - key: sampled-too
    rate_limit: {unit: hour, requests_per_unit: 1, strategy: {name: sampled, one_in: 2}, failure_mode: fail_local}
`)
	st, err := Open(context.Background(), Config{Redis: []string{srv.Addr()}, RedisPrefix: "assemble-test:", StoreTimeout: time.Second,
		FailureMode: failover.FailClosed, Fleet: FleetConfig{Strategy: policy.StrategyExact, NodeName: "n", Nodes: 3}},
		policies, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rule := func(key string) policy.Rule {
		p, _ := policies.Policy("d")
		for _, r := range p.Rules() {
			if r.Path == "d."+key {
				return r
			}
		}
		t.Fatalf("no rule %s", key)
		return policy.Rule{}
	}
	sampled := st.fleet.limiters[st.fleet.keyOf(rule("sampled"))]
	for _, tc := range []struct {
		rule policy.Rule
		want floodgate.Limiter
	}{
		{policy.Rule{}, st.byMode[failover.FailClosed]},
		{rule("open"), st.byMode[failover.FailOpen]},
		{rule("sampled"), sampled[failover.FailClosed]},
		{rule("sampled-too"), sampled[failover.FailLocal]},
	} {
		if got := st.For(tc.rule); got != tc.want || got == nil {
			t.Errorf("rule %q: For gives %T %p, want %T %p", tc.rule.Path, got, got, tc.want, tc.want)
		}
	}
	if _, ok := st.For(rule("local")).(*cluster.Local); !ok {
		t.Errorf("rule local: For gives %T, want the local strategy itself", st.For(rule("local")))
	}
	if st.Default() != st.For(policy.Rule{}) {
		t.Error("Default is not where a rule without strategy or failure mode counts")
	}
	if n := st.Count(); n != 3 {
		t.Errorf("Count %d, want --nodes 3", n)
	}
	if err := st.Ready(); err != nil {
		t.Errorf("Ready with Redis up: %v", err)
	}
}

// Check refuses policies that bring in a strategy instance this node did
// not start with, and accepts those it has.
func TestCheckRefusesAStrategyNotStarted(t *testing.T) {
	st, err := Open(context.Background(), Config{Fleet: FleetConfig{Strategy: policy.StrategyLocal, NodeName: "n", Nodes: 1}},
		nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	started := parsePolicies(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n")
	if err := st.Check(started); err != nil {
		t.Errorf("policies on the default strategy: %v", err)
	}
	added := parsePolicies(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1, strategy: {name: sampled, one_in: 3}}\n")
	if err := st.Check(added); err == nil {
		t.Error("policies with a sampled limit passed the check of a node that started without one")
	}
}

// downStore is a store that never answers.
type downStore struct{}

func (downStore) AllowN(context.Context, string, floodgate.Limit, int64) (floodgate.Decision, error) {
	return floodgate.Decision{}, floodgate.ErrStoreUnavailable
}

// Breaker is the worst state of the per-mode breakers.
func TestBreakerIsTheWorstOfTheModes(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	broken, err := failover.New(downStore{}, failover.Config{Mode: failover.FailOpen, FailureThreshold: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer broken.Close()
	idle, err := failover.New(downStore{}, failover.Config{Mode: failover.FailClosed, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	s := &Stores{name: "redis", byMode: map[failover.Mode]failover.Limiter{failover.FailOpen: broken, failover.FailClosed: idle}}
	if st, ok := s.Breaker(); !ok || st != failover.Closed {
		t.Fatalf("before any failure: %v, %v", st, ok)
	}
	if _, err := broken.AllowN(context.Background(), "k", floodgate.PerSecond(1), 1); err != nil {
		t.Fatal(err) // the first error opens the breaker
	}
	if st, ok := s.Breaker(); !ok || st != failover.Open {
		t.Fatalf("after a failure: %v, %v; want open", st, ok)
	}
}
