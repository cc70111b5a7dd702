package client

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Budget is a retry budget: retries may be at most Ratio of the requests
// plus MinPerSecond, as in gRPC's retry throttling and Finagle's
// RetryBudget, so that retries cannot multiply the load on a server that is
// already refusing it. A naive client that retries 3 times sends 4 times
// its load to an overloaded server; with the default budget it sends at
// most 1.1 times, plus one retry a second.
//
// It is a token bucket: every first attempt deposits Ratio tokens, time
// deposits MinPerSecond tokens a second, every retry withdraws one, and the
// bucket holds at most Max (it starts full). Over any interval of t
// seconds with q first attempts, retries ≤ Max + Ratio·q + MinPerSecond·t.
type Budget struct {
	Ratio        float64 // tokens per first attempt; in [0, 1]
	MinPerSecond float64 // tokens per second, whatever the traffic; ≥ 0
	Max          float64 // the bucket's capacity; ≥ 1
}

// DefaultBudget is the budget of a transport built without WithBudget.
var DefaultBudget = Budget{Ratio: 0.1, MinPerSecond: 1, Max: 10}

func (b Budget) validate() error {
	ok := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	if !ok(b.Ratio) || !ok(b.MinPerSecond) || !ok(b.Max) || b.Ratio < 0 || b.Ratio > 1 || b.MinPerSecond < 0 || b.Max < 1 {
		return fmt.Errorf("%w: WithBudget(Ratio %v, MinPerSecond %v, Max %v): want Ratio in [0, 1], MinPerSecond ≥ 0, Max ≥ 1",
			ErrInvalidOption, b.Ratio, b.MinPerSecond, b.Max)
	}
	return nil
}

// NewState returns a full bucket at now, or an error naming a bad field.
func (b Budget) NewState(now time.Time) (*BudgetState, error) {
	if err := b.validate(); err != nil {
		return nil, err
	}
	return &BudgetState{cfg: b, tokens: b.Max, last: now}, nil
}

// BudgetState is one budget's bucket, for one server. It is safe for
// concurrent use.
type BudgetState struct {
	cfg    Budget
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// Deposit records a first attempt at now.
func (s *BudgetState) Deposit(now time.Time) {
	s.mu.Lock()
	s.refill(now)
	s.tokens = min(s.tokens+s.cfg.Ratio, s.cfg.Max)
	s.mu.Unlock()
}

// Withdraw takes one retry from the budget at now, and reports whether
// there was one to take.
func (s *BudgetState) Withdraw(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refill(now)
	if s.tokens < 1 {
		return false
	}
	s.tokens--
	return true
}

// refill adds the time's tokens since the last call; a clock that went
// back adds none.
func (s *BudgetState) refill(now time.Time) {
	if d := now.Sub(s.last); d > 0 {
		s.tokens = min(s.tokens+s.cfg.MinPerSecond*d.Seconds(), s.cfg.Max)
		s.last = now
	}
}
