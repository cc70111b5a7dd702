package policy

import (
	"net/netip"
	"strings"
)

// Policy is one file: a domain and its tree of descriptors, and the routes
// that turn HTTP requests into its descriptors. It does not change once
// built; its fields are for reading.
type Policy struct {
	Domain string
	File   string // the name it was parsed under

	line   int // of the domain, for NewSet's error
	root   *level
	routes []*Route
}

// Node is one descriptor of a domain's tree as written: the input of New.
type Node struct {
	// Key is the descriptor's key; Value its value, "" for a key-only
	// descriptor; a value with "*" in it is a wildcard, each "*" standing
	// for any run of characters, the empty one included ("/api/*",
	// "/api/*/action", "svc*ep*rpc").
	Key, Value string
	// ShareThreshold makes every value a wildcard matches count against
	// one counter (see Rule.StateKey).
	ShareThreshold bool
	// ValueToMetric puts the request's value in the metric key (see
	// Rule.MetricKey).
	ValueToMetric bool
	// Rules are the descriptor's limits; New fills in their Domain, Path,
	// Index, Count and, unless a rule already has one, File.
	Rules []Rule
	// Children are the descriptors one level down.
	Children []*Node
}

// level is the descriptors at one depth under one parent.
type level struct {
	nodes    []*node            // in file order
	exact    map[Entry]*node    // descriptors with a value, wildcards included (by their literal value)
	wildcard map[string][]*node // key -> descriptors whose value has a "*", in file order
	keyOnly  map[string]*node   // key -> the descriptor with that key and no value
}

// node is one descriptor.
type node struct {
	step
	parts    []string // a wildcard's value split at its stars, so that matching does not allocate
	rules    []Rule   // its limits; nil when it has none
	children *level   // nil when it has none
}

// New builds the matcher of one domain's tree, written in file at line. The
// tree must have been checked (as the decoder does): no two descriptors of
// one level with the same key and value, share_threshold on wildcards only;
// of two equal descriptors the first would be the one matched.
func New(domain, file string, line int, tree []*Node) *Policy {
	p := &Policy{Domain: domain, File: file, line: line}
	p.root = p.level(tree, "", nil)
	return p
}

// level builds the descriptors under the one at path (Envoy-style, "" at
// the top), steps the matches leading to it.
func (p *Policy) level(nodes []*Node, parent string, steps []step) *level {
	l := &level{exact: map[Entry]*node{}, wildcard: map[string][]*node{}, keyOnly: map[string]*node{}}
	for _, n := range nodes {
		nd := &node{step: step{key: n.Key, value: n.Value, wildcard: strings.Contains(n.Value, "*"),
			share: n.ShareThreshold, valueToMetric: n.ValueToMetric}}
		if nd.wildcard {
			nd.parts = strings.Split(n.Value, "*")
		}
		path := JoinPath(parent, n.Key, n.Value)
		steps := append(steps[:len(steps):len(steps)], nd.step)
		for i, r := range n.Rules {
			r.Domain, r.Path = p.Domain, p.Domain+"."+path
			if r.File == "" { // a rule merged from another file of the domain keeps that file
				r.File = p.File
			}
			r.Index, r.Count = i, len(n.Rules)
			r.steps = steps
			nd.rules = append(nd.rules, r)
		}
		if len(n.Children) > 0 {
			nd.children = p.level(n.Children, path, steps)
		}
		l.add(nd)
	}
	return l
}

func (l *level) add(nd *node) {
	l.nodes = append(l.nodes, nd)
	if nd.value == "" {
		if l.keyOnly[nd.key] == nil {
			l.keyOnly[nd.key] = nd
		}
		return
	}
	if l.exact[Entry{nd.key, nd.value}] == nil {
		l.exact[Entry{nd.key, nd.value}] = nd
	}
	if nd.wildcard {
		l.wildcard[nd.key] = append(l.wildcard[nd.key], nd)
	}
}

// JoinPath is the Envoy-style path of a descriptor under the one at parent
// ("" at the top): "tenant_free.user". Rule.Path is the domain, a dot and
// this path.
func JoinPath(parent, key, value string) string {
	path := key
	if value != "" {
		path += "_" + value
	}
	if parent != "" {
		path = parent + "." + path
	}
	return path
}

// lookup finds the descriptor an entry takes at this level: key and value,
// else the first wildcard in file order that the value matches, wherever
// its stars are, else key alone.
func (l *level) lookup(e Entry) *node {
	if n := l.exact[e]; n != nil {
		return n
	}
	for _, n := range l.wildcard[e.Key] {
		if globMatch(n.parts, e.Value) {
			return n
		}
	}
	return l.keyOnly[e.Key]
}

// globMatch reports whether s matches a pattern split at its stars (at
// least two parts): it starts with the first part, ends with the last, and
// has the middle ones in order, without overlap, in between. Taking each
// middle part at its leftmost place is enough: a later place leaves less
// room for the rest and never more.
func globMatch(parts []string, s string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}

// Rules lists every limit of the policy, in file order.
func (p *Policy) Rules() []Rule {
	var out []Rule
	var walk func(*level)
	walk = func(l *level) {
		for _, n := range l.nodes {
			out = append(out, n.rules...)
			if n.children != nil {
				walk(n.children)
			}
		}
	}
	walk(p.root)
	return out
}

// Routes lists the routes of the policy, in file order.
func (p *Policy) Routes() []*Route { return p.routes }

// WithRoutes returns a copy of p with routes, prepared for matching
// requests: a "from: ip" entry believes the forwarding headers of the peers
// in trusted. The routes belong to the copy from then on.
func (p *Policy) WithRoutes(routes []*Route, trusted []netip.Prefix) *Policy {
	c := *p
	c.routes = routes
	for _, rt := range routes {
		rt.prepare(trusted)
	}
	return &c
}

// Reaches reports whether a request descriptor with these entries can land
// on a descriptor with limits: keys walk the tree as Set.Match walks it, and
// an entry whose value comes from the request may take any descriptor of
// its key. It catches a route's misspelt key or entries in the wrong order.
func (p *Policy) Reaches(entries []RouteEntry) bool { return p.root.reaches(entries) }

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
