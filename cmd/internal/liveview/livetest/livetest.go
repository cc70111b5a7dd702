// Package livetest drives the live view (cmd/internal/liveview) in a real
// headless browser for tests: it finds Chromium, starts it with a profile
// of its own, and reads the page as an operator sees it, as text. The live
// view's own browser test (against a server of its own) and the cli's
// (against a real floodgate serve) share it. It is for tests only.
package livetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/floodgate-io/floodgate/internal/testkit/timing"
)

// RequireBrowserEnv=1 (set by .ci/run) fails a browser test when no
// browser is found, instead of skipping it.
const RequireBrowserEnv = "FLOODGATE_REQUIRE_BROWSER"

// FindBrowser returns the path of a Chromium or Chrome, or skips the test
// (fails it under FLOODGATE_REQUIRE_BROWSER=1) when there is none.
func FindBrowser(t *testing.T) string {
	t.Helper()
	names := []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}
	for _, name := range names {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	msg := fmt.Sprintf("no browser found (looked for %s in PATH): install Debian's chromium to run the live view's browser test", strings.Join(names, ", "))
	if os.Getenv(RequireBrowserEnv) == "1" {
		t.Fatalf("%s (%s=1 requires it)", msg, RequireBrowserEnv)
	}
	t.Skipf("%s; set %s=1 to fail instead of skipping", msg, RequireBrowserEnv)
	return ""
}

// OpenBrowser starts a headless browser with a profile of its own, which
// goes when the test ends, after the browser has.
func OpenBrowser(t *testing.T, path string) context.Context {
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

// View is what the page shows, as text.
type View struct {
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

// readView reads the page into a View (v), with helpers for predicates:
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

// Read reads what the page shows now.
func Read(t *testing.T, ctx context.Context) View {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[View](`(() => {`+readView+`return v; })()`))
	if err != nil {
		t.Fatalf("reading the page: %v", err)
	}
	return v
}

// WaitFor waits until the page shows what pred (JavaScript over v, row
// and num) says, checking on every change of the page, at most
// timing.Patience, and returns it.
func WaitFor(t *testing.T, ctx context.Context, what, pred string) View {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Poll[View](`(() => {`+readView+`return (`+pred+`) ? v : null; })()`,
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(timing.Patience)))
	if err != nil {
		t.Fatalf("waiting for %s: %v; the page shows %+v", what, err, Read(t, ctx))
	}
	return v
}

// UseToken enters token in the page's form, as an operator would.
func UseToken(t *testing.T, ctx context.Context, token string) {
	t.Helper()
	js := fmt.Sprintf(`document.getElementById("token").value = %q; document.getElementById("token-form").requestSubmit();`, token)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](js)); err != nil {
		t.Fatalf("submitting the token form: %v", err)
	}
}

// Console collects what the page writes to its console.
type Console struct {
	mu     sync.Mutex
	msgs   []chromedp.ConsoleMessage
	cancel context.CancelFunc
	done   chan struct{}
}

// WatchConsole collects the console of the page of ctx until Stop.
func WatchConsole(ctx context.Context) *Console {
	ctx, cancel := context.WithCancel(ctx)
	c := &Console{cancel: cancel, done: make(chan struct{})}
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

func (c *Console) add(m chromedp.ConsoleMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, m)
}

// Stop stops collecting and returns what the console received.
func (c *Console) Stop() []chromedp.ConsoleMessage {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.msgs
}

// Problems are the console's messages that say the page went wrong:
// exceptions, security errors and errors other than failed requests.
func Problems(msgs []chromedp.ConsoleMessage) []chromedp.ConsoleMessage {
	var out []chromedp.ConsoleMessage
	for _, m := range msgs {
		if m.IsException() || m.Source == "security" || (m.Type == chromedp.ConsoleError && m.Source != "network") {
			out = append(out, m)
		}
	}
	return out
}
