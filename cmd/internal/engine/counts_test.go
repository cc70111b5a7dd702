package engine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
)

// llm is an API key with requests per minute and tokens per minute, and a
// tenant limit that counts requests.
var llm = "domain: llm\ndescriptors:\n" + servicetest.TokenLimits(3, 1000) + `  - key: tenant
    rate_limit: {name: tenant-rpm, counts: requests, unit: minute, requests_per_unit: 10}
`

// keyed is one api_key descriptor changed by fs.
func keyed(fs ...func(*engine.Descriptor)) engine.Descriptor {
	d := desc("api_key", "k1")
	for _, f := range fs {
		f(&d)
	}
	return d
}

func hits(n int64) func(*engine.Descriptor) {
	return func(d *engine.Descriptor) { d.Hits, d.HitsSet = n, true }
}

func costs(c map[string]int64) func(*engine.Descriptor) {
	return func(d *engine.Descriptor) { d.Costs = c }
}

func refund(d *engine.Descriptor) { d.Refund = true }
func charge(d *engine.Descriptor) { d.Charge = true }

func requests(n int64) func(*engine.Descriptor) {
	return func(d *engine.Descriptor) { d.Requests = n }
}

// A request's cost goes to the limits that count units; those that count
// requests take 1, a read takes nothing from either, a cost given by name
// wins, and corrections move units only unless told otherwise.
func TestRequestsAndUnitsCountApart(t *testing.T) {
	e, _ := newEngine(t, llm)
	for i, s := range []struct {
		what     string
		desc     engine.Descriptor
		code     engine.Code
		rpm, tpm int64 // remaining after the step
		costs    [2]int64
	}{
		{"400 tokens: 1 request, 400 units", keyed(hits(400)), engine.OK, 2, 600, [2]int64{1, 400}},
		{"a read takes nothing", keyed(hits(0)), engine.OK, 2, 600, [2]int64{0, 0}},
		{"700 tokens: tpm denies, nothing taken", keyed(hits(700)), engine.OverLimit, 2, 600, [2]int64{1, 700}},
		{"a refund of 300 gives units back, not the request", keyed(hits(300), refund), engine.OK, 2, 900, [2]int64{0, -300}},
		{"a charge with requests 1 takes a request too", keyed(hits(100), charge, requests(1)), engine.OK, 1, 800, [2]int64{1, 100}},
		{"costs by name win", keyed(hits(1), costs(map[string]int64{"rpm": 0, "tpm": 50})), engine.OK, 1, 750, [2]int64{0, 50}},
		{"a unit request", keyed(), engine.OK, 0, 749, [2]int64{1, 1}},
		{"rpm denies with tokens to spare", keyed(hits(1)), engine.OverLimit, 0, 749, [2]int64{1, 1}},
		{"a read still passes", keyed(hits(0)), engine.OK, 0, 749, [2]int64{0, 0}},
		{"a refund by name gives a request back", keyed(hits(0), refund, costs(map[string]int64{"rpm": 1})), engine.OK, 1, 749, [2]int64{-1, 0}},
	} {
		r := decide(t, e, engine.Request{Domain: "llm", Descriptors: []engine.Descriptor{s.desc}})
		ls := r.Descriptors[0].Limits
		got := [2]int64{ls[0].Cost, ls[1].Cost}
		if r.Code != s.code || ls[0].Decision.Remaining != s.rpm || ls[1].Decision.Remaining != s.tpm || got != s.costs {
			t.Fatalf("step %d (%s): %v, rpm %d, tpm %d, costs %v; want %v, %d, %d, %v",
				i, s.what, r.Code, ls[0].Decision.Remaining, ls[1].Decision.Remaining, got, s.code, s.rpm, s.tpm, s.costs)
		}
	}
}

