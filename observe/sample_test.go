package observe_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/observetest"
)

// countingClock is a manual clock that counts its reads.
type countingClock struct {
	*floodgate.ManualClock
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time {
	c.reads.Add(1)
	return c.ManualClock.Now()
}

func newCountingClock() *countingClock {
	return &countingClock{ManualClock: floodgate.NewManualClock(time.Unix(1_700_000_000, 0))}
}

// seeded is a deterministic random source for a Sampler.
func seeded() func(uint64) uint64 { return rand.New(rand.NewPCG(1, 2)).Uint64N }

func newSampler(t *testing.T, opts observe.SamplerOptions) *observe.Sampler {
	t.Helper()
	s, err := observe.NewSampler(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// decide reports one decision of one limit through o, taking d of the
// clock's time.
func decide(o observe.Observer, clock *countingClock, d time.Duration) {
	_, rep := observe.Start(context.Background(), o, observe.Decided{Surface: "test", Policy: "api",
		Requests: []floodgate.Request{{Key: "k", Cost: 1}}})
	clock.Advance(d)
	rep.Decided()
	rep.Report([]floodgate.Decision{{Allowed: true, Limit: 10, Remaining: 9}}, nil, func(int) string { return "rule" })
}

// Below FullRate every decision is timed, exactly as without a Sampler:
// a latency, a time, weight 1.
func TestBelowTheFullRateEveryDecisionIsTimed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fullRate int
		gap      time.Duration // between decisions
	}{
		{"half the rate", 1000, 2 * time.Millisecond},
		{"just below the rate", 1000, 1001 * time.Microsecond},
		{"a slow trickle", 1000, 3 * time.Second},
		{"FullRate 0 at a million per second", 0, time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newCountingClock()
			rec := &observetest.Recorder{}
			o := observe.Sample(rec, newSampler(t, observe.SamplerOptions{FullRate: tc.fullRate, Clock: clock, Rand: seeded()}))
			for range 5000 {
				decide(o, clock, time.Microsecond)
				clock.Advance(tc.gap - time.Microsecond)
			}
			for i, e := range rec.Events() {
				if e.Untimed || e.Weight != 1 || e.Latency != time.Microsecond || e.Time.IsZero() {
					t.Fatalf("event %d: Untimed %v, Weight %d, Latency %v, Time %v; want timed, weight 1, 1µs, a time",
						i, e.Untimed, e.Weight, e.Latency, e.Time)
				}
			}
		})
	}
}

// Above FullRate about FullRate decisions per second are timed, each
// weighing N, so that the weights add up to the decisions; the others
// read no clock.
func TestAboveTheFullRateAboutFullRateAreTimed(t *testing.T) {
	const fullRate, perSecond, seconds = 1000, 200_000, 3
	clock := newCountingClock()
	rec := &observetest.Recorder{}
	s := newSampler(t, observe.SamplerOptions{FullRate: fullRate, Clock: clock, Rand: seeded()})
	o := observe.Sample(rec, s)
	gap := time.Second / perSecond
	decideFor := func() (timed, weights, reads int64) {
		rec.Reset()
		before := clock.reads.Load()
		for range perSecond {
			decide(o, clock, 0)
			clock.Advance(gap)
		}
		for _, e := range rec.Events() {
			if !e.Untimed {
				timed++
			}
			weights += e.Weighed()
		}
		return timed, weights, clock.reads.Load() - before
	}
	decideFor() // the Sampler adapts within its first windows
	for sec := range seconds {
		timed, weights, reads := decideFor()
		if timed < fullRate*8/10 || timed > fullRate*12/10 {
			t.Errorf("second %d: %d decisions timed, want about %d (±20%%)", sec, timed, fullRate)
		}
		// The sum is unbiased; its deviation is about √(perSecond·N), 3%.
		if weights < perSecond*85/100 || weights > perSecond*115/100 {
			t.Errorf("second %d: the timed decisions weigh %d, want about the %d decided (±15%%)", sec, weights, perSecond)
		}
		if reads != 2*timed {
			t.Errorf("second %d: %d clock reads for %d timed decisions, want two each and none for the untimed", sec, reads, timed)
		}
	}
	// Each estimate is from about FullRate/10 timed decisions: ±10% each.
	if n := s.Period(); n < perSecond/fullRate*6/10 || n > perSecond/fullRate*14/10 {
		t.Errorf("Period() = %d, want about %d (±40%%)", n, perSecond/fullRate)
	}
	for _, e := range rec.Events() {
		if e.Untimed && (e.Latency != 0 || e.StoreTime != 0 || e.Weight != 0 || e.Time.IsZero()) {
			t.Fatalf("untimed event: Latency %v, StoreTime %v, Weight %d, Time %v; want 0, 0, 0 and the latest timed decision's time",
				e.Latency, e.StoreTime, e.Weight, e.Time)
		}
	}
}

