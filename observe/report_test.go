package observe_test

import (
	"context"
	"errors"
	"runtime"
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

// countingObserver counts what it is told and keeps nothing, so that a
// report to it allocates only what the report itself does.
type countingObserver struct{ events, ends int }

func (c *countingObserver) Observe(context.Context, observe.Event) { c.events++ }
func (c *countingObserver) Begin(ctx context.Context, _, _ string) context.Context {
	return ctx
}
func (c *countingObserver) End(context.Context, observe.Summary) { c.ends++ }

// bytesPerRun is how many bytes f allocates per call, averaged over runs
// calls: testing.AllocsPerRun counts allocations, not their size.
func bytesPerRun(runs int, f func()) uint64 {
	f() // warm up whatever is made once
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// A surface keeps its Reporting on its stack: a report allocates only the
// decision's context with its Notes (32 bytes), which the limiter may keep
// past the decision; a request without an Observer allocates nothing.
func TestReportingAllocatesOnlyTheDecisionsContext(t *testing.T) {
	reqs := []floodgate.Request{{Key: "a", Cost: 1}}
	ds := []floodgate.Decision{{Allowed: true, Limit: 10, Remaining: 9}}
	name := func(int) string { return "rule" }
	report := func(o observe.Observer) func() {
		return func() {
			ctx, rep := observe.Start(context.Background(), o, observe.Decided{Surface: "test", Policy: "api", Requests: reqs})
			_ = ctx
			rep.Decided()
			rep.Report(ds, nil, name)
		}
	}
	obs := &countingObserver{}
	const runs = 1000
	if got := testing.AllocsPerRun(runs, report(obs)); got != 1 {
		t.Errorf("a report allocates %v times, want 1 (its context)", got)
	}
	// The context is 32 bytes; 64 allows for a size class of another
	// platform, and is well under the 208 a heap-allocated Reporting took.
	if got := bytesPerRun(runs, report(obs)); got > 64 {
		t.Errorf("a report allocates %d bytes, want at most 64", got)
	}
	if got := testing.AllocsPerRun(runs, report(nil)); got != 0 {
		t.Errorf("a report without an Observer allocates %v times, want 0", got)
	}
	if obs.events != obs.ends || obs.events < runs {
		t.Errorf("the observer saw %d events and %d ends, want one of each per report", obs.events, obs.ends)
	}
}

// The zero Reporting, which Start returns without an Observer, reports
// nothing and may be used as a live one would.
func TestZeroReportingDoesNothing(t *testing.T) {
	ctx := context.Background()
	got, rep := observe.Start(ctx, nil, observe.Decided{Surface: "test"})
	if got != ctx {
		t.Fatal("Start without an Observer changed the context")
	}
	rep.Decided()
	rep.Report(nil, errors.New("store down"), func(int) string { return "" })
	rep.Malformed(errors.New("bad")) // none of these may panic or block
}

// The context a report decides with carries Notes: a failure policy that
// notes a degraded decision in it marks the events degraded.
func TestReportingCarriesNotes(t *testing.T) {
	rec := &observetest.Recorder{}
	ctx, rep := observe.Start(context.Background(), rec, observe.Decided{Surface: "test", Policy: "api",
		Requests: []floodgate.Request{{Key: "a", Cost: 1}}})
	cause := errors.New("store down")
	observe.NoteDegraded(ctx, cause)
	rep.Decided()
	rep.Report([]floodgate.Decision{{Allowed: true}}, nil, func(int) string { return "rule" })
	evs := rec.Events()
	if len(evs) != 1 || !evs[0].Degraded || !errors.Is(evs[0].Err, cause) {
		t.Fatalf("events %+v, want one degraded by %v", evs, cause)
	}
}

// honest is a Limiter that says whether it may note a decision degraded.
type honest struct {
	floodgate.Limiter
	never bool
}

func (h honest) NeverDegrades() bool { return h.never }

// A Limiter that says it never notes a decision degraded
// (observe.Undegradable) is decided with the caller's context as it is,
// and its report allocates nothing; any other gets a context with Notes,
// the report's one allocation. observe.Start and Reporting.Start agree.
func TestStartGivesNotesOnlyToALimiterThatMayNote(t *testing.T) {
	mem := floodgate.NewMemory()
	t.Cleanup(mem.Close)
	limiters := []struct {
		name      string
		limiter   floodgate.Limiter
		wantNotes bool
	}{
		{"no limiter named", nil, true},
		{"a limiter that does not say", struct{ floodgate.Limiter }{mem}, true},
		{"a wrapper that may note", honest{Limiter: mem, never: false}, true},
		{"a wrapper that never notes", honest{Limiter: mem, never: true}, false},
		{"floodgate.Memory", mem, false},
	}
	starts := []struct {
		name  string
		start startFunc
	}{
		{"observe.Start", func(ctx context.Context, o observe.Observer, d observe.Decided, rep *observe.Reporting) context.Context {
			ctx, *rep = observe.Start(ctx, o, d)
			return ctx
		}},
		{"Reporting.Start", func(ctx context.Context, o observe.Observer, d observe.Decided, rep *observe.Reporting) context.Context {
			return rep.Start(ctx, o, d)
		}},
	}
	for _, l := range limiters {
		for _, s := range starts {
			t.Run(l.name+"/"+s.name, func(t *testing.T) { checkStartNotes(t, s.start, l.limiter, l.wantNotes) })
		}
	}
}

// startFunc starts rep, one way or the other.
type startFunc func(ctx context.Context, o observe.Observer, d observe.Decided, rep *observe.Reporting) context.Context

// checkStartNotes reports decisions with limiter, started by start, and
// checks their context's Notes and the report's allocations.
func checkStartNotes(t *testing.T, start startFunc, limiter floodgate.Limiter, wantNotes bool) {
	reqs := []floodgate.Request{{Key: "a", Cost: 1}}
	ds := []floodgate.Decision{{Allowed: true, Limit: 10, Remaining: 9}}
	name := func(int) string { return "rule" }
	base, obs := context.Background(), &countingObserver{}
	var rep observe.Reporting
	report := func() {
		ctx := start(base, obs, observe.Decided{Surface: "test", Policy: "api", Requests: reqs, Limiter: limiter}, &rep)
		if got := observe.NotesFrom(ctx) != nil; got != wantNotes {
			t.Fatalf("the decision's context carries Notes: %v, want %v", got, wantNotes)
		}
		if !wantNotes && ctx != base {
			t.Fatal("Start changed the context of a limiter that never notes")
		}
		rep.Decided()
		rep.Report(ds, nil, name)
	}
	want := 0.0
	if wantNotes {
		want = 1
	}
	if got := testing.AllocsPerRun(100, report); got != want {
		t.Errorf("a report allocates %v times, want %v", got, want)
	}
	if obs.events != obs.ends || obs.events < 100 {
		t.Errorf("the observer saw %d events and %d ends, want one of each per report", obs.events, obs.ends)
	}
}
