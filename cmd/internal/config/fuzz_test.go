package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// FuzzParse: no input panics; every error is a *Error that names the file;
// every policy that loads holds only limits the engine accepts, and its
// descriptors match the way the package documentation says.
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 60s ./cmd/internal/config/
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{
		"testdata/valid/*.yaml",
		"testdata/invalid/*.yaml",
		"../../../../shared/compat/envoy-ratelimit/*/*.yaml",
	} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is not a *config.Error", err, err)
			}
			if ce.File != "fuzz.yaml" || !strings.HasPrefix(err.Error(), "fuzz.yaml:") || ce.Msg == "" || ce.Line < 0 {
				t.Fatalf("error %q does not name the file and a problem", err)
			}
			return
		}
		if p.Domain == "" {
			t.Fatal("a policy without a domain")
		}
		set, err := policy.NewSet(p)
		if err != nil {
			t.Fatal(err)
		}
		exact := exactDescriptors(t, data)
		rules := p.Rules()
		if len(exact) != len(rules) {
			t.Fatalf("%d rules in the policy, %d in the file", len(rules), len(exact))
		}
		for i, r := range rules {
			checkRule(t, r)
			d := exact[i]
			if d == nil {
				continue
			}
			// Key and value at every level always reach this descriptor.
			rules, ok := set.Match(p.Domain, *d)
			if !ok || !containsRule(rules, r) {
				t.Fatalf("Match(%s) = %v, %v: misses %s #%d", d, rules, ok, r.Path, r.Index)
			}
			for _, got := range rules {
				if got.Path != r.Path || got.StateKey(*d) == "" || got.MetricKey(*d) == "" {
					t.Fatalf("Match(%s) returned %s, want %s", d, got.Path, r.Path)
				}
			}
			set.MatchAll(p.Domain, []policy.Descriptor{*d, {}})
		}
	})
}

func checkRule(t *testing.T, r policy.Rule) {
	t.Helper()
	switch {
	case r.Unlimited:
		if r.Limit.Rate != 0 || r.Limit.Period != 0 || r.Limit.Algorithm != "" {
			t.Fatalf("%s: unlimited with a limit %v", r.Path, r.Limit)
		}
	case r.DeniesAll():
		l := r.Limit
		l.Rate = 1
		if err := l.Validate(); err != nil || r.Limit.Burst != 0 {
			t.Fatalf("%s: a rate 0 limit %v that is otherwise invalid: %v", r.Path, r.Limit, err)
		}
	default:
		if err := r.Limit.Validate(); err != nil {
			t.Fatalf("%s: %v", r.Path, err)
		}
	}
	if r.Count < 1 || r.Index < 0 || r.Index >= r.Count || r.Domain == "" || !strings.HasPrefix(r.Path, r.Domain+".") {
		t.Fatalf("%s: Index %d, Count %d, domain %q", r.Path, r.Index, r.Count, r.Domain)
	}
	for _, name := range r.Replaces {
		if name == "" || name == r.Name {
			t.Fatalf("%s: replaces %q", r.Path, name)
		}
	}
}

// exactDescriptors are, for each rule of a file in the order of
// Policy.Rules, the request descriptor giving the key and value of every
// level down to the rule, or nil when a level has no value.
func exactDescriptors(t *testing.T, data []byte) []*policy.Descriptor {
	d, doc, err := read("fuzz.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.document(doc)
	if err != nil {
		t.Fatal(err)
	}
	var out []*policy.Descriptor
	var walk func(nodes []*policy.Node, above []policy.Entry)
	walk = func(nodes []*policy.Node, above []policy.Entry) {
		for _, n := range nodes {
			entries := append(above[:len(above):len(above)], policy.Entry{Key: n.Key, Value: n.Value})
			var desc *policy.Descriptor
			if !slices.ContainsFunc(entries, func(e policy.Entry) bool { return e.Value == "" }) {
				desc = &policy.Descriptor{Entries: entries}
			}
			for range n.Rules {
				out = append(out, desc)
			}
			walk(n.Children, entries)
		}
	}
	walk(f.tree, nil)
	return out
}

func containsRule(rules []policy.Rule, r policy.Rule) bool {
	for _, got := range rules {
		if got.Path == r.Path && got.Index == r.Index && got.Line == r.Line {
			return true
		}
	}
	return false
}
