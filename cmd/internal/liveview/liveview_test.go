package liveview_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate/cmd/internal/liveview"
)

// serveUI starts the handler on a real 127.0.0.1 listener, mounted as the
// package doc asks, and returns its base URL.
func serveUI(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(liveview.Prefix, liveview.Handler())
	mux.Handle(strings.TrimSuffix(liveview.Prefix, "/"), liveview.Handler())
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// noRedirects lets a test see a redirect instead of following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func TestHandlerServesTheFiles(t *testing.T) {
	base := serveUI(t)
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/admin/ui/", "text/html; charset=utf-8", `<script src="liveview.js" defer></script>`},
		{"/admin/ui/liveview.css", "text/css; charset=utf-8", ".sparkline"},
		{"/admin/ui/liveview.js", "text/javascript; charset=utf-8", `"use strict"`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, body := get(t, noRedirects, base+tc.path, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200; body %s", resp.StatusCode, body)
			}
			wantHeaders(t, resp.Header, map[string]string{
				"Content-Type":            tc.contentType,
				"Cache-Control":           "no-cache",
				"Content-Security-Policy": liveview.ContentSecurityPolicy,
				"X-Content-Type-Options":  "nosniff",
			})
			if !strings.Contains(body, tc.contains) {
				t.Errorf("body does not contain %q", tc.contains)
			}
			etag := resp.Header.Get("ETag")
			if etag == "" {
				t.Fatal("no ETag: a browser could not revalidate its no-cache copy")
			}
			again, _ := get(t, noRedirects, base+tc.path, http.Header{"If-None-Match": {etag}})
			if again.StatusCode != http.StatusNotModified {
				t.Errorf("revalidating with ETag %s: status %d, want 304", etag, again.StatusCode)
			}
		})
	}
}

// The policy must forbid inline script and every other origin: the page
// shows keys that clients choose.
func TestContentSecurityPolicyIsStrict(t *testing.T) {
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "connect-src 'self'", "object-src 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(liveview.ContentSecurityPolicy, want) {
			t.Errorf("policy %q lacks %q", liveview.ContentSecurityPolicy, want)
		}
	}
	if strings.Contains(liveview.ContentSecurityPolicy, "unsafe") {
		t.Errorf("policy %q allows something unsafe", liveview.ContentSecurityPolicy)
	}
}

func TestHandlerRedirectsTheBarePrefix(t *testing.T) {
	base := serveUI(t)
	for _, tc := range []struct{ path, location string }{
		{"/admin/ui", "/admin/ui/"},
		{"/admin/ui?refresh=5", "/admin/ui/?refresh=5"},
	} {
		resp, _ := get(t, noRedirects, base+tc.path, nil)
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != tc.location {
			t.Errorf("GET %s: status %d Location %q, want 301 to %q", tc.path, resp.StatusCode, resp.Header.Get("Location"), tc.location)
		}
	}
}

func TestHandlerRefusesWithProblems(t *testing.T) {
	base := serveUI(t)
	for _, tc := range []struct {
		name, method, path string
		status             int
		detail             string
	}{
		{"an unknown file", http.MethodGet, "/admin/ui/secrets.txt", http.StatusNotFound, `no file "/admin/ui/secrets.txt"`},
		{"a directory below", http.MethodGet, "/admin/ui/static/", http.StatusNotFound, `no file "/admin/ui/static/"`},
		{"the embedded path", http.MethodGet, "/admin/ui/static/index.html", http.StatusNotFound, "no file"},
		{"a traversal", http.MethodGet, "/admin/ui/..%2fliveview.go", http.StatusNotFound, "no file"},
		{"a write", http.MethodPost, "/admin/ui/", http.StatusMethodNotAllowed, "method POST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, base+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := noRedirects.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var p struct {
				Status int    `json:"status"`
				Detail string `json:"detail"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			if resp.StatusCode != tc.status || p.Status != tc.status || !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("status %d, problem %+v; want %d naming %q", resp.StatusCode, p, tc.status, tc.detail)
			}
			wantHeaders(t, resp.Header, map[string]string{
				"Content-Type":           "application/problem+json",
				"X-Content-Type-Options": "nosniff",
			})
		})
	}
}

// A HEAD answers the headers of the GET, without the body.
func TestHandlerAnswersHead(t *testing.T) {
	base := serveUI(t)
	resp, err := http.Head(base + "/admin/ui/liveview.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/javascript; charset=utf-8" || resp.ContentLength <= 0 {
		t.Errorf("HEAD: status %d, Content-Type %q, length %d", resp.StatusCode, resp.Header.Get("Content-Type"), resp.ContentLength)
	}
}

func get(t *testing.T, c *http.Client, url string, h http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func wantHeaders(t *testing.T, h http.Header, want map[string]string) {
	t.Helper()
	for name, v := range want {
		if got := h.Get(name); got != v {
			t.Errorf("%s: %q, want %q", name, got, v)
		}
	}
}
