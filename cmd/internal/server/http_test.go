package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/floodgate-io/floodgate/cmd/internal/server"
	"github.com/floodgate-io/floodgate/internal/headers"
)

func lookup(cost int, kv ...string) string {
	var entries []string
	for i := 0; i+1 < len(kv); i += 2 {
		entries = append(entries, fmt.Sprintf(`{"key":%q,"value":%q}`, kv[i], kv[i+1]))
	}
	c := ""
	if cost != 0 {
		c = fmt.Sprintf(`,"cost":%d`, cost)
	}
	return fmt.Sprintf(`{"domain":"api","descriptors":[{"entries":[%s]}]%s}`, strings.Join(entries, ","), c)
}

// httpStep is one /v1/allow call and its answer.
type httpStep struct {
	advance    time.Duration
	status     int
	remaining  int64
	retryMS    int64
	resetMS    int64
	retryAfter string // the Retry-After header, "" for none
	limit      string // the RateLimit field
}

func TestAllowSequences(t *testing.T) {
	const bucket = `{"key":"user:42","limit":{"algorithm":"token_bucket","rate":10,"period":"1s","burst":10}%s}`
	for _, tc := range []struct {
		name   string
		body   string
		policy string // the RateLimit-Policy field
		steps  []httpStep
	}{
		{
			name:   "policy lookup, a minute window",
			body:   lookup(0, "user", "ann"),
			policy: `"api.user";q=3;w=60`,
			steps: []httpStep{
				{0, 200, 2, 0, 60000, "", `"api.user";r=2;t=60`},
				{0, 200, 1, 0, 60000, "", `"api.user";r=1;t=60`},
				{20 * time.Second, 200, 0, 0, 40000, "", `"api.user";r=0;t=40`},
				{0, 429, 0, 40000, 40000, "40", `"api.user";r=0;t=40`},
				{39*time.Second + 500*time.Millisecond, 429, 0, 500, 500, "1", `"api.user";r=0;t=1`},
				{500 * time.Millisecond, 200, 2, 0, 60000, "", `"api.user";r=2;t=60`},
			},
		},
		{
			name:   "policy lookup with a cost",
			body:   lookup(2, "user", "bob"),
			policy: `"api.user";q=3;w=60`,
			steps: []httpStep{
				{0, 200, 1, 0, 60000, "", `"api.user";r=1;t=60`},
				{0, 429, 1, 60000, 60000, "60", `"api.user";r=1;t=60`},
			},
		},
		{
			name:   "explicit token bucket",
			body:   fmt.Sprintf(bucket, ""),
			policy: `"user:42";q=10;w=1`,
			steps: append(func() []httpStep {
				var s []httpStep
				for i := range 10 {
					s = append(s, httpStep{0, 200, int64(9 - i), 0, int64(100 * (i + 1)), "", fmt.Sprintf(`"user:42";r=%d;t=%d`, 9-i, 1)})
				}
				return s
			}(),
				httpStep{0, 429, 0, 100, 1000, "1", `"user:42";r=0;t=1`},
				httpStep{100 * time.Millisecond, 200, 0, 0, 1000, "", `"user:42";r=0;t=1`},
			),
		},
		{
			name:   "explicit cost 0 reads",
			body:   fmt.Sprintf(bucket, `,"cost":0`),
			policy: `"user:42";q=10;w=1`,
			steps: []httpStep{
				{0, 200, 10, 0, 0, "", `"user:42";r=10;t=0`},
				{0, 200, 10, 0, 0, "", `"user:42";r=10;t=0`},
			},
		},
		{
			name:   "explicit cost above the burst never passes",
			body:   fmt.Sprintf(bucket, `,"cost":11`),
			policy: `"user:42";q=10;w=1`,
			steps: []httpStep{
				{0, 429, 10, -1, 0, "", `"user:42";r=10;t=0`},
			},
		},
		{
			name:   "requests_per_unit 0 never passes",
			body:   lookup(0, "path", "/blocked"),
			policy: `"api.path_/blocked";q=0;w=1`,
			steps: []httpStep{
				{0, 429, 0, -1, 1000, "", `"api.path_/blocked";r=0;t=1`},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, setup{})
			for i, s := range tc.steps {
				h.clock.Advance(s.advance)
				r := h.post("/v1/allow", tc.body)
				m := r.json(t)
				if r.status != s.status || m["allowed"] != (s.status == 200) {
					t.Fatalf("step %d: %d %s", i, r.status, r.body)
				}
				if num(t, m, "remaining") != s.remaining || num(t, m, "retry_after_ms") != s.retryMS || num(t, m, "reset_after_ms") != s.resetMS {
					t.Fatalf("step %d: %s, want remaining %d retry %d reset %d", i, r.body, s.remaining, s.retryMS, s.resetMS)
				}
				if got := r.header.Get("Retry-After"); got != s.retryAfter {
					t.Fatalf("step %d: Retry-After %q, want %q", i, got, s.retryAfter)
				}
				if got := r.header.Get("RateLimit"); got != s.limit {
					t.Fatalf("step %d: RateLimit %q, want %q", i, got, s.limit)
				}
				if got := r.header.Get("RateLimit-Policy"); got != tc.policy {
					t.Fatalf("step %d: RateLimit-Policy %q, want %q", i, got, tc.policy)
				}
				for _, f := range []string{"RateLimit", "RateLimit-Policy"} {
					if _, err := headers.ParseList(r.header.Get(f)); err != nil {
						t.Fatalf("step %d: %s: %v", i, f, err)
					}
				}
				if r.header.Get("Content-Type") != "application/json" {
					t.Fatalf("content type %q", r.header.Get("Content-Type"))
				}
			}
		})
	}
}

