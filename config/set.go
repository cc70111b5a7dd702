package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
			return nil, &Error{File: p.File, Line: p.domainLine,
				Msg: fmt.Sprintf("domain %q is already defined in %s", p.Domain, first.File)}
		}
		s.domains[p.Domain] = p
		s.routes = append(s.routes, p.routes...)
	}
	return s, nil
}

// LoadFiles parses files and directories into a Set. A directory
// contributes its *.yaml and *.yml files, not those of its subdirectories,
// nor hidden ones, in name order. Every file is parsed; the errors of all of
// them come back joined.
func LoadFiles(paths ...string) (*Set, error) {
	var files []string
	var errs []error
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			errs = append(errs, fileError(p, err))
			continue
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			errs = append(errs, fileError(p, err))
			continue
		}
		for _, e := range entries {
			name := e.Name()
			ext := strings.ToLower(filepath.Ext(name))
			if e.IsDir() || strings.HasPrefix(name, ".") || (ext != ".yaml" && ext != ".yml") {
				continue
			}
			files = append(files, filepath.Join(p, name))
		}
	}
	var policies []*Policy
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, fileError(f, err))
			continue
		}
		p, err := Parse(f, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		policies = append(policies, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return NewSet(policies...)
}

func fileError(path string, err error) *Error {
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	return &Error{File: path, Msg: "cannot read: " + msg, Err: err}
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
	out := make([][]Rule, len(ds))
	var replaced map[string]bool
	for i, d := range ds {
		rules, _ := s.Match(domain, d)
		out[i] = rules
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
	for i, rules := range out {
		if !slices.ContainsFunc(rules, func(r Rule) bool { return dropped(r, replaced) }) {
			continue
		}
		kept := make([]Rule, 0, len(rules))
		for _, r := range rules {
			if !dropped(r, replaced) {
				kept = append(kept, r)
			}
		}
		out[i] = kept
	}
	return out
}

func dropped(r Rule, replaced map[string]bool) bool {
	return !r.Unlimited && r.Name != "" && replaced[r.Name]
}
