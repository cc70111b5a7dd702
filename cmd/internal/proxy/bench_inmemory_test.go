package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/proxy"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
)

// cannedUpstream answers every request at once, in memory, so that the
// in-memory benchmarks measure the proxies and nothing else.
type cannedUpstream struct{}

func (cannedUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{
		StatusCode:    http.StatusOK,
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"text/plain"}},
		Body:          io.NopCloser(strings.NewReader("hello\n")),
		ContentLength: 6,
		Request:       r,
	}, nil
}

// BenchmarkInMemory compares, without a network, a bare reverse proxy with
// the floodgate proxy admitting every request and refusing every request:
// the difference is the cost of routing, deciding and the RateLimit fields.
//
//	go test -run '^$' -bench InMemory -benchmem ./cmd/internal/proxy/
func BenchmarkInMemory(b *testing.B) {
	upstream, _ := url.Parse("http://127.0.0.1:1")
	gated := func(b *testing.B, policy string) http.Handler {
		mem := floodgate.NewMemory()
		b.Cleanup(mem.Close)
		p, err := proxy.New(proxy.Options{Upstream: upstream, Transport: cannedUpstream{},
			Engine: engine.New(servicetest.Policies(b, policy), engine.OneStore{Limiter: mem})})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	denyAll := strings.Replace(alwaysAllow, "unit: second, requests_per_unit: 1000000, burst: 1000000", "unit: day, requests_per_unit: 1", 1)
	for _, bc := range []struct {
		name    string
		handler http.Handler
		status  int
	}{
		{"bare", proxy.NewReverseProxy(upstream, proxy.Forwarding{Transport: cannedUpstream{}}), 200},
		{"floodgate-admit", gated(b, alwaysAllow), 200},
		{"floodgate-deny", gated(b, denyAll), 429},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest(http.MethodGet, "http://example.com/items", nil)
				req.RemoteAddr = "127.0.0.1:4242"
				bc.handler.ServeHTTP(httptest.NewRecorder(), req) // the deny case spends its one token here
				for pb.Next() {
					w := httptest.NewRecorder()
					bc.handler.ServeHTTP(w, req)
					if w.Code != bc.status {
						b.Fatalf("status %d, want %d", w.Code, bc.status)
					}
				}
			})
		})
	}
}
