package adaptive

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestOptionsAreValidated: each option a constructor cannot use is an
// error wrapping ErrInvalidOptions that names it.
func TestOptionsAreValidated(t *testing.T) {
	aimd := func(o AIMDOptions) error { _, err := NewAIMD(o); return err }
	g2 := func(o Gradient2Options) error { _, err := NewGradient2(o); return err }
	vegas := func(o VegasOptions) error { _, err := NewVegas(o); return err }
	for _, tc := range []struct {
		err  error
		name string // in the message
	}{
		{aimd(AIMDOptions{MinLimit: -1}), "AIMDOptions.MinLimit"},
		{aimd(AIMDOptions{MaxLimit: -5}), "AIMDOptions.MaxLimit"},
		{aimd(AIMDOptions{MinLimit: 10, MaxLimit: 5}), "MinLimit 10 is above MaxLimit 5"},
		{aimd(AIMDOptions{InitialLimit: 2000}), "InitialLimit 2000 is outside"},
		{aimd(AIMDOptions{MinLimit: 30}), "InitialLimit 20 is outside"},
		{aimd(AIMDOptions{Step: -1}), "AIMDOptions.Step"},
		{aimd(AIMDOptions{Step: math.Inf(1)}), "AIMDOptions.Step"},
		{aimd(AIMDOptions{BackoffRatio: 1}), "AIMDOptions.BackoffRatio"},
		{aimd(AIMDOptions{BackoffRatio: math.NaN()}), "AIMDOptions.BackoffRatio"},
		{aimd(AIMDOptions{Timeout: -time.Second}), "AIMDOptions.Timeout"},
		{aimd(AIMDOptions{Utilisation: 1.5}), "AIMDOptions.Utilisation"},
		{g2(Gradient2Options{ShortWindow: -1}), "Gradient2Options.ShortWindow"},
		{g2(Gradient2Options{ShortWindow: 700}), "ShortWindow 700 is longer than LongWindow 600"},
		{g2(Gradient2Options{Smoothing: 2}), "Gradient2Options.Smoothing"},
		{g2(Gradient2Options{Utilisation: -0.1}), "Gradient2Options.Utilisation"},
		{g2(Gradient2Options{ProbeInterval: -1}), "Gradient2Options.ProbeInterval"},
		{g2(Gradient2Options{ProbeSamples: -1}), "Gradient2Options.ProbeSamples"},
		{g2(Gradient2Options{ProbeRatio: 1.1}), "Gradient2Options.ProbeRatio"},
		{g2(Gradient2Options{MaxLimit: -1}), "Gradient2Options.MaxLimit"},
		{vegas(VegasOptions{Alpha: 7}), "VegasOptions.Alpha 7 and Beta 6"},
		{vegas(VegasOptions{Alpha: -1}), "VegasOptions.Alpha -1"},
		{vegas(VegasOptions{Beta: math.Inf(1)}), "VegasOptions.Alpha 3 and Beta +Inf"},
		{vegas(VegasOptions{ProbeRatio: -1}), "VegasOptions.ProbeRatio"},
		{vegas(VegasOptions{InitialLimit: 5, MaxLimit: 4}), "InitialLimit 5 is outside"},
	} {
		if !errors.Is(tc.err, ErrInvalidOptions) || !strings.Contains(tc.err.Error(), tc.name) {
			t.Errorf("error %v; want one wrapping ErrInvalidOptions that says %q", tc.err, tc.name)
		}
	}
}

// TestZeroOptionsAreTheDefaults: the zero options make a working
// algorithm starting at DefaultInitialLimit (a probe aside).
func TestZeroOptionsAreTheDefaults(t *testing.T) {
	for _, tc := range propertyAlgorithms {
		alg, err := tc.make(DefaultMinLimit, DefaultMaxLimit, DefaultInitialLimit)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := learnt(alg); got != DefaultInitialLimit {
			t.Errorf("%s: limit %d; want %d", tc.name, got, DefaultInitialLimit)
		}
	}
}

