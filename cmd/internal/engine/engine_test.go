package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
)

// apiPolicy is the example API of the tests that need one.
const apiPolicy = servicetest.APIPolicy

var ctx = context.Background()

func newEngine(t testing.TB, yaml string) (*engine.Engine, *floodgate.ManualClock) {
	t.Helper()
	set := servicetest.Policies(t, yaml)
	clock := floodgate.NewManualClock(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	return engine.New(set, engine.OneStore{Limiter: floodgate.NewMemory(floodgate.WithClock(clock))}), clock
}

func desc(kv ...string) engine.Descriptor {
	var d engine.Descriptor
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, policy.Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func decide(t *testing.T, e *engine.Engine, req engine.Request) engine.Response {
	t.Helper()
	if req.Domain == "" {
		req.Domain = "api"
	}
	r, err := e.Decide(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func codes(r engine.Response) []engine.Code {
	out := []engine.Code{r.Code}
	for _, d := range r.Descriptors {
		out = append(out, d.Code)
	}
	return out
}

func TestALimitCountsPerValueAndDenies(t *testing.T) {
	e, _ := newEngine(t, apiPolicy)
	for i := range 3 {
		r := decide(t, e, engine.Request{Descriptors: []engine.Descriptor{desc("user", "ann")}})
		if r.Code != engine.OK || r.Descriptors[0].Limits[0].Decision.Remaining != int64(2-i) {
			t.Fatalf("request %d: %+v", i, r)
		}
	}
	if r := decide(t, e, engine.Request{Descriptors: []engine.Descriptor{desc("user", "ann")}}); r.Code != engine.OverLimit {
		t.Fatalf("4th request: %v", codes(r))
	}
	if r := decide(t, e, engine.Request{Descriptors: []engine.Descriptor{desc("user", "bob")}}); r.Code != engine.OK {
		t.Fatalf("another user is counted apart: %v", codes(r))
	}
}

func TestWhatIsNotLimited(t *testing.T) {
	e, _ := newEngine(t, apiPolicy)
	for _, d := range []engine.Descriptor{desc("unknown", "x"), desc("path", "/health"), desc("user", "ann", "extra", "level")} {
		r := decide(t, e, engine.Request{Descriptors: []engine.Descriptor{d}})
		if r.Code != engine.OK || len(r.Descriptors[0].Limits) != 0 || r.Descriptors[0].Tightest != -1 {
			t.Fatalf("%v: %+v", d, r)
		}
	}
	if r := decide(t, e, engine.Request{Domain: "nope", Descriptors: []engine.Descriptor{desc("user", "ann")}}); r.Code != engine.OK {
		t.Fatalf("unknown domain: %v", codes(r))
	}
}

func TestZeroRateDenies(t *testing.T) {
	e, _ := newEngine(t, apiPolicy)
	r := decide(t, e, engine.Request{Descriptors: []engine.Descriptor{desc("path", "/blocked")}})
	if r.Code != engine.OverLimit || r.Descriptors[0].Limits[0].Decision.RetryAfter >= 0 {
		t.Fatalf("%+v", r)
	}
}

func TestShadowModeReportsButNeverDenies(t *testing.T) {
	e, _ := newEngine(t, apiPolicy)
	decide(t, e, engine.Request{Descriptors: []engine.Descriptor{desc("beta", "x")}})
	r := decide(t, e, engine.Request{Descriptors: []engine.Descriptor{desc("beta", "x")}})
	if r.Code != engine.OK || !r.Descriptors[0].ShadowDenied {
		t.Fatalf("%+v", r)
	}
}

func TestLimitsOfOneDescriptorAreAllOrNothing(t *testing.T) {
	e, clock := newEngine(t, apiPolicy)
	tenant := []engine.Descriptor{desc("tenant", "acme")}
	for i := range 4 { // the burst of 4 passes at once
		if r := decide(t, e, engine.Request{Descriptors: tenant}); r.Code != engine.OK {
			t.Fatalf("request %d: %v", i, codes(r))
		}
	}
	r := decide(t, e, engine.Request{Descriptors: tenant})
	if r.Code != engine.OverLimit {
		t.Fatalf("5th at once: %v", codes(r))
	}
	// The burst limit denied: the sustained limit was not charged.
	if s := r.Descriptors[0].Limits[1]; s.Rule.Name != "sustained" || s.Decision.Remaining != 1 {
		t.Fatalf("sustained after a denied request: %+v", s)
	}
	clock.Advance(time.Second)
	decide(t, e, engine.Request{Descriptors: tenant})
	r = decide(t, e, engine.Request{Descriptors: tenant})
	if r.Code != engine.OverLimit || r.Descriptors[0].Tightest != 1 {
		t.Fatalf("the sustained limit should now deny and be the tightest: %+v", r)
	}
}

// Envoy's protocol decides each descriptor on its own: a denied descriptor
// does not stop the others from counting. Atomic makes the request all or
// nothing.
func TestDescriptorsIndependentOrAtomic(t *testing.T) {
	for _, atomic := range []bool{false, true} {
		e, _ := newEngine(t, apiPolicy)
		both := []engine.Descriptor{desc("user", "ann"), desc("path", "/blocked")}
		r := decide(t, e, engine.Request{Descriptors: both, Atomic: atomic})
		if r.Code != engine.OverLimit || r.Descriptors[0].Code != engine.OK || r.Descriptors[1].Code != engine.OverLimit {
			t.Fatalf("atomic=%v: %v", atomic, codes(r))
		}
		r = decide(t, e, engine.Request{Descriptors: []engine.Descriptor{desc("user", "ann")}})
		want := int64(1) // the first request counted for ann
		if atomic {
			want = 2 // nothing was consumed
		}
		if got := r.Descriptors[0].Limits[0].Decision.Remaining; got != want {
			t.Fatalf("atomic=%v: ann has %d left, want %d", atomic, got, want)
		}
	}
}

func TestHitsAndOverrides(t *testing.T) {
	e, _ := newEngine(t, apiPolicy)
	r := decide(t, e, engine.Request{Hits: 2, Descriptors: []engine.Descriptor{desc("user", "ann")}})
	if got := r.Descriptors[0].Limits[0].Decision.Remaining; got != 1 {
		t.Fatalf("hits 2 of 3: %d left", got)
	}
	d := desc("user", "bob")
	d.Hits = 3
	if r := decide(t, e, engine.Request{Hits: 1, Descriptors: []engine.Descriptor{d}}); r.Descriptors[0].Limits[0].Decision.Remaining != 0 {
		t.Fatalf("per-descriptor hits: %+v", r)
	}
	o := desc("anything", "x")
	o.Override = &floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 1, Period: time.Hour}
	decide(t, e, engine.Request{Descriptors: []engine.Descriptor{o}})
	if r := decide(t, e, engine.Request{Descriptors: []engine.Descriptor{o}}); r.Code != engine.OverLimit {
		t.Fatalf("override 1/h, second request: %v", codes(r))
	}
}

func TestReloadKeepsCounts(t *testing.T) {
	e, _ := newEngine(t, apiPolicy)
	decide(t, e, engine.Request{Descriptors: []engine.Descriptor{desc("user", "ann")}})
	p, _ := config.Parse("new.yaml", []byte("domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"))
	set, _ := policy.NewSet(p)
	e.Reload(set)
	r := decide(t, e, engine.Request{Descriptors: []engine.Descriptor{desc("user", "ann")}})
	if got := r.Descriptors[0].Limits[0].Decision.Remaining; got != 8 {
		t.Fatalf("after raising the limit to 10: %d left, want 8", got)
	}
}

func TestBadRequests(t *testing.T) {
	e, _ := newEngine(t, apiPolicy)
	many := make([]engine.Descriptor, engine.MaxDescriptors+1)
	for i := range many {
		many[i] = desc("user", "x")
	}
	deep := engine.Descriptor{Entries: make([]policy.Entry, engine.MaxEntries+1)}
	for i := range deep.Entries {
		deep.Entries[i] = policy.Entry{Key: "k", Value: "v"}
	}
	bad := desc("user", "x")
	bad.Override = &floodgate.Limit{Algorithm: "nope", Rate: 1, Period: time.Second}
	for name, req := range map[string]engine.Request{
		"empty domain":     {Descriptors: []engine.Descriptor{desc("user", "x")}},
		"no descriptors":   {Domain: "api"},
		"too many":         {Domain: "api", Descriptors: many},
		"too deep":         {Domain: "api", Descriptors: []engine.Descriptor{deep}},
		"empty descriptor": {Domain: "api", Descriptors: []engine.Descriptor{{}}},
		"empty key":        {Domain: "api", Descriptors: []engine.Descriptor{desc("", "x")}},
		"negative hits":    {Domain: "api", Hits: -1, Descriptors: []engine.Descriptor{desc("user", "x")}},
		"invalid override": {Domain: "api", Descriptors: []engine.Descriptor{bad}},
	} {
		if _, err := e.Decide(ctx, req); !errors.Is(err, engine.ErrBadRequest) {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

// A request that used more than it reserved is charged the difference,
// past the limit if need be; one that used less gets it back. Neither is
// ever over the limit in its answer.
func TestChargeAndRefund(t *testing.T) {
	e, _ := newEngine(t, apiPolicy)
	remaining := func(r engine.Response) int64 { return r.Descriptors[0].Limits[0].Decision.Remaining }
	with := func(hits int64, change func(*engine.Descriptor)) engine.Request {
		d := desc("user", "kim")
		d.Hits = hits
		change(&d)
		return engine.Request{Descriptors: []engine.Descriptor{d}}
	}
	plain := func(*engine.Descriptor) {}
	charge := func(d *engine.Descriptor) { d.Charge = true }
	refund := func(d *engine.Descriptor) { d.Refund = true }
	for i, s := range []struct {
		req       engine.Request
		code      engine.Code
		remaining int64
	}{
		{with(1, plain), engine.OK, 2},
		{with(5, charge), engine.OK, 0}, // 6 taken of 3: the overrun is charged
		{with(1, plain), engine.OverLimit, 0},
		{with(4, refund), engine.OK, 1},
		{with(1, plain), engine.OK, 0},
	} {
		r := decide(t, e, s.req)
		if r.Code != s.code || remaining(r) != s.remaining {
			t.Fatalf("step %d: %v with %d remaining, want %v with %d", i, r.Code, remaining(r), s.code, s.remaining)
		}
	}
	bad := with(1, func(d *engine.Descriptor) { d.Charge, d.Refund = true, true })
	if _, err := e.Decide(ctx, engine.Request{Domain: "api", Descriptors: bad.Descriptors}); !errors.Is(err, engine.ErrBadRequest) {
		t.Fatalf("charge and refund at once: %v, want ErrBadRequest", err)
	}
}
