package observers

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/floodgate-io/floodgate/internal/problem"
)

// RequireToken serves h to requests that carry token as their bearer
// token, compared in constant time; it answers the others with fail
// (status and message): 404 when token is "" (the admin API is off), 401
// with WWW-Authenticate when the token is missing or wrong.
func RequireToken(token string, h http.Handler, fail func(w http.ResponseWriter, status int, msg string)) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token == "" {
			fail(w, http.StatusNotFound, "the admin API is off: no admin token is configured")
			return
		}
		got, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="floodgate admin"`)
			fail(w, http.StatusUnauthorized, "missing admin token: send Authorization: Bearer <token>")
			return
		}
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="floodgate admin", error="invalid_token"`)
			fail(w, http.StatusUnauthorized, "invalid admin token")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// writeProblem is RequireToken's fail for the proxy's admin listener.
func writeProblem(w http.ResponseWriter, status int, msg string) {
	problem.Write(w, problem.Generic(status, msg))
}

// AdminHandler is the whole admin listener of a server whose only admin
// routes are these (the proxy): GET /metrics, the admin JSON routes
// behind token (AdminRoutes), the live view (with a token) and GET
// /healthz; anything else is a 404 that lists them.
func (s *Set) AdminHandler(token string, srv Server) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.Metrics.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	admin := http.NewServeMux()
	s.AdminRoutes(admin, srv)
	admin.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusNotFound, "no admin route "+r.URL.Path)
	})
	mux.Handle("/admin/", RequireToken(token, admin, writeProblem))
	if token != "" {
		s.UIRoutes(mux)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusNotFound, "no route "+r.URL.Path+" on the admin listener (/metrics, /healthz, /admin/top, /admin/near-limit, /admin/events, /admin/stats, /admin/status, /admin/ui/)")
	})
	return mux
}
