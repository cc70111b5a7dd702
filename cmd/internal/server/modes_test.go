package server_test

import (
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate-io/floodgate/cmd/internal/server"
)

// modesPolicy has one limit a minute on "one", none on "free" (an
// unlimited descriptor) and no rule at all for other keys.
const modesPolicy = `
domain: api
descriptors:
  - key: one
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
`

// The global modes act on the answer as envoyproxy/ratelimit's SHADOW_MODE
// and QUOTA_MODE do (src/service/ratelimit.go): the descriptors' statuses
// stay what the limits say; shadow makes the overall code OK, quota makes
// every descriptor but unlimited ones a quota, including one no limit
// matches, so that the request is over only when all of them are.
func TestGRPCGlobalModes(t *testing.T) {
	over := rdesc("one", "x")
	nolimit := rdesc("other", "y")
	free := rdesc("free", "z")
	for _, tc := range []struct {
		name     string
		modes    server.Modes
		descs    []string // which descriptors the second request has: over, nolimit, free
		overall  rlsv3.RateLimitResponse_Code
		statuses []rlsv3.RateLimitResponse_Code
	}{
		{"none", server.Modes{}, []string{"over", "nolimit"}, OverLimit, []rlsv3.RateLimitResponse_Code{OverLimit, OK}},
		{"shadow: overall OK, status still over", server.Modes{Shadow: true}, []string{"over"}, OK, []rlsv3.RateLimitResponse_Code{OverLimit}},
		{"quota: alone over", server.Modes{Quota: true}, []string{"over"}, OverLimit, []rlsv3.RateLimitResponse_Code{OverLimit}},
		{"quota: a descriptor without a limit passes", server.Modes{Quota: true}, []string{"over", "nolimit"}, OK, []rlsv3.RateLimitResponse_Code{OverLimit, OK}},
		{"quota: an unlimited descriptor is no quota", server.Modes{Quota: true}, []string{"over", "free"}, OverLimit, []rlsv3.RateLimitResponse_Code{OverLimit, OK}},
		{"both: shadow wins", server.Modes{Shadow: true, Quota: true}, []string{"over"}, OK, []rlsv3.RateLimitResponse_Code{OverLimit}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, setup{policy: modesPolicy, opts: func(o *server.Options) { o.Modes = tc.modes }})
			h.should(rreq(over)) // the minute's one request
			req := rreq()
			for _, d := range tc.descs {
				req.Descriptors = append(req.Descriptors, map[string]*ratelimitv3.RateLimitDescriptor{"over": over, "nolimit": nolimit, "free": free}[d])
			}
			resp := h.should(req)
			if resp.OverallCode != tc.overall {
				t.Errorf("overall code %v, want %v", resp.OverallCode, tc.overall)
			}
			for i, want := range tc.statuses {
				if got := resp.Statuses[i].Code; got != want {
					t.Errorf("status %d (%s): %v, want %v", i, tc.descs[i], got, want)
				}
			}
		})
	}
}

// --shadow-mode answers /v1/allow allowed too, with the limits' own
// statuses.
func TestAllowGlobalShadow(t *testing.T) {
	h := newHarness(t, setup{policy: modesPolicy, opts: func(o *server.Options) { o.Modes.Shadow = true }})
	body := `{"domain":"api","descriptors":[{"entries":[{"key":"one","value":"x"}]}]}`
	h.post("/v1/allow", body)
	r := h.post("/v1/allow", body)
	if r.status != 200 || r.header.Get("Retry-After") != "" || !strings.Contains(string(r.body), `"allowed":true`) ||
		!strings.Contains(string(r.body), `"code":"OVER_LIMIT"`) {
		t.Fatalf("second request in shadow mode: %d %s %v", r.status, r.body, r.header)
	}
}
