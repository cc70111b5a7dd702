package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate-io/floodgate"
)

// keyBody is a /v1/allow or /v1/adjust body for the api_key descriptor
// (rpm counts requests, tpm units), with JSON fields after the descriptor
// (",\"cost\":5") and in it (",\"costs\":{...}").
func keyBody(top, inDescriptor string) string {
	return fmt.Sprintf(`{"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"k1"}]%s}]%s}`, inDescriptor, top)
}

// limits reads the first descriptor's limits of an answer: name -> (cost,
// remaining).
func limits(t *testing.T, r response) map[string][2]int64 {
	t.Helper()
	var a struct {
		Descriptors []struct {
			Limits []struct {
				Name      string `json:"name"`
				Cost      int64  `json:"cost"`
				Remaining int64  `json:"remaining"`
			} `json:"limits"`
		} `json:"descriptors"`
	}
	if err := json.Unmarshal(r.body, &a); err != nil || len(a.Descriptors) == 0 {
		t.Fatalf("body %s: %v", r.body, err)
	}
	out := map[string][2]int64{}
	for _, l := range a.Descriptors[0].Limits {
		out[l.Name] = [2]int64{l.Cost, l.Remaining}
	}
	return out
}

// costStep is one call and the api_key limits after it.
type costStep struct {
	path, body string
	status     int
	rpm, tpm   [2]int64 // cost, remaining
}

func runCostSteps(t *testing.T, h *harness, steps []costStep) {
	t.Helper()
	for i, s := range steps {
		r := h.post(s.path, s.body)
		if r.status != s.status {
			t.Fatalf("step %d %s %s: %d %s, want %d", i, s.path, s.body, r.status, r.body, s.status)
		}
		got := limits(t, r)
		if got["rpm"] != s.rpm || got["tpm"] != s.tpm {
			t.Fatalf("step %d %s %s: rpm %v, tpm %v (cost, remaining); want %v, %v", i, s.path, s.body, got["rpm"], got["tpm"], s.rpm, s.tpm)
		}
	}
}

// Through /v1/allow a request's cost goes to the limits that count units
// and the one that counts requests takes 1; cost 0 reads both; a
// descriptor's costs give named limits their own.
func TestAllowCountsRequestsAndUnitsApart(t *testing.T) {
	h := newHarness(t, setup{})
	runCostSteps(t, h, []costStep{
		{"/v1/allow", keyBody(`,"cost":400`, ""), 200, [2]int64{1, 2}, [2]int64{400, 600}},
		{"/v1/allow", keyBody(`,"cost":0`, ""), 200, [2]int64{0, 2}, [2]int64{0, 600}},
		{"/v1/allow", keyBody(`,"cost":700`, ""), 429, [2]int64{1, 2}, [2]int64{700, 600}},
		{"/v1/allow", keyBody("", `,"costs":{"tpm":100}`), 200, [2]int64{1, 1}, [2]int64{100, 500}},
		{"/v1/allow", keyBody(`,"cost":50`, `,"costs":{"rpm":0}`), 200, [2]int64{0, 1}, [2]int64{50, 450}},
		{"/v1/allow", keyBody("", ""), 200, [2]int64{1, 0}, [2]int64{1, 449}},
		{"/v1/allow", keyBody("", ""), 429, [2]int64{1, 0}, [2]int64{1, 449}}, // rpm denies, tokens to spare
		{"/v1/allow", keyBody(`,"cost":0`, ""), 200, [2]int64{0, 0}, [2]int64{0, 449}},
	})
}

// POST /v1/adjust charges or gives back units after the fact: cost moves
// the limits that count units, a descriptor's costs the limits they name;
// requests limits move only when named.
func TestAdjust(t *testing.T) {
	h := newHarness(t, setup{})
	runCostSteps(t, h, []costStep{
		{"/v1/allow", keyBody(`,"cost":500`, ""), 200, [2]int64{1, 2}, [2]int64{500, 500}},
		{"/v1/adjust", keyBody(`,"cost":-200`, ""), 200, [2]int64{0, 2}, [2]int64{-200, 700}},
		{"/v1/adjust", keyBody(`,"cost":900`, ""), 200, [2]int64{0, 2}, [2]int64{900, 0}}, // past the limit
		{"/v1/allow", keyBody("", ""), 429, [2]int64{1, 2}, [2]int64{1, 0}},
		{"/v1/adjust", keyBody("", `,"costs":{"tpm":-500,"rpm":-1}`), 200, [2]int64{-1, 3}, [2]int64{-500, 300}},
		{"/v1/adjust", keyBody(`,"cost":0`, ""), 200, [2]int64{0, 3}, [2]int64{0, 300}},
		{"/v1/adjust", keyBody(`,"cost":-5000`, ""), 200, [2]int64{0, 3}, [2]int64{-5000, 1000}}, // never below empty
	})
	r := h.post("/v1/adjust", keyBody(`,"cost":1`, ""))
	if r.header.Get("Retry-After") != "" || !strings.Contains(string(r.body), `"code":"OK"`) {
		t.Fatalf("an adjustment is never refused: %v %s", r.header, r.body)
	}
}

