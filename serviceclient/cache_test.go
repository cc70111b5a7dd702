package serviceclient_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/serviceclient"
)

// A denial is answered locally, without a call, from the instant it
// arrives until exactly its RetryAfter later (on the client's clock); at
// that instant the service is asked again. Smaller costs, which might
// pass sooner, are always asked.
func TestCacheAnswersADeniedKeyUntilItsRetryAfter(t *testing.T) {
	srv := startServe(t)
	clock := floodgate.NewManualClock(time.Unix(1_700_000_000, 0))
	rt := &counting{}
	c := newClient(t, serviceclient.Options{HTTP: srv.HTTP, Clock: clock, HTTPClient: &http.Client{Transport: rt}})
	limit := floodgate.PerMinute(2)
	if d, err := c.AllowN(patient(t), "carol", limit, 2); err != nil || !d.Allowed {
		t.Fatalf("first request: %+v, %v; want allowed", d, err)
	}
	denied, err := c.AllowN(patient(t), "carol", limit, 2)
	if err != nil || denied.Allowed || denied.RetryAfter <= 0 {
		t.Fatalf("second request: %+v, %v; want denied with a RetryAfter", denied, err)
	}
	r := denied.RetryAfter
	steps := []struct {
		at    time.Duration // since the denial
		cost  int64
		calls int64 // calls to the service so far
	}{
		{0, 2, 2},
		{r / 2, 2, 2},
		{r / 2, 3, 2}, // a larger cost waits at least as long
		{r - time.Nanosecond, 2, 2},
		{r, 2, 3}, // the answer ends: asked again (and denied again)
		{r, 1, 4}, // a smaller cost might pass sooner: asked
	}
	start := clock.Now()
	for _, s := range steps {
		clock.Set(start.Add(s.at))
		d, err := c.AllowN(patient(t), "carol", limit, s.cost)
		if err != nil {
			t.Fatalf("at +%s cost %d: %v", s.at, s.cost, err)
		}
		if got := rt.n.Load(); got != s.calls {
			t.Errorf("at +%s cost %d: %d calls to the service, want %d", s.at, s.cost, got, s.calls)
		}
		if d.Allowed {
			t.Errorf("at +%s cost %d: allowed, want denied (the real service's minute has not passed)", s.at, s.cost)
		}
		if s.calls == 2 && s.cost == 2 && d.RetryAfter != r-s.at {
			t.Errorf("at +%s: cached RetryAfter %s, want the time left %s", s.at, d.RetryAfter, r-s.at)
		}
	}
}

// A policy decision whose descriptors are all held as over their limit is
// answered locally until the RetryAfter ends; one with a descriptor not
// held asks the service.
func TestCacheAnswersDeniedDescriptors(t *testing.T) {
	srv := startServe(t)
	clock := floodgate.NewManualClock(time.Unix(1_700_000_000, 0))
	rt := &counting{}
	c := newClient(t, serviceclient.Options{HTTP: srv.HTTP, Clock: clock, HTTPClient: &http.Client{Transport: rt}})
	var r serviceclient.Result
	for range 4 {
		var err error
		if r, err = c.Decide(patient(t), "shop", user("dave"), 1); err != nil {
			t.Fatal(err)
		}
	}
	if r.Allowed || r.Descriptors[0].RetryAfter <= 0 {
		t.Fatalf("fourth request: %+v, want denied with a RetryAfter", r)
	}
	wait := r.Descriptors[0].RetryAfter
	clock.Advance(wait - time.Nanosecond)
	got, err := c.Decide(patient(t), "shop", user("dave"), 1)
	if err != nil || got.Allowed || !got.Cached || rt.n.Load() != 4 || got.Descriptors[0].RetryAfter != time.Nanosecond {
		t.Errorf("1ns before the end: %+v, %v, %d calls; want a cached denial with 1ns left and 4 calls", got, err, rt.n.Load())
	}
	clock.Advance(time.Nanosecond)
	if got, err := c.Decide(patient(t), "shop", user("dave"), 1); err != nil || got.Cached || rt.n.Load() != 5 {
		t.Errorf("at the end: %+v, %v, %d calls; want the service asked (5 calls)", got, err, rt.n.Load())
	}
	// dave is held again (the service denied him again); erin is not.
	if got, err := c.Decide(patient(t), "shop", user("dave", "erin"), 1); err != nil || got.Cached || rt.n.Load() != 6 {
		t.Errorf("with a descriptor not held: %+v, %v, %d calls; want the service asked (6 calls)", got, err, rt.n.Load())
	}
}
