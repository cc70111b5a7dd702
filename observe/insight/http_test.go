package insight_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/insight"
)

// serve starts the handler on a real listener (127.0.0.1) over traffic
// of two keys on policy "api".
func serve(t *testing.T) (*fixture, string) {
	t.Helper()
	f := newFixture(t, insight.Options{Counters: 16})
	for _, e := range []observe.Event{
		{Policy: "api", Limit: "per-user", Key: "alice", Outcome: observe.Allowed, Cost: 3,
			Decision: floodgate.Decision{Limit: 10, Remaining: 1, ResetAfter: 30 * time.Second}},
		{Policy: "api", Limit: "per-user", Key: "mallory", Outcome: observe.Denied, Cost: 1,
			Decision: floodgate.Decision{Limit: 10, Remaining: 0, ResetAfter: time.Minute}},
	} {
		f.observe(e)
	}
	if err := f.in.Record(insight.Event{Kind: "config_reload", Message: "policies reloaded", Fields: map[string]any{"policies": 3}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.in.Handler())
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func get(t *testing.T, url string) (status int, contentType, body string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// The answers, byte for byte: the package doc's examples.
func TestHandlerAnswers(t *testing.T) {
	_, url := serve(t)
	for _, tc := range []struct{ path, want string }{
		{"/admin/top?policy=api&by=denied&n=5",
			`{"lists":[{"policy":"api","by":"denied","window_seconds":60,"total":1,"sampled":1,"sampling_period":1,"counters":16,"max_error":0,` +
				`"entries":[{"key":"mallory","count":1,"error":0,"error_above":0}]}]}`},
		{"/admin/top",
			`{"lists":[{"policy":"api","by":"admitted","window_seconds":60,"total":3,"sampled":3,"sampling_period":1,"counters":16,"max_error":0,"entries":[{"key":"alice","count":3,"error":0,"error_above":0}]},` +
				`{"policy":"api","by":"denied","window_seconds":60,"total":1,"sampled":1,"sampling_period":1,"counters":16,"max_error":0,"entries":[{"key":"mallory","count":1,"error":0,"error_above":0}]}]}`},
		{"/admin/near-limit?n=1",
			`{"ratio":0.8,"entries":[{"policy":"api","limit":"per-user","key":"mallory","used":1,"remaining":0,"max":10,` +
				`"reset_at":"2026-03-01T12:01:00Z","seen_at":"2026-03-01T12:00:00Z"}]}`},
		{"/admin/events?since=2026-03-01T12:00:00Z",
			`{"events":[{"seq":1,"time":"2026-03-01T12:00:00Z","kind":"config_reload","message":"policies reloaded","fields":{"policies":3}}]}`},
		{"/admin/events?since=2026-03-01T12:00:01Z", `{"events":[]}`},
		{"/admin/stats",
			`{"time":"2026-03-01T12:00:00Z","policies":[{"policy":"api","decisions_per_second":0,"denials_per_second":0,` +
				`"baseline":{"decisions":0,"denials":0},"spiking":[],"totals":{"allowed":1,"denied":1,"error":0,"shadow_denied":0,"shed":0},` +
				`"near_limit_decisions":1,"near_limit_keys":2}],"near_limit_keys":2,"near_limit_dropped":0,"events":1}`},
	} {
		status, ct, body := get(t, url+tc.path)
		if status != http.StatusOK || ct != "application/json" || strings.TrimSpace(body) != tc.want {
			t.Errorf("GET %s: %d %s\n%s\nwant 200 application/json\n%s", tc.path, status, ct, body, tc.want)
		}
	}
}

func TestHandlerNamesTheBadParameter(t *testing.T) {
	_, url := serve(t)
	for _, tc := range []struct {
		path   string
		status int
		names  string // the problem's detail names it
	}{
		{"/admin/top?policy=nope", 404, `"nope"`},
		{"/admin/top?by=both", 400, `"by"`},
		{"/admin/top?n=0", 400, `"n"`},
		{"/admin/top?n=17", 400, `"n"`}, // above Counters
		{"/admin/top?n=ten", 400, `"n"`},
		{"/admin/top?n=", 400, `"n"`},
		{"/admin/top?n=1&n=2", 400, `"n" given 2 times`},
		{"/admin/top?limit=5", 400, `"limit"`},
		{"/admin/top?%zz", 400, "does not parse"},
		{"/admin/near-limit?policy=nope", 404, `"nope"`},
		{"/admin/near-limit?by=denied", 400, `"by"`},
		{"/admin/events?since=yesterday", 400, `"since"`},
		{"/admin/events?n=257", 400, `"n"`},
		{"/admin/stats?n=1", 400, `"n"`},
	} {
		status, ct, body := get(t, url+tc.path)
		var p struct{ Status int }
		if status != tc.status || ct != "application/problem+json" || json.Unmarshal([]byte(body), &p) != nil ||
			p.Status != tc.status || !strings.Contains(body, strings.ReplaceAll(tc.names, `"`, `\"`)) {
			t.Errorf("GET %s: %d %s %s; want %d, a problem naming %s", tc.path, status, ct, body, tc.status, tc.names)
		}
	}
	resp, err := http.Post(url+"/admin/top", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /admin/top: %d, want 405", resp.StatusCode)
	}
}

func TestHandlerDefaultsFitSmallBounds(t *testing.T) {
	f := newFixture(t, insight.Options{Counters: 2, MaxNearLimit: 1, MaxEvents: 1})
	for _, key := range []string{"a", "b", "c"} {
		f.observe(observe.Event{Policy: "api", Key: key, Outcome: observe.Denied, Cost: 1,
			Decision: floodgate.Decision{Limit: 1, ResetAfter: time.Second}})
	}
	srv := httptest.NewServer(f.in.Handler())
	defer srv.Close()
	for _, path := range []string{"/admin/top", "/admin/near-limit", "/admin/events"} {
		if status, _, body := get(t, srv.URL+path); status != http.StatusOK {
			t.Errorf("GET %s with no n under small bounds: %d %s, want 200", path, status, body)
		}
	}
}
