package insight_test

import (
	"slices"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/observe/insight"
)

func TestRecordKeepsTheLastEventsAndTellsTheHook(t *testing.T) {
	var told []uint64
	f := newFixture(t, insight.Options{MaxEvents: 3, OnEvent: func(r insight.EventRecord) { told = append(told, r.Seq) }})
	for _, kind := range []string{"config_reload", "breaker_open", "breaker_half_open", "breaker_closed"} {
		if err := f.in.Record(insight.Event{Kind: kind, Message: kind}); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Second)
	}
	if err := f.in.Record(insight.Event{Message: "no kind"}); err == nil {
		t.Fatal("an event without a kind was recorded")
	}
	if !slices.Equal(told, []uint64{1, 2, 3, 4}) {
		t.Fatalf("OnEvent told %v", told)
	}
	for _, tc := range []struct {
		since time.Time
		n     int
		want  []string
	}{
		{time.Time{}, 10, []string{"breaker_closed", "breaker_half_open", "breaker_open"}}, // the first fell out
		{time.Time{}, 1, []string{"breaker_closed"}},
		{start.Add(2 * time.Second), 3, []string{"breaker_closed", "breaker_half_open"}},
		{start.Add(time.Hour), 3, nil},
	} {
		got, err := f.in.Events(tc.since, min(tc.n, 3))
		if err != nil {
			t.Fatal(err)
		}
		var k []string
		for _, r := range got {
			k = append(k, r.Kind)
		}
		if !slices.Equal(k, tc.want) {
			t.Errorf("Events(%v, %d) = %q, want %q", tc.since, tc.n, k, tc.want)
		}
	}
	if _, err := f.in.Events(time.Time{}, 4); err == nil {
		t.Error("Events beyond MaxEvents gave no error")
	}
	if st := f.in.Stats(); st.Events != 4 {
		t.Errorf("Stats().Events = %d, want 4", st.Events)
	}
}
