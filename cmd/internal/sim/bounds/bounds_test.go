package bounds

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
)

// base is the fleet the hand-computed cases start from: 10 nodes sharing
// 1000 units per second, each node offered 200/s (twice its share), a 5ms
// round trip, a 100ms sync interval.
func base() Params {
	return Params{
		Nodes:       10,
		Interval:    100 * time.Millisecond,
		Limit:       floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1000, Period: time.Second},
		ArrivalRate: 200,
		Delay:       5 * time.Millisecond,
		OneIn:       10,
	}
}

func with(change func(*Params)) Params {
	p := base()
	change(&p)
	return p
}

// TestOvershootFormulas pins each strategy's stated overshoot on cases
// worked by hand.
func TestOvershootFormulas(t *testing.T) {
	tests := []struct {
		name     string
		strategy string
		p        Params
		want     float64
	}{
		{"exact never overshoots", Exact, base(), 0},
		{"local with one N and no skew", Local, base(), 0},
		{"local fixed window skewed: every share twice", Local, with(func(p *Params) { p.Skew = time.Millisecond }), 1000},
		{"local token bucket ignores skew", Local, with(func(p *Params) {
			p.Skew = time.Millisecond
			p.Limit.Algorithm = floodgate.TokenBucket
		}), 0},
		{"leased with equal clock rates", Leased, base(), 0},
		{"leased with 1% drift: N·λ·ρ·T = 10·200·0.01·0.1", Leased, with(func(p *Params) { p.Drift = 0.01 }), 2},
		{"synced: 9·200·(0.2+0.005)", Synced, base(), 369},
		{"synced capped at (N−1)·R", Synced, with(func(p *Params) { p.ArrivalRate = 10000 }), 9000},
		{"synced with asymmetric trips: + ⌈10·200·0.01⌉", Synced, with(func(p *Params) { p.Asymmetry = 10 * time.Millisecond }), 389},
		{"gossip reads no store clock: asymmetry adds nothing", Gossip, with(func(p *Params) { p.Asymmetry = 10 * time.Millisecond }), 369},
		{"synced with T < D: rounds every 19·277µs, 9·200·(2·0.005263 + 0.005)", Synced,
			with(func(p *Params) { p.Interval = 277 * time.Microsecond }), 9 * 200 * (2*0.005263 + 0.005)},
		{"synced on one node", Synced, with(func(p *Params) { p.Nodes = 1 }), 0},
		{"sampled 1/10: 3·√9000 + 9·(44 + 1)", Sampled, base(), 3*math.Sqrt(9000) + 405},
		{"sampled with p = 1: staleness only, 9·(1 + 1)", Sampled, with(func(p *Params) { p.OneIn = 1 }), 18},
		{"sampled with g given: 3·√9000 + 9·(5 + 1)", Sampled, with(func(p *Params) { p.Gap = 5 }), 3*math.Sqrt(9000) + 54},
		{"gossip: 9·200·(2·0.1 + 0.005), two rounds of fan-out 3 to reach 9", Gossip, base(), 369},
		{"gossip: 3·200·(0.1 + 0.005), one round reaches 3", Gossip, with(func(p *Params) { p.Nodes = 4 }), 63},
		{"gossip capped at (N−1)·R", Gossip, with(func(p *Params) { p.Delay = 10 * time.Second }), 9000},
		{"gossip skewed: R + 2·369", Gossip, with(func(p *Params) { p.Skew = 10 * time.Millisecond }), 1738},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Overshoot(tt.strategy, tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if !near(got, tt.want) {
				t.Errorf("Overshoot(%s) = %v, want %v", tt.strategy, got, tt.want)
			}
		})
	}
}

