package serviceclient_test

import (
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/serviceclient"
)

// closedPort is an address on 127.0.0.1 where nothing listens: calls to
// it are refused at once.
func closedPort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func epoch() *floodgate.ManualClock { return floodgate.NewManualClock(time.Unix(1_700_000_000, 0)) }

// step is one policy decision of a sequence: advance the clock, decide,
// expect allowed or not.
type step struct {
	advance time.Duration
	allowed bool
}

// decideSteps runs steps for descs against c on clock, each answered by
// the fallback.
func decideSteps(t *testing.T, c *serviceclient.Client, clock *floodgate.ManualClock, descs []serviceclient.Descriptor, steps []step) {
	t.Helper()
	for i, s := range steps {
		clock.Advance(s.advance)
		r, err := c.Decide(patient(t), "shop", descs, 1)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if r.Allowed != s.allowed || !errors.Is(r.Degraded, floodgate.ErrStoreUnavailable) {
			t.Errorf("step %d (after %s): %+v, want allowed %v by the fallback", i, s.advance, r, s.allowed)
		}
		if !r.Allowed && r.Descriptors[0].RetryAfter <= 0 {
			t.Errorf("step %d: denied with RetryAfter %s, want the wait for the local share", i, r.Descriptors[0].RetryAfter)
		}
	}
}

// FailLocal learns a policy's limits from the service's answers (gRPC's
// requests_per_unit and unit, HTTP's RateLimit-Policy field) and, once the
// service is gone, enforces them locally divided by Nodes: testPolicy's 3
// a minute over 2 nodes is 2 here. A descriptor the service never answered
// has no known limit: the decision fails, saying so.
func TestFailLocalEnforcesTheLearnedPolicyLimit(t *testing.T) {
	for _, proto := range []string{"http", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			srv := startServe(t)
			clock := epoch()
			opts := serviceclient.Options{CacheSize: -1, Clock: clock,
				Fallback: failover.Config{Mode: failover.FailLocal, Nodes: 2}}
			if proto == "http" {
				opts.HTTP = srv.HTTP
			} else {
				opts.GRPCAddr = srv.GRPC
			}
			c := newClient(t, opts)
			if r, err := c.Decide(patient(t), "shop", user("hana"), 1); err != nil || !r.Allowed || r.Degraded != nil {
				t.Fatalf("the service's decision: %+v, %v; want allowed by the service", r, err)
			}
			srv.stop()
			// 2 a minute as a bucket: two now, the next after 30s
			decideSteps(t, c, clock, user("hana"), []step{{0, true}, {0, true}, {0, false}, {29 * time.Second, false}, {time.Second, true}})
			_, err := c.Decide(patient(t), "shop", user("ivan"), 1)
			if !errors.Is(err, serviceclient.ErrNoLocalLimit) || !errors.Is(err, floodgate.ErrStoreUnavailable) {
				t.Errorf("a descriptor never answered: error %v, want ErrNoLocalLimit and ErrStoreUnavailable", err)
			}
		})
	}
}

// givenLimits is a caller's copy of a policy: 4 a minute per user; "anon"
// is not limited; anything else is unknown.
func givenLimits(domain string, d serviceclient.Descriptor) ([]floodgate.Limit, bool) {
	switch d.Entries[0].Key {
	case "user":
		return []floodgate.Limit{floodgate.PerMinute(4)}, true
	case "anon":
		return nil, true
	}
	return nil, false
}

func ip(addr string) serviceclient.Descriptor {
	return serviceclient.Descriptor{Entries: []serviceclient.Entry{{Key: "ip", Value: addr}}}
}

// Limits the caller gives (Options.PolicyLimits) are enforced locally,
// divided by Nodes, when the service is unreachable: 4 a minute over 2
// nodes is 2, a token back every 30s. A descriptor they say is not
// limited passes.
func TestFailLocalEnforcesGivenPolicyLimits(t *testing.T) {
	clock := epoch()
	c := newClient(t, serviceclient.Options{HTTP: "http://" + closedPort(t), Clock: clock, PolicyLimits: givenLimits,
		Fallback: failover.Config{Mode: failover.FailLocal, Nodes: 2}})
	decideSteps(t, c, clock, user("jo"), []step{{0, true}, {0, true}, {0, false}, {30 * time.Second, true}, {0, false}})
	anon := []serviceclient.Descriptor{{Entries: []serviceclient.Entry{{Key: "anon"}}}}
	decideSteps(t, c, clock, anon, []step{{0, true}, {0, true}, {0, true}})
}

