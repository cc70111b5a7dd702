package policy

import (
	"fmt"
	"slices"
)

// Set is every loaded domain. It is immutable once built, so any number of
// goroutines may match against it; to reload, build a new Set and swap it in.
type Set struct {
	domains map[string]*Policy
	routes  []*Route // of every policy, in the order the policies were given
}

// NewSet gathers policies into a Set. Two policies with the same domain are
// an error, as in Envoy's service.
func NewSet(policies ...*Policy) (*Set, error) {
	s := &Set{domains: make(map[string]*Policy, len(policies))}
	for _, p := range policies {
		if p == nil {
			continue
		}
		if first, ok := s.domains[p.Domain]; ok {
			return nil, &Error{File: p.File, Line: p.line,
				Msg: fmt.Sprintf("domain %q is already defined in %s", p.Domain, first.File)}
		}
		s.domains[p.Domain] = p
		s.routes = append(s.routes, p.routes...)
	}
	return s, nil
}

// Domains lists the domains, sorted.
func (s *Set) Domains() []string {
	out := make([]string, 0, len(s.domains))
	for d := range s.domains {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// Policy returns the policy of a domain.
func (s *Set) Policy(domain string) (*Policy, bool) {
	p, ok := s.domains[domain]
	return p, ok
}

// Match returns the rules that apply to one request descriptor in a domain,
// or false when none does: unknown domain, no descriptor on the way, or the
// request ends above or goes past the descriptor that has limits (see the
// package documentation for the rules). An unlimited descriptor matches,
// with Unlimited rules. It does not allocate; the slice is shared.
func (s *Set) Match(domain string, d Descriptor) ([]Rule, bool) {
	p := s.domains[domain]
	if p == nil || len(d.Entries) == 0 {
		return nil, false
	}
	l := p.root
	for i, e := range d.Entries {
		n := l.lookup(e)
		if n == nil {
			return nil, false
		}
		if i == len(d.Entries)-1 {
			if len(n.rules) == 0 {
				return nil, false
			}
			return n.rules[:len(n.rules):len(n.rules)], true
		}
		if n.children == nil {
			return nil, false
		}
		l = n.children
	}
	return nil, false
}

// MatchAll matches every descriptor of one request and applies replaces as
// Envoy's service does: a rule whose name another matched rule replaces is
// dropped (unlimited rules are never dropped, but their replaces count).
// The result has one slice per descriptor, nil or empty when nothing
// applies to it.
func (s *Set) MatchAll(domain string, ds []Descriptor) [][]Rule {
	return s.AppendMatchAll(make([][]Rule, 0, len(ds)), domain, ds)
}

// AppendMatchAll is MatchAll appending its slices to out, for a caller
// that reuses out from request to request.
func (s *Set) AppendMatchAll(out [][]Rule, domain string, ds []Descriptor) [][]Rule {
	base := len(out)
	var replaced map[string]bool
	for _, d := range ds {
		rules, _ := s.Match(domain, d)
		out = append(out, rules)
		for _, r := range rules {
			for _, name := range r.Replaces {
				if replaced == nil {
					replaced = map[string]bool{}
				}
				replaced[name] = true
			}
		}
	}
	if replaced == nil {
		return out
	}
	for i, rules := range out[base:] {
		if !slices.ContainsFunc(rules, func(r Rule) bool { return dropped(r, replaced) }) {
			continue
		}
		kept := make([]Rule, 0, len(rules))
		for _, r := range rules {
			if !dropped(r, replaced) {
				kept = append(kept, r)
			}
		}
		out[base+i] = kept
	}
	return out
}

func dropped(r Rule, replaced map[string]bool) bool {
	return !r.Unlimited && r.Name != "" && replaced[r.Name]
}