// TestUndershootFormulas pins each strategy's stated undershoot.
func TestUndershootFormulas(t *testing.T) {
	slow := with(func(p *Params) { p.ArrivalRate = 1 })
	tests := []struct {
		name     string
		strategy string
		p        Params
		want     float64
	}{
		{"exact", Exact, base(), 0},
		{"local: all traffic on one node, R − ⌊R/N⌋", Local, base(), 900},
		{"local rounds the share down", Local, with(func(p *Params) { p.Limit.Rate = 1005 }), 905},
		{"leased: N·λ·(B+D)·(P/T + 1 + P/B) = 10·1·0.03·51", Leased, slow, 15.3},
		{"leased capped at R", Leased, base(), 1000},
		{"synced", Synced, base(), 0},
		{"sampled: z·σ", Sampled, base(), 3 * math.Sqrt(9000)},
		{"gossip", Gossip, base(), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Undershoot(tt.strategy, tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if !near(got, tt.want) {
				t.Errorf("Undershoot(%s) = %v, want %v", tt.strategy, got, tt.want)
			}
		})
	}
}

// TestStoreCallsPerSecond pins each strategy's cost.
func TestStoreCallsPerSecond(t *testing.T) {
	tests := []struct {
		strategy string
		keys     int
		want     float64
	}{
		{Exact, 1, 2000},     // every decision: 10 nodes · 200/s
		{Local, 1, 0},        // no store
		{Leased, 1, 500},     // 10 · (1/0.1s + 1/0.025s)
		{Synced, 3, 300},     // 3 keys · 10 nodes / 0.1s
		{Sampled, 1, 100},    // admitted ≤ R = 1000/s, one in 10 pushed
		{Gossip, 5, 0},       // no store
		{Exact, 2, 2 * 2000}, // per key
	}
	for _, tt := range tests {
		got, err := StoreCallsPerSecond(tt.strategy, base(), tt.keys)
		if err != nil {
			t.Fatal(err)
		}
		if !near(got, tt.want) {
			t.Errorf("StoreCallsPerSecond(%s, %d keys) = %v, want %v", tt.strategy, tt.keys, got, tt.want)
		}
	}
}

// TestSampledConfidence: 1 − 1/(1+z²) − N·(1−p)^g with z = 3, g = 44.
func TestSampledConfidence(t *testing.T) {
	got, err := SampledConfidence(base())
	if err != nil {
		t.Fatal(err)
	}
	if want := 0.9 - 10*math.Pow(0.9, 44); !near(got, want) {
		t.Errorf("SampledConfidence = %v, want %v", got, want)
	}
}

