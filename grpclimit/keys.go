package grpclimit

import (
	"context"
	"net"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// KeyFunc picks the value a rule counts a call under: calls with the same
// value share one limit. It returns ok=false to skip the rule for this call
// (the call is then neither counted nor limited by that rule), which is how
// a rule applies to some methods or callers only. A KeyFunc must be safe for
// concurrent use.
type KeyFunc func(ctx context.Context, fullMethod string) (value string, ok bool)

// ByMethod counts each method on its own: "/pkg.Service/Method".
func ByMethod() KeyFunc {
	return func(_ context.Context, fullMethod string) (string, bool) { return fullMethod, true }
}

// ByPeer counts each client address on its own: the peer's IP without its
// port, so that a client's connections share one limit. The rule is skipped
// when the transport reports no peer. Behind a proxy every call comes from
// the proxy: count by ByMetadata of the header it forwards instead.
func ByPeer() KeyFunc {
	return func(ctx context.Context, _ string) (string, bool) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return "", false
		}
		return host(p.Addr), true
	}
}

// host is an address without its port. IP addresses are rendered by
// net.IP.String, so that one IPv4 client has one key whether it arrived on
// an IPv4 or a dual-stack listener.
func host(a net.Addr) string {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case *net.UDPAddr:
		return a.IP.String()
	}
	s := a.String()
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return s // a unix socket or another address without a port
}

// ByMetadata counts each value of the incoming metadata key (an API key, a
// tenant id) on its own; keys are case-insensitive, as in gRPC. When the
// key has several values the first counts. The rule is skipped when the
// call carries no value: pair it with a rule by peer or a constant if
// callers must not escape the limit by leaving the key out. An empty value
// is a value like any other. ByMetadata panics if key is empty.
func ByMetadata(key string) KeyFunc {
	if key == "" {
		panic("grpclimit: ByMetadata with an empty key")
	}
	key = strings.ToLower(key)
	return func(ctx context.Context, _ string) (string, bool) {
		vs := metadata.ValueFromIncomingContext(ctx, key)
		if len(vs) == 0 {
			return "", false
		}
		return vs[0], true
	}
}

// Constant counts every call under v: one limit shared by all callers.
func Constant(v string) KeyFunc {
	return func(context.Context, string) (string, bool) { return v, true }
}

// Combine counts each combination of the parts' values on its own: for
// instance Combine(ByMetadata("tenant"), ByMethod()) limits each tenant on
// each method. The rule is skipped when any part skips it. Values are
// joined with '|' after escaping '\' and '|' in each, so that different
// combinations never share a key whatever the values hold. With no parts
// every call has the same value. Combine panics if a part is nil.
func Combine(parts ...KeyFunc) KeyFunc {
	for _, p := range parts {
		if p == nil {
			panic("grpclimit: Combine with a nil KeyFunc")
		}
	}
	parts = append([]KeyFunc(nil), parts...) // the caller may reuse its slice
	return func(ctx context.Context, fullMethod string) (string, bool) {
		var b strings.Builder
		for i, p := range parts {
			v, ok := p(ctx, fullMethod)
			if !ok {
				return "", false
			}
			if i > 0 {
				b.WriteByte('|')
			}
			escape(&b, v)
		}
		return b.String(), true
	}
}

func escape(b *strings.Builder, v string) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '\\' || c == '|' {
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
	}
}
