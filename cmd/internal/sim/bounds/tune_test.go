package bounds

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestTunePicksEachStrategysSetting: the rows carry the setting the bounds
// allow, and the confirmation runs at exactly that setting.
func TestTunePicksEachStrategysSetting(t *testing.T) {
	seen := map[string]Params{}
	confirm := func(_ context.Context, s string, p Params) (Measurement, error) {
		seen[s] = p
		return Measurement{Overshoot: 7, StoreCallsPerSecond: 1}, nil
	}
	rows, err := Tune(context.Background(), Strategies(), base(), 0.05, 1, confirm)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		verdict  Verdict
		interval time.Duration
	}{
		Exact:   {AnyInterval, 0},
		Local:   {AnyInterval, 0},
		Leased:  {AnyInterval, time.Second}, // never overshoots: one round per window shown
		Synced:  {Bounded, 11388 * time.Microsecond},
		Sampled: {Bounded, 0},
		Gossip:  {Bounded, 11388 * time.Microsecond},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for _, r := range rows {
		w := want[r.Strategy]
		if r.Verdict != w.verdict || r.Interval != w.interval || r.Reason == "" {
			t.Errorf("%s: %s at %s (%q), want %s at %s", r.Strategy, r.Verdict, r.Interval, r.Reason, w.verdict, w.interval)
		}
		if r.Tolerance != 50 || !r.Confirmed() {
			t.Errorf("%s: tolerance %v, confirmed %v; want 50 units, measured 7 within it", r.Strategy, r.Tolerance, r.Confirmed())
		}
		if r.Overshoot > r.Tolerance {
			t.Errorf("%s: tuned setting's bound %v exceeds the tolerance %v", r.Strategy, r.Overshoot, r.Tolerance)
		}
	}
	if got := seen[Synced].Interval; got != 11388*time.Microsecond {
		t.Errorf("synced confirmed at T = %s, want the tuned 11.388ms", got)
	}
	if seen[Sampled].OneIn != rows[4].OneIn || rows[4].OneIn < 1 {
		t.Errorf("sampled confirmed at 1/p = %d, tuned %d", seen[Sampled].OneIn, rows[4].OneIn)
	}
	if rows[2].Lease == nil || rows[2].Lease.Units != 100 {
		t.Errorf("leased row's lease = %+v, want 100 units", rows[2].Lease)
	}
}

// TestTuneReportsFailuresAndRefusals: nothing to run is not run; a failing
// confirmation is in its row and in the error; bad input fails at once.
func TestTuneReportsFailuresAndRefusals(t *testing.T) {
	boom := errors.New("simulator down")
	calls := 0
	confirm := func(_ context.Context, s string, p Params) (Measurement, error) {
		calls++
		return Measurement{}, boom
	}
	strict := with(func(p *Params) { p.Delay = time.Second }) // synced's delay term alone is too much
	rows, err := Tune(context.Background(), []string{Synced, Exact}, strict, 0.05, 1, confirm)
	if !errors.Is(err, ErrConfirmFailed) || !errors.Is(err, boom) {
		t.Fatalf("err = %v, want ErrConfirmFailed wrapping the cause", err)
	}
	if len(rows) != 2 || rows[0].Verdict != NoInterval || rows[0].ConfirmError != "" || rows[1].ConfirmError == "" {
		t.Errorf("rows = %+v; want synced refused unconfirmed, exact with its confirm error", rows)
	}
	if calls != 1 {
		t.Errorf("confirm called %d times, want once (nothing to run for synced)", calls)
	}
	if _, err := Tune(context.Background(), []string{"paxos"}, base(), 0.05, 1, nil); !errors.Is(err, ErrUnknownStrategy) {
		t.Errorf("unknown strategy: err = %v", err)
	}
	if _, err := Tune(context.Background(), Strategies(), base(), 0.05, 0, nil); !errors.Is(err, ErrInvalidParams) {
		t.Errorf("0 keys: err = %v", err)
	}
}
