package policy

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/floodgate-io/floodgate/httplimit"
)

// Errors about one request that a Route cannot turn into descriptors. The
// gateway answers them with 400: the client must fix its request.
var (
	// ErrMissingValue: an entry's request part is absent (no such header).
	ErrMissingValue = errors.New("config: request lacks a value a route needs")
	// ErrBadCost: the cost header is absent, malformed or below 1.
	ErrBadCost = errors.New("config: request has no valid cost")
)

// Route maps the requests it matches onto descriptors of its file's domain
// and a cost. A request takes the first route, in load order, that matches
// its host, path and method; see the package documentation. Routes come
// from Policy.WithRoutes, which prepares their matching; treat them as
// read-only.
type Route struct {
	// Name identifies the route in logs; "routes[i]" when the file gives none.
	Name string
	// Domain is the domain of the file the route is written in.
	Domain string
	// Host is "" (any host), a lower-case host name, or "*.suffix", which
	// matches every name ending in ".suffix" but not "suffix" itself.
	Host string
	// PathPrefix is "" (any path) or a prefix matched at a segment
	// boundary: "/api" matches "/api" and "/api/x", not "/apix".
	PathPrefix string
	// Methods lists the methods matched, upper case; empty matches any.
	Methods []string
	// Descriptors are what a matched request is limited by; none means the
	// route forwards its requests unlimited.
	Descriptors []RouteDescriptor
	// Cost is what a request takes when CostHeader is "" (at least 1): the
	// cost of the limits that count units (see Counts), which are those
	// a reconciling route corrects. The limits that count requests take 1.
	Cost int64
	// CostHeader, when set, names the request header that holds the cost.
	CostHeader string
	// Costs gives the limits it names costs of their own, whatever they
	// count, in place of the above; nil when the route names none. Named
	// limits are never reconciled.
	Costs map[string]LimitCost
	// ActualHeader or ActualTrailer, when set, name the response header or
	// trailer that says what the request really cost: the cost above is
	// then an estimate, reserved when the request is decided, and the
	// difference is charged or refunded when the response is complete (an
	// LLM API's tokens).
	ActualHeader, ActualTrailer string
	// Concurrency, when set, is the route's own bulkhead (its
	// `concurrency:` block); nil leaves it to the proxy's --concurrency.
	Concurrency *Concurrency
	// File and Line are where the route is written.
	File string
	Line int

	pathMatch httplimit.KeyFunc // nil when PathPrefix is ""
	hostMatch httplimit.KeyFunc // normalises r.Host
	cost      httplimit.CostFunc
	actual    httplimit.ActualFunc // nil unless the cost is reconciled
	fixed     map[string]int64     // Costs, when none comes from a header
}

// LimitCost is the cost a route gives one limit by name: Cost, or the
// whole number (0 or more) in the request header Header when it is set.
type LimitCost struct {
	Cost   int64
	Header string

	read httplimit.CostFunc // of Header; nil in a LimitCost built by hand
}

// RequestCost is what one request of a route costs.
type RequestCost struct {
	// Units is what the limits that count units take: the route's cost.
	Units int64
	// Named are the costs of the limits the route names, whatever they
	// count; nil when it names none. The map may be shared between
	// requests: read it only.
	Named map[string]int64
}

// Reconciles reports whether the route's cost is an estimate to correct
// from the response (ActualCost).
func (rt *Route) Reconciles() bool { return rt.actual != nil }

// ActualCost reads what a request of a reconciling route really cost from
// its finished response. An error wraps ErrBadCost and names the field.
func (rt *Route) ActualCost(resp *httplimit.Response) (int64, error) {
	if rt.actual == nil {
		return 0, fmt.Errorf("route %q: %w: the route does not reconcile its cost", rt.Name, ErrBadCost)
	}
	n, err := rt.actual(resp)
	if err != nil {
		return 0, fmt.Errorf("route %q: %w: %w", rt.Name, ErrBadCost, err)
	}
	return n, nil
}

// RouteDescriptor is one descriptor a route builds from a request.
type RouteDescriptor struct {
	Entries []RouteEntry
	// SkipIfMissing drops this descriptor from a request that lacks one of
	// its values; without it such a request is refused (ErrMissingValue).
	SkipIfMissing bool
}

// RouteEntry is one (key, value) entry whose value comes from the request.
type RouteEntry struct {
	Key string
	// From is where the value comes from, as written: "ip", "header:NAME",
	// "path", "method", "host"; "" for the constant Value.
	From  string
	Value string

	value httplimit.KeyFunc
}

// Routes lists every route, in the order requests try them.
func (s *Set) Routes() []*Route { return s.routes }

// RouteFor returns the first route that matches r, or nil when none does.
func (s *Set) RouteFor(r *http.Request) *Route {
	for _, rt := range s.routes {
		if rt.Matches(r) {
			return rt
		}
	}
	return nil
}

// Matches reports whether r's host, path and method are the route's.
func (rt *Route) Matches(r *http.Request) bool {
	if len(rt.Methods) > 0 && !slices.Contains(rt.Methods, r.Method) {
		return false
	}
	if rt.pathMatch != nil {
		if _, ok := rt.pathMatch(r); !ok {
			return false
		}
	}
	if rt.Host == "" {
		return true
	}
	hostOf := rt.hostMatch
	if hostOf == nil { // a Route built by hand rather than parsed
		hostOf = httplimit.ByHost()
	}
	host, _ := hostOf(r)
	if suffix, ok := strings.CutPrefix(rt.Host, "*"); ok {
		return len(host) > len(suffix) && strings.HasSuffix(host, suffix)
	}
	return host == rt.Host
}

