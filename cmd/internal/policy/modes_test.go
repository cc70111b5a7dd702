package policy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// modesTree is a domain with a plain limit, a nested one already in shadow
// mode, a wildcard one in quota mode and an unlimited descriptor.
func modesTree(t *testing.T) *policy.Set {
	t.Helper()
	limit := policy.Rule{Limit: floodgate.Limit{Algorithm: floodgate.FixedWindow, Rate: 5, Period: time.Minute}}
	shadow, quota := limit, limit
	shadow.ShadowMode, quota.QuotaMode = true, true
	set, err := policy.NewSet(policy.New("d", "d.yaml", 1, []*policy.Node{
		{Key: "plain", Rules: []policy.Rule{limit}, Children: []*policy.Node{{Key: "shadow", Rules: []policy.Rule{shadow}}}},
		{Key: "path", Value: "/api/*/x", Rules: []policy.Rule{quota}},
		{Key: "free", Rules: []policy.Rule{{Unlimited: true}}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// modesOf is "shadow quota" as a matched rule's modes say, for each
// request descriptor: "-" for neither.
func modesOf(t *testing.T, set *policy.Set) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, d := range map[string]policy.Descriptor{
		"plain":  {Entries: []policy.Entry{{Key: "plain", Value: "a"}}},
		"shadow": {Entries: []policy.Entry{{Key: "plain", Value: "a"}, {Key: "shadow", Value: "b"}}},
		"quota":  {Entries: []policy.Entry{{Key: "path", Value: "/api/v1/x"}}},
		"free":   {Entries: []policy.Entry{{Key: "free", Value: "c"}}},
	} {
		rules, ok := set.Match("d", d)
		if !ok || len(rules) != 1 {
			t.Fatalf("%s: Match = %v, %v; want one rule", name, rules, ok)
		}
		out[name] = fmt.Sprintf("shadow=%v quota=%v", rules[0].ShadowMode, rules[0].QuotaMode)
	}
	return out
}

// WithModes turns a mode on for every rule that limits, on top of what
// each descriptor says, never for an unlimited one, and leaves the Set
// it was given as it was.
func TestWithModes(t *testing.T) {
	asWritten := map[string]string{
		"plain": "shadow=false quota=false", "shadow": "shadow=true quota=false",
		"quota": "shadow=false quota=true", "free": "shadow=false quota=false",
	}
	tests := []struct {
		name  string
		modes policy.Modes
		want  map[string]string
	}{
		{name: "none: as written", modes: policy.Modes{}, want: asWritten},
		{name: "shadow", modes: policy.Modes{Shadow: true}, want: map[string]string{
			"plain": "shadow=true quota=false", "shadow": "shadow=true quota=false",
			"quota": "shadow=true quota=true", "free": "shadow=false quota=false"}},
		{name: "quota", modes: policy.Modes{Quota: true}, want: map[string]string{
			"plain": "shadow=false quota=true", "shadow": "shadow=true quota=true",
			"quota": "shadow=false quota=true", "free": "shadow=false quota=false"}},
		{name: "both", modes: policy.Modes{Shadow: true, Quota: true}, want: map[string]string{
			"plain": "shadow=true quota=true", "shadow": "shadow=true quota=true",
			"quota": "shadow=true quota=true", "free": "shadow=false quota=false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := modesTree(t)
			got := modesOf(t, set.WithModes(tt.modes))
			for name, want := range tt.want {
				if got[name] != want {
					t.Errorf("%s: %s, want %s", name, got[name], want)
				}
			}
			for name, was := range modesOf(t, set) {
				if was != asWritten[name] {
					t.Errorf("the original Set changed: %s is %s, want %s", name, was, asWritten[name])
				}
			}
			if d := set.WithModes(tt.modes).Domains(); len(d) != 1 || d[0] != "d" {
				t.Errorf("Domains = %v, want [d]", d)
			}
		})
	}
}
