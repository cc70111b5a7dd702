package config

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

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
// from Parse, which prepares their matching; treat them as read-only.
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
	// cost of the limits that count units (config.Counts), which are those
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

// Routes lists the routes of the policy, in file order.
func (p *Policy) Routes() []*Route { return p.routes }

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

var (
	routeFields      = []string{"name", "host", "path_prefix", "methods", "descriptors", "cost", "costs"}
	routeDescFields  = []string{"entries", "if_missing"}
	routeEntryFields = []string{"key", "from", "value"}
)

// routes reads the routes section of a file whose descriptors are loaded.
func (d *decoder) routes(n, trustedNode *yaml.Node, p *Policy) error {
	trusted, err := d.trustedProxies(trustedNode)
	if err != nil {
		return err
	}
	items, err := d.items(n, "routes")
	if err != nil {
		return err
	}
	for i, item := range items {
		rt, err := d.route(item, fmt.Sprintf("routes[%d]", i), trusted, p)
		if err != nil {
			return err
		}
		p.routes = append(p.routes, rt)
	}
	return nil
}

// trustedProxies reads the CIDRs whose forwarding headers "from: ip"
// believes. nil n is none.
func (d *decoder) trustedProxies(n *yaml.Node) ([]netip.Prefix, error) {
	if n == nil {
		return nil, nil
	}
	items, err := d.items(n, "trusted_proxies")
	if err != nil {
		return nil, err
	}
	out := make([]netip.Prefix, 0, len(items))
	for i, item := range items {
		what := fmt.Sprintf("trusted_proxies[%d]", i)
		s, err := d.str(item, what)
		if err != nil {
			return nil, err
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, d.errorf(item, "%s: %q is not a CIDR such as 127.0.0.1/32 or ::1/128", what, s)
		}
		out = append(out, pfx)
	}
	return out, nil
}

func (d *decoder) route(n *yaml.Node, where string, trusted []netip.Prefix, p *Policy) (*Route, error) {
	fs, err := d.fields(n, where)
	if err != nil {
		return nil, err
	}
	rt := &Route{Name: where, Domain: p.Domain, Cost: 1, File: d.file, Line: n.Line, hostMatch: httplimit.ByHost()}
	for _, f := range fs {
		if f.name == "name" {
			if rt.Name, err = d.str(f.value, where+": name"); err != nil {
				return nil, err
			}
			if rt.Name == "" {
				return nil, d.errorf(f.value, "%s: name must not be empty", where)
			}
			where = fmt.Sprintf("route %q", rt.Name)
		}
	}
	var descriptors *yaml.Node
	for _, f := range fs {
		switch f.name {
		case "name":
		case "costs":
			err = d.routeCosts(f.value, where, rt, p)
		case "host":
			err = d.routeHost(f.value, where, rt)
		case "path_prefix":
			err = d.routePath(f.value, where, rt)
		case "methods":
			err = d.routeMethods(f.value, where, rt)
		case "descriptors":
			descriptors = f.value
		case "cost":
			err = d.routeCost(f.value, where, rt)
		default:
			return nil, d.unknown(f, where, routeFields)
		}
		if err != nil {
			return nil, err
		}
	}
	if descriptors == nil {
		return nil, d.errorf(n, "%s: descriptors is required (an empty list forwards the matched requests unlimited)", where)
	}
	items, err := d.items(descriptors, where+": descriptors")
	if err != nil {
		return nil, err
	}
	for i, item := range items {
		rd, err := d.routeDescriptor(item, fmt.Sprintf("%s: descriptors[%d]", where, i), trusted, p)
		if err != nil {
			return nil, err
		}
		rt.Descriptors = append(rt.Descriptors, rd)
	}
	return rt, nil
}

func (d *decoder) routeHost(n *yaml.Node, where string, rt *Route) error {
	s, err := d.str(n, where+": host")
	if err != nil {
		return err
	}
	host := strings.ToLower(s)
	name := strings.TrimPrefix(host, "*.")
	switch {
	case host == "":
		return d.errorf(n, "%s: host must not be empty (leave it out to match any host)", where)
	case strings.Contains(name, "*"):
		return d.errorf(n, "%s: host %q: a wildcard is only allowed as a leading \"*.\"", where, s)
	case name == "" || strings.ContainsAny(name, ":/ []") || strings.HasPrefix(name, ".") || strings.HasSuffix(name, "."):
		return d.errorf(n, "%s: host %q is not a host name (no port, scheme or path)", where, s)
	}
	rt.Host = host
	return nil
}

func (d *decoder) routePath(n *yaml.Node, where string, rt *Route) error {
	s, err := d.str(n, where+": path_prefix")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(s, "/") {
		return d.errorf(n, "%s: path_prefix %q must start with \"/\"", where, s)
	}
	rt.PathPrefix = s
	if s != "/" {
		rt.pathMatch = httplimit.ByPathPrefix(s)
	}
	return nil
}

