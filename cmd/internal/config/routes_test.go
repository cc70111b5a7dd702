package config_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/floodgate-io/floodgate/cmd/internal/config"
	"github.com/floodgate-io/floodgate/cmd/internal/policy"
	"github.com/floodgate-io/floodgate/httplimit"
)

func loadGateway(t *testing.T) *policy.Set {
	t.Helper()
	set, err := config.LoadFiles("testdata/routes/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// request builds a request as a server receives it: "METHOD host/path",
// from peer, with header name, value pairs.
func request(line, peer string, header ...string) *http.Request {
	method, target, _ := strings.Cut(line, " ")
	host, path, _ := strings.Cut(target, "/")
	r := httptest.NewRequest(method, "http://"+host+"/"+path, nil)
	r.RemoteAddr = peer
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

// A request takes the first route whose host, path prefix and methods it
// has.
func TestRouteFor(t *testing.T) {
	set := loadGateway(t)
	for _, tc := range []struct{ request, route string }{
		{"GET api.example.com/healthz", "health"},
		{"GET any.host/healthz/deep", "health"},
		{"GET api.example.com/healthzz", "everything else"}, // prefixes end at a segment boundary
		{"POST files.example.com/upload", "uploads"},
		{"PUT a.b.example.com/upload/big.iso", "uploads"},
		{"GET files.example.com/upload", "everything else"},   // method not listed
		{"POST example.com/upload", "everything else"},        // *.example.com needs a label before it
		{"POST files.example.com:8443/upload", "uploads"},     // the port is not part of the host
		{"POST FILES.Example.COM/upload", "uploads"},          // host names compare case-insensitively
		{"POST files.example.com/uploads", "everything else"}, // not at a segment boundary
		{"GET api.example.com/v1/items", "api"},
		{"GET api.example.com/v1", "everything else"}, // "/v1/" asks for something under it
		{"DELETE api.example.com/v1/items/7", "api"},
		{"GET other.example.com/v1/items", "everything else"},
	} {
		rt := set.RouteFor(request(tc.request, "127.0.0.9:1234"))
		got := "none"
		if rt != nil {
			got = rt.Name
		}
		if got != tc.route {
			t.Errorf("%s: route %q, want %q", tc.request, got, tc.route)
		}
	}
}

// The routes of several files are tried in the order of their files: a
// catch-all route of the first shadows every route of the next.
func TestRoutesFollowFileOrder(t *testing.T) {
	parse := func(name, yaml string) *policy.Policy {
		p, err := config.Parse(name, []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := parse("a.yaml", "domain: a\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n"+
		"routes: [{name: a-admin, path_prefix: /admin, descriptors: [{entries: [{key: k, value: x}]}]}]\n")
	b := parse("b.yaml", "domain: b\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n"+
		"routes: [{name: b-all, descriptors: [{entries: [{key: k, value: x}]}]}]\n")
	for _, tc := range []struct {
		order []*policy.Policy
		path  string
		want  string
	}{
		{[]*policy.Policy{a, b}, "/admin/users", "a-admin"},
		{[]*policy.Policy{a, b}, "/public", "b-all"},
		{[]*policy.Policy{b, a}, "/admin/users", "b-all"},
	} {
		set, err := policy.NewSet(tc.order...)
		if err != nil {
			t.Fatal(err)
		}
		if rt := set.RouteFor(request("GET h"+tc.path, "127.0.0.1:1")); rt == nil || rt.Name != tc.want {
			t.Errorf("%s then %s, %s: %v, want %s", tc.order[0].Domain, tc.order[1].Domain, tc.path, rt, tc.want)
		} else if rt.Domain != tc.want[:1] {
			t.Errorf("route %s has domain %q", rt.Name, rt.Domain)
		}
	}
}

// A route turns a request into descriptors whose values come from the
// request, and a cost.
func TestRouteRequest(t *testing.T) {
	set := loadGateway(t)
	for _, tc := range []struct {
		name    string
		request *http.Request
		descs   string // descriptors joined by " "
		cost    int64
		err     error
	}{
		{"client address", request("GET h/", "127.0.0.9:1234"), "(client=127.0.0.9)", 1, nil},
		{"IPv6 clients by /64", request("GET h/", "[2001:db8::1]:1"), "(client=2001:db8::/64)", 1, nil},
		{"forwarded by a trusted proxy", request("GET h/", "127.0.0.1:1", "X-Forwarded-For", "198.51.100.7"), "(client=198.51.100.7)", 1, nil},
		{"forged by the client itself", request("GET h/", "127.0.0.9:1", "X-Forwarded-For", "198.51.100.7"), "(client=127.0.0.9)", 1, nil},
		{"api key and method", request("PATCH api.example.com/v1/x", "127.0.0.9:1", "X-API-Key", "k1"),
			"(client=127.0.0.9) (api_key=k1),(method=PATCH)", 1, nil},
		{"no api key: that descriptor skipped", request("GET api.example.com/v1/x", "127.0.0.9:1"), "(client=127.0.0.9)", 1, nil},
		{"constant value, cost from a header", request("POST f.example.com/upload", "127.0.0.9:1", "X-Upload-MB", "25"), "(route=upload)", 25, nil},
		{"cost header missing", request("POST f.example.com/upload", "127.0.0.9:1"), "", 0, policy.ErrBadCost},
		{"cost header not a number", request("POST f.example.com/upload", "127.0.0.9:1", "X-Upload-MB", "lots"), "", 0, policy.ErrBadCost},
		{"cost header zero", request("POST f.example.com/upload", "127.0.0.9:1", "X-Upload-MB", "0"), "", 0, policy.ErrBadCost},
		{"no limits on the health check", request("GET h/healthz", "127.0.0.9:1"), "", 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			descs, cost, err := set.RouteFor(tc.request).Request(tc.request)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "X-Upload-Mb") && !strings.Contains(err.Error(), "X-Upload-MB") {
					t.Errorf("error %q does not name the header", err)
				}
				return
			}
			got := make([]string, len(descs))
			for i, d := range descs {
				got[i] = d.String()
			}
			if strings.Join(got, " ") != tc.descs || cost.Units != tc.cost || cost.Named != nil {
				t.Errorf("%q cost %+v, want %q cost %d", strings.Join(got, " "), cost, tc.descs, tc.cost)
			}
		})
	}
}

// A value the request lacks refuses it unless the descriptor says skip,
// and the error names the entry.
func TestRouteMissingValueDenies(t *testing.T) {
	p, err := config.Parse("p.yaml", []byte(`
domain: d
descriptors: [{key: tenant, rate_limit: {unit: second, requests_per_unit: 1}}]
routes:
  - descriptors: [{entries: [{key: tenant, from: "header:X-Tenant"}]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	rt := p.Routes()[0]
	_, _, err = rt.Request(request("GET h/", "127.0.0.1:1"))
	if !errors.Is(err, policy.ErrMissingValue) || !strings.Contains(err.Error(), `"tenant"`) || !strings.Contains(err.Error(), "routes[0]") {
		t.Fatalf("error %v: want ErrMissingValue naming the route and the entry", err)
	}
}

// A route's costs give named limits costs of their own, fixed or from a
// header; its cost is for the limits that count units.
func TestRouteNamedCosts(t *testing.T) {
	set, err := config.LoadFiles("testdata/valid/costs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	key := []string{"X-Plan", "free", "X-API-Key", "k1"}
	for _, tc := range []struct {
		name    string
		request *http.Request
		units   int64
		named   map[string]int64
		err     string
	}{
		{"fixed", request("POST h/v1/completions", "127.0.0.1:1", key...), 1000, map[string]int64{"free-images": 0}, ""},
		{"from a header", request("POST h/v1/images", "127.0.0.1:1", append(key, "X-Tokens", "300", "X-Images", "2")...), 300, map[string]int64{"free-images": 2}, ""},
		{"0 from a header", request("POST h/v1/images", "127.0.0.1:1", append(key, "X-Tokens", "300", "X-Images", "0")...), 300, map[string]int64{"free-images": 0}, ""},
		{"header missing", request("POST h/v1/images", "127.0.0.1:1", append(key, "X-Tokens", "300")...), 0, nil, `route "images": config: request has no valid cost: the cost of limit "free-images": missing header X-Images`},
		{"header negative", request("POST h/v1/images", "127.0.0.1:1", append(key, "X-Tokens", "300", "X-Images", "-2")...), 0, nil, `header X-Images must be a non-negative integer, got "-2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cost, err := set.RouteFor(tc.request).Request(tc.request)
			if tc.err != "" {
				if !errors.Is(err, policy.ErrBadCost) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want ErrBadCost naming %q", err, tc.err)
				}
				return
			}
			if err != nil || cost.Units != tc.units || len(cost.Named) != len(tc.named) {
				t.Fatalf("%+v, %v; want %d units, named %v", cost, err, tc.units, tc.named)
			}
			for name, c := range tc.named {
				if got, ok := cost.Named[name]; !ok || got != c {
					t.Fatalf("named %v, want %v", cost.Named, tc.named)
				}
			}
		})
	}
}

