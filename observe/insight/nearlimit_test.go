package insight_test

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/insight"
)

// decided is one decision of a near-limit scenario, after an optional
// wait.
type decided struct {
	wait                 time.Duration
	limit, key           string
	outcome              observe.Outcome
	max, remaining       int64
	resetAfter           time.Duration
	wantKeys             []string // limit/key, most used first
	wantDropped, wantHit int64    // the counters after it
}

func TestNearLimitKeysComeAndGo(t *testing.T) {
	for _, tc := range []struct {
		name  string
		max   int
		steps []decided
	}{
		{"a key enters at the ratio and leaves below it", 0, []decided{
			{limit: "u", key: "a", outcome: observe.Allowed, max: 10, remaining: 3, resetAfter: time.Minute, wantKeys: nil},
			{limit: "u", key: "a", outcome: observe.Allowed, max: 10, remaining: 2, resetAfter: time.Minute, wantKeys: []string{"u/a"}, wantHit: 1},
			{limit: "u", key: "a", outcome: observe.Denied, max: 10, remaining: 0, resetAfter: time.Minute, wantKeys: []string{"u/a"}, wantHit: 1},
			{limit: "u", key: "a", outcome: observe.Error, wantKeys: []string{"u/a"}, wantHit: 1}, // no decision: no news
			{limit: "u", key: "a", outcome: observe.Allowed, max: 10, remaining: 9, resetAfter: time.Minute, wantKeys: nil, wantHit: 1},
		}},
		{"a key leaves when its limit resets", 0, []decided{
			{limit: "u", key: "a", outcome: observe.Allowed, max: 10, remaining: 1, resetAfter: 10 * time.Second, wantKeys: []string{"u/a"}, wantHit: 1},
			{wait: 9 * time.Second, limit: "u", key: "b", outcome: observe.Denied, max: 10, remaining: 0, resetAfter: time.Second,
				wantKeys: []string{"u/b", "u/a"}, wantHit: 1},
			{wait: time.Second, limit: "u", key: "c", outcome: observe.Allowed, max: 10, remaining: 8, resetAfter: time.Second,
				wantKeys: nil, wantHit: 1},
		}},
		{"a key leaves at its latest reset, later or earlier than before", 0, []decided{
			{limit: "u", key: "a", outcome: observe.Denied, max: 1, resetAfter: 10 * time.Second, wantKeys: []string{"u/a"}},
			{wait: 5 * time.Second, limit: "u", key: "a", outcome: observe.Denied, max: 1, resetAfter: 20 * time.Second, wantKeys: []string{"u/a"}},
			{wait: 6 * time.Second, limit: "u", key: "b", outcome: observe.Denied, max: 1, resetAfter: 3 * time.Second, wantKeys: []string{"u/a", "u/b"}},
			{limit: "u", key: "b", outcome: observe.Denied, max: 1, resetAfter: time.Second, wantKeys: []string{"u/a", "u/b"}},
			{wait: time.Second, limit: "u", key: "c", outcome: observe.Allowed, max: 10, remaining: 10, wantKeys: []string{"u/a"}},
			{wait: 12 * time.Second, limit: "u", key: "c", outcome: observe.Allowed, max: 10, remaining: 10, wantKeys: []string{"u/a"}},
			{wait: time.Second, limit: "u", key: "c", outcome: observe.Allowed, max: 10, remaining: 10, wantKeys: nil},
		}},
		{"each limit of a key is its own entry", 0, []decided{
			{limit: "per-user", key: "a", outcome: observe.Allowed, max: 100, remaining: 10, resetAfter: time.Minute, wantKeys: []string{"per-user/a"}, wantHit: 1},
			{limit: "per-tenant", key: "a", outcome: observe.Allowed, max: 100, remaining: 5, resetAfter: time.Minute,
				wantKeys: []string{"per-tenant/a", "per-user/a"}, wantHit: 2},
		}},
		{"when full, a new key evicts the key that resets soonest, or is dropped", 2, []decided{
			{limit: "u", key: "a", outcome: observe.Denied, max: 1, resetAfter: 10 * time.Second, wantKeys: []string{"u/a"}},
			{limit: "u", key: "b", outcome: observe.Denied, max: 1, resetAfter: 20 * time.Second, wantKeys: []string{"u/a", "u/b"}},
			{limit: "u", key: "c", outcome: observe.Denied, max: 1, resetAfter: 30 * time.Second, wantKeys: []string{"u/b", "u/c"}},
			{limit: "u", key: "d", outcome: observe.Denied, max: 1, resetAfter: 5 * time.Second, wantKeys: []string{"u/b", "u/c"}, wantDropped: 1},
			{limit: "u", key: "b", outcome: observe.Allowed, max: 10, remaining: 10, resetAfter: 0, wantKeys: []string{"u/c"}, wantDropped: 1},
			{limit: "u", key: "d", outcome: observe.Denied, max: 1, resetAfter: 5 * time.Second, wantKeys: []string{"u/c", "u/d"}, wantDropped: 1},
		}},
		{"when full, the key that resets soonest is the one evicted, whatever came first", 2, []decided{
			{limit: "u", key: "a", outcome: observe.Denied, max: 1, resetAfter: 10 * time.Second, wantKeys: []string{"u/a"}},
			{limit: "u", key: "b", outcome: observe.Denied, max: 1, resetAfter: 20 * time.Second, wantKeys: []string{"u/a", "u/b"}},
			{limit: "u", key: "a", outcome: observe.Denied, max: 1, resetAfter: 30 * time.Second, wantKeys: []string{"u/a", "u/b"}},
			{limit: "u", key: "c", outcome: observe.Denied, max: 1, resetAfter: 25 * time.Second, wantKeys: []string{"u/a", "u/c"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, insight.Options{MaxNearLimit: tc.max}) // 0: the default
			for i, s := range tc.steps {
				f.clock.Advance(s.wait)
				f.observe(observe.Event{Policy: "api", Limit: s.limit, Key: s.key, Outcome: s.outcome, Cost: 1,
					Decision: floodgate.Decision{Limit: s.max, Remaining: s.remaining, ResetAfter: s.resetAfter}})
				entries, err := f.in.NearLimit("api", cmp.Or(tc.max, insight.DefaultMaxNearLimit))
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range entries {
					got = append(got, e.Limit+"/"+e.Key)
				}
				st := f.in.Stats()
				if !slices.Equal(got, s.wantKeys) || st.NearLimitDropped != s.wantDropped ||
					st.Policies[0].NearLimitDecisions != uint64(s.wantHit) || st.NearLimitKeys != int64(len(got)) {
					t.Fatalf("after step %d: keys %q, dropped %d, near-limit decisions %d, keys counted %d; want %q, %d, %d, %d",
						i, got, st.NearLimitDropped, st.Policies[0].NearLimitDecisions, st.NearLimitKeys,
						s.wantKeys, s.wantDropped, s.wantHit, len(s.wantKeys))
				}
			}
		})
	}
}

func TestNearLimitEntryTellsUseRemainingAndReset(t *testing.T) {
	f := newFixture(t, insight.Options{NearLimitRatio: 0.5})
	f.observe(observe.Event{Policy: "api", Limit: "per-user", Key: "alice", Outcome: observe.Allowed, Cost: 1,
		Decision: floodgate.Decision{Limit: 40, Remaining: 10, ResetAfter: 90 * time.Second}})
	f.clock.Advance(time.Second)
	got, err := f.in.NearLimit(insight.AllPolicies, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []insight.NearEntry{{Policy: "api", Limit: "per-user", Key: "alice", Used: 0.75, Remaining: 10, Max: 40,
		ResetAt: start.Add(90 * time.Second), SeenAt: start}}
	if !slices.Equal(got, want) {
		t.Fatalf("near-limit\n got %+v\nwant %+v", got, want)
	}
	for _, bad := range []struct {
		policy string
		n      int
	}{{"api", 0}, {"nope", 1}} {
		if _, err := f.in.NearLimit(bad.policy, bad.n); err == nil {
			t.Errorf("NearLimit(%q, %d) gave no error", bad.policy, bad.n)
		}
	}
}
