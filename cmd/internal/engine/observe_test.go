package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/observetest"
)

// down is a store that never answers.
type down struct{}

func (down) AllowN(context.Context, string, floodgate.Limit, int64) (floodgate.Decision, error) {
	return floodgate.Decision{}, floodgate.ErrStoreUnavailable
}

// seen is what a test checks of an event.
type seen struct {
	policy, limit, key string
	outcome            observe.Outcome
	remaining          int64
}

func seenOf(ev []observe.Event) []seen {
	var out []seen
	for _, e := range ev {
		out = append(out, seen{e.Policy, e.Limit, e.Key, e.Outcome, e.Decision.Remaining})
	}
	return out
}

func TestObserverSeesEveryLimit(t *testing.T) {
	e, _ := newEngine(t, apiPolicy)
	rec := &observetest.Recorder{}
	e.Observe("serve", rec)
	before := time.Now()
	for range 4 {
		decide(t, e, engine.Request{Client: "192.0.2.7", Descriptors: []engine.Descriptor{
			desc("user", "ann"), desc("tenant", "acme"), desc("beta", "x"), desc("path", "/health")}})
	}
	after := time.Now()
	for _, ev := range rec.Events() {
		if ev.Surface != "serve" || ev.Client != "192.0.2.7" || ev.Cost != 1 || ev.Latency <= 0 || ev.Degraded {
			t.Fatalf("event %+v: surface, client, cost, latency or degraded wrong", ev)
		}
		if ev.Time.Before(before) || ev.Time.After(after) { // the decision's end, read once for Latency
			t.Fatalf("event %+v: Time not between %v and %v", ev, before, after)
		}
	}
	got := seenOf(rec.Events())
	// The fourth request: user is over its 3 a minute; beta (shadow, 1 a
	// minute) would deny; the unlimited /health reports nothing.
	want := []seen{
		{"api", "api.user", "api/user=ann", observe.Denied, 0}, // an unnamed rule is its path
		{"api", "burst", "api/tenant=acme#0", observe.Allowed, 0},
		{"api", "sustained", "api/tenant=acme#1", observe.Allowed, 1},
		{"api", "api.beta", "api/beta=x", observe.ShadowDenied, 0},
	}
	if len(got) != 16 {
		t.Fatalf("%d events, want 4 limits × 4 requests: %+v", len(got), got)
	}
	for i, w := range want {
		if got[12+i] != w {
			t.Errorf("fourth request, event %d = %+v, want %+v", i, got[12+i], w)
		}
	}
	sums := rec.Summaries()
	if len(sums) != 4 || sums[0].Outcome != observe.Allowed || sums[3].Outcome != observe.Denied || sums[3].Limits != 4 {
		t.Fatalf("summaries %+v", sums)
	}
	if b := rec.Begun(); len(b) != 4 || b[0] != "serve/api" {
		t.Fatalf("begun %q", b)
	}
}

func TestObserverSeesRequestsNoLimitApplied(t *testing.T) {
	e, _ := newEngine(t, apiPolicy)
	rec := &observetest.Recorder{}
	e.Observe("serve", rec)
	decide(t, e, engine.Request{Domain: "nope", Descriptors: []engine.Descriptor{desc("user", "ann")}})
	decide(t, e, engine.Request{Descriptors: []engine.Descriptor{desc("path", "/health")}})
	want := []seen{
		{engine.UnknownDomain, "", "", observe.Allowed, 0}, // a domain nobody defined is not its own label
		{"api", "", "", observe.Allowed, 0},
	}
	got := seenOf(rec.Events())
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("events %+v, want %+v", got, want)
	}
}

func TestObserverSeesErrors(t *testing.T) {
	set := apiPolicy
	t.Run("malformed requests are no decision", func(t *testing.T) {
		e, _ := newEngine(t, set)
		rec := &observetest.Recorder{}
		e.Observe("serve", rec)
		if _, err := e.Decide(ctx, engine.Request{Domain: ""}); !errors.Is(err, engine.ErrBadRequest) {
			t.Fatalf("err %v", err)
		}
		if ev := rec.Events(); len(ev) != 0 {
			t.Fatalf("events %+v, want none", ev)
		}
		if s := rec.Summaries(); len(s) != 1 || s[0].Outcome != observe.Error {
			t.Fatalf("summaries %+v, want one error", s)
		}
	})
	t.Run("a store that fails", func(t *testing.T) {
		e := engine.New(servicetest.Policies(t, set), engine.OneStore{Limiter: down{}})
		rec := &observetest.Recorder{}
		e.Observe("serve", rec)
		_, err := e.Decide(ctx, engine.Request{Domain: "api", Descriptors: []engine.Descriptor{desc("user", "ann")}})
		ev := rec.Events()
		if err == nil || len(ev) != 1 || ev[0].Outcome != observe.Error || !errors.Is(ev[0].Err, floodgate.ErrStoreUnavailable) {
			t.Fatalf("err %v, events %+v: want one error event", err, ev)
		}
	})
	t.Run("a failure policy decides", func(t *testing.T) {
		l, err := failover.New(down{}, failover.Config{Mode: failover.FailClosed})
		if err != nil {
			t.Fatal(err)
		}
		e := engine.New(servicetest.Policies(t, set), engine.OneStore{Limiter: l})
		rec := &observetest.Recorder{}
		e.Observe("serve", rec)
		decide(t, e, engine.Request{Descriptors: []engine.Descriptor{desc("user", "ann")}})
		ev := rec.Events()
		if len(ev) != 1 || ev[0].Outcome != observe.Denied || !ev[0].Degraded || !errors.Is(ev[0].Err, floodgate.ErrStoreUnavailable) {
			t.Fatalf("events %+v: want one denied, degraded", ev)
		}
	})
}

// The engine times the decisions its Observer's Sampler picks: above the
// Sampler's rate most are reported untimed (no latency, the latest timed
// decision's time), every one is still reported, and the timed ones weigh
// for the rest.
func TestEngineSamplesItsTiming(t *testing.T) {
	e, _ := newEngine(t, apiPolicy)
	clock := floodgate.NewManualClock(time.Unix(1_700_000_000, 0))
	s, err := observe.NewSampler(observe.SamplerOptions{FullRate: 10, Clock: clock, Rand: func(n uint64) uint64 { return 1 % n }})
	if err != nil {
		t.Fatal(err)
	}
	rec := &observetest.Recorder{}
	e.Observe("serve", observe.Sample(rec, s))
	const requests = 200 // 1000 a second, a hundred times the rate
	for range requests {
		decide(t, e, engine.Request{Descriptors: []engine.Descriptor{desc("path", "/items")}})
		clock.Advance(time.Millisecond)
	}
	var timed, untimed int
	for _, ev := range rec.Events() {
		switch {
		case ev.Untimed && ev.Latency == 0 && ev.StoreTime == 0 && ev.Weight == 0 && !ev.Time.IsZero():
			untimed++
		case !ev.Untimed && ev.Weight >= 1:
			timed++
		default:
			t.Fatalf("event %+v: neither a timed nor an untimed event", ev)
		}
	}
	if timed+untimed != requests || untimed < requests/2 {
		t.Fatalf("%d timed and %d untimed events for %d requests, want one each, most untimed", timed, untimed, requests)
	}
	for _, sum := range rec.Summaries() {
		if sum.Untimed && sum.Latency != 0 {
			t.Fatalf("untimed summary %+v has a latency", sum)
		}
	}
}
