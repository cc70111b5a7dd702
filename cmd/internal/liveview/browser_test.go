package liveview_test

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/liveview"
	"github.com/floodgate-io/floodgate/httplimit"
	"github.com/floodgate-io/floodgate/internal/problem"
	"github.com/floodgate-io/floodgate/internal/testkit/timing"
	"github.com/floodgate-io/floodgate/observe/insight"
)

// The environment variables of the browser test.
const (
	// requireBrowserEnv=1 (set by .ci/run) fails the test when no browser
	// is found, instead of skipping it.
	requireBrowserEnv = "FLOODGATE_REQUIRE_BROWSER"
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
	browser := findBrowser(t)
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
	ctx := openBrowser(t, browser)
	console := watchConsole(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/admin/ui/?refresh=0.25#token="+adminToken)); err != nil {
		t.Fatal(err)
	}

	first := waitFor(t, ctx, "the api policy's decisions per second, its top consumers and alice near her limit",
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
	waitFor(t, ctx, "the totals and the top count to change",
		fmt.Sprintf(`row("api")[4] !== %q && v.topAdmitted[0][1] !== %q`, allowed, units))

	// Keys are text, never markup.
	waitFor(t, ctx, "the markup key among the top consumers", fmt.Sprintf(`v.keys.includes(%q)`, "per-key:"+xssKey))
	if v := read(t, ctx); v.Images != 0 || v.Title != "Floodgate live view" {
		t.Errorf("a key ran as markup: %d images in the page, title %q", v.Images, v.Title)
	}

	// A failing /admin/status leaves the rest of the page working.
	statusFails.Store(true)
	before := read(t, ctx).Policies["api"][4]
	waitFor(t, ctx, "the server panel to say /admin/status fails, and the totals to move on",
		fmt.Sprintf(`v.statusError.includes("503") && row("api")[4] !== %q && !v.banner`, before))
	statusFails.Store(false)
	waitFor(t, ctx, "the server panel to recover", `!v.statusError && v.store === "memory"`)

	// A wrong token is said in the banner, and the right one clears it.
	useToken(t, ctx, "wrong-token")
	bad := waitFor(t, ctx, "the 401 banner", `v.bannerStatus === "401"`)
	if !strings.Contains(bad.Banner, "token is missing or wrong") {
		t.Errorf("banner %q does not say the token is wrong", bad.Banner)
	}
	useToken(t, ctx, adminToken)
	waitFor(t, ctx, "the banner to clear with the right token", `!v.banner`)

	if os.Getenv(screenshotEnv) == "1" {
		screenshot(t, ctx)
	}

	// A bad ?refresh= is said, not silently replaced; the token is still
	// in the tab's sessionStorage after the reload.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/admin/ui/?refresh=abc")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the banner to say ?refresh=abc is wrong, with the data still shown",
		`v.banner.includes("?refresh=abc is not a number of seconds") && v.bannerStatus === "" && row("api").length`)

	// A server that goes away is said, and the last data stays.
	stopServer()
	gone := waitFor(t, ctx, "the unreachable banner", `v.bannerStatus === "0" && row("api").length`)
	if !strings.Contains(gone.Banner, "server is unreachable") {
		t.Errorf("banner %q does not say the server is unreachable", gone.Banner)
	}
	for _, m := range console.stop() {
		if m.IsException() || m.Source == "security" || (m.Type == chromedp.ConsoleError && m.Source != "network") {
			t.Errorf("console: %s (%s:%d)", m, m.URL, m.Line)
		}
	}
}

