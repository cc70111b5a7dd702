package assemble

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/failover"
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

// readiness is what Ready says, for a table: "ready", or the breaker state
// its error names.
func readiness(s *Stores) string {
	err := s.Ready()
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
			s := &Stores{name: "redis", byMode: map[failover.Mode]failover.Limiter{failover.FailClosed: l}}
			if place != "exact" {
				// The exact store's breaker stays closed; the strategy's moves.
				idle, err := failover.New(heldStore{}, failover.Config{Mode: failover.FailClosed})
				if err != nil {
					t.Fatal(err)
				}
				s.byMode[failover.FailClosed] = idle
				s.fleet = &fleet{limiters: map[strategyKey]map[failover.Mode]floodgate.Limiter{
					{name: policy.StrategyLocal}:   {"": floodgate.NewMemory()},
					{name: policy.Strategy(place)}: {failover.FailOpen: idle, failover.FailClosed: l},
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