// Bad routes are refused with the file, the line and the problem.
func TestInvalidRoutes(t *testing.T) {
	const head = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: per-k}\n" +
		"  - key: a\n    descriptors:\n      - key: b\n        rate_limit: {unit: second, requests_per_unit: 1}\n"
	const ok = "    descriptors: [{entries: [{key: k, from: ip}]}]\n"
	for _, tc := range []struct {
		name, yaml string
		line       int
		want       string
	}{
		{"not a list", "routes: {}\n", 9, "routes must be a list"},
		{"misspelt field", "routes:\n  - path_prefx: /x\n" + ok, 10, `unknown field "path_prefx" (did you mean "path_prefix"?)`},
		{"no descriptors", "routes:\n  - path_prefix: /x\n", 10, "descriptors is required"},
		{"relative prefix", "routes:\n  - path_prefix: x/\n" + ok, 10, `path_prefix "x/" must start with "/"`},
		{"empty host", "routes:\n  - host: ''\n" + ok, 10, "host must not be empty"},
		{"host with port", "routes:\n  - host: example.com:80\n" + ok, 10, `host "example.com:80" is not a host name`},
		{"inner wildcard", "routes:\n  - host: api.*.example.com\n" + ok, 10, `leading "*."`},
		{"bare wildcard", "routes:\n  - host: '*'\n" + ok, 10, `host "*": a wildcard is only allowed as a leading "*."`},
		{"empty methods", "routes:\n  - methods: []\n" + ok, 10, "methods is empty"},
		{"bad method", "routes:\n  - methods: [GET, 'P T']\n" + ok, 10, `methods[1]: "P T" is not an HTTP method`},
		{"zero cost", "routes:\n  - cost: 0\n" + ok, 10, "cost must be at least 1"},
		{"cost list", "routes:\n  - cost: [1]\n" + ok, 10, "cost wants a whole number or {header: NAME}, not a list"},
		{"cost without header", "routes:\n  - cost: {}\n" + ok, 10, "cost wants a whole number, {header: NAME}, or an estimate"},
		{"estimate without actual", "routes:\n  - cost: {estimate: 10}\n" + ok, 10, "an estimate needs actual_header or actual_trailer"},
		{"estimate of 0", "routes:\n  - cost: {estimate: 0, actual_header: X-Used}\n" + ok, 10, "estimate must be at least 1, got 0"},
		{"header and estimate", "routes:\n  - cost: {header: X-Cost, estimate: 5, actual_header: X-Used}\n" + ok, 10, "give header or estimate, not both"},
		{"two actuals", "routes:\n  - cost: {estimate: 5, actual_header: X-Used, actual_trailer: X-Used}\n" + ok, 10, "give actual_header or actual_trailer, not both"},
		{"actual not a header name", "routes:\n  - cost: {estimate: 5, actual_trailer: 'X Used'}\n" + ok, 10, `actual_trailer: "X Used" is not a header name`},
		{"unknown source", "routes:\n  - descriptors: [{entries: [{key: k, from: cookie}]}]\n", 10, `from "cookie": want ip, header:NAME`},
		{"header without a name", "routes:\n  - descriptors: [{entries: [{key: k, from: 'header:'}]}]\n", 10, `from "header:"`},
		{"from and value", "routes:\n  - descriptors: [{entries: [{key: k, from: ip, value: x}]}]\n", 10, "give from or value, not both"},
		{"neither from nor value", "routes:\n  - descriptors: [{entries: [{key: k}]}]\n", 10, "from (ip, header:NAME, path, method, host) or value is required"},
		{"no entries", "routes:\n  - descriptors: [{if_missing: skip}]\n", 10, "entries is required"},
		{"bad if_missing", "routes:\n  - descriptors: [{entries: [{key: k, from: ip}], if_missing: allow}]\n", 10, `if_missing "allow"`},
		{"misspelt key", "routes:\n  - name: r\n    descriptors: [{entries: [{key: kk, from: ip}]}]\n", 11, `route "r": descriptors[0]: (kk) reaches no limit of domain "d"`},
		{"entries out of order", "routes:\n  - descriptors: [{entries: [{key: b, from: ip}, {key: a, from: ip}]}]\n", 10, "(b, a) reaches no limit"},
		{"stops above the limit", "routes:\n  - descriptors: [{entries: [{key: a, from: ip}]}]\n", 10, "(a) reaches no limit"},
		{"constant no descriptor has", "routes:\n  - descriptors: [{entries: [{key: a, value: x}, {key: c, from: ip}]}]\n", 10, "(a, c) reaches no limit"},
		{"bad trusted proxy", "trusted_proxies: [127.0.0.1/33]\nroutes:\n  - descriptors: []\n", 9, `trusted_proxies[0]: "127.0.0.1/33" is not a CIDR`},
		{"trusted proxies without routes", "trusted_proxies: [127.0.0.1/32]\n", 9, "trusted_proxies applies to routes"},
		{"empty name", "routes:\n  - name: ''\n" + ok, 10, "name must not be empty"},
		{"costs of an unknown limit", "routes:\n  - costs: {tpm: 1}\n" + ok, 10, `costs: no limit of domain "d" is named "tpm" (its named limits: per-k)`},
		{"costs a list", "routes:\n  - costs: [1]\n" + ok, 10, "costs must be a mapping, not a list"},
		{"negative cost by name", "routes:\n  - costs: {per-k: -1}\n" + ok, 10, "costs: per-k must not be negative, got -1"},
		{"cost by name a list", "routes:\n  - costs: {per-k: [1]}\n" + ok, 10, "costs: per-k: want a whole number or {header: NAME}, not a list"},
		{"cost by name, misspelt header", "routes:\n  - costs: {per-k: {headr: X}}\n" + ok, 10, `unknown field "headr" (did you mean "header"?)`},
		{"cost by name, not a header name", "routes:\n  - costs: {per-k: {header: 'X Y'}}\n" + ok, 10, `costs: per-k: header: "X Y" is not a header name`},
		{"cost by name, empty", "routes:\n  - costs: {per-k: {}}\n" + ok, 10, "costs: per-k: want a whole number or {header: NAME}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("routes.yaml", []byte(head+tc.yaml))
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want a *config.Error", err)
			}
			if ce.File != "routes.yaml" || ce.Line != tc.line || !strings.Contains(ce.Msg, tc.want) {
				t.Errorf("got %q, want routes.yaml:%d: ...%s...", err, tc.line, tc.want)
			}
		})
	}
}

