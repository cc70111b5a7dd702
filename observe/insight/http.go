package insight

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/floodgate-io/floodgate/internal/problem"
)

// The default n of each endpoint.
const (
	defaultTopN       = 10
	defaultNearLimitN = 50
	defaultEventsN    = 50
)

// Handler serves the views as JSON, under the paths the admin listeners
// mount it at: GET /admin/top, /admin/near-limit, /admin/events and
// /admin/stats (see the package doc for their parameters and answers). A
// bad parameter is answered 400, an unknown policy 404, each with an
// application/problem+json body that names it. It does no authentication:
// mount it behind the admin listener's.
func (in *Insight) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/top", in.serveTop)
	mux.HandleFunc("GET /admin/near-limit", in.serveNearLimit)
	mux.HandleFunc("GET /admin/events", in.serveEvents)
	mux.HandleFunc("GET /admin/stats", in.serveStats)
	return mux
}

// query is an endpoint's parameters.
type query struct {
	policy    string
	hasPolicy bool
	by        By // "" for both
	n         int
	since     time.Time
}

// parseQuery reads raw, allowing only the parameters named in allowed,
// each at most once; n must lie in 1..maxN and defaults to defN, or to
// maxN when that is smaller.
func parseQuery(raw string, allowed []string, defN, maxN int) (query, error) {
	q := query{n: min(defN, maxN)}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return q, fmt.Errorf("%w: the query string does not parse: %v", ErrInvalidQuery, err)
	}
	for name, vs := range vals {
		if !slices.Contains(allowed, name) {
			return q, fmt.Errorf("%w: unknown parameter %q (this endpoint takes %q)", ErrInvalidQuery, name, allowed)
		}
		if len(vs) != 1 {
			return q, fmt.Errorf("%w: parameter %q given %d times", ErrInvalidQuery, name, len(vs))
		}
		if err := q.set(name, vs[0], maxN); err != nil {
			return q, fmt.Errorf("%w: parameter %q: %w", ErrInvalidQuery, name, err)
		}
	}
	return q, nil
}

var (
	errEmpty    = errors.New("empty")
	errBadBy    = fmt.Errorf("want %q or %q", ByAdmitted, ByDenied)
	errBadCount = errors.New("not a whole number in range")
	errBadSince = errors.New("not an RFC 3339 time (2006-01-02T15:04:05Z)")
)

func (q *query) set(name, v string, maxN int) error {
	if v == "" {
		return errEmpty
	}
	switch name {
	case "policy":
		q.policy, q.hasPolicy = v, true
	case "by":
		q.by = By(v)
		if q.by != ByAdmitted && q.by != ByDenied {
			return fmt.Errorf("%q: %w", v, errBadBy)
		}
	case "n":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxN {
			return fmt.Errorf("%q: %w 1 to %d", v, errBadCount, maxN)
		}
		q.n = n
	case "since":
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return fmt.Errorf("%q: %w", v, errBadSince)
		}
		q.since = t
	}
	return nil
}

func (in *Insight) serveTop(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, []string{"policy", "by", "n"}, defaultTopN, in.opts.Counters)
	if err != nil {
		fail(w, err)
		return
	}
	names := []string{q.policy}
	if !q.hasPolicy {
		names = in.Policies()
	}
	bys := []By{ByAdmitted, ByDenied}
	if q.by != "" {
		bys = []By{q.by}
	}
	lists := []TopList{}
	for _, name := range names {
		for _, by := range bys {
			l, err := in.Top(name, by, q.n)
			if err != nil {
				fail(w, err)
				return
			}
			lists = append(lists, l)
		}
	}
	reply(w, struct {
		Lists []TopList `json:"lists"`
	}{lists})
}

func (in *Insight) serveNearLimit(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, []string{"policy", "n"}, defaultNearLimitN, in.opts.MaxNearLimit)
	if err != nil {
		fail(w, err)
		return
	}
	keys, err := in.NearLimit(q.policy, q.n) // no policy parameter: AllPolicies
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, struct {
		Ratio   float64     `json:"ratio"`
		Entries []NearEntry `json:"entries"`
	}{in.opts.NearLimitRatio, keys})
}

func (in *Insight) serveEvents(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, []string{"since", "n"}, defaultEventsN, in.opts.MaxEvents)
	if err != nil {
		fail(w, err)
		return
	}
	evs, err := in.Events(q.since, q.n)
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, struct {
		Events []EventRecord `json:"events"`
	}{evs})
}

func (in *Insight) serveStats(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r.URL.RawQuery, nil, 0, 0); err != nil {
		fail(w, err)
		return
	}
	reply(w, in.Stats())
}

// fail answers err as a problem: 404 for an unknown policy, else 400.
func fail(w http.ResponseWriter, err error) {
	status := http.StatusBadRequest
	if errors.Is(err, ErrUnknownPolicy) {
		status = http.StatusNotFound
	}
	problem.Write(w, problem.Generic(status, err.Error()))
}

func reply(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil { // an owner's event field that JSON cannot hold
		problem.Write(w, problem.Generic(http.StatusInternalServerError, "insight: "+err.Error()))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.Write(append(body, '\n'))
}
