package sim_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/cmd/internal/sim"
)

// render is every output format of a result, concatenated.
func render(t *testing.T, r sim.Result) []byte {
	t.Helper()
	var b bytes.Buffer
	rs := []sim.Result{r}
	for _, write := range []func(*bytes.Buffer) error{
		func(w *bytes.Buffer) error { return sim.WriteJSON(w, rs) },
		func(w *bytes.Buffer) error { return sim.WriteCSV(w, rs) },
		func(w *bytes.Buffer) error { return sim.WriteTable(w, rs) },
		func(w *bytes.Buffer) error { return sim.WriteWindowsCSV(w, rs) },
	} {
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// TestSameSeedSameBytes: a run is a function of its Config. Jitter, loss
// and skew are on so that every random draw and every store call, with
// its goroutine hand-overs, takes part.
func TestSameSeedSameBytes(t *testing.T) {
	for _, strategy := range sim.Strategies {
		t.Run(strategy, func(t *testing.T) {
			c := small(strategy, "zipf")
			c.Loss, c.Skew = 0.05, 3*time.Millisecond
			first, second := render(t, run(t, c)), render(t, run(t, c))
			if !bytes.Equal(first, second) {
				t.Fatalf("two runs with seed %d differ:\n%s\n---\n%s", c.Seed, first, second)
			}
			c.Seed++
			if other := render(t, run(t, c)); bytes.Equal(first, other) {
				t.Fatalf("seeds %d and %d gave the same bytes", c.Seed-1, c.Seed)
			}
		})
	}
}

// TestSameArrivalsForEveryStrategy: arrivals draw from a stream of their
// own, so strategies compared on one seed face the same traffic.
func TestSameArrivalsForEveryStrategy(t *testing.T) {
	want := run(t, small("exact", "sticky")).Windows
	for _, strategy := range sim.Strategies[1:] {
		got := run(t, small(strategy, "sticky")).Windows
		for i := range want {
			if got[i].Offered != want[i].Offered {
				t.Fatalf("%s: window %d offered %d, exact's offered %d", strategy, i, got[i].Offered, want[i].Offered)
			}
		}
	}
}
