package liveview_test

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/liveview"
	"github.com/floodgate-io/floodgate/cmd/internal/liveview/livetest"
	"github.com/floodgate-io/floodgate/httplimit"
	"github.com/floodgate-io/floodgate/internal/problem"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
	"github.com/floodgate-io/floodgate/observe/insight"
)

// The environment variables of the browser test.
const (
	// screenshotEnv=1 writes the README's screenshot, docs/img/liveview.png.
	screenshotEnv = "FLOODGATE_LIVEVIEW_SCREENSHOT"
)

const (
	adminToken = "test-admin-token"
	// xssKey is a key that runs script if a page puts it in as markup.
	xssKey = `<img src=x onerror="document.title='pwned'">`
)

// TestLiveViewInABrowser loads the page in headless Chromium against a
// server under load and reads it as an operator would: the numbers appear
// and change, a wrong token and a failing /admin/status are said, and a
// key made of markup shows as text.
func TestLiveViewInABrowser(t *testing.T) {
	browser := livetest.FindBrowser(t)
	in, err := insight.New(insight.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Record(insight.Event{Kind: "config_reload", Message: "configuration loaded from floodgate.yaml"}); err != nil {
		t.Fatal(err)
	}
	var statusFails atomic.Bool
	base, stopServer := startServer(t, in, &statusFails)
	startLoad(t, base)
	ctx := livetest.OpenBrowser(t, browser)
	console := livetest.WatchConsole(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/admin/ui/?refresh=0.25#token="+adminToken)); err != nil {
		t.Fatal(err)
	}

	first := livetest.WaitFor(t, ctx, "the api policy's decisions per second, its top consumers and alice near her limit",
		`num(row("api")[1]) > 0 && v.topAdmitted.length && v.topDenied.length && v.near.some((r) => r[2] === "per-key:alice") && v.events.length`)
	if got := first.Location; strings.Contains(got, adminToken) {
		t.Errorf("the token stays in the address bar: %s", got)
	}
	for _, tc := range []struct{ what, got, want string }{
		{"top admitted key", first.TopAdmitted[0][0], "per-key:alice"},
		{"top denied key", first.TopDenied[0][0], "per-key:alice"},
		{"store", first.Store, "memory"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: the page shows %q, want %q (page: %+v)", tc.what, tc.got, tc.want, first)
		}
	}
	if !strings.Contains(first.Events[0], "configuration loaded from floodgate.yaml") {
		t.Errorf("events: %q, want the configuration reload", first.Events)
	}

	// The totals and counts move while the load runs.
	allowed, units := first.Policies["api"][4], first.TopAdmitted[0][1]
	livetest.WaitFor(t, ctx, "the totals and the top count to change",
		fmt.Sprintf(`row("api")[4] !== %q && v.topAdmitted[0][1] !== %q`, allowed, units))

	// Keys are text, never markup.
	livetest.WaitFor(t, ctx, "the markup key among the top consumers", fmt.Sprintf(`v.keys.includes(%q)`, "per-key:"+xssKey))
	if v := livetest.Read(t, ctx); v.Images != 0 || v.Title != "Floodgate live view" {
		t.Errorf("a key ran as markup: %d images in the page, title %q", v.Images, v.Title)
	}

	// A failing /admin/status leaves the rest of the page working.
	statusFails.Store(true)
	before := livetest.Read(t, ctx).Policies["api"][4]
	livetest.WaitFor(t, ctx, "the server panel to say /admin/status fails, and the totals to move on",
		fmt.Sprintf(`v.statusError.includes("503") && row("api")[4] !== %q && !v.banner`, before))
	statusFails.Store(false)
	livetest.WaitFor(t, ctx, "the server panel to recover", `!v.statusError && v.store === "memory"`)

	// A wrong token is said in the banner, and the right one clears it.
	livetest.UseToken(t, ctx, "wrong-token")
	bad := livetest.WaitFor(t, ctx, "the 401 banner", `v.bannerStatus === "401"`)
	if !strings.Contains(bad.Banner, "token is missing or wrong") {
		t.Errorf("banner %q does not say the token is wrong", bad.Banner)
	}
	livetest.UseToken(t, ctx, adminToken)
	livetest.WaitFor(t, ctx, "the banner to clear with the right token", `!v.banner`)

	if os.Getenv(screenshotEnv) == "1" {
		screenshot(t, ctx)
	}

	// A bad ?refresh= is said, not silently replaced; the token is still
	// in the tab's sessionStorage after the reload.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/admin/ui/?refresh=abc")); err != nil {
		t.Fatal(err)
	}
	livetest.WaitFor(t, ctx, "the banner to say ?refresh=abc is wrong, with the data still shown",
		`v.banner.includes("?refresh=abc is not a number of seconds") && v.bannerStatus === "" && row("api").length`)

	// A server that goes away is said, and the last data stays.
	stopServer()
	gone := livetest.WaitFor(t, ctx, "the unreachable banner", `v.bannerStatus === "0" && row("api").length`)
	if !strings.Contains(gone.Banner, "server is unreachable") {
		t.Errorf("banner %q does not say the server is unreachable", gone.Banner)
	}
	for _, m := range livetest.Problems(console.Stop()) {
		t.Errorf("console: %s (%s:%d)", m, m.URL, m.Line)
	}
}

