package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
)

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) policy.Descriptor {
	var d policy.Descriptor
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, policy.Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func loadValid(t testing.TB) *policy.Set {
	t.Helper()
	set, err := config.LoadFiles("testdata/valid")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// summary renders rules compactly: "8/1s", "unlimited", "0/1m0s deny",
// "11/1s shadow", "burst:5/1s+sustained:1000/1h0m0s"; "none" for no match.
func summary(rules []policy.Rule, ok bool) string {
	if !ok {
		return "none"
	}
	parts := make([]string, len(rules))
	for i, r := range rules {
		s := fmt.Sprintf("%d/%s", r.Limit.Rate, r.Limit.Period)
		if r.Unlimited {
			s = "unlimited"
		}
		if r.Name != "" {
			s = r.Name + ":" + s
		}
		if r.DeniesAll() {
			s += " deny"
		}
		if r.ShadowMode {
			s += " shadow"
		}
		if r.QuotaMode {
			s += " quota"
		}
		parts[i] = s
	}
	return strings.Join(parts, "+")
}

// Matching follows envoyproxy/ratelimit (src/config/config_impl.go, GetLimit):
// key+value before a wildcard before key alone, one level per entry, and the
// limit of the descriptor the last entry reaches.
func TestMatch(t *testing.T) {
	set := loadValid(t)
	tests := []struct {
		name   string
		domain string
		d      policy.Descriptor
		want   string
	}{
		// key+value over key alone
		{"key alone: the default", "shop", desc("cart", "c-1"), "40/1m0s"},
		{"key and value: the override", "shop", desc("cart", "bulk"), "90/1m0s"},
		{"a value listed without a limit is never limited", "shop", desc("cart", "internal"), "none"},
		{"nested key alone", "shop", desc("region", "eu", "client", "web"), "8/1s"},
		{"nested key and value", "shop", desc("region", "eu", "client", "mobile"), "16/1s"},
		{"units", "shop", desc("search", "q"), "3/1h0m0s"},
		{"named", "shop", desc("export", "csv"), "export_daily:2/24h0m0s"},
		{"empty value takes the key-only descriptor", "shop", desc("cart", ""), "40/1m0s"},
		{"keys are case-sensitive", "shop", desc("Cart", "bulk"), "none"},
		{"values are case-sensitive", "shop", desc("cart", "BULK"), "40/1m0s"},

		// depth: the request's depth must be the limit's depth
		{"a placeholder has no limit of its own", "shop", desc("region", "eu"), "none"},
		{"deeper request than the limit", "shop", desc("cart", "bulk", "item", "1"), "none"},
		{"deeper request than a key-only limit", "shop", desc("search", "q", "page", "2"), "none"},
		{"parent limit at the parent's depth", "shop", desc("order", "gift"), "12/24h0m0s"},
		{"child limit at the child's depth", "shop", desc("order", "gift", "wrap", "ribbon"), "30/24h0m0s"},
		{"the parent's limit does not reach an unknown child", "shop", desc("order", "gift", "wrap", "paper"), "none"},
		{"a limit on a parent stops nobody deeper", "gateway", desc("app", "a", "user", "bob"), "9/1m0s"},
		{"no backtracking to a key-only sibling", "shop", desc("region", "eu", "zone", "1"), "none"},
		{"unknown key", "shop", desc("nope", "x"), "none"},
		{"unknown domain", "nowhere", desc("cart", "bulk"), "none"},
		{"no entries", "shop", desc(), "none"},

		// unlimited, banned, shadow and quota modes
		{"unlimited", "shop", desc("healthcheck", "lb"), "unlimited"},
		{"nested unlimited", "gateway", desc("app", "a", "bot", "crawler"), "unlimited"},
		{"requests_per_unit 0 denies everything", "gateway", desc("app", "a", "user", "mallory"), "banned:0/1m0s deny"},
		{"shadow mode on a key+value", "soft", desc("team", "core", "job", "nightly"), "11/1s shadow"},
		{"no shadow mode on its key-only sibling", "soft", desc("team", "core", "job", "hourly"), "4/1s"},
		{"shadow mode on a key-only default", "soft", desc("ip", "198.51.100.1"), "15/1m0s shadow"},
		{"not on the value that overrides it", "soft", desc("ip", "192.0.2.7"), "45/1m0s"},
		{"quota mode", "gateway", desc("model", "small"), "10/1m0s quota"},

		// wildcards: a trailing "*" is a prefix match
		{"wildcard", "wild", desc("route", "/v1/users"), "30/1m0s"},
		{"wildcard with an empty rest", "wild", desc("route", "/v1/"), "30/1m0s"},
		{"the first wildcard in file order wins, not the longest", "wild", desc("route", "/v1/admin/keys"), "30/1m0s"},
		{"no wildcard matches: key alone", "wild", desc("route", "/v2/users"), "60/1m0s"},
		{"a value equal to the pattern matches it exactly", "wild", desc("route", "/v1/*"), "30/1m0s"},
		{"an exact value is not a prefix", "wild", desc("exact_only", "abcd"), "none"},
		{`"*" alone matches any value`, "wild", desc("any_value", "anything"), "12/1m0s"},
		{`"*" alone matches the empty value`, "wild", desc("any_value", ""), "12/1m0s"},

		// wildcards: a "*" anywhere stands for any run of characters
		{"a star inside a value", "wild", desc("inner_star", "xzy"), "30/1m0s"},
		{"a star inside a value matches the empty run", "wild", desc("inner_star", "xy"), "30/1m0s"},
		{"a value equal to a middle pattern", "wild", desc("inner_star", "x*y"), "30/1m0s"},
		{"the text after the star must end the value", "wild", desc("inner_star", "xy*"), "none"},
		{"several stars", "wild", desc("many_stars", "abbc"), "14/1m0s"},
		{"several stars, each empty", "wild", desc("many_stars", "abc"), "14/1m0s"},
		{"several stars: the parts in order", "wild", desc("many_stars", "acb"), "none"},
		{"several stars: the last part ends the value", "wild", desc("many_stars", "abcb"), "none"},
		{"several stars: parts do not overlap", "wild", desc("many_stars", "ab"), "none"},
		{"a middle wildcard", "wild", desc("api", "/api/x9vdsuu/action"), "21/1m0s"},
		{"a middle wildcard, empty middle", "wild", desc("api", "/api//action"), "21/1m0s"},
		{"the middle one listed first wins over the trailing one", "wild", desc("api", "/api/v2/x/action"), "21/1m0s"},
		{"the trailing one when the middle one does not match", "wild", desc("api", "/api/x/list"), "22/1m0s"},
		{"...which also takes a value the middle one lacks a part of", "wild", desc("api", "/api/action"), "22/1m0s"},
		{"an exact value wins over every wildcard", "wild", desc("api", "/api/admin/action"), "24/1m0s"},
		{"the prefix is literal", "wild", desc("api", "/apix/action"), "none"},
		{"a trailing wildcard listed first wins over a multi one", "wild", desc("svc", "svc-ep-rpc"), "31/1s"},
		{"svc*ep*rpc", "wild", desc("rpc", "svcXepYrpc"), "33/1s"},
		{"svc*ep*rpc with empty runs", "wild", desc("rpc", "svceprpc"), "33/1s"},
		{"svc*ep*rpc lacks its end", "wild", desc("rpc", "svcep"), "none"},
		{"svc*ep*rpc lacks a middle part", "wild", desc("rpc", "svc-rpc"), "none"},
		{"a leading star", "wild", desc("rpc", "svc.ep.rpc.internal"), "34/1s"},
		{"a leading star: the suffix must end the value", "wild", desc("rpc", "svcepXrpcY"), "none"},
		{"a shared middle wildcard", "wild", desc("tenant", "t-1-eu"), "35/1m0s"},
		{"a shared middle wildcard, no match", "wild", desc("tenant", "t-1-us"), "none"},
		{"nested wildcard", "wild", desc("zone", "north", "host", "web-7"), "30/1m0s"},
		{"nested wildcard, no match", "wild", desc("zone", "north", "host", "db-1"), "none"},
		{"the key must match too", "wild", desc("other", "/v1/x"), "none"},

		// several limits on one descriptor: all apply
		{"burst and sustained", "llm", desc("api_key", "k1"), "burst:5/1s+sustained:1000/1h0m0s"},
		{"requests and tokens", "llm", desc("model", "large"), "rpm:60/1m0s+tpm:90000/1m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, ok := set.Match(tt.domain, tt.d)
			if got := summary(rules, ok); got != tt.want {
				t.Errorf("Match(%s, %s) = %s, want %s", tt.domain, tt.d, got, tt.want)
			}
		})
	}
}

// Replaces works across the descriptors of one request, as Envoy's service
// (src/service/ratelimit.go, constructLimitsToCheck) applies it.
func TestMatchAllReplaces(t *testing.T) {
	set := loadValid(t)
	tests := []struct {
		name string
		ds   []policy.Descriptor
		want []string
	}{
		{"alone, the named limit applies",
			[]policy.Descriptor{desc("app", "a", "user", "alice")},
			[]string{"per_user:1/1m0s"}},
		{"a matched limit that replaces it drops it",
			[]policy.Descriptor{desc("app", "a", "user", "alice"), desc("tier", "partner")},
			[]string{"", "6/1m0s"}},
		{"in any order",
			[]policy.Descriptor{desc("from", "edge", "to", "billing"), desc("app", "a", "user", "alice")},
			[]string{"3/1m0s", ""}},
		{"a replaces that names nothing matched changes nothing",
			[]policy.Descriptor{desc("tier", "partner"), desc("app", "a", "user", "bob")},
			[]string{"6/1m0s", "9/1m0s"}},
		{"an unnamed limit is never replaced",
			[]policy.Descriptor{desc("tier", "partner"), desc("cart", "c")},
			[]string{"6/1m0s", "none"}},
		{"unmatched descriptors stay empty",
			[]policy.Descriptor{desc("nope", "x")},
			[]string{"none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := set.MatchAll("gateway", tt.ds)
			if len(got) != len(tt.ds) {
				t.Fatalf("%d results for %d descriptors", len(got), len(tt.ds))
			}
			for i, rules := range got {
				s := summary(rules, len(rules) > 0)
				if len(rules) == 0 && tt.want[i] == "" {
					continue
				}
				if s != tt.want[i] {
					t.Errorf("descriptor %d (%s): %s, want %s", i, tt.ds[i], s, tt.want[i])
				}
			}
		})
	}
}

// The key a store counts under: per distinct value for key-only and wildcard
// descriptors, shared under share_threshold, one per limit when there are
// several, and escaped so that different inputs never collide.
func TestStateKey(t *testing.T) {
	set := loadValid(t)
	tests := []struct {
		domain string
		d      policy.Descriptor
		want   []string
	}{
		{"shop", desc("cart", "c-1"), []string{"shop/cart=c-1"}},
		{"shop", desc("cart", "c-2"), []string{"shop/cart=c-2"}},
		{"shop", desc("cart", "bulk"), []string{"shop/cart=bulk"}},
		{"shop", desc("region", "eu", "client", "web"), []string{"shop/region=eu/client=web"}},
		{"wild", desc("route", "/v1/users"), []string{"wild/route=%2Fv1%2Fusers"}},
		{"wild", desc("route", "/v1/orders"), []string{"wild/route=%2Fv1%2Forders"}},
		{"wild", desc("file", "/files/a.pdf"), []string{"wild/file=%2Ffiles%2F*"}},
		{"wild", desc("file", "/files/b.csv"), []string{"wild/file=%2Ffiles%2F*"}},
		{"wild", desc("tenant", "t-1-eu"), []string{"wild/tenant=t-*-eu"}},
		{"wild", desc("tenant", "t-2-eu"), []string{"wild/tenant=t-*-eu"}},
		{"wild", desc("api", "/api/a/action"), []string{"wild/api=%2Fapi%2Fa%2Faction"}},
		{"llm", desc("api_key", "k1"), []string{"llm/api_key=k1#0", "llm/api_key=k1#1"}},
		{"shop", desc("cart", "a=b#c%d"), []string{"shop/cart=a%3Db%23c%25d"}},
	}
	for _, tt := range tests {
		rules, ok := set.Match(tt.domain, tt.d)
		if !ok || len(rules) != len(tt.want) {
			t.Errorf("Match(%s, %s): %d rules, %v", tt.domain, tt.d, len(rules), ok)
			continue
		}
		for i, r := range rules {
			if got := r.StateKey(tt.d); got != tt.want[i] {
				t.Errorf("StateKey(%s) = %q, want %q", tt.d, got, tt.want[i])
			}
		}
	}

	// Keys and values with separators in them do not collide.
	p, err := config.Parse("c.yaml", []byte(`
domain: c
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: a=b
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a/b
    rate_limit: {unit: second, requests_per_unit: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	cset, _ := policy.NewSet(p)
	seen := map[string]policy.Descriptor{}
	for _, d := range []policy.Descriptor{
		desc("a", "b=c"), desc("a=b", "c"), desc("a/b", ""), desc("a", "/b="), desc("a", "", "b", ""), desc("a", "b/c"),
	} {
		rules, ok := cset.Match("c", d)
		if !ok {
			t.Errorf("%s: no match", d)
			continue
		}
		k := rules[0].StateKey(d)
		if prev, dup := seen[k]; dup {
			t.Errorf("%s and %s share the key %q", prev, d, k)
		}
		seen[k] = d
	}
}

// Metric names follow Envoy's: the path as configured, with the request's
// values where detailed_metric or value_to_metric ask for them.
func TestMetricKey(t *testing.T) {
	set := loadValid(t)
	tests := []struct {
		domain string
		d      policy.Descriptor
		want   string
	}{
		{"shop", desc("cart", "c-1"), "shop.cart"},
		{"shop", desc("cart", "bulk"), "shop.cart_bulk"},
		{"shop", desc("region", "eu", "client", "web"), "shop.region_eu.client"},
		{"shop", desc("report", "weekly"), "shop.report_weekly"}, // detailed_metric
		{"wild", desc("route", "/v1/users"), "wild.route_/v1/*"},
		{"wild", desc("file", "/files/a.pdf"), "wild.file_/files/*"},
		{"wild", desc("customer", "acme"), "wild.customer_acme"}, // value_to_metric
		{"wild", desc("api", "/api/x9vdsuu/action"), "wild.api_/api/*/action"},
		{"wild", desc("rpc", "svcXepYrpc"), "wild.rpc_svc*ep*rpc"},
		{"wild", desc("tenant", "t-1-eu"), "wild.tenant_t-*-eu"},
	}
	for _, tt := range tests {
		rules, ok := set.Match(tt.domain, tt.d)
		if !ok {
			t.Errorf("%s: no match", tt.d)
			continue
		}
		if got := rules[0].MetricKey(tt.d); got != tt.want {
			t.Errorf("MetricKey(%s) = %q, want %q", tt.d, got, tt.want)
		}
		if rules[0].Path == "" {
			t.Errorf("%s: empty Path", tt.d)
		}
	}
}

// Match is the hot path of every decision: it must not allocate.
func TestMatchDoesNotAllocate(t *testing.T) {
	set := loadValid(t)
	ds := []policy.Descriptor{
		desc("cart", "c-1"), desc("region", "eu", "client", "mobile"), desc("route", "/v1/users"), desc("nope", "x"),
		desc("api", "/api/x9vdsuu/action"), desc("rpc", "svcXepYrpc"), desc("rpc", "svcepXrpcY"),
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, d := range ds {
			set.Match("shop", d)
			set.Match("wild", d)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run", allocs)
	}
}

func TestDomains(t *testing.T) {
	set := loadValid(t)
	want := "anchored,cache_ops,ext,flat,fleet,gateway,llm,shop,soft,tokens,wild"
	if got := strings.Join(set.Domains(), ","); got != want {
		t.Errorf("Domains() = %s, want %s", got, want)
	}
	if _, ok := set.Policy("shop"); !ok {
		t.Error(`Policy("shop") not found`)
	}
}

func BenchmarkMatch(b *testing.B) {
	set := loadValid(b)
	d := desc("region", "eu", "client", "mobile")
	b.ReportAllocs()
	for b.Loop() {
		set.Match("shop", d)
	}
}

// BenchmarkMatchWildcard measures the wildcard walk: the first wildcard in
// file order that matches, after the exact lookup has missed.
func BenchmarkMatchWildcard(b *testing.B) {
	set := loadValid(b)
	for _, bc := range []struct {
		name string
		d    policy.Descriptor
	}{
		{"trailing", desc("route", "/v1/users")},
		{"middle", desc("api", "/api/x9vdsuu/action")},
		{"multi", desc("rpc", "svcXepYrpc")},
		{"none", desc("rpc", "svcepXrpcY")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				set.Match("wild", bc.d)
			}
		})
	}
}
