package server_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/floodgate-io/floodgate/cmd/internal/server"
)

// envoyHeadersPolicy has a limit of each kind envoyproxy/ratelimit's
// headers treat apart.
const envoyHeadersPolicy = `domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
`

// With EnvoyHeaders the Envoy surfaces add envoyproxy/ratelimit's three
// headers in place of RateLimit-Policy and RateLimit, describing the
// descriptor it would: the last one over its limit (quota_mode aside),
// else the first with the fewest hits remaining. The clock is 15 s into
// a minute and an hour, so a minute's window resets in 45 s and an hour's
// in 3585 s.
func TestEnvoyHeaders(t *testing.T) {
	type hits struct {
		d     *ratelimitv3.RateLimitDescriptor
		times int
	}
	for _, tc := range []struct {
		name  string
		names server.EnvoyHeaders
		prep  []hits // requests before the one checked
		req   []*ratelimitv3.RateLimitDescriptor
		want  map[string]string // nil: no header at all
	}{
		{name: "one descriptor", req: ds(rdesc("user", "ann")),
			want: map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "2", "RateLimit-Reset": "45"}},
		{name: "the fewest remaining", req: ds(rdesc("tenant", "acme"), rdesc("user", "ann")),
			want: map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "2", "RateLimit-Reset": "45"}},
		{name: "of two as close, the first", prep: []hits{{rdesc("tenant", "acme"), 7}},
			req:  ds(rdesc("tenant", "acme"), rdesc("user", "ann")),
			want: map[string]string{"RateLimit-Limit": "10", "RateLimit-Remaining": "2", "RateLimit-Reset": "3585"}},
		{name: "a limit over wins", prep: []hits{{rdesc("user", "ann"), 3}},
			req:  ds(rdesc("user", "ann"), rdesc("tenant", "acme")),
			want: map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "0", "RateLimit-Reset": "45"}},
		{name: "a quota over does not win over one as close", prep: []hits{{rdesc("tenant", "acme"), 9}, {rdesc("quota", "q"), 1}},
			req:  ds(rdesc("tenant", "acme"), rdesc("quota", "q")),
			want: map[string]string{"RateLimit-Limit": "10", "RateLimit-Remaining": "0", "RateLimit-Reset": "3585"}},
		{name: "a shadow limit over has none remaining", prep: []hits{{rdesc("shadow", "s"), 1}},
			req:  ds(rdesc("user", "ann"), rdesc("shadow", "s")),
			want: map[string]string{"RateLimit-Limit": "1", "RateLimit-Remaining": "0", "RateLimit-Reset": "1"}},
		{name: "unlimited and unknown descriptors have no headers", req: ds(rdesc("free", "f"), rdesc("nobody", "n"))},
		{name: "names of one's own", names: server.EnvoyHeaders{Limit: "X-Limit", Remaining: "X-Left", Reset: "X-Reset"},
			req:  ds(rdesc("user", "ann")),
			want: map[string]string{"X-Limit": "3", "X-Left": "2", "X-Reset": "45"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := tc.names
			if names == (server.EnvoyHeaders{}) {
				names = server.DefaultEnvoyHeaders()
			}
			h := newHarness(t, setup{policy: envoyHeadersPolicy, opts: func(o *server.Options) { o.EnvoyHeaders = &names }})
			h.clock.Advance(15 * time.Second)
			for _, p := range tc.prep {
				for range p.times {
					h.should(rreq(p.d))
				}
			}
			got := map[string]string{}
			for _, hv := range h.should(rreq(tc.req...)).ResponseHeadersToAdd {
				got[hv.Key] = hv.Value
			}
			if len(got) != len(tc.want) {
				t.Fatalf("headers %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s: %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}

func ds(d ...*ratelimitv3.RateLimitDescriptor) []*ratelimitv3.RateLimitDescriptor { return d }

// Envoy's /json answers with the same headers, as HTTP headers.
func TestEnvoyHeadersOverJSON(t *testing.T) {
	names := server.DefaultEnvoyHeaders()
	h := newHarness(t, setup{policy: envoyHeadersPolicy, opts: func(o *server.Options) { o.EnvoyHeaders = &names }})
	h.clock.Advance(15 * time.Second)
	r := h.post("/json", `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}`)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	for k, v := range map[string]string{"RateLimit-Limit": "3", "RateLimit-Remaining": "2", "RateLimit-Reset": "45", "RateLimit-Policy": ""} {
		if got := r.header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
}

func TestEnvoyHeadersValidate(t *testing.T) {
	for _, tc := range []struct {
		h    server.EnvoyHeaders
		want string // "" when valid
	}{
		{server.DefaultEnvoyHeaders(), ""},
		{server.EnvoyHeaders{Limit: "X-RL-Limit", Remaining: "x_left", Reset: "Reset!"}, ""},
		{server.EnvoyHeaders{Limit: "", Remaining: "R", Reset: "S"}, `the limit header: ""`},
		{server.EnvoyHeaders{Limit: "L", Remaining: "Rate Limit", Reset: "S"}, `the remaining header: "Rate Limit"`},
		{server.EnvoyHeaders{Limit: "L", Remaining: "R", Reset: "Reset:"}, `the reset header: "Reset:"`},
	} {
		err := tc.h.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.h, err)
			}
			continue
		}
		if !errors.Is(err, server.ErrHeaderName) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want ErrHeaderName saying %q", tc.h, err, tc.want)
		}
	}
}
