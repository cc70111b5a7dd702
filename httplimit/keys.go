package httplimit

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// KeyFunc maps a request to the value that identifies its bucket under a
// rule. ok is false when the request has no value for it (no API key, no
// matching path prefix); Options.Missing decides what happens then.
type KeyFunc func(r *http.Request) (value string, ok bool)

// IPOptions configures ByIP.
type IPOptions struct {
	// TrustedProxies are the networks of the proxies in front of this
	// server. Forwarded and X-Forwarded-For are read only when the peer that
	// connected is in one of them, and only as far back as the hops stay in
	// them: any client can write those headers, so an entry is believed only
	// when a trusted proxy appended it.
	TrustedProxies []netip.Prefix
	// IPv6Prefix groups IPv6 clients by network, since one subscriber
	// usually holds a whole /64 and could otherwise rotate through 2^64
	// buckets. 0 or less means 64; values above 128 mean 128 (one bucket per
	// address).
	IPv6Prefix int
}

// ByIP keys requests by client address: IPv4 addresses as themselves, IPv6
// addresses as their /IPv6Prefix network ("2001:db8::/64").
//
// The client is the peer of the connection (r.RemoteAddr) unless that peer
// is a trusted proxy. Then the forwarding header is walked from right to
// left, the order in which proxies appended to it, skipping trusted hops;
// the first untrusted hop is the client. Forwarded (RFC 7239) is used when
// present, X-Forwarded-For otherwise. A hop that is not an IP address
// ("unknown", an obfuscated name, garbage) ends the walk at the last trusted
// hop seen: the address before it cannot be verified, and taking the proxy
// as the client never lets a spoofer pick someone else's bucket. When every
// hop is trusted the leftmost one is the client. A peer that cannot be
// parsed gives no value (ok false).
func ByIP(opts IPOptions) KeyFunc {
	trusted := make([]netip.Prefix, 0, len(opts.TrustedProxies))
	for _, p := range opts.TrustedProxies {
		if p.IsValid() {
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			trusted = append(trusted, p.Masked())
		}
	}
	bits := opts.IPv6Prefix
	switch {
	case bits <= 0:
		bits = 64
	case bits > 128:
		bits = 128
	}
	return func(r *http.Request) (string, bool) {
		a, ok := clientIP(r.RemoteAddr, r.Header, trusted)
		if !ok {
			return "", false
		}
		return group(a, bits), true
	}
}

// group renders a client address as its bucket's name.
func group(a netip.Addr, v6bits int) string {
	if a.Is4() || v6bits == 128 {
		return a.String()
	}
	p, _ := a.Prefix(v6bits)
	return p.String()
}

// clientIP finds the client's address for ByIP; see there for the rules.
func clientIP(remoteAddr string, h http.Header, trusted []netip.Prefix) (netip.Addr, bool) {
	peer, ok := parseHop(remoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if !isTrusted(peer, trusted) {
		return peer, true
	}
	var hops []string
	if fw := h.Values("Forwarded"); len(fw) > 0 {
		hops = forwardedFor(fw)
	} else {
		for _, v := range h.Values("X-Forwarded-For") {
			hops = append(hops, strings.Split(v, ",")...)
		}
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			return client, true // cannot see past a hop we cannot read
		}
		client = a
		if !isTrusted(a, trusted) {
			return a, true
		}
	}
	return client, true
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHop reads one address as proxies write it: "192.0.2.1",
// "192.0.2.1:443", "2001:db8::1", "[2001:db8::1]:443" or "[2001:db8::1]",
// with surrounding blanks. Zones are dropped and IPv4-mapped IPv6 addresses
// become IPv4, so that one client has one spelling.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		host, _, err2 := net.SplitHostPort(s)
		if err2 != nil {
			if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
				host = s[1 : len(s)-1]
			} else {
				return netip.Addr{}, false
			}
		}
		if a, err = netip.ParseAddr(host); err != nil {
			return netip.Addr{}, false
		}
	}
	return a.WithZone("").Unmap(), true
}

