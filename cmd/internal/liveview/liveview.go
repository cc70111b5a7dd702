// Package liveview is the live view of floodgate serve and floodgate
// proxy: a small page on the admin listener, at /admin/ui/, that shows per
// policy the decisions and denials per second, the top consumers, the keys
// near their limit, the recent events, the loaded policies and the store's
// and breaker's state, refreshed every second without reloading.
//
// The page is three static files (HTML, CSS and plain JavaScript, embedded
// in the binary; no framework, no build step, nothing fetched from another
// origin). Its script reads the admin JSON endpoints of the same listener:
// GET /admin/stats, /admin/top, /admin/near-limit and /admin/events (package
// observe/insight) and GET /admin/status (the server's own). It is not a
// dashboard for history: it keeps the last minute of rates in the browser
// only, for its sparklines; Prometheus and Grafana keep the rest.
//
// # Who may see what
//
// The static files hold no data, so Handler serves them to anyone who
// reaches the admin listener, without a token: a browser cannot send a
// bearer token when it navigates. The data stays behind the admin token:
// the page sends "Authorization: Bearer <token>" on every fetch. It takes
// the token from the URL's fragment (/admin/ui/#token=...; a fragment is
// never sent to the server, and the page removes it from the address bar)
// or from its token form, and keeps it in sessionStorage, so it is
// forgotten when the tab closes.
//
// The page refreshes every second; ?refresh=SECONDS (0.25 to 60) changes
// that, as /admin/ui/?refresh=5#token=....
//
// Every value from the server, keys above all (a client chooses its key),
// is put in the page as text (textContent), never as markup, and the
// Content-Security-Policy allows scripts from the listener's own files
// only, so a key cannot run as script even if that rule were broken.
package liveview

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/floodgate-io/floodgate/internal/problem"
)

// Prefix is the path the page is served under; Handler expects the full
// path (mount it at Prefix, without stripping it).
const Prefix = "/admin/ui/"

// ContentSecurityPolicy is sent with every answer: the page loads its
// script, style and fetches from its own origin only, runs no inline
// script or style, and cannot be framed.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed static
var static embed.FS

// asset is one embedded file, ready to serve.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the page: GET or HEAD /admin/ui/ (the page),
// /admin/ui/liveview.css and /admin/ui/liveview.js, each with its
// Content-Type, Cache-Control: no-cache (a browser revalidates with the
// ETag, so an upgraded server's page is never stale), the
// ContentSecurityPolicy and X-Content-Type-Options: nosniff. /admin/ui
// redirects to /admin/ui/, keeping the query. Any other path below the
// prefix is answered 404 and any other method 405, with a problem+json
// body naming it. It does no authentication (see the package doc).
func Handler() http.Handler {
	// The path below Prefix ("" for the index) of each file.
	files := map[string]struct{ name, contentType string }{
		"":             {"static/index.html", "text/html; charset=utf-8"},
		"liveview.css": {"static/liveview.css", "text/css; charset=utf-8"},
		"liveview.js":  {"static/liveview.js", "text/javascript; charset=utf-8"},
	}
	assets := make(map[string]asset, len(files))
	for path, f := range files {
		body, err := static.ReadFile(f.name)
		if err != nil {
			panic(fmt.Sprintf("liveview: %s is not embedded: %v", f.name, err)) // a build without the files
		}
		sum := sha256.Sum256(body)
		assets[path] = asset{body: body, contentType: f.contentType, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serve(w, r, assets) })
}

func serve(w http.ResponseWriter, r *http.Request, assets map[string]asset) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		problem.Write(w, problem.Generic(http.StatusMethodNotAllowed,
			fmt.Sprintf("method %s: the live view answers GET and HEAD only", r.Method)))
		return
	}
	if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
		target := Prefix
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, target, http.StatusMovedPermanently)
		return
	}
	a, ok := assets[strings.TrimPrefix(r.URL.Path, Prefix)]
	if !ok || !strings.HasPrefix(r.URL.Path, Prefix) {
		problem.Write(w, problem.Generic(http.StatusNotFound,
			fmt.Sprintf("no file %q in the live view (it serves %s, %sliveview.css and %sliveview.js)", r.URL.Path, Prefix, Prefix, Prefix)))
		return
	}
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
