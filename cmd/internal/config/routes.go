package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

var (
	routeFields      = []string{"name", "host", "path_prefix", "methods", "descriptors", "cost", "costs", "concurrency"}
	routeDescFields  = []string{"entries", "if_missing"}
	routeEntryFields = []string{"key", "from", "value"}
)

// routes reads the routes section of a file whose descriptors are loaded
// into p, and returns p with the routes.
func (d *decoder) routes(n, trustedNode *yaml.Node, p *policy.Policy) (*policy.Policy, error) {
	trusted, err := d.trustedProxies(trustedNode)
	if err != nil {
		return nil, err
	}
	items, err := d.items(n, "routes")
	if err != nil {
		return nil, err
	}
	var routes []*policy.Route
	for i, item := range items {
		rt, err := d.route(item, fmt.Sprintf("routes[%d]", i), p)
		if err != nil {
			return nil, err
		}
		routes = append(routes, rt)
	}
	return p.WithRoutes(routes, trusted), nil
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

func (d *decoder) route(n *yaml.Node, where string, p *policy.Policy) (*policy.Route, error) {
	fs, err := d.fields(n, where)
	if err != nil {
		return nil, err
	}
	rt := &policy.Route{Name: where, Domain: p.Domain, Cost: 1, File: d.file, Line: n.Line}
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
		case "concurrency":
			rt.Concurrency, err = d.concurrency(f.value, where+": concurrency")
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
		rd, err := d.routeDescriptor(item, fmt.Sprintf("%s: descriptors[%d]", where, i), p)
		if err != nil {
			return nil, err
		}
		rt.Descriptors = append(rt.Descriptors, rd)
	}
	return rt, nil
}

func (d *decoder) routeHost(n *yaml.Node, where string, rt *policy.Route) error {
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

func (d *decoder) routePath(n *yaml.Node, where string, rt *policy.Route) error {
	s, err := d.str(n, where+": path_prefix")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(s, "/") {
		return d.errorf(n, "%s: path_prefix %q must start with \"/\"", where, s)
	}
	rt.PathPrefix = s
	return nil
}

func (d *decoder) routeMethods(n *yaml.Node, where string, rt *policy.Route) error {
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
		if !policy.IsToken(s) {
			return d.errorf(item, "%s: methods[%d]: %q is not an HTTP method", where, i, s)
		}
		rt.Methods = append(rt.Methods, strings.ToUpper(s))
	}
	return nil
}

// routeCost reads `cost: 3` or `cost: {header: X-Cost}`.
func (d *decoder) routeCost(n *yaml.Node, where string, rt *policy.Route) error {
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
	return nil
}

// routeCosts reads `costs: {NAME: 3, OTHER: {header: X-Cost}}`: costs
// of limits of the file's domain, by name.
func (d *decoder) routeCosts(n *yaml.Node, where string, rt *policy.Route, p *policy.Policy) error {
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
	rt.Costs = make(map[string]policy.LimitCost, len(fs))
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
	}
	return nil
}

// limitCost reads one limit's cost: a whole number, 0 or more, or
// {header: NAME}.
func (d *decoder) limitCost(n *yaml.Node, what string) (policy.LimitCost, error) {
	if n.Kind == yaml.ScalarNode {
		c, err := d.integer(n, what)
		return policy.LimitCost{Cost: c}, err
	}
	fs, err := d.fields(n, what)
	if err != nil {
		return policy.LimitCost{}, d.errorf(n, "%s: want a whole number or {header: NAME}, not %s", what, kindName(n))
	}
	var c policy.LimitCost
	for _, f := range fs {
		if f.name != "header" {
			return c, d.unknown(f, what, []string{"header"})
		}
		if c.Header, err = d.str(f.value, what+": header"); err != nil {
			return c, err
		}
		if !policy.IsToken(c.Header) {
			return c, d.errorf(f.value, "%s: header: %q is not a header name", what, c.Header)
		}
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
func (d *decoder) costHeaderName(n *yaml.Node, what string, rt *policy.Route, key string) error {
	name, err := d.str(n, what)
	if err != nil {
		return err
	}
	if !policy.IsToken(name) {
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

func (d *decoder) routeDescriptor(n *yaml.Node, where string, p *policy.Policy) (policy.RouteDescriptor, error) {
	var rd policy.RouteDescriptor
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
		e, err := d.routeEntry(item, fmt.Sprintf("%s: entries[%d]", where, i))
		if err != nil {
			return rd, err
		}
		rd.Entries = append(rd.Entries, e)
	}
	if !p.Reaches(rd.Entries) {
		return rd, d.errorf(n, "%s: %s reaches no limit of domain %q: check the keys and their order against the descriptors",
			where, entryKeys(rd.Entries), p.Domain)
	}
	return rd, nil
}

func (d *decoder) routeEntry(n *yaml.Node, where string) (policy.RouteEntry, error) {
	var e policy.RouteEntry
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
		return e, nil
	case given["from"] == nil:
		return e, d.errorf(n, "%s: from (ip, header:NAME, path, method, host) or value is required", where)
	}
	if !policy.IsSource(e.From) {
		return e, d.errorf(given["from"], "%s: from %q: want ip, header:NAME, path, method or host", where, e.From)
	}
	return e, nil
}

func entryKeys(es []policy.RouteEntry) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Key
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
