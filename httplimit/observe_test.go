package httplimit

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/failover"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/observetest"
)

// down is a store that never answers.
type down struct{}

func (down) AllowN(context.Context, string, floodgate.Limit, int64) (floodgate.Decision, error) {
	return floodgate.Decision{}, floodgate.ErrStoreUnavailable
}

func TestObserverSeesEveryRulesDecision(t *testing.T) {
	rec := &observetest.Recorder{}
	clock := floodgate.NewManualClock(epoch)
	url := serve(t, floodgate.NewMemory(floodgate.WithClock(clock)), Options{
		Name:     "api",
		Observer: rec,
		Rules: []Rule{
			{Name: "per-user", Limit: floodgate.PerMinute(1), Key: ByHeader("X-User")},
			{Name: "per-host", Limit: floodgate.PerMinute(10), Key: ByHost()},
		},
	}, nil)
	if r := get(t, url, "X-User", "u1"); r.status != 200 {
		t.Fatal(r.status)
	}
	if r := get(t, url, "X-User", "u1"); r.status != 429 {
		t.Fatal(r.status)
	}
	type seen struct {
		limit, key string
		outcome    observe.Outcome
		remaining  int64
	}
	var got []seen
	for _, e := range rec.Events() {
		if e.Surface != observe.SurfaceHTTP || e.Policy != "api" || e.Client != "127.0.0.1" || e.Cost != 1 || e.Latency <= 0 || e.StoreTime != e.Latency || e.Degraded {
			t.Errorf("event %+v: surface, policy, client, cost, latency or degraded wrong", e)
		}
		got = append(got, seen{e.Limit, e.Key, e.Outcome, e.Decision.Remaining})
	}
	host := "127.0.0.1" // ByHost drops the port
	want := []seen{
		{"per-user", "per-user:u1", observe.Allowed, 0},
		{"per-host", "per-host:" + host, observe.Allowed, 9},
		{"per-user", "per-user:u1", observe.Denied, 0},
		// per-host would have admitted the second request: its own verdict
		// is Allowed, though the batch consumed nothing.
		{"per-host", "per-host:" + host, observe.Allowed, 9},
	}
	if len(got) != len(want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	sums := rec.Summaries()
	if len(sums) != 2 || sums[0].Outcome != observe.Allowed || sums[1].Outcome != observe.Denied || sums[1].Limits != 2 {
		t.Fatalf("summaries %+v: want allowed then denied, of 2 limits", sums)
	}
	if b := rec.Begun(); len(b) != 2 || b[0] != "httplimit/api" {
		t.Fatalf("begun %q", b)
	}
}

func TestObserverSeesStoreFailures(t *testing.T) {
	rules := []Rule{{Name: "per-user", Limit: floodgate.PerMinute(5), Key: ByHeader("X-User")}}
	t.Run("undecided", func(t *testing.T) {
		rec := &observetest.Recorder{}
		url := serve(t, down{}, Options{Observer: rec, Rules: rules}, nil)
		if r := get(t, url, "X-User", "u1"); r.status != 503 {
			t.Fatal(r.status)
		}
		ev := rec.Events()
		if len(ev) != 1 || ev[0].Outcome != observe.Error || !errors.Is(ev[0].Err, floodgate.ErrStoreUnavailable) || ev[0].Policy != "http" {
			t.Fatalf("events %+v: want one error wrapping ErrStoreUnavailable under policy http", ev)
		}
	})
	t.Run("degraded", func(t *testing.T) {
		rec := &observetest.Recorder{}
		l, err := failover.New(down{}, failover.Config{Mode: failover.FailOpen, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		url := serve(t, l, Options{Observer: rec, Rules: rules}, nil)
		if r := get(t, url, "X-User", "u1"); r.status != 200 {
			t.Fatal(r.status)
		}
		ev := rec.Events()
		if len(ev) != 1 || ev[0].Outcome != observe.Allowed || !ev[0].Degraded || !errors.Is(ev[0].Err, floodgate.ErrStoreUnavailable) {
			t.Fatalf("events %+v: want one allowed, degraded, with the store's error", ev)
		}
		if s := rec.Summaries(); len(s) != 1 || !s[0].Degraded {
			t.Fatalf("summaries %+v: want one, degraded", s)
		}
	})
}
