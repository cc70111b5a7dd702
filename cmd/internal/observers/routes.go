package observers

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/floodgate-io/floodgate/cmd/internal/liveview"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/internal/problem"
)

// Status is the answer of GET /admin/status: what the live view shows of
// the server itself.
type Status struct {
	Surface   string         `json:"surface"`
	Version   string         `json:"version"`
	StartedAt time.Time      `json:"started_at"`
	Store     StoreStatus    `json:"store"`
	Policies  []PolicyStatus `json:"policies"`
	Config    ConfigStatus   `json:"config"`
}

// StoreStatus is where the counts live and the state of its breaker
// ("" when the store has none: memory).
type StoreStatus struct {
	Name    string `json:"name"`
	Breaker string `json:"breaker"`
}

// PolicyStatus is one loaded policy.
type PolicyStatus struct {
	Domain string `json:"domain"`
	Limits int    `json:"limits"`
}

// ConfigStatus is the policy source and when it was last loaded.
type ConfigStatus struct {
	Path     string    `json:"path"`
	LoadedAt time.Time `json:"loaded_at"`
}

// Server is what GET /admin/status asks the server.
type Server struct {
	Surface, Version string
	// ConfigPath is the policy's file or directory ("" for a built-in one).
	ConfigPath string
	// Store names the store; Breaker reads its breaker's state (nil: none).
	Store   string
	Breaker func() string
	// Policies returns the policies in force (nil: none).
	Policies func() *policy.Set
}

// statusSource answers GET /admin/status.
type statusSource struct {
	srv      Server
	started  time.Time
	loadedAt atomic.Pointer[time.Time]
}

// AdminRoutes adds the admin JSON routes to mux, which the caller puts
// behind the admin token: GET /admin/top, /admin/near-limit,
// /admin/events and /admin/stats (insight's; 404 when it is off) and GET
// /admin/status (srv's).
func (s *Set) AdminRoutes(mux *http.ServeMux, srv Server) {
	if s.Insight != nil {
		h := s.Insight.Handler()
		for _, p := range []string{"/admin/top", "/admin/near-limit", "/admin/events", "/admin/stats"} {
			mux.Handle(p, h)
		}
	} else {
		off := func(w http.ResponseWriter, r *http.Request) {
			problem.Write(w, problem.Generic(http.StatusNotFound, r.URL.Path+" is off: the server runs with --insight=false"))
		}
		for _, p := range []string{"/admin/top", "/admin/near-limit", "/admin/events", "/admin/stats"} {
			mux.HandleFunc(p, off)
		}
	}
	s.status.srv = srv
	mux.HandleFunc("GET /admin/status", s.serveStatus)
}

// UIRoutes adds the live view, /admin/ui/, to mux. Its files hold no data
// and are served without the token; the data they fetch is behind it.
func (s *Set) UIRoutes(mux *http.ServeMux) {
	h := liveview.Handler()
	mux.Handle("/admin/ui/", h)
	mux.Handle("/admin/ui", h)
}

func (s *Set) serveStatus(w http.ResponseWriter, _ *http.Request) {
	src := &s.status
	st := Status{Surface: src.srv.Surface, Version: src.srv.Version, StartedAt: src.started,
		Store: StoreStatus{Name: src.srv.Store}, Config: ConfigStatus{Path: src.srv.ConfigPath, LoadedAt: *src.loadedAt.Load()},
		Policies: []PolicyStatus{}}
	if src.srv.Breaker != nil {
		st.Store.Breaker = src.srv.Breaker()
	}
	if src.srv.Policies != nil {
		if set := src.srv.Policies(); set != nil {
			for _, d := range set.Domains() {
				p, _ := set.Policy(d)
				st.Policies = append(st.Policies, PolicyStatus{Domain: d, Limits: len(p.Rules())})
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(st)
}