// When the traffic falls back below FullRate, the Sampler times every
// decision again once it has seen a timed one.
func TestSamplingStopsWhenTheRateFalls(t *testing.T) {
	clock := newCountingClock()
	rec := &observetest.Recorder{}
	s := newSampler(t, observe.SamplerOptions{FullRate: 1000, Clock: clock, Rand: seeded()})
	o := observe.Sample(rec, s)
	for range 100_000 { // 100,000/s for a second
		decide(o, clock, 0)
		clock.Advance(10 * time.Microsecond)
	}
	if s.Period() < 50 {
		t.Fatalf("Period() = %d at 100 times FullRate, want about 100", s.Period())
	}
	for range 1000 { // 100/s
		decide(o, clock, 0)
		clock.Advance(10 * time.Millisecond)
	}
	if s.Period() != 1 {
		t.Errorf("Period() = %d after 10 s at a tenth of FullRate, want 1", s.Period())
	}
}

func TestNewSamplerRefusesANegativeRate(t *testing.T) {
	_, err := observe.NewSampler(observe.SamplerOptions{FullRate: -1})
	if !errors.Is(err, observe.ErrInvalidSampler) {
		t.Fatalf("NewSampler(FullRate -1): %v, want ErrInvalidSampler", err)
	}
}

// Sample keeps a Spanner a Spanner; SampleByDefault wraps once and leaves
// an Observer already wrapped (to share a Sampler, or to time everything)
// alone.
func TestSampleWrapping(t *testing.T) {
	rec := &observetest.Recorder{}
	if observe.Sample(nil, nil) != nil || observe.SampleByDefault(nil) != nil {
		t.Error("a nil Observer sampled is not nil")
	}
	if _, ok := observe.Sample(rec, nil).(observe.Spanner); !ok {
		t.Error("a sampled Spanner is no Spanner")
	}
	if _, ok := observe.Sample(observe.Func(func(context.Context, observe.Event) {}), nil).(observe.Spanner); ok {
		t.Error("a sampled Func became a Spanner")
	}
	exact := observe.Sample(rec, nil)
	if observe.SampleByDefault(exact) != exact {
		t.Error("SampleByDefault rewrapped an Observer given its own sampling")
	}
	// Every decision of an exact Observer is timed, whatever the rate.
	clock := newCountingClock()
	for range 10_000 {
		decide(exact, clock, 0)
	}
	for _, e := range rec.Events() {
		if e.Untimed {
			t.Fatal("Sample(o, nil) left a decision untimed")
		}
	}
}

// An untimed report allocates only the decision's context, as a timed one.
func TestUntimedReportAllocatesOnlyTheContext(t *testing.T) {
	clock := newCountingClock()
	s := newSampler(t, observe.SamplerOptions{FullRate: 1, Clock: clock, Rand: func(uint64) uint64 { return 1 }})
	o := observe.Sample(&countingObserver{}, s)
	for range 100 { // a rate far above 1/s: every decision untimed from now
		decide(o, clock, 0)
		clock.Advance(time.Millisecond)
	}
	if s.Period() < 2 {
		t.Fatalf("Period() = %d, want sampling", s.Period())
	}
	reqs := []floodgate.Request{{Key: "k", Cost: 1}}
	ds := []floodgate.Decision{{Allowed: true, Limit: 10, Remaining: 9}}
	name := func(int) string { return "rule" }
	report := func() {
		_, rep := observe.Start(context.Background(), o, observe.Decided{Surface: "test", Policy: "api", Requests: reqs})
		rep.Decided()
		rep.Report(ds, nil, name)
	}
	if got := testing.AllocsPerRun(1000, report); got != 1 {
		t.Errorf("an untimed report allocates %v times, want 1 (its context)", got)
	}
}