// Request turns r into the route's descriptors and cost. An error wraps
// ErrMissingValue or ErrBadCost and names the entry or header at fault.
func (rt *Route) Request(r *http.Request) ([]Descriptor, RequestCost, error) {
	descs := make([]Descriptor, 0, len(rt.Descriptors))
	for i := range rt.Descriptors {
		rd := &rt.Descriptors[i]
		d, err := rd.build(r)
		if err != nil {
			if rd.SkipIfMissing {
				continue
			}
			return nil, RequestCost{}, fmt.Errorf("route %q: %w", rt.Name, err)
		}
		descs = append(descs, d)
	}
	cost := RequestCost{Units: rt.Cost, Named: rt.fixed}
	if rt.cost != nil {
		n, err := rt.cost(r)
		if err == nil && n < 1 {
			err = fmt.Errorf("header %s must be at least 1, got %d", rt.CostHeader, n)
		}
		if err != nil {
			return nil, RequestCost{}, fmt.Errorf("route %q: %w: %w", rt.Name, ErrBadCost, err)
		}
		cost.Units = n
	}
	if rt.Costs != nil && rt.fixed == nil {
		named, err := rt.namedCosts(r)
		if err != nil {
			return nil, RequestCost{}, fmt.Errorf("route %q: %w: %w", rt.Name, ErrBadCost, err)
		}
		cost.Named = named
	}
	return descs, cost, nil
}

// namedCosts reads the costs the route gives limits by name, some from
// the request's headers.
func (rt *Route) namedCosts(r *http.Request) (map[string]int64, error) {
	out := make(map[string]int64, len(rt.Costs))
	for _, name := range slices.Sorted(maps.Keys(rt.Costs)) { // the same error first every time
		c := rt.Costs[name]
		if c.Header == "" {
			out[name] = c.Cost
			continue
		}
		read := c.read
		if read == nil {
			read = httplimit.CostFromHeader(c.Header)
		}
		n, err := read(r)
		if err != nil {
			return nil, fmt.Errorf("the cost of limit %q: %w", name, err)
		}
		out[name] = n
	}
	return out, nil
}

func (rd *RouteDescriptor) build(r *http.Request) (Descriptor, error) {
	entries := make([]Entry, len(rd.Entries))
	for i, e := range rd.Entries {
		v, ok := e.Value, e.Value != ""
		if e.value != nil { // nil in an entry built by hand: its constant Value
			v, ok = e.value(r)
		}
		if !ok {
			return Descriptor{}, fmt.Errorf("%w: no %s for entry %q", ErrMissingValue, e.From, e.Key)
		}
		entries[i] = Entry{Key: e.Key, Value: v}
	}
	return Descriptor{Entries: entries}, nil
}

// prepare builds the functions that match and read requests from the
// route's fields.
func (rt *Route) prepare(trusted []netip.Prefix) {
	rt.hostMatch = httplimit.ByHost()
	if rt.PathPrefix != "" && rt.PathPrefix != "/" {
		rt.pathMatch = httplimit.ByPathPrefix(rt.PathPrefix)
	}
	if rt.CostHeader != "" {
		rt.cost = httplimit.CostFromHeader(rt.CostHeader)
	}
	switch {
	case rt.ActualHeader != "":
		rt.actual = httplimit.ActualFromHeader(rt.ActualHeader)
	case rt.ActualTrailer != "":
		rt.actual = httplimit.ActualFromTrailer(rt.ActualTrailer)
	}
	fixed := rt.Costs != nil
	for name, c := range rt.Costs {
		if c.Header != "" {
			c.read = httplimit.CostFromHeader(c.Header)
			rt.Costs[name] = c
			fixed = false
		}
	}
	if fixed {
		rt.fixed = make(map[string]int64, len(rt.Costs))
		for name, c := range rt.Costs {
			rt.fixed[name] = c.Cost
		}
	}
	for i := range rt.Descriptors {
		for j := range rt.Descriptors[i].Entries {
			e := &rt.Descriptors[i].Entries[j]
			if e.From == "" {
				e.value = httplimit.Constant(e.Value)
			} else {
				e.value = source(e.From, trusted)
			}
		}
	}
}

// IsSource reports whether a route entry's value may come from the request
// part from: ip, header:NAME, path, method or host.
func IsSource(from string) bool { return source(from, nil) != nil }

// source is the KeyFunc that reads one request part, nil for an unknown one.
func source(from string, trusted []netip.Prefix) httplimit.KeyFunc {
	if name, ok := strings.CutPrefix(from, "header:"); ok {
		if !IsToken(name) {
			return nil
		}
		return httplimit.ByHeader(name)
	}
	switch from {
	case "ip":
		return httplimit.ByIP(httplimit.IPOptions{TrustedProxies: trusted})
	case "path":
		return httplimit.ByPath()
	case "method":
		return httplimit.ByMethod()
	case "host":
		return httplimit.ByHost()
	}
	return nil
}

// IsToken reports whether s is an HTTP token, as a route's methods and
// header names must be.
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// String renders the route for logs: its name and what it matches.
func (rt *Route) String() string {
	var b strings.Builder
	b.WriteString(strconv.Quote(rt.Name))
	if rt.Host != "" {
		b.WriteString(" host=" + rt.Host)
	}
	if rt.PathPrefix != "" {
		b.WriteString(" path_prefix=" + rt.PathPrefix)
	}
	if len(rt.Methods) > 0 {
		b.WriteString(" methods=" + strings.Join(rt.Methods, ","))
	}
	return b.String()
}
