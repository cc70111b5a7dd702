package adaptive

import (
	"testing"
	"time"
)

// TestAIMD follows one limit through a sequence of samples; each step
// says why the limit moves or does not.
func TestAIMD(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	a, err := NewAIMD(AIMDOptions{InitialLimit: 10, MinLimit: 6, MaxLimit: 12, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(ms, inFlight int) Sample {
		return Sample{RTT: 10 * time.Millisecond, InFlight: inFlight, At: at(ms)}
	}
	drop := func(ms, rttMs int) Sample {
		return Sample{RTT: time.Duration(rttMs) * time.Millisecond, InFlight: 10, Dropped: true, At: at(ms)}
	}
	for i, step := range []struct {
		why  string
		s    Sample
		want float64
	}{
		{"a success with the limit in use adds Step/limit", ok(10, 10), 10.1},
		{"a success with less than 80% in flight leaves a limit nobody uses", ok(20, 7), 10.1},
		{"exactly 80% in flight counts as in use", ok(30, 9), 10.1 + 1/10.1},
		{"a drop multiplies by 0.9", drop(1000, 100), (10.1 + 1/10.1) * 0.9},
		{"a drop of a request admitted before that decrease is the same burst", drop(1050, 100), (10.1 + 1/10.1) * 0.9},
		{"a drop of a request admitted after it decreases again", drop(1200, 100), (10.1 + 1/10.1) * 0.81},
		{"an RTT above Timeout is overload too", Sample{RTT: 2 * time.Second, InFlight: 1, At: at(3300)}, (10.1 + 1/10.1) * 0.729},
		{"a sample without At skips the cool-down", Sample{RTT: time.Millisecond, Dropped: true}, (10.1 + 1/10.1) * 0.6561},
		{"and so does the next", Sample{RTT: time.Millisecond, Dropped: true}, (10.1 + 1/10.1) * 0.59049},
		{"MinLimit holds", drop(5000, 1), 6},
	} {
		a.Update(step.s)
		if d := a.limit - step.want; d > 1e-9 || d < -1e-9 {
			t.Fatalf("step %d (%s): limit %.4f; want %.4f", i, step.why, a.limit, step.want)
		}
		if a.Limit() != int(step.want) {
			t.Fatalf("step %d (%s): Limit() = %d; want %d", i, step.why, a.Limit(), int(step.want))
		}
	}
	for range 1000 {
		a.Update(ok(6000, 12))
	}
	if a.Limit() != 12 {
		t.Fatalf("after 1000 successes Limit() = %d; want MaxLimit 12", a.Limit())
	}
}