func (d *decoder) routeMethods(n *yaml.Node, where string, rt *Route) error {
	items, err := d.items(n, where+": methods")
	if err != nil {
		return err
	}
	if len(items) == 0 {
		return d.errorf(n, "%s: methods is empty (leave it out to match any method)", where)
	}
	for i, item := range items {
		s, err := d.str(item, fmt.Sprintf("%s: methods[%d]", where, i))
		if err != nil {
			return err
		}
		if !isToken(s) {
			return d.errorf(item, "%s: methods[%d]: %q is not an HTTP method", where, i, s)
		}
		rt.Methods = append(rt.Methods, strings.ToUpper(s))
	}
	return nil
}

// routeCost reads `cost: 3` or `cost: {header: X-Cost}`.
func (d *decoder) routeCost(n *yaml.Node, where string, rt *Route) error {
	if n.Kind == yaml.ScalarNode {
		c, err := d.integer(n, where+": cost")
		if err != nil {
			return err
		}
		if c < 1 {
			return d.errorf(n, "%s: cost must be at least 1, got %d", where, c)
		}
		rt.Cost = c
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return d.errorf(n, "%s: cost wants a whole number or {header: NAME}, not %s", where, kindName(n))
	}
	fs, err := d.fields(n, where+": cost")
	if err != nil {
		return err
	}
	given := map[string]*yaml.Node{}
	for _, f := range fs {
		given[f.name] = f.value
		switch f.name {
		case "header", "actual_header", "actual_trailer":
			err = d.costHeaderName(f.value, where+": cost: "+f.name, rt, f.name)
		case "estimate":
			var c int64
			if c, err = d.integer(f.value, where+": cost: estimate"); err == nil && c < 1 {
				err = d.errorf(f.value, "%s: cost: estimate must be at least 1, got %d", where, c)
			}
			rt.Cost = c
		default:
			err = d.unknown(f, where+": cost", costFields)
		}
		if err != nil {
			return err
		}
	}
	switch {
	case given["header"] != nil && given["estimate"] != nil:
		return d.errorf(n, "%s: cost: give header or estimate, not both", where)
	case given["actual_header"] != nil && given["actual_trailer"] != nil:
		return d.errorf(n, "%s: cost: give actual_header or actual_trailer, not both", where)
	case given["estimate"] != nil && rt.ActualHeader == "" && rt.ActualTrailer == "":
		return d.errorf(n, "%s: cost: an estimate needs actual_header or actual_trailer (else give the number itself)", where)
	case rt.CostHeader == "" && rt.ActualHeader == "" && rt.ActualTrailer == "":
		return d.errorf(n, "%s: cost wants a whole number, {header: NAME}, or an estimate with actual_header or actual_trailer", where)
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
	return nil
}

// routeCosts reads `costs: {NAME: 3, OTHER: {header: X-Cost}}`: costs
// of limits of the file's domain, by name.
func (d *decoder) routeCosts(n *yaml.Node, where string, rt *Route, p *Policy) error {
	fs, err := d.fields(n, where+": costs")
	if err != nil || len(fs) == 0 {
		return err
	}
	var known []string
	for _, r := range p.Rules() {
		if r.Name != "" && !slices.Contains(known, r.Name) {
			known = append(known, r.Name)
		}
	}
	rt.Costs = make(map[string]LimitCost, len(fs))
	fixed := true
	for _, f := range fs {
		what := fmt.Sprintf("%s: costs: %s", where, f.name)
		if !slices.Contains(known, f.name) {
			have := "it has no named limit"
			if len(known) > 0 {
				have = "its named limits: " + strings.Join(known, ", ")
			}
			return d.errorf(f.key, "%s: no limit of domain %q is named %q (%s)", where+": costs", p.Domain, f.name, have)
		}
		c, err := d.limitCost(f.value, what)
		if err != nil {
			return err
		}
		rt.Costs[f.name] = c
		fixed = fixed && c.Header == ""
	}
	if fixed {
		rt.fixed = make(map[string]int64, len(rt.Costs))
		for name, c := range rt.Costs {
			rt.fixed[name] = c.Cost
		}
	}
	return nil
}

// limitCost reads one limit's cost: a whole number, 0 or more, or
// {header: NAME}.
func (d *decoder) limitCost(n *yaml.Node, what string) (LimitCost, error) {
	if n.Kind == yaml.ScalarNode {
		c, err := d.integer(n, what)
		return LimitCost{Cost: c}, err
	}
	fs, err := d.fields(n, what)
	if err != nil {
		return LimitCost{}, d.errorf(n, "%s: want a whole number or {header: NAME}, not %s", what, kindName(n))
	}
	var c LimitCost
	for _, f := range fs {
		if f.name != "header" {
			return c, d.unknown(f, what, []string{"header"})
		}
		if c.Header, err = d.str(f.value, what+": header"); err != nil {
			return c, err
		}
		if !isToken(c.Header) {
			return c, d.errorf(f.value, "%s: header: %q is not a header name", what, c.Header)
		}
		c.read = httplimit.CostFromHeader(c.Header)
	}
	if c.Header == "" {
		return c, d.errorf(n, "%s: want a whole number or {header: NAME}", what)
	}
	return c, nil
}

// costFields are the keys of a route's cost given as a mapping.
var costFields = []string{"header", "estimate", "actual_header", "actual_trailer"}

// costHeaderName reads a header name of a route's cost into the field the
// key names.
func (d *decoder) costHeaderName(n *yaml.Node, what string, rt *Route, key string) error {
	name, err := d.str(n, what)
	if err != nil {
		return err
	}
	if !isToken(name) {
		return d.errorf(n, "%s: %q is not a header name", what, name)
	}
	switch key {
	case "header":
		rt.CostHeader = name
	case "actual_header":
		rt.ActualHeader = name
	default:
		rt.ActualTrailer = name
	}
	return nil
}

func (d *decoder) routeDescriptor(n *yaml.Node, where string, trusted []netip.Prefix, p *Policy) (RouteDescriptor, error) {
	var rd RouteDescriptor
	fs, err := d.fields(n, where)
	if err != nil {
		return rd, err
	}
	var entries *yaml.Node
	for _, f := range fs {
		switch f.name {
		case "entries":
			entries = f.value
		case "if_missing":
			s, err := d.str(f.value, where+": if_missing")
			if err != nil {
				return rd, err
			}
			switch s {
			case "deny":
			case "skip":
				rd.SkipIfMissing = true
			default:
				return rd, d.errorf(f.value, "%s: if_missing %q: want deny (answer 400) or skip (drop this descriptor)", where, s)
			}
		default:
			return rd, d.unknown(f, where, routeDescFields)
		}
	}
	if entries == nil {
		return rd, d.errorf(n, "%s: entries is required", where)
	}
	items, err := d.items(entries, where+": entries")
	if err != nil {
		return rd, err
	}
	if len(items) == 0 {
		return rd, d.errorf(entries, "%s: entries is empty: give at least one", where)
	}
	for i, item := range items {
		e, err := d.routeEntry(item, fmt.Sprintf("%s: entries[%d]", where, i), trusted)
		if err != nil {
			return rd, err
		}
		rd.Entries = append(rd.Entries, e)
	}
	if !p.root.reaches(rd.Entries) {
		return rd, d.errorf(n, "%s: %s reaches no limit of domain %q: check the keys and their order against the descriptors",
			where, entryKeys(rd.Entries), p.Domain)
	}
	return rd, nil
}

func (d *decoder) routeEntry(n *yaml.Node, where string, trusted []netip.Prefix) (RouteEntry, error) {
	var e RouteEntry
	fs, err := d.fields(n, where)
	if err != nil {
		return e, err
	}
	given := map[string]*yaml.Node{}
	for _, f := range fs {
		given[f.name] = f.key
		switch f.name {
		case "key":
			e.Key, err = d.str(f.value, where+": key")
		case "from":
			e.From, err = d.str(f.value, where+": from")
		case "value":
			e.Value, err = d.str(f.value, where+": value")
		default:
			return e, d.unknown(f, where, routeEntryFields)
		}
		if err != nil {
			return e, err
		}
	}
	switch {
	case e.Key == "":
		return e, d.errorf(n, "%s: key is required and must not be empty", where)
	case given["from"] != nil && given["value"] != nil:
		return e, d.errorf(given["value"], "%s: give from or value, not both", where)
	case given["value"] != nil:
		if e.Value == "" {
			return e, d.errorf(given["value"], "%s: value must not be empty", where)
		}
		e.value = httplimit.Constant(e.Value)
		return e, nil
	case given["from"] == nil:
		return e, d.errorf(n, "%s: from (ip, header:NAME, path, method, host) or value is required", where)
	}
	if e.value = source(e.From, trusted); e.value == nil {
		return e, d.errorf(given["from"], "%s: from %q: want ip, header:NAME, path, method or host", where, e.From)
	}
	return e, nil
}

// source is the KeyFunc that reads one request part, nil for an unknown one.
func source(from string, trusted []netip.Prefix) httplimit.KeyFunc {
	if name, ok := strings.CutPrefix(from, "header:"); ok {
		if !isToken(name) {
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

// reaches reports whether a request descriptor with these entries can land
// on a descriptor with limits: keys walk the tree as Match walks it, and
// an entry whose value comes from the request may take any descriptor of
// its key. It catches a misspelt key or entries in the wrong order.
func (l *level) reaches(entries []RouteEntry) bool {
	if l == nil || len(entries) == 0 {
		return false
	}
	e, rest := entries[0], entries[1:]
	var candidates []*node
	if e.From == "" {
		if n := l.lookup(Entry{e.Key, e.Value}); n != nil {
			candidates = append(candidates, n)
		}
	} else {
		for _, n := range l.nodes {
			if n.key == e.Key {
				candidates = append(candidates, n)
			}
		}
	}
	for _, n := range candidates {
		if len(rest) == 0 && len(n.rules) > 0 {
			return true
		}
		if len(rest) > 0 && n.children.reaches(rest) {
			return true
		}
	}
	return false
}

func entryKeys(es []RouteEntry) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Key
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// isToken reports whether s is an HTTP token (a method or a header name).
func isToken(s string) bool {
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
