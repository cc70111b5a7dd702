package observers_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/observers"
	"github.com/floodgate-io/floodgate/observe"
	"github.com/floodgate-io/floodgate/observe/decisionlog"
	"github.com/floodgate-io/floodgate/observe/insight"
)

func newSet(t *testing.T, cfg observers.Config) *observers.Set {
	t.Helper()
	s, err := observers.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// scrape returns the lines of the set's metrics that start with prefix.
func scrape(t *testing.T, s *observers.Set, prefix string) []string {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var out []string
	for line := range strings.SplitSeq(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return out
}

func decision(policy, key string, outcome observe.Outcome, remaining int64) observe.Event {
	return observe.Event{Surface: "test", Policy: policy, Limit: "per-key", Key: key, Outcome: outcome, Cost: 1,
		Decision: floodgate.Decision{Allowed: outcome == observe.Allowed, Limit: 10, Remaining: remaining}}
}

func TestBadConfigNamesTheProblem(t *testing.T) {
	for _, cfg := range []observers.Config{
		{NearLimitRatio: 1.5},
		{Insight: insight.Options{Counters: -1}},
		{DecisionLog: filepath.Join(t.TempDir(), "missing-dir", "log")},
		{DecisionLog: "stderr", DecisionLogConfig: decisionlogWith(2)},
	} {
		if _, err := observers.New(context.Background(), cfg); !errors.Is(err, observers.ErrInvalidConfig) {
			t.Errorf("%+v: err %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

func TestDecisionsReachEveryObserver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	s := newSet(t, observers.Config{DecisionLog: path})
	ctx := context.Background()
	s.Observer.Observe(ctx, decision("api", "alice", observe.Denied, 0))
	s.Observer.Observe(ctx, decision("api", "bob", observe.Allowed, 1))
	if got := scrape(t, s, "floodgate_decisions_total"); len(got) != 2 {
		t.Errorf("metrics: %q", got)
	}
	if top, err := s.Insight.Top("api", insight.ByDenied, 1); err != nil || len(top.Entries) != 1 || top.Entries[0].Key != "alice" {
		t.Errorf("top denied: %+v, %v", top, err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"result":"denied"`) || strings.Contains(lines[0], "alice") {
		t.Fatalf("decision log %q: want one denied line without the raw key", lines)
	}
}

func TestSpikesAreCountedAndShown(t *testing.T) {
	clock := floodgate.NewManualClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	s := newSet(t, observers.Config{Insight: insight.Options{Clock: clock}})
	ctx := context.Background()
	second := func(n int) {
		for range n {
			s.Observer.Observe(ctx, decision("api", "k", observe.Allowed, 9))
		}
		clock.Advance(time.Second)
	}
	for range 90 { // past the warm-up, a steady baseline
		second(20)
	}
	second(2000)
	second(20) // closes the spiking second
	if got := scrape(t, s, `floodgate_spike_active{policy="api",signal="decisions"}`); len(got) != 1 || !strings.HasSuffix(got[0], " 1") {
		t.Fatalf("spike gauge %q, want 1", got)
	}
	if got := scrape(t, s, `floodgate_events_total{kind="spike_start"}`); len(got) != 1 || !strings.HasSuffix(got[0], " 1") {
		t.Fatalf("events %q", got)
	}
	for range 5 {
		second(20)
	}
	if got := scrape(t, s, `floodgate_spike_active{policy="api",signal="decisions"}`); len(got) != 1 || !strings.HasSuffix(got[0], " 0") {
		t.Fatalf("spike gauge %q after it ended, want 0", got)
	}
}

func TestAdminHandler(t *testing.T) {
	s := newSet(t, observers.Config{})
	s.Observer.Observe(context.Background(), decision("api", "alice", observe.Denied, 0))
	s.ConfigReload(true)
	srv := httptest.NewServer(s.AdminHandler("t0ken", observers.Server{Surface: "proxy", Store: "memory"}))
	t.Cleanup(srv.Close)
	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		path, token string
		status      int
		has         string
	}{
		{"/metrics", "", 200, `floodgate_events_total{kind="config_reload"} 1`},
		{"/healthz", "", 200, "ok"},
		{"/admin/ui/", "", 200, "<html"},
		{"/admin/top?policy=api&by=denied", "", 401, "missing admin token"},
		{"/admin/top?policy=api&by=denied", "wrong", 401, "invalid admin token"},
		{"/admin/top?policy=api&by=denied", "t0ken", 200, `"key":"alice"`},
		{"/admin/events", "t0ken", 200, `"kind":"config_reload"`},
		{"/admin/nope", "t0ken", 404, "no admin route /admin/nope"},
		{"/nope", "", 404, "/admin/ui/"},
	} {
		status, body := get(tc.path, tc.token)
		if status != tc.status || !strings.Contains(body, tc.has) {
			t.Errorf("GET %s (token %q): %d %.200s; want %d with %q", tc.path, tc.token, status, body, tc.status, tc.has)
		}
	}
	_, body := get("/admin/status", "t0ken")
	var st observers.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Surface != "proxy" || st.Store.Name != "memory" || st.Config.LoadedAt.IsZero() {
		t.Fatalf("status %s (%v)", body, err)
	}
}

func TestNoTokenNoAdminRoutes(t *testing.T) {
	s := newSet(t, observers.Config{})
	srv := httptest.NewServer(s.AdminHandler("", observers.Server{}))
	t.Cleanup(srv.Close)
	for path, want := range map[string]int{"/admin/top": 404, "/admin/ui/": 404, "/metrics": 200} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s without a token configured: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

func decisionlogWith(sample float64) decisionlog.Config {
	return decisionlog.Config{SampleAllowed: sample}
}
