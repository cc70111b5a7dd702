package insight_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/insight"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fixture is an Insight on a manual clock.
type fixture struct {
	t     testing.TB
	clock *floodgate.ManualClock
	in    *insight.Insight
}

func newFixture(t testing.TB, opts insight.Options) *fixture {
	t.Helper()
	clock := floodgate.NewManualClock(start)
	opts.Clock = clock
	in, err := insight.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t, clock, in}
}

func (f *fixture) observe(e observe.Event) { f.in.Observe(context.Background(), e) }

// hit reports one decision of key under policy's limit "per-user".
func (f *fixture) hit(policy, key string, o observe.Outcome, cost int64) {
	f.observe(observe.Event{Policy: policy, Limit: "per-user", Key: key, Outcome: o, Cost: cost})
}

func (f *fixture) top(policy string, by insight.By, n int) []insight.TopEntry {
	f.t.Helper()
	l, err := f.in.Top(policy, by, n)
	if err != nil {
		f.t.Fatal(err)
	}
	return l.Entries
}

func TestNewNamesTheBadOption(t *testing.T) {
	for _, tc := range []struct {
		field string
		opts  insight.Options
	}{
		{"Window", insight.Options{Window: -time.Second}},
		{"Window", insight.Options{Window: 7 * time.Second, Slots: 2}},
		{"Window", insight.Options{Window: 1500 * time.Millisecond, Slots: 1}},
		{"Slots", insight.Options{Slots: -1}},
		{"Counters", insight.Options{Counters: 1 << 20}},
		{"MaxPolicies", insight.Options{MaxPolicies: -5}},
		{"NearLimitRatio", insight.Options{NearLimitRatio: 1.2}},
		{"NearLimitRatio", insight.Options{NearLimitRatio: -0.1}},
		{"MaxNearLimit", insight.Options{MaxNearLimit: -1}},
		{"SpikeZ", insight.Options{SpikeZ: -4}},
		{"SpikeMinDelta", insight.Options{SpikeMinDelta: -1}},
		{"SpikeMinRatio", insight.Options{SpikeMinRatio: 0.5}},
		{"SpikeTimeConstant", insight.Options{SpikeTimeConstant: time.Millisecond}},
		{"SpikeWarmUp", insight.Options{SpikeWarmUp: -time.Second}},
		{"RateWindow", insight.Options{RateWindow: 1500 * time.Millisecond}},
		{"RateWindow", insight.Options{RateWindow: time.Hour}},
		{"MaxEvents", insight.Options{MaxEvents: -1}},
	} {
		_, err := insight.New(tc.opts)
		if !errors.Is(err, insight.ErrInvalidOption) || !strings.Contains(err.Error(), tc.field+" ") {
			t.Errorf("New(%+v) = %v, want an ErrInvalidOption naming %s", tc.opts, err, tc.field)
		}
	}
	if _, err := insight.New(insight.Options{}); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
}

func TestTopRanksAdmittedAndDeniedUnitsApart(t *testing.T) {
	f := newFixture(t, insight.Options{})
	for _, e := range []struct {
		key  string
		o    observe.Outcome
		cost int64
	}{
		{"alice", observe.Allowed, 5}, {"bob", observe.Allowed, 2}, {"alice", observe.Allowed, 1},
		{"mallory", observe.Denied, 10}, {"bob", observe.ShadowDenied, 3}, {"mallory", observe.Denied, 10},
		{"carol", observe.Shed, 100}, {"dave", observe.Error, 100}, // not a quota's doing: not ranked
		{"erin", observe.Allowed, 0}, // a read: no units
	} {
		f.hit("api", e.key, e.o, e.cost)
	}
	want := map[insight.By][]insight.TopEntry{
		insight.ByAdmitted: {{Key: "alice", Count: 6}, {Key: "bob", Count: 2}},
		insight.ByDenied:   {{Key: "mallory", Count: 20}, {Key: "bob", Count: 3}},
	}
	for by, w := range want {
		if got := f.top("api", by, 10); !slices.Equal(got, w) {
			t.Errorf("top by %s = %+v, want %+v", by, got, w)
		}
	}
	if got := f.top("api", insight.ByAdmitted, 1); !slices.Equal(got, want[insight.ByAdmitted][:1]) {
		t.Errorf("top 1 = %+v", got)
	}
}