// TestLeaseSize follows the coordinator's water-filling.
func TestLeaseSize(t *testing.T) {
	tests := []struct {
		name string
		p    Params
		want Lease
	}{
		{"demands fit: 20 + (1000 − 200)/10", base(), Lease{Units: 100, Demand: 20, Valid: 150 * time.Millisecond}},
		{"demands exceed the budget: the level R/N", with(func(p *Params) { p.ArrivalRate = 2000 }),
			Lease{Units: 100, Demand: 200, Valid: 150 * time.Millisecond}},
		{"demand capped at R", with(func(p *Params) { p.ArrivalRate = 1e9 }),
			Lease{Units: 100, Demand: 1000, Valid: 150 * time.Millisecond}},
		{"integer shares round down", with(func(p *Params) { p.Limit.Rate = 1005 }),
			Lease{Units: 100, Demand: 20, Valid: 150 * time.Millisecond}},
		{"idle nodes report no demand and get R/N", with(func(p *Params) { p.ArrivalRate = 0 }),
			Lease{Units: 100, Demand: 0, Valid: 150 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LeaseSize(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("LeaseSize = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestLongestInterval pins the search on cases solved by hand.
func TestLongestInterval(t *testing.T) {
	tests := []struct {
		name      string
		strategy  string
		p         Params
		tolerance float64
		want      time.Duration
		verdict   Verdict
	}{
		// 9·200·(2T + 0.005) ≤ 50  ⇔  T ≤ 11.3888…ms
		{"synced at 5%", Synced, base(), 0.05, 11388 * time.Microsecond, Bounded},
		// 10·200·0.003·T ≤ 50  ⇔  T ≤ 8.333…s
		{"leased drifting 0.3%", Leased, with(func(p *Params) { p.Drift = 0.003 }), 0.05, 8333333 * time.Microsecond, Bounded},
		{"leased with equal clocks: any T", Leased, base(), 0.05, 0, AnyInterval},
		{"local: any T", Local, base(), 0, 0, AnyInterval},
		{"exact: any T", Exact, base(), 0, 0, AnyInterval},
		// 9·200·(2T + 0.005) ≤ 50 as for synced: two rounds of broadcasts
		{"gossip at 5%", Gossip, base(), 0.05, 11388 * time.Microsecond, Bounded},
		{"gossip over tolerance: no T helps", Gossip, base(), 0.001, 0, NoInterval},
		{"sampled: the sampling term ignores T", Sampled, base(), 0.05, 0, NoInterval},
		{"synced at 1%: T would be 277µs, below the round trip", Synced, base(), 0.01, 0, NoInterval},
		{"synced whose delay alone overshoots", Synced, with(func(p *Params) { p.Delay = time.Second }), 0.05, 0, NoInterval},
		{"synced within tolerance even stale: any T", Synced, base(), 9, 0, AnyInterval},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := SearchInterval(tt.strategy, tt.p, tt.tolerance)
			if err != nil {
				t.Fatal(err)
			}
			if a.Verdict != tt.verdict || a.Interval != tt.want || a.Reason == "" {
				t.Errorf("SearchInterval = %+v, want %s %s with a reason", a, tt.verdict, tt.want)
			}
			got, ok, err := LongestInterval(tt.strategy, tt.p, tt.tolerance)
			if err != nil || ok != (tt.verdict == Bounded) || got != tt.want {
				t.Errorf("LongestInterval = %s, %v, %v; want %s, %v", got, ok, err, tt.want, tt.verdict == Bounded)
			}
		})
	}
}

// TestLargestOneIn: sampled's knob is p, and OneIn = 1 is the last resort.
func TestLargestOneIn(t *testing.T) {
	// 10% of 1000: z·√(1000·(k−1)) + 9·(g(k) + 1) ≤ 100 holds for k = 1
	// only when the staleness 9·(1+1) = 18 fits, then σ grows fast.
	oneIn, ok, err := LargestOneIn(base(), 0.1)
	if err != nil || !ok {
		t.Fatalf("LargestOneIn = %d, %v, %v; want a fit", oneIn, ok, err)
	}
	fits := func(k int64) bool {
		o, err := Overshoot(Sampled, with(func(p *Params) { p.OneIn = k }))
		if err != nil {
			t.Fatal(err)
		}
		return o <= 100
	}
	if !fits(oneIn) || fits(oneIn+1) {
		t.Errorf("OneIn %d: fits %v, next fits %v; want the last fit", oneIn, fits(oneIn), fits(oneIn+1))
	}
	// Staleness alone: 9·(1 + 200·1s) > 5% of 1000.
	_, ok, err = LargestOneIn(with(func(p *Params) { p.Delay = time.Second }), 0.05)
	if err != nil || ok {
		t.Errorf("LargestOneIn with a 1s delay: ok %v, err %v; want no fit", ok, err)
	}
}

// TestBadInput: every mistake is an error that names it, never a panic or
// a default.
func TestBadInput(t *testing.T) {
	tests := []struct {
		name     string
		strategy string
		p        Params
		want     error
	}{
		{"unknown strategy", "raft", base(), ErrUnknownStrategy},
		{"no nodes", Synced, with(func(p *Params) { p.Nodes = 0 }), ErrInvalidParams},
		{"no algorithm", Local, with(func(p *Params) { p.Limit.Algorithm = "" }), ErrInvalidParams},
		{"zero rate", Exact, with(func(p *Params) { p.Limit.Rate = 0 }), ErrInvalidParams},
		{"leased on a token bucket", Leased, with(func(p *Params) { p.Limit.Algorithm = floodgate.TokenBucket }), ErrInvalidParams},
		{"synced without T", Synced, with(func(p *Params) { p.Interval = 0 }), ErrInvalidParams},
		{"sampled without p", Sampled, with(func(p *Params) { p.OneIn = 0 }), ErrInvalidParams},
		{"NaN arrivals", Exact, with(func(p *Params) { p.ArrivalRate = math.NaN() }), ErrInvalidParams},
		{"negative delay", Gossip, with(func(p *Params) { p.Delay = -time.Millisecond }), ErrInvalidParams},
		{"gossip skewed a whole period", Gossip, with(func(p *Params) { p.Skew = -time.Second }), ErrInvalidParams},
		{"early renewal beyond T", Leased, with(func(p *Params) { p.EarlyRenewal = time.Second }), ErrInvalidParams},
		{"drift of 100%", Leased, with(func(p *Params) { p.Drift = 1 }), ErrInvalidParams},
		{"negative z", Sampled, with(func(p *Params) { p.Z = -1 }), ErrInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for fn, call := range map[string]func() error{
				"Overshoot":  func() error { _, err := Overshoot(tt.strategy, tt.p); return err },
				"Undershoot": func() error { _, err := Undershoot(tt.strategy, tt.p); return err },
				"Cost":       func() error { _, err := StoreCallsPerSecond(tt.strategy, tt.p, 1); return err },
			} {
				if err := call(); !errors.Is(err, tt.want) {
					t.Errorf("%s: err = %v, want %v", fn, err, tt.want)
				}
			}
		})
	}
	for _, tol := range []float64{-0.01, math.NaN(), math.Inf(1)} {
		if _, _, err := LongestInterval(Synced, base(), tol); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("tolerance %v: err = %v, want ErrInvalidParams", tol, err)
		}
	}
	if _, err := StoreCallsPerSecond(Exact, base(), 0); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("0 keys: err = %v, want ErrInvalidParams", err)
	}
}

// TestOutageOvershoot pins the bounds while the store is unreachable.
func TestOutageOvershoot(t *testing.T) {
	tests := []struct {
		strategy string
		p        Params
		want     float64
		err      error
	}{
		{Leased, base(), 1000, nil}, // N·⌊R/N⌋
		{Leased, with(func(p *Params) { p.LeaseFraction = 0.05 }), 500, nil},
		{Synced, base(), 9000, nil},
		{Sampled, base(), 9000, nil}, // (N−1)·R until it hands over
		{Local, base(), 0, nil},
		{Exact, base(), 0, ErrNoOutageBound},
	}
	for _, tt := range tests {
		got, err := OutageOvershoot(tt.strategy, tt.p)
		if !errors.Is(err, tt.err) || got != tt.want {
			t.Errorf("OutageOvershoot(%s) = %v, %v; want %v, %v", tt.strategy, got, err, tt.want, tt.err)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestPoissonArrivals: with Poisson set, the others' arrivals are a
// quantile of a Poisson stream, not the steady product.
func TestPoissonArrivals(t *testing.T) {
	// gossip's (N−1)·λ·(T + D) = 3·200·(0.010 + 0.005) = 9; Poisson(9):
	// P(X ≤ 15) = 0.9780, P(X ≤ 16) = 0.9889, so the 0.98 quantile is 16.
	p := with(func(p *Params) { p.Poisson, p.Nodes, p.Interval = 0.98, 4, 10*time.Millisecond })
	got, err := Overshoot(Gossip, p)
	if err != nil || got != 16 {
		t.Errorf("gossip with Poisson(9) arrivals at 98%%: %v, %v; want 16", got, err)
	}
	// The cap stays (N−1)·R.
	got, _ = Overshoot(Synced, with(func(p *Params) { p.Poisson = 0.9999; p.ArrivalRate = 1e5 }))
	if got != 9000 {
		t.Errorf("synced capped: %v, want 9000", got)
	}
	for _, tt := range []struct{ mean, level, want float64 }{
		{0, 0.99, 0},
		{1, 0.5, 1},               // P(X ≤ 0) = 0.368, P(X ≤ 1) = 0.736
		{1, 0.99, 4},              // P(X ≤ 3) = 0.981, P(X ≤ 4) = 0.9963
		{4e6, 0.5, 4e6},           // normal approximation, median
		{4e6, 0.8413, 4e6 + 2000}, // one σ = 2000
	} {
		if got := poissonQuantile(tt.mean, tt.level); math.Abs(got-tt.want) > 1 {
			t.Errorf("poissonQuantile(%v, %v) = %v, want %v", tt.mean, tt.level, got, tt.want)
		}
	}
	if _, err := Overshoot(Gossip, with(func(p *Params) { p.Poisson = 1 })); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("Poisson 1: err = %v, want ErrInvalidParams", err)
	}
}