// propertyAlgorithms make each learning algorithm with the given bounds
// and otherwise default options, and give the largest change one Update
// may make to a limit (before Limit rounds it down), as their doc
// comments state it.
var propertyAlgorithms = []struct {
	name    string
	make    func(min, max, initial int) (Algorithm, error)
	maxStep func(limit float64) float64
}{
	{"AIMD", func(min, max, initial int) (Algorithm, error) {
		return NewAIMD(AIMDOptions{MinLimit: min, MaxLimit: max, InitialLimit: initial})
	}, func(l float64) float64 { return math.Max(1/l, (1-DefaultAIMDBackoff)*l) }},
	{"Gradient2", func(min, max, initial int) (Algorithm, error) {
		return NewGradient2(Gradient2Options{MinLimit: min, MaxLimit: max, InitialLimit: initial, ProbeInterval: time.Second, ProbeSamples: 5})
	}, func(l float64) float64 { return DefaultGradient2Smoothing * math.Max(math.Sqrt(l)/l, 0.5) }},
	{"Vegas", func(min, max, initial int) (Algorithm, error) {
		return NewVegas(VegasOptions{MinLimit: min, MaxLimit: max, InitialLimit: initial, ProbeInterval: time.Second, ProbeSamples: 5})
	}, func(l float64) float64 { return math.Max(1, math.Log10(l)) / l }},
}

// TestLimitsStayBoundedAndMoveByTheDocumentedStep: for any sequence of
// samples, Limit stays within [MinLimit, MaxLimit] and, probes aside, one
// Update moves it by no more than the documented step plus one (Limit
// rounds down).
func TestLimitsStayBoundedAndMoveByTheDocumentedStep(t *testing.T) {
	for _, tc := range propertyAlgorithms {
		t.Run(tc.name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				lo := rapid.IntRange(1, 50).Draw(t, "min")
				hi := rapid.IntRange(lo, 500).Draw(t, "max")
				alg, err := tc.make(lo, hi, rapid.IntRange(lo, hi).Draw(t, "initial"))
				if err != nil {
					t.Fatal(err)
				}
				at := time.Unix(1_700_000_000, 0)
				for i := range rapid.IntRange(1, 300).Draw(t, "samples") {
					at = at.Add(time.Duration(rapid.Int64Range(0, int64(2*time.Second)).Draw(t, "gap")))
					s := Sample{
						RTT:      time.Duration(rapid.Int64Range(0, int64(10*time.Second)).Draw(t, "rtt")),
						InFlight: rapid.IntRange(0, 2*hi).Draw(t, "inFlight"),
						Dropped:  rapid.Bool().Draw(t, "dropped"),
						At:       at,
					}
					before, probing := learnt(alg), isProbing(alg)
					after := alg.Update(s)
					if after < lo || after > hi || alg.Limit() != after {
						t.Fatalf("sample %d %+v: Update = %d, Limit = %d; want the same, within [%d, %d]", i, s, after, alg.Limit(), lo, hi)
					}
					if probing || isProbing(alg) {
						continue
					}
					if d := math.Abs(float64(after - before)); d > tc.maxStep(float64(before+1))+1 {
						t.Fatalf("sample %d %+v: limit %d → %d; want a step of at most %.2f+1", i, s, before, after, tc.maxStep(float64(before+1)))
					}
				}
			})
		})
	}
}

func isProbing(alg Algorithm) bool {
	switch a := alg.(type) {
	case *Gradient2:
		return a.probe.probing
	case *Vegas:
		return a.probe.probing
	}
	return false
}

// BenchmarkUpdate is the cost of one sample for each algorithm, in the
// steady state of an overloaded backend (no probe due).
func BenchmarkUpdate(b *testing.B) {
	for _, tc := range propertyAlgorithms {
		b.Run(tc.name, func(b *testing.B) {
			alg, err := tc.make(DefaultMinLimit, DefaultMaxLimit, DefaultInitialLimit)
			if err != nil {
				b.Fatal(err)
			}
			at := time.Unix(1_700_000_000, 0)
			s := Sample{RTT: 10 * time.Millisecond, InFlight: 15, At: at}
			for range 100 { // through the first probe
				alg.Update(s)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				s.RTT = time.Duration(10+i%5) * time.Millisecond
				s.InFlight = alg.Limit()
				s.Dropped = i%97 == 0
				alg.Update(s)
			}
		})
	}
}
