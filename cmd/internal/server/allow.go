package server

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/internal/excerpt"
	"github.com/floodgate-io/floodgate/internal/headers"
)

// MaxExplicitKeyBytes bounds the key of an explicit limit: the store holds
// it as ExplicitPrefix+key, which the key-size policy holds to
// floodgate.MaxKeyBytes.
const MaxExplicitKeyBytes = floodgate.MaxKeyBytes - len(ExplicitPrefix)

// allowBody is the body of POST /v1/allow: an explicit limit (key, limit)
// or a policy lookup (domain, descriptors), and a cost: what the explicit
// limit, or the lookup's limits that count units, take (1 when left out;
// 0 reads). A lookup's descriptors may give named limits costs of their
// own.
type allowBody struct {
	Key         *string          `json:"key"`
	Limit       *limitJSON       `json:"limit"`
	Domain      *string          `json:"domain"`
	Descriptors []descriptorJSON `json:"descriptors"`
	Cost        *int64           `json:"cost"`
}

type limitJSON struct {
	Algorithm string `json:"algorithm"`
	Rate      int64  `json:"rate"`
	Period    string `json:"period"`
	Burst     int64  `json:"burst,omitempty"`
}

type descriptorJSON struct {
	Entries []entryJSON `json:"entries"`
	// Costs gives the descriptor's limits costs of their own, by name,
	// whatever they count.
	Costs map[string]int64 `json:"costs"`
}

type entryJSON struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// allowRequest is a decoded, validated POST /v1/allow.
type allowRequest struct {
	explicit bool
	key      string          // explicit
	limit    floodgate.Limit // explicit
	engine   engine.Request  // policy lookup
	cost     int64
}

// decodeAllow reads and validates a /v1/allow body. Every error it returns
// is an *httpError with status 400.
func decodeAllow(body []byte) (allowRequest, error) {
	var b allowBody
	if err := decodeJSON(body, &b); err != nil {
		return allowRequest{}, err
	}
	explicit := b.Key != nil || b.Limit != nil
	lookup := b.Domain != nil || b.Descriptors != nil
	switch {
	case explicit && lookup:
		return allowRequest{}, badRequest("give either key and limit (an explicit limit) or domain and descriptors (a policy lookup), not both")
	case !explicit && !lookup:
		return allowRequest{}, badRequest("give either key and limit (an explicit limit) or domain and descriptors (a policy lookup)")
	}
	cost := int64(1)
	if b.Cost != nil {
		cost = *b.Cost
	}
	if cost < 0 || cost > engine.MaxHits {
		return allowRequest{}, badRequest("cost %d outside [0, %d]", cost, int64(engine.MaxHits))
	}
	if explicit {
		if b.Key == nil || *b.Key == "" {
			return allowRequest{}, badRequest("key is empty")
		}
		if err := checkExplicitKey("key", *b.Key); err != nil {
			return allowRequest{}, err
		}
		if b.Limit == nil {
			return allowRequest{}, badRequest("limit is required with a key")
		}
		limit, err := b.Limit.parse()
		if err != nil {
			return allowRequest{}, err
		}
		return allowRequest{explicit: true, key: *b.Key, limit: limit, cost: cost}, nil
	}
	domain := ""
	if b.Domain != nil {
		domain = *b.Domain
	}
	descs, err := toDescriptors(domain, b.Descriptors)
	if err != nil {
		return allowRequest{}, err
	}
	for i := range descs {
		for _, name := range slices.Sorted(maps.Keys(descs[i].Costs)) {
			if c := descs[i].Costs[name]; c < 0 {
				return allowRequest{}, badRequest("descriptors[%d].costs: %s: cost %d is negative (POST /v1/adjust gives units back)", i, excerpt.Quote(name), c)
			}
		}
		if cost == 0 { // the engine reads a request's Hits of 0 as 1
			descs[i].HitsSet = true
		}
	}
	return allowRequest{engine: engine.Request{Domain: domain, Descriptors: descs, Hits: cost, Atomic: true}, cost: cost}, nil
}

