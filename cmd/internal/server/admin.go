package server

import (
	"fmt"
	"net/http"
	"net/http/pprof"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/observers"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/internal/excerpt"
)

// admin serves /admin/... behind the bearer token; without a token it
// does not exist.
func (s *Server) admin() http.Handler {
	mux := http.NewServeMux()
	route := func(path, method string, h http.HandlerFunc) { mux.Handle(path, onlyMethod(method, h)) }
	route("/admin/policies", http.MethodGet, s.handlePolicies)
	route("/admin/inspect", http.MethodPost, s.handleInspect)
	route("/admin/reset", http.MethodPost, s.handleReset)
	route("/admin/reload", http.MethodPost, s.handleReload)
	s.obs.AdminRoutes(mux, s.opts.Status)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no admin route %s", r.URL.Path))
	})
	return s.requireToken(mux)
}

// profiler serves net/http/pprof's profiles under /debug/pprof/, behind
// the admin token as /admin is: a profile shows what the process holds
// and a CPU profile costs it, so it is not for anyone who can reach it.
func (s *Server) profiler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // the index and every named profile (heap, goroutine, ...)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return s.requireToken(mux)
}

// operatorRoutes adds what only operators call to mux: /metrics, /admin
// and /debug/pprof/. They are on the HTTP listener, or on the admin
// listener alone when there is one (Listeners.Admin).
func (s *Server) operatorRoutes(mux *http.ServeMux) {
	mux.Handle("/metrics", onlyMethod(http.MethodGet, s.obs.Metrics.Handler().ServeHTTP))
	if s.opts.AdminToken != "" {
		s.obs.UIRoutes(mux) // the live view's files, which fetch /admin's data with the token
	}
	mux.Handle("/admin/", s.admin())
	mux.Handle("/admin", s.admin())
	mux.Handle("/debug/pprof/", s.profiler())
}

// movedRoutes answers the operator's routes on the HTTP listener, when
// the admin listener serves them, with a 404 that says where they went.
func (s *Server) movedRoutes(mux *http.ServeMux) {
	moved := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("%s is served on the admin listener, not on this one", r.URL.Path))
	}
	for _, path := range []string{"/metrics", "/admin/", "/admin", "/debug/pprof/"} {
		mux.HandleFunc(path, moved)
	}
}

// adminListener is the admin listener's handler: the operator's routes,
// and /healthz and /readyz for probes that cannot present the client
// certificate the HTTP listener may require.
func (s *Server) adminListener() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/healthz", onlyMethod(http.MethodGet, s.handleHealthz))
	mux.Handle("/readyz", onlyMethod(http.MethodGet, s.handleReadyz))
	s.operatorRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s on the admin listener (/admin, /metrics, /debug/pprof/, /healthz, /readyz)", r.URL.Path))
	})
	return s.recoverer(mux)
}

// requireToken serves h to requests with the admin bearer token; without
// a token configured, h is off (404).
func (s *Server) requireToken(h http.Handler) http.Handler {
	return observers.RequireToken(s.opts.AdminToken, h, writeError)
}

type policiesResponse struct {
	Domains []domainJSON `json:"domains"`
}

type domainJSON struct {
	Domain string     `json:"domain"`
	File   string     `json:"file"`
	Rules  []ruleJSON `json:"rules"`
}

type ruleJSON struct {
	Name           string     `json:"name,omitempty"`
	Path           string     `json:"path"`
	Limit          *limitJSON `json:"limit,omitempty"`
	Unlimited      bool       `json:"unlimited,omitempty"`
	Counts         string     `json:"counts,omitempty"`
	ShadowMode     bool       `json:"shadow_mode,omitempty"`
	QuotaMode      bool       `json:"quota_mode,omitempty"`
	DetailedMetric bool       `json:"detailed_metric,omitempty"`
	FailureMode    string     `json:"failure_mode,omitempty"`
	Strategy       string     `json:"strategy,omitempty"`
	Replaces       []string   `json:"replaces,omitempty"`
	File           string     `json:"file"`
	Line           int        `json:"line"`
}

func (s *Server) handlePolicies(w http.ResponseWriter, _ *http.Request) {
	set := s.engine.Policies()
	out := policiesResponse{Domains: []domainJSON{}}
	for _, name := range set.Domains() {
		p, _ := set.Policy(name)
		d := domainJSON{Domain: name, File: p.File, Rules: []ruleJSON{}}
		for _, r := range p.Rules() {
			rj := ruleJSON{
				Name: r.Name, Path: r.Path, Unlimited: r.Unlimited, Counts: string(r.Counts), ShadowMode: r.ShadowMode, QuotaMode: r.QuotaMode,
				DetailedMetric: r.DetailedMetric, FailureMode: string(r.FailureMode), Strategy: string(r.Strategy),
				Replaces: r.Replaces, File: r.File, Line: r.Line,
			}
			if !r.Unlimited {
				rj.Limit = toLimitJSON(r.Limit)
			}
			d.Rules = append(d.Rules, rj)
		}
		out.Domains = append(out.Domains, d)
	}
	writeJSON(w, http.StatusOK, out)
}

func toLimitJSON(l floodgate.Limit) *limitJSON {
	return &limitJSON{Algorithm: string(l.Algorithm), Rate: l.Rate, Period: l.Period.String(), Burst: l.Burst}
}