// "*.suffix" matches every name under suffix, at any depth, and neither
// suffix itself nor a name that merely ends with the same letters.
func TestWildcardHostProperty(t *testing.T) {
	label := rapid.StringMatching(`[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?`)
	rapid.Check(t, func(t *rapid.T) {
		suffix := strings.Join(rapid.SliceOfN(label, 1, 3).Draw(t, "suffix"), ".")
		sub := strings.Join(rapid.SliceOfN(label, 1, 3).Draw(t, "sub"), ".")
		p, err := config.Parse("p.yaml", []byte("domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n"+
			"routes: [{host: '*."+suffix+"', descriptors: [{entries: [{key: k, value: v}]}]}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		rt := p.Routes()[0]
		if !rt.Matches(request("GET "+sub+"."+suffix+"/", "127.0.0.1:1")) {
			t.Fatalf("%s.%s is not under *.%s", sub, suffix, suffix)
		}
		if rt.Matches(request("GET "+suffix+"/", "127.0.0.1:1")) {
			t.Fatalf("*.%s matched %s itself", suffix, suffix)
		}
		if rt.Matches(request("GET "+sub+suffix+"/", "127.0.0.1:1")) && !strings.HasSuffix(sub+suffix, "."+suffix) {
			t.Fatalf("*.%s matched %s%s", suffix, sub, suffix)
		}
	})
}

// No file makes the loader or the routes it builds panic.
func FuzzParseRoutes(f *testing.F) {
	seed, err := os.ReadFile("testdata/routes/gateway.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	if costs, err := os.ReadFile("testdata/valid/costs.yaml"); err == nil {
		f.Add(costs)
	}
	f.Add([]byte("domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n" +
		"trusted_proxies: ['::1/128']\nroutes: [{host: '*.a', methods: [GET], cost: {header: X}, descriptors: [{entries: [{key: k, from: ip}]}]}]\n"))
	reqs := []*http.Request{
		request("GET api.example.com/v1/x", "127.0.0.1:1", "X-API-Key", "k", "X-Upload-MB", "3"),
		request("POST a.example.com/upload", "[::1]:1", "X-Forwarded-For", "198.51.100.7"),
		request("POST h/v1/images", "127.0.0.1:1", "X-Plan", "free", "X-API-Key", "k", "X-Tokens", "9", "X-Images", "x"),
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := config.Parse("fuzz.yaml", data)
		if err != nil {
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *config.Error", err)
			}
			return
		}
		for _, rt := range p.Routes() {
			for _, r := range reqs {
				if rt.Matches(r) {
					rt.Request(r)
				}
			}
		}
	})
}

