package experiments

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Rate requests 1µs apart just before a boundary and Rate just after: the
// fixed window lets all 2·Rate through within 2·Rate µs; the others hold the
// line at Rate, since nothing they free in 2·Rate µs amounts to a request.
func TestBoundaryBurstReproducesTheDoubleExactly(t *testing.T) {
	tests := []struct {
		rate   int64
		period time.Duration
	}{
		{1, time.Second},
		{10, time.Second},
		{100, time.Minute},
		{1000, time.Hour},
	}
	for _, tt := range tests {
		res, err := BoundaryBurst(BoundaryConfig{Rate: tt.rate, Period: tt.period, Width: time.Duration(tt.rate) * time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{"fixed_window": 2 * tt.rate, "sliding_window": tt.rate, "sliding_log": tt.rate, "token_bucket": tt.rate}
		for _, row := range res.Rows {
			if row.MaxInPeriod != want[row.Algorithm] || row.Admitted != want[row.Algorithm] {
				t.Errorf("rate %d per %s, %s: admitted %d, max in a period %d; want %d for both",
					tt.rate, tt.period, row.Algorithm, row.Admitted, row.MaxInPeriod, want[row.Algorithm])
			}
		}
	}
}

// However wide the bursts, the fixed window admits exactly 2·Rate in one
// period, the sliding log exactly Rate, and the two others something in
// between.
func TestBoundaryBurstOrdersTheAlgorithms(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rate := rapid.Int64Range(1, 500).Draw(t, "rate")
		period := time.Duration(rapid.Int64Range(2*rate, 10_000_000).Draw(t, "period µs")) * time.Microsecond
		width := time.Duration(rapid.Int64Range(rate, int64(period/time.Microsecond)/2).Draw(t, "width µs")) * time.Microsecond
		res, err := BoundaryBurst(BoundaryConfig{Rate: rate, Period: period, Width: width})
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range res.Rows {
			lo, hi := rate, 2*rate
			switch row.Algorithm {
			case "fixed_window":
				lo = 2 * rate
			case "sliding_log":
				hi = rate
			}
			if row.MaxInPeriod < lo || row.MaxInPeriod > hi {
				t.Fatalf("%s: max in a period %d, want within [%d, %d]", row.Algorithm, row.MaxInPeriod, lo, hi)
			}
		}
	})
}

func TestBoundaryCurvePeaksAtTheBoundary(t *testing.T) {
	res, err := BoundaryBurst(BoundaryConfig{Rate: 100, Period: time.Second, Width: 100 * time.Millisecond, Samples: 301})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.SampleAt) != 301 || res.SampleAt[0] != -1_500_000 || res.SampleAt[300] != 1_500_000 {
		t.Fatalf("samples from %d to %d µs (%d), want 301 from -1.5 to 1.5 periods", res.SampleAt[0], res.SampleAt[len(res.SampleAt)-1], len(res.SampleAt))
	}
	for _, row := range res.Rows {
		peak := int64(0)
		for _, n := range row.Curve {
			peak = max(peak, n)
		}
		if peak != row.MaxInPeriod {
			t.Errorf("%s: curve peaks at %d, want the max in a period %d (a sample lands at the end of the second burst)", row.Algorithm, peak, row.MaxInPeriod)
		}
	}
}

func TestBoundaryBurstRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  BoundaryConfig
	}{
		{"zero rate", BoundaryConfig{Rate: 0, Period: time.Second, Width: time.Millisecond}},
		{"zero period", BoundaryConfig{Rate: 10, Period: 0, Width: time.Millisecond}},
		{"fractional microsecond period", BoundaryConfig{Rate: 10, Period: 1500 * time.Nanosecond, Width: 10 * time.Microsecond}},
		{"requests closer than 1µs", BoundaryConfig{Rate: 10, Period: time.Second, Width: 5 * time.Microsecond}},
		{"bursts wider than half a period", BoundaryConfig{Rate: 10, Period: time.Second, Width: 600 * time.Millisecond}},
		{"negative samples", BoundaryConfig{Rate: 10, Period: time.Second, Width: time.Millisecond, Samples: -1}},
	}
	for _, tt := range tests {
		if _, err := BoundaryBurst(tt.cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: error = %v, want one wrapping ErrBadConfig", tt.name, err)
		}
	}
}