// A request's costs apply wherever a descriptor has a limit of that name
// and are ignored elsewhere (a route names limits some requests reach); a
// descriptor's own costs win over them.
func TestRequestCostsApplyWhereTheNameIs(t *testing.T) {
	e, _ := newEngine(t, llm)
	req := engine.Request{Domain: "llm", Hits: 7, Costs: map[string]int64{"tpm": 20, "tenant-rpm": 4, "elsewhere": 9},
		Descriptors: []engine.Descriptor{keyed(), desc("tenant", "acme"), keyed(costs(map[string]int64{"tpm": 5}))}}
	r := decide(t, e, req)
	var got []int64
	for _, ds := range r.Descriptors {
		for _, ls := range ds.Limits {
			got = append(got, ls.Cost)
		}
	}
	if want := []int64{1, 20, 4, 1, 5}; r.Code != engine.OK || !equal(got, want) {
		t.Fatalf("%v, costs %v; want OK, %v", r.Code, got, want)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Costs the engine refuses, each naming what is wrong.
func TestBadCosts(t *testing.T) {
	e, _ := newEngine(t, llm)
	override := keyed(costs(map[string]int64{"tpm": 1}))
	override.Override = &floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 5, Period: time.Minute}
	for _, tc := range []struct {
		name string
		req  engine.Request
		want string
	}{
		{"unknown name", engine.Request{Descriptors: []engine.Descriptor{keyed(costs(map[string]int64{"tpn": 1, "rpn": 2}))}},
			`descriptor 0: costs: no limit named "rpn", "tpn" applies to it (its limits: rpm, tpm)`},
		{"a name of another descriptor", engine.Request{Descriptors: []engine.Descriptor{desc("tenant", "a"), desc("tenant", "b", "x", "y"), keyed(costs(map[string]int64{"tenant-rpm": 1}))}},
			`descriptor 2: costs: no limit named "tenant-rpm" applies to it (its limits: rpm, tpm)`},
		{"a descriptor without limits", engine.Request{Descriptors: []engine.Descriptor{func() engine.Descriptor {
			d := desc("nothing", "here")
			d.Costs = map[string]int64{"tpm": 1}
			return d
		}()}}, `descriptor 0: costs: no limit named "tpm" applies to it (it has no named limit)`},
		{"an override has no named limit", engine.Request{Descriptors: []engine.Descriptor{override}}, `no limit named "tpm" applies to it (it has no named limit)`},
		{"negative", engine.Request{Descriptors: []engine.Descriptor{keyed(costs(map[string]int64{"tpm": -1}))}}, `descriptor 0: costs: "tpm": cost -1 outside [0, 4294967296]`},
		{"too large", engine.Request{Costs: map[string]int64{"tpm": engine.MaxHits + 1}, Descriptors: []engine.Descriptor{keyed()}}, `costs: "tpm": cost 4294967297 outside`},
		{"empty name", engine.Request{Descriptors: []engine.Descriptor{keyed(costs(map[string]int64{"": 1, "tpm": -1}))}}, "descriptor 0: costs: a limit name is empty"},
		{"requests on a decision", engine.Request{Descriptors: []engine.Descriptor{keyed(requests(1))}}, "descriptor 0: requests 1: only a refund or a charge"},
		{"negative requests", engine.Request{Descriptors: []engine.Descriptor{keyed(refund, requests(-1))}}, "descriptor 0: requests -1 outside"},
	} {
		tc.req.Domain = "llm"
		_, err := e.Decide(ctx, tc.req)
		if !errors.Is(err, engine.ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrBadRequest naming %q", tc.name, err, tc.want)
		}
	}
}

// A correction that moves nothing on a store that cannot adjust is a
// read; one that moves units is ErrUnsupported.
func TestCorrectionsOnAStoreThatCannotAdjust(t *testing.T) {
	clock := floodgate.NewManualClock(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	store := struct{ floodgate.Limiter }{floodgate.NewMemory(floodgate.WithClock(clock))}
	e := engine.New(servicetest.Policies(t, `
domain: llm
descriptors:
  - key: api_key
    rate_limit: {name: rpm, counts: requests, unit: minute, requests_per_unit: 3}
`), engine.OneStore{Limiter: store})
	r, err := e.Decide(ctx, engine.Request{Domain: "llm", Descriptors: []engine.Descriptor{keyed(hits(300), refund)}})
	if err != nil || r.Code != engine.OK || r.Descriptors[0].Limits[0].Decision.Remaining != 3 {
		t.Fatalf("refunding units to a requests limit: %+v, %v; want a read", r, err)
	}
	_, err = e.Decide(ctx, engine.Request{Domain: "llm", Descriptors: []engine.Descriptor{keyed(hits(300), refund, requests(1))}})
	if !errors.Is(err, engine.ErrUnsupported) {
		t.Fatalf("refunding a request: %v, want ErrUnsupported", err)
	}
}

// On any sequence of costs, the requests limit has counted the admitted
// requests that cost something and the units limit their costs; a request
// passes exactly when both have room.
func TestCountsProperty(t *testing.T) {
	const rpm, tpm = 20, 5000
	policy := "domain: llm\ndescriptors:\n" + servicetest.TokenLimits(rpm, tpm)
	rapid.Check(t, func(rt *rapid.T) {
		e, _ := newEngine(t, policy)
		var requestsUsed, unitsUsed int64
		for i, cost := range rapid.SliceOfN(rapid.Int64Range(0, 800), 1, 60).Draw(rt, "costs") {
			r, err := e.Decide(ctx, engine.Request{Domain: "llm", Descriptors: []engine.Descriptor{keyed(hits(cost))}})
			if err != nil {
				rt.Fatal(err)
			}
			took := min(cost, 1)
			pass := requestsUsed+took <= rpm && unitsUsed+cost <= tpm
			if pass {
				requestsUsed += took
				unitsUsed += cost
			}
			ls := r.Descriptors[0].Limits
			if (r.Code == engine.OK) != pass || ls[0].Decision.Remaining != rpm-requestsUsed || ls[1].Decision.Remaining != tpm-unitsUsed {
				rt.Fatalf("request %d of cost %d: %v, rpm %d left, tpm %d left; want pass=%v, %d, %d",
					i, cost, r.Code, ls[0].Decision.Remaining, ls[1].Decision.Remaining, pass, rpm-requestsUsed, tpm-unitsUsed)
			}
		}
	})
}