// toDescriptors validates a policy lookup's domain and descriptors.
func toDescriptors(domain string, in []descriptorJSON) ([]engine.Descriptor, error) {
	switch {
	case domain == "":
		return nil, badRequest("domain is empty")
	case len(domain) > floodgate.MaxValueBytes:
		return nil, badRequest("%v", floodgate.CheckLength("domain", domain, floodgate.MaxValueBytes))
	case len(in) == 0:
		return nil, badRequest("descriptors is empty: give at least one")
	case len(in) > engine.MaxDescriptors:
		return nil, badRequest("%d descriptors, at most %d", len(in), engine.MaxDescriptors)
	}
	out := make([]engine.Descriptor, len(in))
	for i, d := range in {
		switch {
		case len(d.Entries) == 0:
			return nil, badRequest("descriptors[%d] has no entries", i)
		case len(d.Entries) > engine.MaxEntries:
			return nil, badRequest("descriptors[%d] has %d entries, at most %d (too deep)", i, len(d.Entries), engine.MaxEntries)
		}
		out[i].Entries = make([]policy.Entry, len(d.Entries))
		for j, e := range d.Entries {
			if e.Key == "" {
				return nil, badRequest("descriptors[%d].entries[%d]: key is empty", i, j)
			}
			out[i].Entries[j] = policy.Entry{Key: e.Key, Value: e.Value}
			if err := engine.CheckEntry(out[i].Entries[j]); err != nil {
				return nil, badRequest("descriptors[%d].entries[%d]: %v", i, j, err)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(d.Costs)) {
			switch c := d.Costs[name]; {
			case name == "":
				return nil, badRequest("descriptors[%d].costs: a limit name is empty", i)
			case c < -engine.MaxHits || c > engine.MaxHits:
				return nil, badRequest("descriptors[%d].costs: %s: cost %d outside [-%d, %d]", i, excerpt.Quote(name), c, int64(engine.MaxHits), int64(engine.MaxHits))
			}
		}
		out[i].Costs = d.Costs
	}
	return out, nil
}

// checkExplicitKey holds the key of an explicit limit, which the request
// calls field, to MaxExplicitKeyBytes.
func checkExplicitKey(field, key string) *httpError {
	if err := floodgate.CheckLength(field, key, MaxExplicitKeyBytes); err != nil {
		return badRequest("%v", err)
	}
	return nil
}

// parse validates an explicit limit.
func (l *limitJSON) parse() (floodgate.Limit, error) {
	algo := floodgate.Algorithm(l.Algorithm)
	if l.Algorithm == "" {
		return floodgate.Limit{}, badRequest("limit.algorithm is required (one of %s)", algorithmNames())
	}
	if !slices.Contains(floodgate.Algorithms(), algo) {
		return floodgate.Limit{}, badRequest("limit.algorithm: unknown algorithm %q (want one of %s)", l.Algorithm, algorithmNames())
	}
	if l.Period == "" {
		return floodgate.Limit{}, badRequest("limit.period is required: a Go duration such as 1s, 5m or 1500ms")
	}
	period, err := time.ParseDuration(l.Period)
	if err != nil || period <= 0 {
		return floodgate.Limit{}, badRequest("limit.period: %q is not a positive duration such as 1s, 5m or 1500ms", l.Period)
	}
	limit := floodgate.Limit{Algorithm: algo, Rate: l.Rate, Period: period, Burst: l.Burst}
	if err := limit.Validate(); err != nil {
		return floodgate.Limit{}, badRequest("limit: %s", strings.TrimPrefix(err.Error(), floodgate.ErrInvalidLimit.Error()+": "))
	}
	return limit, nil
}

func algorithmNames() string {
	var names []string
	for _, a := range floodgate.Algorithms() {
		names = append(names, string(a))
	}
	return strings.Join(names, ", ")
}

// allowResponse is the answer of POST /v1/allow.
type allowResponse struct {
	Allowed bool `json:"allowed"`
	// Limit and Remaining are the tightest limit's; absent when no limit applied.
	Limit        *int64             `json:"limit,omitempty"`
	Remaining    *int64             `json:"remaining,omitempty"`
	RetryAfterMS int64              `json:"retry_after_ms"`
	ResetAfterMS int64              `json:"reset_after_ms"`
	DelayMS      int64              `json:"delay_ms"`
	Descriptors  []descriptorStatus `json:"descriptors,omitempty"`
}

type descriptorStatus struct {
	Code         string        `json:"code"`
	Limits       []limitStatus `json:"limits"`
	ShadowDenied bool          `json:"shadow_denied,omitempty"`
}

type limitStatus struct {
	Name string `json:"name"`
	// Cost is what the request asked of the limit (/v1/allow), or what it
	// was moved by (/v1/adjust, negative for a refund).
	Cost         int64 `json:"cost"`
	Limit        int64 `json:"limit"`
	Remaining    int64 `json:"remaining"`
	RetryAfterMS int64 `json:"retry_after_ms"`
	ResetAfterMS int64 `json:"reset_after_ms"`
	Shadow       bool  `json:"shadow,omitempty"`
}

// readAllow reads and decodes a /v1/allow body, answering the error itself
// when there is one.
func (s *Server) readAllow(w http.ResponseWriter, r *http.Request) (allowRequest, bool) {
	body, err := s.readBody(w, r)
	if err == nil {
		var req allowRequest
		if req, err = decodeAllow(body); err == nil {
			return req, true
		}
	}
	s.fail(w, r, err)
	return allowRequest{}, false
}

func (s *Server) handleAllow(w http.ResponseWriter, r *http.Request) {
	req, ok := s.readAllow(w, r)
	if !ok {
		return
	}
	if req.explicit {
		s.allowExplicitHTTP(w, r, req)
		return
	}
	req.engine.Client = clientOf(r)
	resp, err := s.decide(r.Context(), req.engine)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer resp.Release() // what follows copies from it
	out := allowResponse{Allowed: resp.Code == engine.OK || s.opts.Modes.Shadow, Descriptors: statusesOf(resp)}
	var enforced []floodgate.Decision
	var quotas []headers.Quota
	for _, ds := range resp.Descriptors {
		for _, ls := range ds.Limits {
			if !isShadow(ls.Rule) {
				enforced = append(enforced, ls.Decision)
				quotas = append(quotas, quotaOf(ls))
			}
		}
	}
	if len(enforced) > 0 {
		c := floodgate.Combine(enforced)
		out.Limit, out.Remaining = &c.Limit, &c.Remaining
		out.ResetAfterMS = ceilMS(c.ResetAfter)
		if out.Allowed {
			out.DelayMS = ceilMS(c.Delay)
		} else {
			out.RetryAfterMS = retryMS(c)
			setRetryAfter(w.Header(), c.RetryAfter)
		}
	}
	headers.Set(w.Header(), quotas)
	writeJSON(w, statusOf(out.Allowed), out)
}

// statusesOf renders the engine's answer limit by limit.
func statusesOf(resp engine.Response) []descriptorStatus {
	out := make([]descriptorStatus, len(resp.Descriptors))
	for i, ds := range resp.Descriptors {
		st := descriptorStatus{Code: ds.Code.String(), Limits: make([]limitStatus, len(ds.Limits)), ShadowDenied: ds.ShadowDenied}
		for j, ls := range ds.Limits {
			d := ls.Decision
			st.Limits[j] = limitStatus{
				Name: limitName(ls.Rule), Cost: ls.Cost, Limit: d.Limit, Remaining: d.Remaining,
				RetryAfterMS: retryMS(d), ResetAfterMS: ceilMS(d.ResetAfter), Shadow: isShadow(ls.Rule),
			}
		}
		out[i] = st
	}
	return out
}

func (s *Server) allowExplicitHTTP(w http.ResponseWriter, r *http.Request, req allowRequest) {
	if s.opts.Limiter == nil {
		writeError(w, http.StatusNotImplemented, "explicit limits are not enabled on this server")
		return
	}
	d, err := s.allowExplicit(r.Context(), clientOf(r), req.key, req.limit, req.cost)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := allowResponse{
		Allowed: d.Allowed, Limit: &d.Limit, Remaining: &d.Remaining,
		ResetAfterMS: ceilMS(d.ResetAfter), DelayMS: ceilMS(d.Delay),
	}
	if !d.Allowed {
		out.RetryAfterMS = retryMS(d)
		setRetryAfter(w.Header(), d.RetryAfter)
	}
	headers.Set(w.Header(), []headers.Quota{headers.QuotaOf(req.key, req.limit, d)})
	writeJSON(w, statusOf(d.Allowed), out)
}

func statusOf(allowed bool) int {
	if allowed {
		return http.StatusOK
	}
	return http.StatusTooManyRequests
}

// setRetryAfter sets Retry-After for a wait after which the request would
// pass; a request that can never pass (negative wait) gets none.
func setRetryAfter(h http.Header, wait time.Duration) {
	if wait > 0 {
		h.Set(headers.RetryAfterField, headers.RetryAfter(wait))
	}
}

// retryMS is a decision's retry_after_ms: 0 when allowed, -1 when the
// request can never pass, else the wait in whole milliseconds rounded up.
func retryMS(d floodgate.Decision) int64 {
	switch {
	case d.Allowed:
		return 0
	case d.RetryAfter < 0:
		return -1
	}
	return ceilMS(d.RetryAfter)
}

// ceilMS is d in whole milliseconds, rounded up; 0 for d ≤ 0.
func ceilMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// limitName names a limit in responses and headers: its name, else its
// path (with "#index" among several), "override" for a limit the request gave.
func limitName(r policy.Rule) string {
	switch {
	case r.Name != "":
		return r.Name
	case r.Path == "":
		return "override"
	case r.Count > 1:
		return fmt.Sprintf("%s#%d", r.Path, r.Index)
	}
	return r.Path
}

func quotaOf(ls engine.LimitStatus) headers.Quota {
	return headers.QuotaOf(limitName(ls.Rule), ls.Limit, ls.Decision)
}