func TestAllowDescriptorsInTheAnswer(t *testing.T) {
	h := newHarness(t, setup{})
	body := `{"domain":"api","descriptors":[{"entries":[{"key":"tenant","value":"acme"}]},{"entries":[{"key":"beta","value":"b"}]},{"entries":[{"key":"path","value":"/health"}]}]}`
	h.post("/v1/allow", body)
	r := h.post("/v1/allow", body)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	want := `{"allowed":true,"limit":4,"remaining":2,"retry_after_ms":0,"reset_after_ms":60000,"delay_ms":0,"descriptors":[` +
		`{"code":"OK","limits":[{"name":"burst","cost":1,"limit":4,"remaining":2,"retry_after_ms":0,"reset_after_ms":1000},` +
		`{"name":"sustained","cost":1,"limit":5,"remaining":3,"retry_after_ms":0,"reset_after_ms":60000}]},` +
		`{"code":"OK","limits":[{"name":"api.beta","cost":1,"limit":1,"remaining":0,"retry_after_ms":60000,"reset_after_ms":60000,"shadow":true}],"shadow_denied":true},` +
		`{"code":"OK","limits":[]}]}` + "\n"
	if string(r.body) != want {
		t.Fatalf("got  %s\nwant %s", r.body, want)
	}
	// Atomic: a denied descriptor consumes nothing anywhere.
	r = h.post("/v1/allow", `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"ann"}]},{"entries":[{"key":"path","value":"/blocked"}]}]}`)
	if r.status != 429 || !strings.Contains(string(r.body), `"code":"OVER_LIMIT"`) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if m := h.post("/v1/allow", lookup(0, "user", "ann")).json(t); num(t, m, "remaining") != 2 {
		t.Fatalf("ann was charged by a denied request: %v", m)
	}
}

func TestAllowUnlimitedHasNoLimitFields(t *testing.T) {
	h := newHarness(t, setup{})
	for _, body := range []string{lookup(0, "path", "/health"), lookup(0, "unknown", "x"), strings.Replace(lookup(0, "user", "x"), `"api"`, `"other"`, 1)} {
		r := h.post("/v1/allow", body)
		m := r.json(t)
		if r.status != 200 || m["limit"] != nil || m["remaining"] != nil || r.header.Get("RateLimit") != "" {
			t.Fatalf("%s: %d %s %v", body, r.status, r.body, r.header)
		}
	}
}

func TestAllowLeakyBucketDelay(t *testing.T) {
	h := newHarness(t, setup{})
	body := `{"key":"shape","limit":{"algorithm":"leaky_bucket","rate":2,"period":"1s","burst":3}}`
	for i, want := range []int64{0, 500, 1000} {
		r := h.post("/v1/allow", body)
		if m := r.json(t); r.status != 200 || num(t, m, "delay_ms") != want {
			t.Fatalf("request %d: %s, want delay %d", i, r.body, want)
		}
	}
	if r := h.post("/v1/allow", body); r.status != 429 || r.header.Get("Retry-After") != "1" {
		t.Fatalf("queue full: %d %s %v", r.status, r.body, r.header)
	}
}