// keyState is one store key as POST /admin/inspect reads it.
type keyState struct {
	Key          string     `json:"key"`
	Name         string     `json:"name"`
	Limit        *limitJSON `json:"limit"`
	Capacity     int64      `json:"capacity"`
	Remaining    int64      `json:"remaining"`
	ResetAfterMS int64      `json:"reset_after_ms"`
}

type inspectResponse struct {
	Keys []keyState `json:"keys"`
}

// handleInspect reads, without consuming, the keys of an explicit limit
// ({"key","limit"}) or of the rules a policy lookup matches
// ({"domain","descriptors"}), through Options.Limiter (which serve gives
// the store the engine counts in). The body is that of /v1/allow; its cost
// is ignored.
func (s *Server) handleInspect(w http.ResponseWriter, r *http.Request) {
	req, ok := s.readAllow(w, r)
	if !ok {
		return
	}
	if s.opts.Limiter == nil {
		writeError(w, http.StatusNotImplemented, "inspect needs a limiter, and this server has none")
		return
	}
	type target struct {
		key, name string
		limit     floodgate.Limit
	}
	var targets []target
	if req.explicit {
		targets = append(targets, target{ExplicitPrefix + req.key, req.key, req.limit})
	} else {
		descs := make([]policy.Descriptor, len(req.engine.Descriptors))
		for i, d := range req.engine.Descriptors {
			descs[i] = policy.Descriptor{Entries: d.Entries}
		}
		for i, rules := range s.engine.Policies().MatchAll(req.engine.Domain, descs) {
			for _, rule := range rules {
				if rule.Unlimited || rule.DeniesAll() {
					continue
				}
				targets = append(targets, target{rule.StateKey(descs[i]), limitName(rule), rule.Limit})
			}
		}
	}
	out := inspectResponse{Keys: []keyState{}}
	for _, t := range targets {
		d, err := s.opts.Limiter.AllowN(r.Context(), t.key, t.limit, 0)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out.Keys = append(out.Keys, keyState{
			Key: t.key, Name: t.name, Limit: toLimitJSON(t.limit),
			Capacity: d.Limit, Remaining: d.Remaining, ResetAfterMS: ceilMS(d.ResetAfter),
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// resetBody names what to reset: a raw store key, the key of an explicit
// limit, or the keys of the rules a policy lookup matches.
type resetBody struct {
	Key         string           `json:"key"`
	ExplicitKey string           `json:"explicit_key"`
	Domain      *string          `json:"domain"`
	Descriptors []descriptorJSON `json:"descriptors"`
}

type resetResponse struct {
	Reset []string `json:"reset"`
}

func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var b resetBody
	if err := decodeJSON(body, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	keys, err := s.resetKeys(b)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if s.opts.Reset == nil {
		writeError(w, http.StatusNotImplemented, "reset is not available on this server")
		return
	}
	for _, k := range keys {
		if err := s.opts.Reset(r.Context(), k); err != nil {
			s.log.Error("server: admin reset failed", "key", k, "error", err)
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("resetting %s: %v", excerpt.Quote(k), err))
			return
		}
	}
	s.log.Info("server: admin reset", "keys", keys)
	writeJSON(w, http.StatusOK, resetResponse{Reset: keys})
}

func (s *Server) resetKeys(b resetBody) ([]string, error) {
	given := 0
	for _, ok := range []bool{b.Key != "", b.ExplicitKey != "", b.Domain != nil || b.Descriptors != nil} {
		if ok {
			given++
		}
	}
	if given != 1 {
		return nil, badRequest("give exactly one of key (a store key), explicit_key (the key of an explicit limit) or domain and descriptors (the keys of the rules they match)")
	}
	switch {
	case b.Key != "":
		if err := floodgate.CheckLength("key", b.Key, floodgate.MaxKeyBytes); err != nil {
			return nil, badRequest("%v", err)
		}
		return []string{b.Key}, nil
	case b.ExplicitKey != "":
		if err := checkExplicitKey("explicit_key", b.ExplicitKey); err != nil {
			return nil, err
		}
		return []string{ExplicitPrefix + b.ExplicitKey}, nil
	}
	domain := ""
	if b.Domain != nil {
		domain = *b.Domain
	}
	descs, err := toDescriptors(domain, b.Descriptors)
	if err != nil {
		return nil, err
	}
	cds := make([]policy.Descriptor, len(descs))
	for i, d := range descs {
		cds[i] = policy.Descriptor{Entries: d.Entries}
	}
	keys := []string{}
	for i, rules := range s.engine.Policies().MatchAll(domain, cds) {
		for _, rule := range rules {
			if rule.Unlimited || rule.DeniesAll() {
				continue
			}
			key := rule.StateKey(cds[i])
			if err := floodgate.CheckLength("key", key, floodgate.MaxKeyBytes); err != nil {
				return nil, badRequest("descriptors[%d]: %v", i, err)
			}
			keys = append(keys, key)
		}
	}
	return keys, nil
}

type reloadResponse struct {
	Status  string   `json:"status"`
	Domains []string `json:"domains"`
}

func (s *Server) handleReload(w http.ResponseWriter, r *http.Request) {
	if s.opts.Reload == nil {
		writeError(w, http.StatusNotImplemented, "reload is not available on this server")
		return
	}
	if err := s.opts.Reload(); err != nil {
		writeError(w, http.StatusInternalServerError, "reload failed: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, reloadResponse{Status: "reloaded", Domains: s.engine.Policies().Domains()})
}