// A route's cost may be an estimate, reconciled from a response header or
// trailer; the others are not reconciled.
func TestReconciledRouteCost(t *testing.T) {
	set, err := config.Parse("routes.yaml", []byte(`domain: llm
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 90000}
routes:
  - name: completions
    path_prefix: /v1/completions
    cost: {estimate: 1000, actual_trailer: X-Tokens-Used}
    descriptors: [{entries: [{key: tenant, from: "header:X-Tenant"}]}]
  - name: plain
    cost: 3
    descriptors: [{entries: [{key: tenant, from: "header:X-Tenant"}]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	routes := set.Routes()
	req := httptest.NewRequest("POST", "/v1/completions", nil)
	req.Header.Set("X-Tenant", "acme")
	_, cost, err := routes[0].Request(req)
	if err != nil || cost.Units != 1000 || !routes[0].Reconciles() || routes[1].Reconciles() {
		t.Fatalf("estimate %+v (%v), reconciles %v / %v; want 1000, true / false", cost, err, routes[0].Reconciles(), routes[1].Reconciles())
	}
	resp := &httplimit.Response{Header: http.Header{}, Trailer: http.Header{"X-Tokens-Used": {"3412"}}}
	if n, err := routes[0].ActualCost(resp); err != nil || n != 3412 {
		t.Fatalf("ActualCost = %d, %v; want 3412", n, err)
	}
	if _, err := routes[0].ActualCost(&httplimit.Response{Header: http.Header{}, Trailer: http.Header{}}); !errors.Is(err, policy.ErrBadCost) {
		t.Fatalf("a response without the trailer: %v, want ErrBadCost", err)
	}
}