// startServer serves, on 127.0.0.1, two limited endpoints reporting to in
// (/api, policy "api", and /login, policy "login") and the admin surface
// as floodgate serve mounts it: the page to anyone, the JSON behind the
// bearer token. /admin/status answers 503 while fail is set. stop closes
// the server (it is closed when the test ends anyway).
func startServer(t *testing.T, in *insight.Insight, fail *atomic.Bool) (base string, stop func()) {
	t.Helper()
	mem := floodgate.NewMemory()
	limited := func(name string, rule httplimit.Rule) http.Handler {
		mw, err := httplimit.New(mem, httplimit.Options{Name: name, Rules: []httplimit.Rule{rule}, Observer: in})
		if err != nil {
			t.Fatal(err)
		}
		return mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	}
	started := time.Now().UTC()
	status := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if fail.Load() {
			problem.Write(w, problem.Generic(http.StatusServiceUnavailable, "status unavailable in this test"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"surface": "serve", "version": "v0.0.0-test", "started_at": started,
			"store":    map[string]string{"name": "memory", "breaker": ""},
			"policies": []map[string]any{{"domain": "api", "limits": 1}, {"domain": "login", "limits": 1}},
			"config":   map[string]any{"path": "floodgate.yaml", "loaded_at": started},
		})
	})
	mux := http.NewServeMux()
	mux.Handle("/api", limited("api", httplimit.Rule{Name: "per-key", Limit: floodgate.PerSecond(50), Key: httplimit.ByHeader("X-Key")}))
	mux.Handle("/login", limited("login", httplimit.Rule{Name: "per-user", Limit: floodgate.PerSecond(5), Key: httplimit.ByHeader("X-User")}))
	mux.Handle(liveview.Prefix, liveview.Handler())
	mux.Handle("/admin/", bearer(in.Handler()))
	mux.Handle("GET /admin/status", bearer(status))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	stop = func() { srv.Close() }
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

// bearer lets through the requests that carry the admin token.
func bearer(next http.Handler) http.Handler {
	want := []byte("Bearer " + adminToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			problem.Write(w, problem.Generic(http.StatusUnauthorized, "a valid admin bearer token is required"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// startLoad sends bounded traffic until the test ends: rounds of requests
// 20 times a second. alice sends the most (a wave of 60 to 180 a second
// against 50 a second: she is denied and near her limit), bob and carol
// stay below it, the markup key sends a little, and root is over the login
// limit.
func startLoad(t *testing.T, base string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	client := &http.Client{Timeout: timing.Patience}
	send := func(path, header, value string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return
		}
		req.Header.Set(header, value)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for round := 0; ; round++ {
			for range 3 + (round/20)%7 {
				send("/api", "X-Key", "alice")
			}
			send("/api", "X-Key", "bob")
			send("/api", "X-Key", "bob")
			send("/api", "X-Key", "carol")
			send("/api", "X-Key", xssKey)
			send("/login", "X-User", "root")
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
}

// screenshot writes the README's picture of the page, once its
// sparklines hold 20 s of the load's waves.
func screenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	livetest.WaitFor(t, ctx, "20 s of sparkline", `document.querySelector("#policies polyline").getAttribute("points").split(" ").length >= 80`)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join("..", "..", "..", "docs", "img", "liveview.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}
