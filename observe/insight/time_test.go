package insight_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/insight"
)

// An event's own Time (the surface's reading of the clock) dates the
// decision when Insight runs on the system clock, which then need not be
// read again; a Clock of the caller's overrides it, as the surfaces read
// the system's.
func TestTheDecisionsTime(t *testing.T) {
	stamped := time.Now().Add(-time.Minute).Truncate(time.Second).UTC()
	manual := floodgate.NewManualClock(time.Now().Add(-2 * time.Minute).Truncate(time.Second))
	for _, tc := range []struct {
		name  string
		clock floodgate.Clock
		time  time.Time
		want  time.Time
	}{
		{"system clock, stamped event", nil, stamped, stamped},
		{"manual clock, stamped event", manual, stamped, manual.Now().UTC()},
		{"manual clock, unstamped event", manual, time.Time{}, manual.Now().UTC()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := insight.New(insight.Options{Clock: tc.clock})
			if err != nil {
				t.Fatal(err)
			}
			in.Observe(context.Background(), observe.Event{Policy: "api", Limit: "per-user", Key: "ann", Outcome: observe.Allowed,
				Cost: 1, Time: tc.time, Decision: floodgate.Decision{Limit: 10, Remaining: 1, ResetAfter: time.Hour}})
			near, err := in.NearLimit("api", 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(near) != 1 || !near[0].SeenAt.Equal(tc.want) || !near[0].ResetAt.Equal(tc.want.Add(time.Hour)) {
				t.Fatalf("near-limit %+v, want ann seen at %v, resetting an hour later", near, tc.want)
			}
		})
	}
}
