package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/client"
)

// A pause runs until the last r=0 policy's t; r > 0 ends a policy's pause.
func TestPausesLastUntilTheLastPolicyResets(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var p client.Pauses
	if p.Active() || p.Left(now) != 0 {
		t.Fatal("the zero Pauses pauses")
	}
	p.Note("minute", 0, 40*time.Second, now)
	p.Note("second", 0, time.Second, now)
	p.Note("day", 5, time.Hour, now) // r > 0: no pause
	steps := []struct {
		at   time.Duration
		want time.Duration
	}{{0, 40 * time.Second}, {39 * time.Second, time.Second}, {40 * time.Second, 0}}
	for _, s := range steps {
		if got := p.Left(now.Add(s.at)); got != s.want {
			t.Errorf("Left at +%v = %v, want %v", s.at, got, s.want)
		}
	}
	if p.Active() {
		t.Error("Active after every pause ended")
	}
	p.Note("minute", 0, 40*time.Second, now)
	p.Note("minute", 3, 40*time.Second, now)
	if p.Active() {
		t.Error("r > 0 did not end the policy's pause")
	}
}

func TestPolicyPause(t *testing.T) {
	p := client.Policy{MaxRetries: 0, MaxWait: 30 * time.Second, Backoff: client.Backoff{Base: time.Second, Cap: 8 * time.Second}}
	const none = time.Duration(1<<63 - 1)
	cases := []struct {
		name    string
		d, left time.Duration
		want    time.Duration
		err     error
	}{
		{"no pause", 0, none, 0, nil},
		{"pause plus half the first window", 5 * time.Second, none, 5*time.Second + 500*time.Millisecond, nil},
		{"jitter clipped at the deadline", 5 * time.Second, 5*time.Second + 100*time.Millisecond, 5*time.Second + 100*time.Millisecond - 1, nil},
		{"past the deadline", 5 * time.Second, 5 * time.Second, 0, client.ErrPastDeadline},
		{"above MaxWait: not kept", time.Minute, none, 0, nil},
	}
	for _, c := range cases {
		got, err := p.Pause(c.d, c.left, 0.5)
		if got != c.want || !errors.Is(err, c.err) {
			t.Errorf("%s: Pause(%v, %v) = %v, %v; want %v, %v", c.name, c.d, c.left, got, err, c.want, c.err)
		}
	}
}

func TestResolve(t *testing.T) {
	s, err := client.Resolve(client.WithMaxRetries(5), client.WithoutBudget())
	if err != nil || s.Policy.MaxRetries != 5 || s.Budget != nil || s.Throttle == nil || *s.Throttle != client.DefaultThrottle ||
		s.Policy.MaxWait != client.DefaultMaxWait || s.Clock == nil || s.Sleep == nil || s.Random == nil || s.Logger == nil {
		t.Errorf("Resolve = %+v, %v; want 5 retries, no budget, the other defaults", s, err)
	}
	if _, err := client.Resolve(client.WithMaxRetries(-1)); !errors.Is(err, client.ErrInvalidOption) {
		t.Errorf("Resolve(WithMaxRetries(-1)) error %v, want ErrInvalidOption", err)
	}
}

// A margin taught by Learn makes Note pause at an r up to it, keeps the
// largest lesson, and halves every 8 of the lesson's periods.
func TestPausesMarginTreatsASmallRAsZero(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var p client.Pauses
	p.Learn(0, time.Second, now)  // nothing taken: nothing learned
	p.Learn(-3, time.Second, now) // time gave units back: nothing learned
	if p.Learning() || p.Margin(now) != 0 {
		t.Fatal("a lesson of no units taught a margin")
	}
	p.Learn(10, time.Second, now)
	p.Learn(4, time.Second, now) // smaller: the margin stays 10
	steps := []struct {
		at   time.Duration
		want int64
	}{{0, 10}, {8*time.Second - 1, 10}, {8 * time.Second, 5}, {16 * time.Second, 2}, {24 * time.Second, 1}, {32 * time.Second, 0}}
	for _, s := range steps {
		if got := p.Margin(now.Add(s.at)); got != s.want {
			t.Errorf("Margin at +%v = %d, want %d", s.at, got, s.want)
		}
	}
	if p.Learning() {
		t.Error("Learning after the margin halved to 0")
	}

	p.Learn(3, time.Second, now)
	p.Note("api", 4, time.Second, now) // above the margin: no pause
	if p.Active() {
		t.Fatal("r=4 above a margin of 3 paused")
	}
	p.Note("api", 3, time.Second, now)
	if got := p.Left(now); got != time.Second {
		t.Fatalf("after r=3 at a margin of 3, Left = %v, want the policy's t, 1s", got)
	}
	p.Note("api", 7, time.Second, now)
	if p.Active() {
		t.Error("r=7 above the margin did not end the pause")
	}
}
