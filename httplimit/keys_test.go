package httplimit

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

var testTrusted = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("2001:db8:ffff::/48"),
}

func TestByIP(t *testing.T) {
	key := ByIP(IPOptions{TrustedProxies: testTrusted})
	for _, tc := range []struct {
		name   string
		peer   string
		xff    []string
		fwd    []string
		want   string
		wantOK bool
	}{
		{"untrusted peer, no header", "203.0.113.9:1234", nil, nil, "203.0.113.9", true},
		{"untrusted peer spoofs XFF", "203.0.113.9:1234", []string{"198.51.100.7"}, nil, "203.0.113.9", true},
		{"untrusted peer spoofs Forwarded", "203.0.113.9:1234", nil, []string{"for=198.51.100.7"}, "203.0.113.9", true},
		{"trusted peer, client in XFF", "127.0.0.1:80", []string{"198.51.100.7"}, nil, "198.51.100.7", true},
		{"trusted chain", "127.0.0.1:80", []string{"198.51.100.7, 127.0.0.5, 127.0.0.6"}, nil, "198.51.100.7", true},
		{"spoofed left of client", "127.0.0.1:80", []string{"203.0.113.66, 198.51.100.7, 127.0.0.5"}, nil, "198.51.100.7", true},
		{"several XFF lines", "127.0.0.1:80", []string{"203.0.113.66, 198.51.100.7", "127.0.0.5"}, nil, "198.51.100.7", true},
		{"all hops trusted", "127.0.0.1:80", []string{"127.0.0.7, 127.0.0.5"}, nil, "127.0.0.7", true},
		{"malformed hop stops at last trusted", "127.0.0.1:80", []string{"198.51.100.7, garbage, 127.0.0.5"}, nil, "127.0.0.5", true},
		{"malformed last hop", "127.0.0.1:80", []string{"198.51.100.7, "}, nil, "127.0.0.1", true},
		{"empty XFF", "127.0.0.1:80", []string{""}, nil, "127.0.0.1", true},
		{"XFF with ports", "127.0.0.1:80", []string{"198.51.100.7:5555, 127.0.0.2:1"}, nil, "198.51.100.7", true},
		{"XFF bracketed IPv6", "127.0.0.1:80", []string{"[2001:db8:1:2::9]:80"}, nil, "2001:db8:1:2::/64", true},
		{"Forwarded", "127.0.0.1:80", nil, []string{`for=198.51.100.7;proto=https, for="[2001:db8:ffff::1]:4711"`}, "198.51.100.7", true},
		{"Forwarded IPv6 client", "127.0.0.1:80", nil, []string{`For="[2001:db8:1:2::9]:4711";by=127.0.0.1`}, "2001:db8:1:2::/64", true},
		{"Forwarded wins over XFF", "127.0.0.1:80", []string{"203.0.113.66"}, []string{"for=198.51.100.7"}, "198.51.100.7", true},
		{"Forwarded unknown", "127.0.0.1:80", nil, []string{"for=unknown"}, "127.0.0.1", true},
		{"Forwarded obfuscated", "127.0.0.1:80", nil, []string{"for=_hidden, for=127.0.0.3"}, "127.0.0.3", true},
		{"Forwarded without for", "127.0.0.1:80", nil, []string{"proto=https"}, "127.0.0.1", true},
		{"Forwarded quoted comma", "127.0.0.1:80", nil, []string{`for="198.51.100.7,203.0.113.66"`}, "127.0.0.1", true},
		{"Forwarded unterminated quote", "127.0.0.1:80", nil, []string{`for="198.51.100.7`}, "127.0.0.1", true},
		{"trusted IPv6 proxy", "[2001:db8:ffff::2]:443", []string{"198.51.100.7"}, nil, "198.51.100.7", true},
		{"IPv6 peer grouped by /64", "[2001:db8:1:2:3:4:5:6]:80", nil, nil, "2001:db8:1:2::/64", true},
		{"IPv4-mapped peer", "[::ffff:203.0.113.9]:80", nil, nil, "203.0.113.9", true},
		{"IPv4-mapped trusted peer", "[::ffff:127.0.0.1]:80", []string{"198.51.100.7"}, nil, "198.51.100.7", true},
		{"zoned peer", "[fe80::1%eth0]:80", nil, nil, "fe80::/64", true},
		{"peer without port", "203.0.113.9", nil, nil, "203.0.113.9", true},
		{"empty peer", "", nil, nil, "", false},
		{"garbage peer", "not an address", []string{"198.51.100.7"}, nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.peer
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			for _, v := range tc.fwd {
				r.Header.Add("Forwarded", v)
			}
			got, ok := key(r)
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("got %q %v, want %q %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestByIPPrefixes(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[2001:db8:1:2:3:4:5:6]:80"
	for bits, want := range map[int]string{
		0: "2001:db8:1:2::/64", 48: "2001:db8:1::/48", 128: "2001:db8:1:2:3:4:5:6",
		200: "2001:db8:1:2:3:4:5:6", -5: "2001:db8:1:2::/64",
	} {
		if got, _ := ByIP(IPOptions{IPv6Prefix: bits})(r); got != want {
			t.Errorf("/%d: got %q, want %q", bits, got, want)
		}
	}
	// A trusted prefix written as IPv4-mapped IPv6 still matches IPv4 peers.
	r.RemoteAddr = "127.1.2.3:80"
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	mapped := ByIP(IPOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("::ffff:127.0.0.0/104")}})
	if got, _ := mapped(r); got != "198.51.100.7" {
		t.Errorf("mapped trusted prefix: got %q", got)
	}
}

func FuzzClientIP(f *testing.F) {
	f.Add("127.0.0.1:80", "198.51.100.7, 127.0.0.5", "")
	f.Add("127.0.0.1:80", "", `for="[2001:db8::1]:80";proto=https, for=unknown`)
	f.Add("203.0.113.9:1", "192.0.2.4", "for=192.0.2.4")
	f.Add("[2001:db8:ffff::1]:443", "[::1]:1,,", `for="\"x`)
	f.Fuzz(func(t *testing.T, peer, xff, fwd string) {
		r := &http.Request{RemoteAddr: peer, Header: http.Header{}}
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		if fwd != "" {
			r.Header.Set("Forwarded", fwd)
		}
		got, ok := ByIP(IPOptions{TrustedProxies: testTrusted})(r)
		p, peerOK := parseHop(peer)
		if ok != peerOK {
			t.Fatalf("ok %v for peer %q (parses: %v)", ok, peer, peerOK)
		}
		if !ok {
			return
		}
		if _, err := netip.ParseAddr(got); err != nil {
			if _, err := netip.ParsePrefix(got); err != nil {
				t.Fatalf("key %q is neither an address nor a prefix", got)
			}
		}
		// The anti-spoofing property: an untrusted peer is the client,
		// whatever the headers say.
		if !isTrusted(p, testTrusted) && got != group(p, 64) {
			t.Fatalf("untrusted peer %q keyed as %q", peer, got)
		}
	})
}

func TestKeyFuncs(t *testing.T) {
	r := httptest.NewRequest("POST", "http://Example.COM:8080/api/v1/items?x=1", nil)
	r.Header.Set("X-Api-Key", "k1")
	for _, tc := range []struct {
		name   string
		fn     KeyFunc
		want   string
		wantOK bool
	}{
		{"header", ByHeader("x-api-key"), "k1", true},
		{"absent header", ByHeader("X-Tenant"), "", false},
		{"path", ByPath(), "/api/v1/items", true},
		{"path prefix longest", ByPathPrefix("/api", "/api/v1", "/other"), "/api/v1", true},
		{"path prefix segment", ByPathPrefix("/api/v"), "", false},
		{"path prefix slash", ByPathPrefix("/api/v1/"), "/api/v1/", true},
		{"path prefix none", ByPathPrefix("/admin"), "", false},
		{"method", ByMethod(), "POST", true},
		{"host", ByHost(), "example.com", true},
		{"constant", Constant("all"), "all", true},
		{"combine", Combine(ByHeader("X-Api-Key"), ByMethod()), "k1|POST", true},
		{"combine missing", Combine(ByHeader("X-Api-Key"), ByHeader("X-Tenant")), "", false},
	} {
		if got, ok := tc.fn(r); got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: got %q %v, want %q %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
	r.URL.Path = "/api"
	if got, ok := ByPathPrefix("/api")(r); got != "/api" || !ok {
		t.Errorf("exact prefix: %q %v", got, ok)
	}
	r.Host = "[2001:DB8::1]:443"
	if got, _ := ByHost()(r); got != "2001:db8::1" {
		t.Errorf("IPv6 host: %q", got)
	}
}

func TestCombineNeverCollides(t *testing.T) {
	tuples := [][2]string{
		{"a|b", "c"}, {"a", "b|c"}, {`a\`, "|b"}, {`a\|`, "b"}, {"a", `\|b`},
		{`a\\`, "b"}, {"a", `\\b`}, {"", "|"}, {"|", ""}, {"", ""}, {`\`, ""}, {"", `\`},
	}
	seen := map[string][2]string{}
	for _, tu := range tuples {
		k, _ := Combine(Constant(tu[0]), Constant(tu[1]))(nil)
		if prev, dup := seen[k]; dup {
			t.Fatalf("%q and %q both give %q", prev, tu, k)
		}
		seen[k] = tu
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "part 1 is nil") {
			t.Fatalf("nil part: panic %v", p)
		}
	}()
	Combine(ByMethod(), nil)
}
