package policy

import "slices"

// Modes are modes a service imposes on every limit it loads, on top of
// what the descriptors say: serve's --shadow-mode and --quota-mode,
// envoyproxy/ratelimit's SHADOW_MODE and QUOTA_MODE.
type Modes struct {
	// Shadow puts every limit in shadow mode: counted and reported, never
	// denying.
	Shadow bool
	// Quota puts every limit in quota mode: a request is over the limit
	// only when every descriptor with a quota is.
	Quota bool
}

// WithModes returns s with every rule that limits in the modes m turns on,
// as if each of its descriptors said so; unlimited rules stay as they are
// (they never deny, and envoyproxy/ratelimit leaves them out of its quota
// count). s is not changed; a zero m returns s itself.
func (s *Set) WithModes(m Modes) *Set {
	if m == (Modes{}) {
		return s
	}
	c := &Set{domains: make(map[string]*Policy, len(s.domains)), routes: s.routes}
	for domain, p := range s.domains {
		cp := *p
		cp.root = p.root.withModes(m)
		c.domains[domain] = &cp
	}
	return c
}

// withModes is a copy of the level and the levels under it with the rules
// in the modes m turns on.
func (l *level) withModes(m Modes) *level {
	c := &level{exact: map[Entry]*node{}, wildcard: map[string][]*node{}, keyOnly: map[string]*node{}}
	for _, n := range l.nodes {
		nc := *n
		nc.rules = slices.Clone(n.rules)
		for i := range nc.rules {
			if r := &nc.rules[i]; !r.Unlimited {
				r.ShadowMode = r.ShadowMode || m.Shadow
				r.QuotaMode = r.QuotaMode || m.Quota
			}
		}
		if n.children != nil {
			nc.children = n.children.withModes(m)
		}
		c.add(&nc)
	}
	return c
}