// findBrowser returns the path of a Chromium or Chrome, or skips the test
// (fails it under FLOODGATE_REQUIRE_BROWSER=1) when there is none.
func findBrowser(t *testing.T) string {
	t.Helper()
	names := []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}
	for _, name := range names {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	msg := fmt.Sprintf("no browser found (looked for %s in PATH): install Debian's chromium to run the live view's browser test", strings.Join(names, ", "))
	if os.Getenv(requireBrowserEnv) == "1" {
		t.Fatalf("%s (%s=1 requires it)", msg, requireBrowserEnv)
	}
	t.Skipf("%s; set %s=1 to fail instead of skipping", msg, requireBrowserEnv)
	return ""
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

// openBrowser starts a headless browser with a profile of its own, which
// goes when the test ends, after the browser has.
func openBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.UserDataDir(t.TempDir()), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1024), chromedp.Flag("lang", "en-US"))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser on this context
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// view is what the page shows, as text.
type view struct {
	Policies     map[string][]string `json:"policies"` // by policy: its row's cells
	TopAdmitted  [][]string          `json:"topAdmitted"`
	TopDenied    [][]string          `json:"topDenied"`
	Near         [][]string          `json:"near"`
	Events       []string            `json:"events"`
	Banner       string              `json:"banner"`
	BannerStatus string              `json:"bannerStatus"`
	StatusError  string              `json:"statusError"`
	Store        string              `json:"store"`
	Images       int                 `json:"images"`
	Title        string              `json:"title"`
	Location     string              `json:"location"`
}

// readView reads the page into a view (v), with helpers for predicates:
// row(policy) is a policy's cells and num(text) a figure as shown.
const readView = `
const cells = (tr) => [...tr.cells].map((td) => td.textContent);
const rows = (sel) => [...document.querySelectorAll(sel + " tbody tr:not(.empty)")].map(cells);
const shown = (id) => { const e = document.getElementById(id); return e.hidden ? "" : e.textContent; };
const v = {
  policies: Object.fromEntries([...document.querySelectorAll("#policies tbody tr[data-policy]")].map((tr) => [tr.dataset.policy, cells(tr)])),
  topAdmitted: rows("#top-admitted"), topDenied: rows("#top-denied"), near: rows("#near"),
  events: [...document.querySelectorAll("#events li")].map((li) => li.textContent),
  banner: shown("banner"), bannerStatus: document.getElementById("banner").dataset.status || "",
  statusError: shown("status-error"), store: document.getElementById("status-store").textContent,
  images: document.images.length, title: document.title, location: location.href,
};
v.keys = [...v.topAdmitted, ...v.topDenied, ...v.near].map((r) => r[0]).concat(v.near.map((r) => r[2]));
const row = (policy) => v.policies[policy] || [];
const num = (text) => Number(String(text).replace(/,/g, ""));
`

func read(t *testing.T, ctx context.Context) view {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[view](`(() => {`+readView+`return v; })()`))
	if err != nil {
		t.Fatalf("reading the page: %v", err)
	}
	return v
}

// waitFor waits until the page shows what pred (JavaScript over v, row
// and num) says, checking on every change of the page, and returns it.
func waitFor(t *testing.T, ctx context.Context, what, pred string) view {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Poll[view](`(() => {`+readView+`return (`+pred+`) ? v : null; })()`,
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(timing.Patience)))
	if err != nil {
		t.Fatalf("waiting for %s: %v; the page shows %+v", what, err, read(t, ctx))
	}
	return v
}

// useToken enters token in the page's form, as an operator would.
func useToken(t *testing.T, ctx context.Context, token string) {
	t.Helper()
	js := fmt.Sprintf(`document.getElementById("token").value = %q; document.getElementById("token-form").requestSubmit();`, token)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](js)); err != nil {
		t.Fatalf("submitting the token form: %v", err)
	}
}

// screenshot writes the README's picture of the page, once its
// sparklines hold 20 s of the load's waves.
func screenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	waitFor(t, ctx, "20 s of sparkline", `document.querySelector("#policies polyline").getAttribute("points").split(" ").length >= 80`)
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

// consoleLog collects what the page writes to its console.
type consoleLog struct {
	mu     sync.Mutex
	msgs   []chromedp.ConsoleMessage
	cancel context.CancelFunc
	done   chan struct{}
}

func watchConsole(ctx context.Context) *consoleLog {
	ctx, cancel := context.WithCancel(ctx)
	c := &consoleLog{cancel: cancel, done: make(chan struct{})}
	msgs := chromedp.Console(ctx)
	go func() {
		defer close(c.done)
		for m, err := range msgs {
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					c.add(chromedp.ConsoleMessage{Type: chromedp.ConsoleException, Text: "reading the console: " + err.Error()})
				}
				return
			}
			c.add(m)
		}
	}()
	return c
}

func (c *consoleLog) add(m chromedp.ConsoleMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, m)
}

func (c *consoleLog) stop() []chromedp.ConsoleMessage {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.msgs
}
