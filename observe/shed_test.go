package observe_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/observetest"
)

func TestReportShedIsOneShedEventInsideItsSpan(t *testing.T) {
	rec := &observetest.Recorder{}
	observe.ReportShed(context.Background(), rec, observe.Event{
		Surface: observe.SurfaceHTTP, Policy: "api", Limit: "concurrency", Key: "sheddable", Latency: time.Millisecond})
	if b := rec.Begun(); len(b) != 1 || b[0] != "httplimit/api" {
		t.Errorf("begun %v, want [httplimit/api]", b)
	}
	if e := rec.Events(); len(e) != 1 || e[0].Outcome != observe.Shed || e[0].Key != "sheddable" {
		t.Errorf("events %+v, want one Shed event of key sheddable", e)
	}
	want := observe.Summary{Policy: "api", Outcome: observe.Shed, Limits: 1, Latency: time.Millisecond}
	if s := rec.Summaries(); len(s) != 1 || s[0] != want {
		t.Errorf("summaries %+v, want [%+v]", s, want)
	}
	observe.ReportShed(context.Background(), nil, observe.Event{}) // a nil Observer is allowed
}
