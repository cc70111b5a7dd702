package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/config"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/internal/testkit"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// heldStore is a store whose calls wait for the test: each call hands the
// test a channel on which the test sends its answer (nil: decided).
type heldStore struct{ calls chan chan error }

func (h heldStore) AllowN(_ context.Context, _ string, limit floodgate.Limit, _ int64) (floodgate.Decision, error) {
	answer := make(chan error)
	h.calls <- answer
	if err := <-answer; err != nil {
		return floodgate.Decision{}, err
	}
	return floodgate.Decision{Allowed: true, Limit: limit.Rate, Remaining: limit.Rate - 1}, nil
}

// readiness is what ready says, for a table: "ready", or the breaker state
// its error names.
func readiness(s *stores) string {
	err := s.ready()
	if err == nil {
		return "ready"
	}
	for _, st := range []failover.BreakerState{failover.Open, failover.HalfOpen, failover.Closed} {
		if strings.Contains(err.Error(), "circuit breaker "+st.String()+")") {
			return st.String()
		}
	}
	return err.Error()
}

// TestReadyWhileAFailClosedBreakerIsNotClosed: the service is not ready
// from the moment a fail_closed breaker opens until a probe finds Redis
// again, including while a probe is out (half-open), for the exact store
// and for a cluster strategy's breaker alike.
func TestReadyWhileAFailClosedBreakerIsNotClosed(t *testing.T) {
	const coolDown = time.Second
	down := fmt.Errorf("redis: %w", floodgate.ErrStoreUnavailable)
	steps := []struct {
		name    string
		advance time.Duration
		asked   bool  // the decision reaches the store (the breaker lets it)
		answer  error // the store's answer when asked
		during  string
		after   string
	}{
		{name: "Redis answers", asked: true, during: "ready", after: "ready"},
		{name: "Redis fails: the breaker opens", asked: true, answer: down, during: "ready", after: "open"},
		{name: "within the cool-down decisions skip Redis", advance: coolDown / 2, after: "open"},
		{name: "a probe finds Redis still down", advance: coolDown, asked: true, answer: down, during: "half_open", after: "open"},
		{name: "a probe finds Redis back", advance: coolDown, asked: true, during: "half_open", after: "ready"},
	}
	for _, place := range []string{"exact", "leased"} {
		t.Run(place, func(t *testing.T) {
			clock := floodgate.NewManualClock(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
			store := heldStore{calls: make(chan chan error)}
			l, err := failover.New(store, failover.Config{Mode: failover.FailClosed, FailureThreshold: 1, CoolDown: coolDown,
				Timeout: timing.Patience, Clock: clock, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			s := &stores{name: "redis", byMode: map[failover.Mode]*failover.Limiter{failover.FailClosed: l}}
			if place != "exact" {
				// The exact store's breaker stays closed; the strategy's moves.
				idle, err := failover.New(heldStore{}, failover.Config{Mode: failover.FailClosed})
				if err != nil {
					t.Fatal(err)
				}
				s.byMode[failover.FailClosed] = idle
				s.fleet = &fleet{limiters: map[strategyKey]map[failover.Mode]floodgate.Limiter{
					{name: config.StrategyLocal}:   {"": floodgate.NewMemory()},
					{name: config.Strategy(place)}: {failover.FailOpen: idle, failover.FailClosed: l},
				}}
			}
			for _, step := range steps {
				clock.Advance(step.advance)
				decided := make(chan error, 1)
				go func() {
					_, err := l.AllowN(context.Background(), "k", floodgate.PerSecond(10), 1)
					decided <- err
				}()
				if step.asked {
					answer := <-store.calls
					if got := readiness(s); got != step.during {
						t.Errorf("%s: while the store is asked, %s; want %s", step.name, got, step.during)
					}
					answer <- step.answer
				}
				if err := <-decided; err != nil {
					t.Fatalf("%s: the decision failed: %v", step.name, err)
				}
				if got := readiness(s); got != step.after {
					t.Errorf("%s: after the decision, %s; want %s", step.name, got, step.after)
				}
			}
		})
	}
}

// TestServeReadinessWhileRedisHangs: with fail_closed limits and Redis
// hung (SIGSTOP) under load, /readyz and grpc.health.v1 report not ready
// from the first time they do until Redis is back, through every probe the
// breaker sends meanwhile; after Redis resumes, they report ready again
// once a probe has found it.
func TestServeReadinessWhileRedisHangs(t *testing.T) {
	redis := testkit.StartServer(t)
	httpAddr, grpcAddr, _ := startServe(t, "--redis", redis.Addr(), "--failure-mode", "fail_closed")
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	ready := func() (httpReady, grpcReady bool) {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ctx, cancel := context.WithTimeout(context.Background(), timing.Patience)
		defer cancel()
		h, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode == http.StatusOK, h.GetStatus() == healthpb.HealthCheckResponse_SERVING
	}
	if h, g := ready(); !h || !g {
		t.Fatalf("with Redis up: /readyz ready %v, gRPC serving %v", h, g)
	}

	// Load, so that the breaker opens and then probes Redis every cool-down.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		body := `{"key":"k","limit":{"algorithm":"fixed_window","rate":1000000000,"period":"1h"}}`
		for {
			select {
			case <-stop:
				return
			default:
			}
			if resp, err := http.Post("http://"+httpAddr+"/v1/allow", "application/json", strings.NewReader(body)); err == nil {
				resp.Body.Close()
			}
		}
	}()
	stopLoad := sync.OnceFunc(func() { close(stop); <-stopped })
	defer stopLoad()

	redis.Pause(t)
	waitFor(t, func() bool { h, _ := ready(); return !h }, "/readyz to report the hung Redis")
	// Eight cool-downs: as many probes, each one half-open while it waits
	// for the store timeout.
	watched := 8 * failover.DefaultCoolDown
	polls := 0
	for start := time.Now(); time.Since(start) < watched; polls++ {
		if h, g := ready(); h || g {
			t.Fatalf("poll %d, %v into the outage: /readyz ready %v, gRPC serving %v; want neither until Redis is back",
				polls, time.Since(start).Round(time.Millisecond), h, g)
		}
	}
	// No traffic from here on: an unready node gets none, so the readiness
	// checks themselves must find out that Redis is back.
	stopLoad()
	redis.Resume(t)
	waitFor(t, func() bool { h, g := ready(); return h && g }, "readiness after Redis resumed, with no traffic")
	t.Logf("not ready in all %d polls over %v of the outage", polls, watched)
}