// Bad costs and adjustments are refused with 400 naming the problem.
func TestBadCosts(t *testing.T) {
	h := newHarness(t, setup{})
	for _, tc := range []struct{ name, path, body, want string }{
		{"unknown limit name", "/v1/allow", keyBody("", `,"costs":{"tpn":5}`), `no limit named "tpn" applies to it (its limits: rpm, tpm)`},
		{"a descriptor with other limits", "/v1/allow", `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"ann"}],"costs":{"tpm":5}}]}`, `no limit named "tpm" applies to it (it has no named limit)`},
		{"negative cost by name", "/v1/allow", keyBody("", `,"costs":{"tpm":-5}`), `descriptors[0].costs: "tpm": cost -5 is negative (POST /v1/adjust gives units back)`},
		{"empty name", "/v1/allow", keyBody("", `,"costs":{"":5}`), "descriptors[0].costs: a limit name is empty"},
		{"cost by name too large", "/v1/allow", keyBody("", `,"costs":{"tpm":5000000000}`), `"tpm": cost 5000000000 outside`},
		{"not a number", "/v1/allow", keyBody("", `,"costs":{"tpm":"5"}`), `field "descriptors.costs"`},
		{"costs on the request", "/v1/allow", keyBody(`,"costs":{"tpm":5}`, ""), `unknown field "costs"`},
		{"adjust an unknown name", "/v1/adjust", keyBody("", `,"costs":{"tpn":-5}`), `no limit named "tpn" applies to it`},
		{"adjust both ways", "/v1/adjust", keyBody(`,"cost":-5`, `,"costs":{"rpm":1}`), "descriptors[0] both charges and gives back units"},
		{"adjust nothing", "/v1/adjust", keyBody("", ""), "nothing to adjust"},
		{"adjust too much", "/v1/adjust", keyBody(`,"cost":-5000000000`, ""), "cost -5000000000 outside"},
		{"adjust an explicit limit", "/v1/adjust", `{"key":"k","cost":1}`, `unknown field "key"`},
		{"adjust without a domain", "/v1/adjust", `{"descriptors":[{"entries":[{"key":"api_key","value":"k"}]}],"cost":1}`, "domain is empty"},
	} {
		r := h.post(tc.path, tc.body)
		if msg, _ := r.json(t)["error"].(string); r.status != 400 || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %d %s, want 400 naming %q", tc.name, r.status, r.body, tc.want)
		}
	}
}

// A store that cannot adjust answers 501 to an adjustment that moves
// something, over HTTP as over gRPC; one that moves nothing is a read.
func TestAdjustOnAStoreThatCannotAdjust(t *testing.T) {
	h := newHarness(t, setup{store: struct{ floodgate.Limiter }{floodgate.NewMemory()}})
	if r := h.post("/v1/adjust", keyBody(`,"cost":-5`, "")); r.status != http.StatusNotImplemented || !strings.Contains(string(r.body), "cannot give hits back") {
		t.Fatalf("HTTP: %d %s, want 501", r.status, r.body)
	}
	d := rdesc("api_key", "k1")
	d.HitsAddend, d.IsNegativeHits = wrapperspb.UInt64(5), true
	if _, err := h.rls.ShouldRateLimit(t.Context(), rreq(d)); status.Code(err) != codes.Unimplemented {
		t.Fatalf("gRPC: %v, want Unimplemented", err)
	}
	if r := h.post("/v1/adjust", keyBody("", `,"costs":{"tpm":0}`)); r.status != 200 {
		t.Fatalf("nothing to move: %d %s, want a read", r.status, r.body)
	}
}

// Envoy's requests count the same way: 1 per descriptor for a requests
// limit, hits_addend for a units limit; hits_addend 0 reads both and
// is_negative_hits gives units back, not the request.
func TestGRPCCountsRequestsAndUnitsApart(t *testing.T) {
	h := newHarness(t, setup{})
	with := func(hits uint64, negative bool) *ratelimitv3.RateLimitDescriptor {
		d := rdesc("api_key", "k1")
		d.HitsAddend, d.IsNegativeHits = wrapperspb.UInt64(hits), negative
		return d
	}
	for i, s := range []struct {
		desc     *ratelimitv3.RateLimitDescriptor
		code     rlsv3.RateLimitResponse_Code
		rpm, tpm int64
	}{
		{with(400, false), OK, 2, 600},
		{with(0, false), OK, 2, 600},
		{with(700, false), OverLimit, 2, 600},
		{with(300, true), OK, 2, 900},
		{with(900, false), OK, 1, 0},
		{with(1, false), OverLimit, 1, 0},
		{rdesc("api_key", "k1"), OverLimit, 1, 0}, // no hits_addend: the request's, 0 meaning 1
	} {
		resp := h.should(rreq(s.desc))
		read := limits(t, h.post("/v1/allow", keyBody(`,"cost":0`, "")))
		if resp.OverallCode != s.code || read["rpm"][1] != s.rpm || read["tpm"][1] != s.tpm {
			t.Fatalf("step %d: %v, rpm %d, tpm %d left; want %v, %d, %d", i, resp.OverallCode, read["rpm"][1], read["tpm"][1], s.code, s.rpm, s.tpm)
		}
	}
	if resp := h.should(&rlsv3.RateLimitRequest{Domain: "api", HitsAddend: 0, Descriptors: []*ratelimitv3.RateLimitDescriptor{rdesc("api_key", "k2")}}); resp.Statuses[0].LimitRemaining != 2 {
		t.Fatalf("a fresh key after one request: %v", resp)
	}
}