// UnknownLimit says what FailLocal does with a descriptor whose limit is
// neither given nor learned: an error by default; FailOpen lets it pass
// while the known descriptors are still enforced; FailClosed denies the
// decision and takes nothing from the known descriptors' local shares.
func TestUnknownLimitDecides(t *testing.T) {
	both := []serviceclient.Descriptor{user("kim")[0], ip("10.0.0.1")}
	cases := []struct {
		unknown failover.Mode
		steps   []step // decisions of both descriptors
		wantErr error
		// then decisions of the known one alone: its local share (2) left
		knownAfter []step
	}{
		{unknown: "", wantErr: serviceclient.ErrNoLocalLimit, knownAfter: []step{{0, true}, {0, true}, {0, false}}},
		{unknown: failover.FailOpen, steps: []step{{0, true}, {0, true}, {0, false}}, knownAfter: []step{{0, false}}},
		{unknown: failover.FailClosed, steps: []step{{0, false}, {0, false}}, knownAfter: []step{{0, true}, {0, true}, {0, false}}},
	}
	for _, tc := range cases {
		t.Run("unknown="+string(tc.unknown), func(t *testing.T) {
			clock := epoch()
			c := newClient(t, serviceclient.Options{HTTP: "http://" + closedPort(t), Clock: clock, PolicyLimits: givenLimits,
				UnknownLimit: tc.unknown, Fallback: failover.Config{Mode: failover.FailLocal, Nodes: 2}})
			if tc.wantErr != nil {
				_, err := c.Decide(patient(t), "shop", both, 1)
				if !errors.Is(err, tc.wantErr) || !errors.Is(err, floodgate.ErrStoreUnavailable) {
					t.Errorf("error %v, want %v and ErrStoreUnavailable", err, tc.wantErr)
				}
			}
			decideSteps(t, c, clock, both, tc.steps)
			decideSteps(t, c, clock, both[:1], tc.knownAfter)
		})
	}
}

// Policy decisions and explicit ones share one circuit breaker: failures
// of either kind open it, then neither calls the service until the
// cool-down has passed, when one probe does.
func TestPolicyDecisionsShareTheBreaker(t *testing.T) {
	clock := epoch()
	calls := &counting{}
	c := newClient(t, serviceclient.Options{HTTP: "http://" + closedPort(t), Clock: clock,
		HTTPClient: &http.Client{Transport: calls},
		Fallback:   failover.Config{Mode: failover.FailOpen, FailureThreshold: 3, CoolDown: time.Second}})
	policy := func() error {
		r, err := c.Decide(patient(t), "shop", user("lee"), 1)
		if err == nil && (!r.Allowed || r.Degraded == nil) {
			err = errors.New("not allowed by the fallback")
		}
		if err == nil && errors.Is(r.Degraded, failover.ErrBreakerOpen) {
			err = failover.ErrBreakerOpen
		}
		return err
	}
	explicit := func() error {
		_, err := c.AllowN(patient(t), "lee", floodgate.PerMinute(5), 1)
		return err
	}
	steps := []struct {
		name        string
		advance     time.Duration
		decide      func() error
		calls       int64 // calls to the service so far
		breakerOpen bool  // the answer says the breaker skipped the call
	}{
		{"explicit fails", 0, explicit, 1, false},
		{"policy fails", 0, policy, 2, false},
		{"explicit fails: open", 0, explicit, 3, false},
		{"policy skipped", 0, policy, 3, true},
		{"explicit skipped", 0, explicit, 3, false},
		{"policy skipped before the cool-down", 999 * time.Millisecond, policy, 3, true},
		{"policy probes after it", time.Millisecond, policy, 4, false},
		{"policy skipped again", 0, policy, 4, true},
	}
	for _, s := range steps {
		clock.Advance(s.advance)
		err := s.decide()
		if got := errors.Is(err, failover.ErrBreakerOpen); err != nil && !got || got != s.breakerOpen {
			t.Errorf("%s: %v, want breaker open %v", s.name, err, s.breakerOpen)
		}
		if n := calls.n.Load(); n != s.calls {
			t.Errorf("%s: %d calls to the service so far, want %d", s.name, n, s.calls)
		}
	}
}
