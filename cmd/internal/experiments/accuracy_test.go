package experiments

import (
	"context"
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate/internal/algo"
)

// A hand-made trace, limit 2 per 10µs, where every decision is worked out:
//
//	t   counter (weighted+current)   log (replay)        exact on counter's history
//	8   0+0 → allow                  {} → allow          {} → allow
//	9   0+1 → allow                  {8} → allow         {8} → allow
//	10  ⌈2·10/10⌉=2 → deny           {8,9} → deny        {8,9} → deny
//	15  ⌈2·5/10⌉=1, +0 → allow       {8,9} → deny        {8,9} → deny      ← wrongly allowed (both)
//	19  ⌈2·1/10⌉=1, +1 → deny        {} → allow          {15} → allow      ← wrongly denied (both)
//	20  prev=1: 1+0 → allow          {19} → allow        {15} → allow
//	21  ⌈1·9/10⌉=1, +1 → deny        {19,20} → deny      {15,20} → deny
//	26  ⌈1·4/10⌉=1, +1 → deny        {19,20} → deny      {20} → allow      ← wrongly denied (shadow only)
//
// After t=15 the replayed log and the counter hold different histories,
// which is why the two methods part at t=26.
func TestJudgeSourceCountsAKnownTrace(t *testing.T) {
	counter, err := algo.NewParams(algo.SlidingWindow, 2, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	exact, err := algo.NewParams(algo.SlidingLog, 2, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := judgeSource(&counter, &exact, []int64{8, 9, 10, 15, 19, 20, 21, 26})
	want := tally{
		counterAllowed: 4, // 8, 9, 15, 20
		logAllowed:     4, // 8, 9, 19, 20
		replay:         Disagreement{WronglyAllowed: 1, WronglyDenied: 1},
		shadow:         Disagreement{WronglyAllowed: 1, WronglyDenied: 2},
	}
	if got != want {
		t.Errorf("judgeSource = %+v, want %+v", got, want)
	}
}

// The shadow reference must be the sliding log's rule: fed the history the
// log itself admits, it decides exactly as algo.DecideLog does.
func TestAdmittedWindowDecidesAsTheSlidingLog(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rate := rapid.Int64Range(1, 20).Draw(t, "rate")
		period := rapid.Int64Range(1, 1000).Draw(t, "period")
		p, err := algo.NewParams(algo.SlidingLog, rate, period, 0)
		if err != nil {
			t.Fatal(err)
		}
		var (
			log algo.Log
			w   admittedWindow
			r   algo.Result
			now int64
		)
		for i, gap := range rapid.SliceOfN(rapid.Int64Range(0, 2*period), 1, 300).Draw(t, "gaps") {
			now += gap
			algo.DecideLog(&p, &log, now, 1, true, &r)
			if byWindow := w.admits(now, period, rate, 1); byWindow != r.Allowed {
				t.Fatalf("request %d at %d: window says %v, log says %v", i, now, byWindow, r.Allowed)
			}
			if r.Allowed {
				w.record(now, 1)
			}
		}
	})
}

func TestSlidingAccuracyIsDeterministic(t *testing.T) {
	cfg := AccuracyConfig{Requests: 30_000, Sources: 300, Seed: 3, Rate: 10, Period: time.Minute,
		Shape: Shape{TailIndex: 1.5, DutyCycle: 0.2, Load: 0.05}}
	ctx := context.Background()
	first, err := SlidingAccuracy(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 3, 7} {
		cfg.Workers = workers
		again, err := SlidingAccuracy(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if again != first {
			t.Errorf("workers=%d: %+v, want %+v as with the default", workers, again, first)
		}
	}
	cfg.Seed = 4
	other, err := SlidingAccuracy(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if other.Replay == first.Replay && other.CounterAllowed == first.CounterAllowed {
		t.Errorf("seeds 3 and 4 gave the same run: the seed is not used")
	}
	if first.Replay.Total() == 0 || first.CounterAllowed == first.Requests {
		t.Errorf("a trace with sources over their limit shows no disagreement or no denial: %+v", first)
	}
}

func TestSlidingAccuracyRejectsBadConfig(t *testing.T) {
	good := AccuracyConfig{Requests: 1000, Sources: 10, Rate: 10, Period: time.Minute,
		Shape: Shape{TailIndex: 1.5, DutyCycle: 0.5, Load: 0.1}}
	tests := []struct {
		name   string
		change func(*AccuracyConfig)
	}{
		{"no sources", func(c *AccuracyConfig) { c.Sources = 0 }},
		{"fewer requests than sources", func(c *AccuracyConfig) { c.Requests = 5 }},
		{"zero rate", func(c *AccuracyConfig) { c.Rate = 0 }},
		{"sub-microsecond period", func(c *AccuracyConfig) { c.Period = time.Nanosecond }},
		{"negative tail index", func(c *AccuracyConfig) { c.Shape.TailIndex = -1 }},
		{"duty cycle zero", func(c *AccuracyConfig) { c.Shape.DutyCycle = 0 }},
		{"duty cycle above one", func(c *AccuracyConfig) { c.Shape.DutyCycle = 1.5 }},
		{"zero load", func(c *AccuracyConfig) { c.Shape.Load = 0 }},
		{"negative workers", func(c *AccuracyConfig) { c.Workers = -1 }},
		{"trace shorter than five periods", func(c *AccuracyConfig) { c.Shape.Load = 1000 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.change(&cfg)
			if _, err := SlidingAccuracy(context.Background(), cfg); !errors.Is(err, ErrBadConfig) {
				t.Errorf("error = %v, want one wrapping ErrBadConfig", err)
			}
		})
	}
}

func TestSlidingAccuracyStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := SlidingAccuracy(ctx, AccuracyConfig{Requests: 10_000, Sources: 100, Rate: 10, Period: time.Minute,
		Shape: Shape{TailIndex: 1.5, DutyCycle: 1, Load: 0.1}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}