// forwardedFor returns the for= value of each element of the Forwarded
// field lines, in order; an element without one yields "" (unreadable).
// Quoted strings are honoured so that a comma or semicolon inside quotes
// does not split an element.
func forwardedFor(lines []string) []string {
	var out []string
	for _, line := range lines {
		for _, elem := range splitQuoted(line, ',') {
			var v string
			for _, pair := range splitQuoted(elem, ';') {
				name, val, ok := strings.Cut(pair, "=")
				if ok && strings.EqualFold(strings.TrimSpace(name), "for") {
					v = unquote(strings.TrimSpace(val))
				}
			}
			out = append(out, v)
		}
	}
	return out
}

// splitQuoted splits s at sep outside double quotes.
func splitQuoted(s string, sep byte) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// unquote removes the quotes of a quoted-string and its backslash escapes;
// other values are returned as they are.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	s = s[1 : len(s)-1]
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ByHeader keys requests by the first value of a request header, an API key
// or a tenant id set by an authenticating proxy; an absent or empty header
// gives no value.
func ByHeader(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, bool) {
		v := r.Header.Get(name)
		return v, v != ""
	}
}

// ByPath keys requests by URL path, one bucket per endpoint. Paths are
// unbounded: combine with a client key, or prefer ByPathPrefix, so that a
// client cannot create buckets at will.
func ByPath() KeyFunc {
	return func(r *http.Request) (string, bool) {
		if r.URL == nil {
			return "", false
		}
		return r.URL.Path, true
	}
}

// ByPathPrefix keys requests by the longest of prefixes their path starts
// with, at a segment boundary: "/api" matches "/api" and "/api/x" but not
// "/apix" (a prefix ending in "/" matches anything under it). A path under
// none of them gives no value.
func ByPathPrefix(prefixes ...string) KeyFunc {
	ps := append([]string(nil), prefixes...)
	return func(r *http.Request) (string, bool) {
		if r.URL == nil {
			return "", false
		}
		path, best, found := r.URL.Path, "", false
		for _, p := range ps {
			if !strings.HasPrefix(path, p) || (found && len(p) <= len(best)) {
				continue
			}
			if len(path) == len(p) || strings.HasSuffix(p, "/") || path[len(p)] == '/' {
				best, found = p, true
			}
		}
		return best, found
	}
}

// ByMethod keys requests by method.
func ByMethod() KeyFunc {
	return func(r *http.Request) (string, bool) { return r.Method, r.Method != "" }
}

// ByHost keys requests by virtual host: r.Host lower-cased and without its
// port, so that "Example.com:443" and "example.com" share a bucket.
func ByHost() KeyFunc {
	return func(r *http.Request) (string, bool) {
		h := r.Host
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		h = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
		return h, h != ""
	}
}

// Constant gives every request the value v: one bucket for all (a global
// limit on an endpoint).
func Constant(v string) KeyFunc {
	return func(*http.Request) (string, bool) { return v, true }
}

// Combine keys requests by several values at once ("tenant and endpoint").
// The values are joined with '|', with '\' and '|' inside them escaped, so
// that different tuples never give the same key. A part without a value
// leaves the whole without one. It panics on a nil part, a programming
// error better found at start-up than on the first request.
func Combine(parts ...KeyFunc) KeyFunc {
	ps := append([]KeyFunc(nil), parts...)
	for i, p := range ps {
		if p == nil {
			panic(fmt.Sprintf("httplimit: Combine: part %d is nil", i))
		}
	}
	return func(r *http.Request) (string, bool) {
		var b strings.Builder
		for i, p := range ps {
			v, ok := p(r)
			if !ok {
				return "", false
			}
			if i > 0 {
				b.WriteByte('|')
			}
			for j := 0; j < len(v); j++ {
				if v[j] == '|' || v[j] == '\\' {
					b.WriteByte('\\')
				}
				b.WriteByte(v[j])
			}
		}
		return b.String(), true
	}
}
