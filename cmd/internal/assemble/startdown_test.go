package assemble

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// The service starts while Redis is down (over TCP, or a Unix socket not
// made yet): each limit follows its failure mode — fail_open admits,
// fail_closed denies, fail_local decides in this process — and readiness
// says no while fail_closed limits cannot be served. When Redis comes up
// the service becomes ready and decisions are counted in Redis.
func TestStartWithRedisDown(t *testing.T) {
	srv := testkit.StartServer(t, testkit.WithUnixSocket())
	srv.Kill()
	for _, redis := range []string{srv.Addr(), "unix://" + srv.UnixSocket()} {
		t.Run(redis, func(t *testing.T) {
			srv.Kill()
			st, err := Open(context.Background(), Config{Redis: []string{redis}, RedisPrefix: "down:", StoreTimeout: time.Second,
				FailureMode: failover.FailClosed, Fleet: FleetConfig{Strategy: policy.StrategyExact, NodeName: "n", Nodes: 1}},
				nil, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatalf("Open with Redis down = %v, want a start that follows the failure modes", err)
			}
			defer st.Close()
			limit := floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 5, Period: time.Minute}
			decide := func(mode failover.Mode) floodgate.Decision {
				t.Helper()
				d, err := st.For(policy.Rule{FailureMode: mode}).AllowN(context.Background(), t.Name(), limit, 1)
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				return d
			}
			for mode, want := range map[failover.Mode]bool{failover.FailOpen: true, failover.FailClosed: false, failover.FailLocal: true} {
				if d := decide(mode); d.Allowed != want {
					t.Errorf("%s with Redis down: %+v, want allowed %v", mode, d, want)
				}
			}
			if err := st.Ready(); err == nil {
				t.Error("ready while Redis is down and fail_closed limits deny")
			}
			srv.Restart(t)
			deadline := time.Now().Add(timing.Patience)
			for st.Ready() != nil {
				if time.Now().After(deadline) {
					t.Fatalf("not ready within %s of Redis coming up: %v", timing.Patience, st.Ready())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if d := decide(failover.FailClosed); !d.Allowed || d.Remaining != 4 {
				t.Fatalf("fail_closed once Redis is up: %+v, want allowed with 4 remaining (counted in Redis)", d)
			}
			if got := srv.Do(t, "EXISTS", "down:"+t.Name()); got != "1" {
				t.Fatalf("EXISTS = %s: the decision was not counted in Redis", got)
			}
		})
	}
}
