package experiments

import (
	"errors"
	"testing"
	"time"
)

var skewTestConfig = SkewConfig{
	Nodes: 10, Rate: 100, Period: time.Second, Periods: 400, Seed: 1,
	Skews: []time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond},
}

func rowsOf(res SkewResult, algorithm string) []SkewRow {
	var out []SkewRow
	for _, r := range res.Rows {
		if r.Algorithm == algorithm {
			out = append(out, r)
		}
	}
	return out
}

// Without skew every node's fixed windows are the true windows, so no true
// window can hold more than the limit; with skew, windows straddle true
// boundaries and some true windows go over.
func TestClockSkewBreaksFixedWindowsOnly(t *testing.T) {
	res, err := ClockSkew(skewTestConfig)
	if err != nil {
		t.Fatal(err)
	}
	fixed := rowsOf(res, "fixed_window")
	if fixed[0].MaxWindow > 100 || fixed[0].OverShare != 0 {
		t.Errorf("no skew: max %d per true window, %.3f over; want at most 100 and none over", fixed[0].MaxWindow, fixed[0].OverShare)
	}
	if last := fixed[len(fixed)-1]; last.MaxWindow <= 100 || last.OverShare == 0 {
		t.Errorf("skew %s: max %d per true window, %.3f over; want above 100 in some windows", last.Skew, last.MaxWindow, last.OverShare)
	}
}

// The sliding log and the token bucket look only at time differences, so
// shifting a node's clock changes none of their decisions.
func TestClockSkewLeavesRelativeTimeAlgorithmsAlone(t *testing.T) {
	res, err := ClockSkew(skewTestConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sliding_log", "token_bucket"} {
		rows := rowsOf(res, name)
		for _, r := range rows[1:] {
			r.Skew = rows[0].Skew
			if r != rows[0] {
				t.Errorf("%s: %+v differs from the unskewed %+v", name, r, rows[0])
			}
		}
	}
}

func TestClockSkewIsDeterministic(t *testing.T) {
	a, err := ClockSkew(skewTestConfig)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ClockSkew(skewTestConfig)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a.Rows {
		if a.Rows[i] != b.Rows[i] {
			t.Fatalf("row %d: %+v then %+v", i, a.Rows[i], b.Rows[i])
		}
	}
}

func TestClockSkewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name   string
		change func(*SkewConfig)
	}{
		{"no nodes", func(c *SkewConfig) { c.Nodes = 0 }},
		{"share not whole", func(c *SkewConfig) { c.Rate = 105 }},
		{"one period", func(c *SkewConfig) { c.Periods = 1 }},
		{"no skews", func(c *SkewConfig) { c.Skews = nil }},
		{"negative skew", func(c *SkewConfig) { c.Skews = []time.Duration{-time.Millisecond} }},
		{"skew above a period", func(c *SkewConfig) { c.Skews = []time.Duration{2 * time.Second} }},
		{"zero period", func(c *SkewConfig) { c.Period = 0 }},
	}
	for _, tt := range tests {
		cfg := skewTestConfig
		tt.change(&cfg)
		if _, err := ClockSkew(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: error = %v, want one wrapping ErrBadConfig", tt.name, err)
		}
	}
}
