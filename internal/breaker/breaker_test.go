package breaker

import (
	"testing"
	"time"
)

// TestBreaker walks a breaker of threshold 3 and a cool-down of 1s through
// its states, one call a step.
func TestBreaker(t *testing.T) {
	const coolDown = time.Second
	type step struct {
		advance   time.Duration
		outcome   string // "ok", "fail" or "abandon": how an admitted call ends
		admitted  bool
		wantState State
	}
	opened := []step{
		{outcome: "fail", admitted: true, wantState: Closed},
		{outcome: "fail", admitted: true, wantState: Closed},
		{outcome: "fail", admitted: true, wantState: Open},
	}
	then := func(more ...step) []step { return append(opened[:len(opened):len(opened)], more...) }
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"opens after the threshold", opened},
		{"a success resets the count", []step{
			{outcome: "fail", admitted: true, wantState: Closed},
			{outcome: "fail", admitted: true, wantState: Closed},
			{outcome: "ok", admitted: true, wantState: Closed},
			{outcome: "fail", admitted: true, wantState: Closed},
		}},
		{"refuses while open", then(
			step{wantState: Open},
			step{advance: coolDown - time.Nanosecond, wantState: Open})},
		{"a good probe closes", then(
			step{advance: coolDown, outcome: "ok", admitted: true, wantState: Closed},
			step{outcome: "ok", admitted: true, wantState: Closed})},
		{"a failed probe reopens for a cool-down", then(
			step{advance: coolDown, outcome: "fail", admitted: true, wantState: Open},
			step{advance: coolDown - time.Nanosecond, wantState: Open},
			step{advance: time.Nanosecond, outcome: "ok", admitted: true, wantState: Closed})},
		{"an abandoned probe hands the probe on at once", then(
			step{advance: coolDown, outcome: "abandon", admitted: true, wantState: Open},
			step{outcome: "ok", admitted: true, wantState: Closed})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_700_000_000, 0)
			b := New(3, coolDown, func() time.Time { return now })
			for i, s := range tc.steps {
				now = now.Add(s.advance)
				ph, ok := b.Admit()
				if ok != s.admitted {
					t.Fatalf("step %d: admitted %v, want %v", i, ok, s.admitted)
				}
				if ok {
					switch s.outcome {
					case "ok":
						b.Succeeded(ph)
					case "fail":
						b.Failed(ph)
					default:
						b.Abandon(ph)
					}
				}
				if got := b.State(); got != s.wantState {
					t.Fatalf("step %d: state %v, want %v", i, got, s.wantState)
				}
			}
		})
	}
}

// Half-open admits one probe; the others are refused until it ends, and
// RetryAfter counts down to the next probe while open.
func TestOneProbeAndRetryAfter(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := New(1, 10*time.Second, func() time.Time { return now })
	if got := b.RetryAfter(); got != 10*time.Second {
		t.Fatalf("closed: RetryAfter %v, want the cool-down", got)
	}
	ph, _ := b.Admit()
	if !b.Failed(ph) || b.State() != Open {
		t.Fatal("the threshold's failure did not open the breaker")
	}
	now = now.Add(4 * time.Second)
	if got := b.RetryAfter(); got != 6*time.Second {
		t.Fatalf("open, 4s in: RetryAfter %v, want 6s", got)
	}
	if d, refused := b.Refuses(); !refused || d != 6*time.Second {
		t.Fatalf("open, 4s in: Refuses() = %v, %v; want 6s, true", d, refused)
	}
	now = now.Add(6 * time.Second)
	if _, refused := b.Refuses(); refused {
		t.Fatal("open past the cool-down: Refuses() = true, want the probe let through")
	}
	probe, ok := b.Admit()
	if !ok || probe.State() != HalfOpen {
		t.Fatalf("after the cool-down: admitted %v in %v, want the half-open probe", ok, probe.State())
	}
	if _, ok := b.Admit(); ok {
		t.Fatal("a second call went through during the probe")
	}
	if d, refused := b.Refuses(); !refused || d != 10*time.Second {
		t.Fatalf("half-open: Refuses() = %v, %v; want the cool-down, true", d, refused)
	}
	if b.Failed(ph) || b.Succeeded(ph) {
		t.Fatal("a call of a phase long gone moved the breaker")
	}
	if !b.Succeeded(probe) || b.State() != Closed {
		t.Fatal("the probe's success did not close the breaker")
	}
}

func TestStateNames(t *testing.T) {
	want := []string{"closed", "open", "half_open"}
	for i, s := range States() {
		if s.String() != want[i] || int(s) != i {
			t.Errorf("States()[%d] = %d %q, want %d %q", i, s, s, i, want[i])
		}
	}
	if got := State(7).String(); got != "unknown" {
		t.Errorf("State(7) = %q, want unknown", got)
	}
}
