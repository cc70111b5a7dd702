package client_test

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate/client"
)

func TestBackoffWindowDoublesUpToTheCap(t *testing.T) {
	b := client.Backoff{Base: 100 * time.Millisecond, Cap: time.Second}
	for n, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		if got := b.Window(n); got != want*time.Millisecond {
			t.Errorf("Window(%d) = %v, want %vms", n, got, want)
		}
	}
	if got := b.Window(1000); got != time.Second {
		t.Errorf("Window(1000) = %v, want the cap", got)
	}
}

// Every draw is in [0, window): full jitter.
func TestBackoffDelayIsInItsWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := time.Duration(rapid.Int64Range(1, int64(time.Hour)).Draw(t, "base"))
		b := client.Backoff{Base: base, Cap: base * time.Duration(rapid.Int64Range(1, 1000).Draw(t, "capFactor"))}
		n := rapid.IntRange(0, 200).Draw(t, "n")
		u := rapid.Float64Range(0, 0.999999).Draw(t, "u")
		if d, w := b.Delay(n, u), b.Window(n); d < 0 || d >= w || w > b.Cap || w < b.Base {
			t.Fatalf("Delay(%d, %v) = %v, window %v, want 0 ≤ delay < window in [Base, Cap]", n, u, d, w)
		}
	})
}

func TestPolicyWait(t *testing.T) {
	p := client.Policy{MaxRetries: 2, MaxWait: 30 * time.Second, Backoff: client.Backoff{Base: time.Second, Cap: 8 * time.Second}}
	const none = time.Duration(1<<63 - 1)
	for _, tc := range []struct {
		name  string
		n     int
		asked time.Duration
		told  bool
		left  time.Duration
		u     float64
		want  time.Duration
		err   error
	}{
		{"asked, plus a draw", 0, 3 * time.Second, true, none, 0.5, 3500 * time.Millisecond, nil},
		{"not told: the draw", 1, 0, false, none, 0.5, time.Second, nil},
		{"asked 0", 0, 0, true, none, 0.25, 250 * time.Millisecond, nil},
		{"the draw clipped at the deadline", 0, 3 * time.Second, true, 3200 * time.Millisecond, 0.5, 3200*time.Millisecond - 1, nil},
		{"asked up to the deadline", 0, 3 * time.Second, true, 3 * time.Second, 0, 0, client.ErrPastDeadline},
		{"a draw past the deadline", 1, 0, false, time.Second, 0.6, 0, client.ErrPastDeadline},
		{"above MaxWait", 0, 31 * time.Second, true, none, 0, 0, client.ErrWaitTooLong},
		{"past the deadline before above MaxWait", 0, 31 * time.Second, true, 10 * time.Second, 0, 0, client.ErrPastDeadline},
		{"retries used", 2, time.Second, true, none, 0, 0, client.ErrRetriesExhausted},
	} {
		d, err := p.Wait(tc.n, tc.asked, tc.told, tc.left, tc.u)
		if d != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s: Wait = %v, %v; want %v, %v", tc.name, d, err, tc.want, tc.err)
		}
	}
}

// Over any run, retries ≤ Max + Ratio·first attempts + MinPerSecond·seconds.
func TestBudgetBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := client.Budget{
			Ratio:        rapid.Float64Range(0, 1).Draw(t, "ratio"),
			MinPerSecond: rapid.Float64Range(0, 20).Draw(t, "minPerSecond"),
			Max:          rapid.Float64Range(1, 50).Draw(t, "max"),
		}
		start := time.Unix(1_700_000_000, 0)
		now := start
		s, err := b.NewState(now)
		if err != nil {
			t.Fatal(err)
		}
		requests, retries := 0, 0
		for _, step := range rapid.SliceOf(rapid.IntRange(0, 3)).Draw(t, "steps") {
			switch step {
			case 0:
				s.Deposit(now)
				requests++
			case 3:
				now = now.Add(time.Duration(rapid.Int64Range(0, int64(2*time.Second)).Draw(t, "advance")))
			default:
				if s.Withdraw(now) {
					retries++
				}
			}
		}
		if bound := b.Max + b.Ratio*float64(requests) + b.MinPerSecond*now.Sub(start).Seconds(); float64(retries) > bound+1e-9 {
			t.Fatalf("%d retries for %d requests in %v, above %.3f", retries, requests, now.Sub(start), bound)
		}
	})
}

func TestBudgetSpendsAndEarns(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s, err := client.Budget{Ratio: 0.5, MinPerSecond: 1, Max: 2}.NewState(now)
	if err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct {
		deposits int
		advance  time.Duration
		want     bool
	}{{0, 0, true}, {0, 0, true}, {0, 0, false}, {2, 0, true}, {0, 0, false}, {0, time.Second, true}, {0, 0, false}} {
		for range step.deposits {
			s.Deposit(now)
		}
		now = now.Add(step.advance)
		if got := s.Withdraw(now); got != step.want {
			t.Fatalf("step %d: Withdraw = %v, want %v", i, got, step.want)
		}
	}
}

// The probability is SRE's formula over the window, and forgets what
// left it.
func TestThrottleProbability(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s, err := client.Throttle{K: 2, Window: 24 * time.Second}.NewState()
	if err != nil {
		t.Fatal(err)
	}
	never := func() float64 { return 0.999999 } // a draw that never rejects below p = 1
	for range 30 {
		s.Admit(now, never)
	}
	for range 10 {
		s.Accept(now)
	}
	if got, want := s.Probability(now), (30.0-2*10)/(30+1); got != want {
		t.Fatalf("p = %v after 30 requests and 10 accepts, want %v", got, want)
	}
	if ok, p := s.Admit(now, func() float64 { return 0.3 }); ok || p != 10.0/31 {
		t.Fatalf("Admit with u=0.3 = %v (p %v), want a rejection at p=10/31", ok, p)
	}
	if got := s.Probability(now.Add(25 * time.Second)); got != 0 {
		t.Fatalf("p = %v a window later, want 0", got)
	}
	for range 5 {
		s.Accept(now.Add(25 * time.Second))
	}
	if got := s.Probability(now.Add(25 * time.Second)); got != 0 {
		t.Fatalf("p = %v with more accepts than requests, want 0", got)
	}
}

// The probability stays in [0, 1) whatever happens.
func TestThrottleProbabilityBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, _ := client.Throttle{K: rapid.Float64Range(1, 10).Draw(t, "k"), Window: time.Minute}.NewState()
		now := time.Unix(rapid.Int64Range(-1e9, 4e9).Draw(t, "start"), 0)
		for _, step := range rapid.SliceOf(rapid.IntRange(0, 2)).Draw(t, "steps") {
			switch step {
			case 0:
				s.Admit(now, func() float64 { return 0.5 })
			case 1:
				s.Accept(now)
			default:
				now = now.Add(time.Duration(rapid.Int64Range(-int64(time.Second), int64(30*time.Second)).Draw(t, "advance")))
			}
			if p := s.Probability(now); p < 0 || p >= 1 {
				t.Fatalf("p = %v", p)
			}
		}
	})
}
