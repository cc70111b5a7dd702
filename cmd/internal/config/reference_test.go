package config_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// refNode is a descriptor in a direct transcription of envoyproxy/ratelimit's
// lookup (src/config/config_impl.go, GetLimit): children in a map keyed by
// "key" or "key_value", wildcard keys (a "*" anywhere) per level in file
// order, matched against "key_value", and a limit that applies only when the
// last entry reaches it.
type refNode struct {
	children  map[string]*refNode
	wildcards []string
	limit     int64 // 0: none
}

func (n *refNode) get(entries []policy.Entry) int64 {
	var limit int64
	m, prev := n.children, n
	for i, e := range entries {
		finalKey := e.Key + "_" + e.Value
		next := m[finalKey]
		if next == nil {
			for _, w := range prev.wildcards {
				if globRef(w, finalKey) {
					next = m[w]
					break
				}
			}
		}
		if next == nil {
			next = m[e.Key]
		}
		if next != nil && next.limit != 0 && i == len(entries)-1 {
			limit = next.limit
		}
		if next == nil || len(next.children) == 0 {
			break
		}
		m, prev = next.children, next
	}
	return limit
}

// globRef is the reference for wildcard values: each "*" in pattern stands
// for any run of characters, tried at every length (slow and plain, unlike
// the matcher's single pass).
func globRef(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return false
	}
	for rest := s[star:]; ; rest = rest[1:] {
		if globRef(pattern[star+1:], rest) {
			return true
		}
		if rest == "" {
			return false
		}
	}
}

// Random trees and requests: Match gives the limit Envoy's lookup gives.
// Keys have no "_", where Envoy's joined strings could collide (see the
// package documentation).
func TestMatchAgainstEnvoyReference(t *testing.T) {
	keys := []string{"a", "b"}
	configValues := []string{"", "x", "xy", "x*", "*", "y", "a*b", "*y", "x*y*z", "*a*", "a**b"}
	requestValues := []string{"", "x", "xy", "xz", "y", "*", "x*", "a*b", "ab", "axb", "xyz", "xzyz", "xyzy", "ba", "aab"}
	rng := rand.New(rand.NewPCG(1, 2))
	nextLimit := int64(0)

	var build func(depth int, yaml *strings.Builder, indent string) *refNode
	build = func(depth int, yaml *strings.Builder, indent string) *refNode {
		n := &refNode{children: map[string]*refNode{}}
		for range rng.IntN(5) {
			key, value := keys[rng.IntN(len(keys))], configValues[rng.IntN(len(configValues))]
			finalKey := key
			if value != "" {
				finalKey += "_" + value
			}
			if n.children[finalKey] != nil {
				continue
			}
			fmt.Fprintf(yaml, "%s- key: %s\n", indent, key)
			if value != "" {
				fmt.Fprintf(yaml, "%s  value: %q\n", indent, value)
			}
			var child *refNode
			if depth < 3 && rng.IntN(10) < 4 {
				fmt.Fprintf(yaml, "%s  descriptors:\n", indent)
				child = build(depth+1, yaml, indent+"    ")
			} else {
				child = &refNode{children: map[string]*refNode{}}
			}
			if rng.IntN(10) < 6 {
				nextLimit++
				child.limit = nextLimit
				fmt.Fprintf(yaml, "%s  rate_limit: {unit: second, requests_per_unit: %d}\n", indent, nextLimit)
			}
			n.children[finalKey] = child
			if strings.Contains(finalKey, "*") {
				n.wildcards = append(n.wildcards, finalKey)
			}
		}
		return n
	}

	for iter := range 2000 {
		var yaml strings.Builder
		yaml.WriteString("domain: r\ndescriptors:\n")
		ref := build(0, &yaml, "  ")
		p, err := config.Parse("random.yaml", []byte(yaml.String()))
		if err != nil {
			t.Fatalf("iteration %d: %v\n%s", iter, err, yaml.String())
		}
		set, _ := policy.NewSet(p)
		for range 20 {
			var d policy.Descriptor
			for range 1 + rng.IntN(4) {
				d.Entries = append(d.Entries, policy.Entry{
					Key: keys[rng.IntN(len(keys))], Value: requestValues[rng.IntN(len(requestValues))]})
			}
			want := ref.get(d.Entries)
			rules, ok := set.Match("r", d)
			var got int64
			if ok {
				got = rules[0].Limit.Rate
			}
			if got != want || ok != (want != 0) {
				t.Fatalf("iteration %d: Match(%s) = %d (%v), Envoy's lookup gives %d\n%s", iter, d, got, ok, want, yaml.String())
			}
		}
	}
}