func TestJSONEndpoint(t *testing.T) {
	h := newHarness(t, setup{})
	body := `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"ann"}]}],"hitsAddend":1}`
	for i, want := range []int{200, 200, 200, 429} {
		r := h.post("/json", body)
		if r.status != want {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
		var resp rlsv3.RateLimitResponse
		if err := protojson.Unmarshal(r.body, &resp); err != nil {
			t.Fatalf("%s: %v", r.body, err)
		}
		wantCode := OK
		if want == 429 {
			wantCode = OverLimit
		}
		st := resp.Statuses[0]
		if resp.OverallCode != wantCode || st.LimitRemaining != uint32(max(2-i, 0)) || st.DurationUntilReset.AsDuration() != time.Minute {
			t.Fatalf("request %d: %v", i, &resp)
		}
		if !strings.Contains(string(r.body), `"overallCode"`) {
			t.Fatalf("not Envoy's protojson names: %s", r.body)
		}
		if r.header.Get("RateLimit") == "" || len(resp.ResponseHeadersToAdd) < 2 {
			t.Fatalf("headers missing: %v %v", r.header, resp.ResponseHeadersToAdd)
		}
	}
	// snake_case field names are accepted too, as protojson does.
	zed := `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"zed"}]}],"hits_addend":3}`
	if r := h.post("/json", zed); r.status != 200 {
		t.Fatalf("hits_addend 3 of 3: %d %s", r.status, r.body)
	}
	if r := h.post("/json", zed); r.status != 429 {
		t.Fatalf("zed is out: %d %s", r.status, r.body)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"domain":"api"`, "malformed RateLimitRequest"},
		{`{"domain":"api","bogus":1}`, "bogus"},
		{`{"descriptors":[{"entries":[{"key":"user","value":"x"}]}]}`, "domain is empty"},
		{`{"domain":"api","descriptors":[]}`, "descriptors is empty"},
		{`{"domain":"api","descriptors":[{"entries":[{"key":"","value":"x"}]}]}`, "key is empty"},
		{``, "malformed RateLimitRequest"},
	} {
		r := h.post("/json", tc.body)
		if r.status != 400 || !strings.Contains(r.json(t)["error"].(string), tc.want) {
			t.Errorf("%s: %d %s, want 400 naming %q", tc.body, r.status, r.body, tc.want)
		}
	}
}

func TestBadInput(t *testing.T) {
	h := newHarness(t, setup{})
	many := `{"domain":"api","descriptors":[` + strings.Repeat(`{"entries":[{"key":"user","value":"x"}]},`, 64) + `{"entries":[{"key":"user","value":"x"}]}]}`
	deep := `{"domain":"api","descriptors":[{"entries":[` + strings.Repeat(`{"key":"k","value":"v"},`, 32) + `{"key":"k","value":"v"}]}]}`
	limit := func(l string) string { return `{"key":"k","limit":` + l + `}` }
	for _, tc := range []struct{ name, body, want string }{
		{"empty body", ``, "empty request body"},
		{"malformed JSON", `{"key":`, "malformed JSON"},
		{"not an object", `[1,2]`, "must be a JSON object"},
		{"trailing data", `{"key":"k","limit":{"algorithm":"token_bucket","rate":1,"period":"1s"}} {}`, "unexpected data after the JSON object"},
		{"unknown field", `{"key":"k","limt":{}}`, `unknown field "limt"`},
		{"unknown nested field", `{"domain":"api","descriptors":[{"entries":[{"key":"a","valu":"b"}]}]}`, `unknown field "valu"`},
		{"wrong type", `{"key":"k","cost":"1"}`, `field "cost"`},
		{"both forms", `{"key":"k","domain":"api"}`, "not both"},
		{"neither form", `{"cost":1}`, "give either key and limit"},
		{"empty domain", `{"domain":"","descriptors":[{"entries":[{"key":"user","value":"x"}]}]}`, "domain is empty"},
		{"no descriptors", `{"domain":"api"}`, "descriptors is empty"},
		{"too many descriptors", many, "65 descriptors, at most 64"},
		{"too deep", deep, "33 entries, at most 32 (too deep)"},
		{"no entries", `{"domain":"api","descriptors":[{"entries":[]}]}`, "descriptors[0] has no entries"},
		{"empty entry key", `{"domain":"api","descriptors":[{"entries":[{"key":"","value":"x"}]}]}`, "descriptors[0].entries[0]: key is empty"},
		{"negative cost", `{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"x"}]}],"cost":-1}`, "cost -1 outside"},
		{"cost too large", `{"key":"k","limit":{"algorithm":"token_bucket","rate":1,"period":"1s"},"cost":5000000000}`, "cost 5000000000 outside"},
		{"empty key", limit(`{"algorithm":"token_bucket","rate":1,"period":"1s"}`)[:0] + `{"key":"","limit":{"algorithm":"token_bucket","rate":1,"period":"1s"}}`, "key is empty"},
		{"key too long", `{"key":"` + strings.Repeat("k", server.MaxExplicitKeyBytes+1) + `","limit":{"algorithm":"token_bucket","rate":1,"period":"1s"}}`, "(4088 bytes) is longer than 4087 bytes"},
		{"no limit", `{"key":"k"}`, "limit is required"},
		{"no algorithm", limit(`{"rate":1,"period":"1s"}`), "limit.algorithm is required"},
		{"unknown algorithm", limit(`{"algorithm":"magic","rate":1,"period":"1s"}`), `unknown algorithm "magic"`},
		{"no period", limit(`{"algorithm":"token_bucket","rate":1}`), "limit.period is required"},
		{"bad period", limit(`{"algorithm":"token_bucket","rate":1,"period":"soon"}`), `limit.period: "soon"`},
		{"negative period", limit(`{"algorithm":"token_bucket","rate":1,"period":"-1s"}`), `limit.period: "-1s"`},
		{"zero rate", limit(`{"algorithm":"token_bucket","rate":0,"period":"1s"}`), "limit: "},
		{"negative burst", limit(`{"algorithm":"token_bucket","rate":1,"period":"1s","burst":-1}`), "limit: "},
		{"sub-microsecond period", limit(`{"algorithm":"fixed_window","rate":1,"period":"1500ns"}`), "limit: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.post("/v1/allow", tc.body)
			if r.status != 400 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if msg, _ := r.json(t)["error"].(string); !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q does not name %q", msg, tc.want)
			}
		})
	}
}

func TestOversizedBody(t *testing.T) {
	h := newHarness(t, setup{opts: func(o *server.Options) { o.MaxBodyBytes = 1000 }})
	body := `{"key":"` + strings.Repeat("k", 2000) + `"}`
	for _, path := range []string{"/v1/allow", "/json"} {
		r := h.post(path, body)
		if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.json(t)["error"].(string), "request body too large: over 1000 bytes") {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
	}
}

func TestRoutes(t *testing.T) {
	h := newHarness(t, setup{})
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/v1/allow", 405, "POST"},
		{"PUT", "/json", 405, "POST"},
		{"POST", "/healthz", 405, "GET, HEAD"},
		{"DELETE", "/metrics", 405, "GET, HEAD"},
		{"GET", "/nowhere", 404, ""},
		{"GET", "/healthz", 200, ""},
		{"HEAD", "/readyz", 200, ""},
	} {
		r := h.do(tc.method, tc.path, "")
		if r.status != tc.status || r.header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d allow %q %s", tc.method, tc.path, r.status, r.header.Get("Allow"), r.body)
		}
		if tc.status >= 400 && tc.method != "HEAD" {
			if msg, _ := r.json(t)["error"].(string); msg == "" {
				t.Errorf("%s %s: no error named: %s", tc.method, tc.path, r.body)
			}
		}
	}
}

func TestHealthAndReadiness(t *testing.T) {
	h := newHarness(t, setup{})
	if r := h.do("GET", "/healthz", ""); r.status != 200 || string(r.body) != "ok\n" {
		t.Fatalf("healthz: %d %q", r.status, r.body)
	}
	if r := h.do("GET", "/readyz", ""); r.status != 200 {
		t.Fatalf("readyz: %d %q", r.status, r.body)
	}
	problem := "redis is down"
	h.notOK.Store(&problem)
	if r := h.do("GET", "/readyz", ""); r.status != 503 || !strings.Contains(string(r.body), "redis is down") {
		t.Fatalf("readyz failing: %d %q", r.status, r.body)
	}
	if r := h.do("GET", "/healthz", ""); r.status != 200 {
		t.Fatalf("healthz stays ok while not ready: %d", r.status)
	}
}

func TestDefaults(t *testing.T) {
	srv := server.New(server.Options{})
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/v1/allow", lookup(0, "user", "x"), 200},
		{"/v1/allow", `{"key":"k","limit":{"algorithm":"token_bucket","rate":1,"period":"1s"}}`, 501},
		{"/admin/policies", "", 404},
	} {
		method := "POST"
		if tc.body == "" {
			method = "GET"
		}
		rec := serveRecorder(srv.Handler(), method, tc.path, tc.body)
		if rec.Code != tc.status {
			t.Errorf("%s: %d %s", tc.path, rec.Code, rec.Body)
		}
	}
	rec := serveRecorder(srv.Handler(), "GET", "/metrics", "")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "go_goroutines") || !strings.Contains(rec.Body.String(), "floodgate_decisions_total") {
		t.Fatalf("default metrics: %d %s", rec.Code, rec.Body)
	}
}
