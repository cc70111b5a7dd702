package observe_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/observetest"
)

// The events of a Reporting carry the time its decision ended, read once
// with Latency, so that observers need not read the clock again.
func TestReportingStampsTheDecisionsEnd(t *testing.T) {
	rec := &observetest.Recorder{}
	before := time.Now()
	_, rep := observe.Start(context.Background(), rec, observe.Decided{Surface: "test", Policy: "api",
		Requests: []floodgate.Request{{Key: "a", Cost: 1}, {Key: "b", Cost: 1}}})
	rep.Decided()
	after := time.Now()
	rep.Report([]floodgate.Decision{{Allowed: true}, {Allowed: true}}, nil, func(int) string { return "rule" })
	evs := rec.Events()
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	for _, e := range evs {
		if e.Time.Before(before) || e.Time.After(after) {
			t.Errorf("event %q: Time %v, want between %v and %v", e.Key, e.Time, before, after)
		}
		if e.Time != evs[0].Time || e.Latency > after.Sub(before) {
			t.Errorf("event %q: Time %v and Latency %v, want the decision's one end %v within %v",
				e.Key, e.Time, e.Latency, evs[0].Time, after.Sub(before))
		}
	}
}