func TestTopSlidesOverTheWindow(t *testing.T) {
	f := newFixture(t, insight.Options{Window: time.Minute, Slots: 6})
	f.hit("api", "early", observe.Allowed, 100)
	f.clock.Advance(30 * time.Second)
	f.hit("api", "late", observe.Allowed, 1)
	if got := f.top("api", insight.ByAdmitted, 10); len(got) != 2 {
		t.Fatalf("30 s in: %+v, want both keys", got)
	}
	f.clock.Advance(30 * time.Second) // the first sub-interval is now a window old
	got := f.top("api", insight.ByAdmitted, 10)
	if !slices.Equal(got, []insight.TopEntry{{Key: "late", Count: 1}}) {
		t.Fatalf("a window later: %+v, want only the late key", got)
	}
	f.clock.Advance(time.Hour)
	if got := f.top("api", insight.ByAdmitted, 10); len(got) != 0 {
		t.Fatalf("after an idle hour: %+v", got)
	}
}

func TestTopAnswersBadQueriesWithErrors(t *testing.T) {
	f := newFixture(t, insight.Options{Counters: 16})
	f.hit("api", "k", observe.Allowed, 1)
	for _, tc := range []struct {
		policy string
		by     insight.By
		n      int
		want   error
	}{
		{"nope", insight.ByAdmitted, 5, insight.ErrUnknownPolicy},
		{"api", "both", 5, insight.ErrInvalidQuery},
		{"api", insight.ByDenied, 0, insight.ErrInvalidQuery},
		{"api", insight.ByDenied, 17, insight.ErrInvalidQuery},
	} {
		if _, err := f.in.Top(tc.policy, tc.by, tc.n); !errors.Is(err, tc.want) {
			t.Errorf("Top(%q, %q, %d) = %v, want %v", tc.policy, tc.by, tc.n, err, tc.want)
		}
	}
}

func TestPoliciesBeyondTheBoundAreCountedTogether(t *testing.T) {
	f := newFixture(t, insight.Options{MaxPolicies: 3})
	for i := range 10 {
		f.hit(fmt.Sprintf("p%d", i), "k", observe.Allowed, 1)
	}
	f.hit("", "k", observe.Allowed, 1) // no policy: beyond the bound too
	want := []string{"p0", "p1", "p2", insight.OtherPolicy}
	if got := f.in.Policies(); !slices.Equal(got, want) {
		t.Fatalf("policies %q, want %q", got, want)
	}
	if got := f.top(insight.OtherPolicy, insight.ByAdmitted, 1); !slices.Equal(got, []insight.TopEntry{{Key: "k", Count: 8}}) {
		t.Fatalf("other: %+v", got)
	}
	g := newFixture(t, insight.Options{})
	g.hit("", "k", observe.Allowed, 1)
	if got := g.in.Policies(); !slices.Equal(got, []string{insight.NoPolicy}) {
		t.Fatalf("an event without a policy is tracked as %q", got)
	}
}

func TestHashKeysShowsNoRawKey(t *testing.T) {
	f := newFixture(t, insight.Options{HashKeys: true})
	f.observe(observe.Event{Policy: "api", Key: "alice", Outcome: observe.Denied, Cost: 1,
		Decision: floodgate.Decision{Limit: 10, ResetAfter: time.Second}})
	top := f.top("api", insight.ByDenied, 1)
	near, _ := f.in.NearLimit(insight.AllPolicies, 1)
	// sha256("alice"), first 8 bytes
	const want = "2bd806c97f0e00af"
	if top[0].Key != want || near[0].Key != want {
		t.Fatalf("keys %q and %q, want %q", top[0].Key, near[0].Key, want)
	}
}
