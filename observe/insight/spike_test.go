package insight_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/insight"
)

// traffic is a policy's decisions and denials in one second.
type traffic func(sec int) (decisions, denials int)

// run plays seconds of traffic on policy "api", each second's decisions at
// its start, and returns the events reported to OnEvent.
func run(t *testing.T, opts insight.Options, seconds int, tr traffic) (*fixture, []insight.EventRecord) {
	t.Helper()
	var got []insight.EventRecord
	opts.OnEvent = func(r insight.EventRecord) { got = append(got, r) }
	f := newFixture(t, opts)
	for s := range seconds {
		decisions, denials := tr(s)
		for i := range decisions {
			o := observe.Allowed
			if i < denials {
				o = observe.Denied
			}
			f.hit("api", "k", o, 1)
		}
		f.clock.Advance(time.Second)
	}
	f.in.Stats() // a query closes the last second
	return f, got
}

// kinds is the events' kinds and signals, in order.
func kinds(recs []insight.EventRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Kind+":"+r.Fields["signal"].(string))
	}
	return out
}

func TestSpikes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		seconds int
		tr      traffic
		want    []string
	}{
		{"steady traffic is no spike", 600, func(int) (int, int) { return 100, 5 }, nil},
		{"a 10x burst starts a spike and its end ends it", 300, func(s int) (int, int) {
			if s >= 180 && s < 190 {
				return 1000, 0
			}
			return 100, 0
		}, []string{"spike_start:decisions", "spike_end:decisions"}},
		{"denials from none to 50 a second", 300, func(s int) (int, int) {
			if s >= 120 && s < 150 {
				return 100, 50
			}
			return 100, 0
		}, []string{"spike_start:denials", "spike_end:denials"}},
		{"2 to 6 a second is below the absolute floor", 300, func(s int) (int, int) {
			if s >= 120 {
				return 6, 0
			}
			return 2, 0
		}, nil},
		{"a burst during the warm-up is learnt, not reported", 120, func(s int) (int, int) {
			if s == 30 {
				return 1000, 0
			}
			return 100, 0
		}, nil},
		{"a rise that stays becomes the new baseline", 1200, func(s int) (int, int) {
			if s >= 120 {
				return 1000, 0
			}
			return 100, 0
		}, []string{"spike_start:decisions", "spike_end:decisions"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got := run(t, insight.Options{}, tc.seconds, tc.tr)
			if k := kinds(got); !slices.Equal(k, tc.want) {
				t.Fatalf("events %q, want %q:\n%+v", k, tc.want, got)
			}
		})
	}
}

func TestSpikeEventsSayWhatHappened(t *testing.T) {
	f, got := run(t, insight.Options{}, 200, func(s int) (int, int) {
		if s >= 100 && s < 105 {
			return 1000, 0
		}
		return 100, 0
	})
	if len(got) != 2 {
		t.Fatalf("events %+v", got)
	}
	st, end := got[0], got[1]
	if st.Seq != 1 || !st.Time.Equal(start.Add(101*time.Second)) || st.Policy != "api" ||
		st.Fields["rate"] != 1000.0 || st.Fields["baseline_mean"] != 100.0 || st.Fields["z"].(float64) < 4 {
		t.Errorf("spike_start %+v: want seq 1 at the end of second 100, rate 1000 over a baseline of 100", st)
	}
	if !end.Time.Equal(start.Add(106*time.Second)) || end.Fields["seconds"] != 5 || end.Fields["peak"] != 1000.0 || end.Fields["rate"] != 100.0 {
		t.Errorf("spike_end %+v: want at the end of second 105, after 5 s, peak 1000, back to 100", end)
	}
	if evs, _ := f.in.Events(time.Time{}, 10); !slices.EqualFunc(evs, []insight.EventRecord{end, st}, sameSeq) {
		t.Errorf("Events = %+v, want the two, newest first", evs)
	}
}

func sameSeq(a, b insight.EventRecord) bool { return a.Seq == b.Seq }

func TestSpikeShowsInStatsWhileItLasts(t *testing.T) {
	f, _ := run(t, insight.Options{}, 100, func(s int) (int, int) {
		if s >= 98 {
			return 1000, 0
		}
		return 100, 0
	})
	p := f.in.Stats().Policies[0]
	if !slices.Equal(p.Spiking, []string{insight.SignalDecisions}) || p.Baseline[insight.SignalDecisions] != 100 {
		t.Fatalf("stats %+v: want decisions spiking over a baseline of 100", p)
	}
}

func TestNoFalseSpikeOnNoisyTraffic(t *testing.T) {
	for _, mean := range []float64{3, 30, 300} {
		r := rand.New(rand.NewPCG(16, uint64(mean)))
		// Poisson arrivals: exponential gaps, counted per second
		poisson := func() int {
			n := 0
			for at := r.ExpFloat64() / mean; at < 1; at += r.ExpFloat64() / mean {
				n++
			}
			return n
		}
		_, got := run(t, insight.Options{}, 3600, func(int) (int, int) {
			d := poisson()
			return d, d / 10
		})
		if len(got) != 0 {
			t.Errorf("Poisson traffic at %v/s for an hour: %d events, want none: %+v", mean, len(got), got[0])
		}
	}
}
