package observers_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/floodgate-io/floodgate"
	"github.com/floodgate-io/floodgate/cmd/internal/engine"
	"github.com/floodgate-io/floodgate/cmd/internal/observers"
	"github.com/floodgate-io/floodgate/cmd/internal/proxy"
	"github.com/floodgate-io/floodgate/cmd/internal/servicetest"
)

// perClient admits every request, counting each client address apart.
const perClient = `
domain: bench
descriptors:
  - key: client
    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 1000000000, burst: 1000000000}
routes:
  - descriptors: [{entries: [{key: client, from: ip}]}]
`

// benchClients is how many client addresses the proxy benchmark's requests
// come from: more than insight's counters, as under real traffic.
const benchClients = 10_000

// canned answers every request at once, in memory, so that the benchmark
// measures the proxy and its observers, not a network.
type canned struct{}

func (canned) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), ContentLength: 2, Request: r}, nil
}

// sink is a ResponseWriter that keeps nothing.
type sink struct{ h http.Header }

func (s *sink) Header() http.Header         { return s.h }
func (s *sink) Write(p []byte) (int, error) { return len(p), nil }
func (s *sink) WriteHeader(int)             {}

// BenchmarkProxyObservers is issue 16's throughput measure: floodgate
// proxy, in memory, admitting requests from many clients, with no
// observer, with the metrics alone (observers.Config.NoInsight), and with
// the metrics and insight as floodgate proxy runs by default. Throughput is
// 1/(ns/op); the goal is at most 10% lost.
//
//	go test -run '^$' -bench ProxyObservers -benchmem ./internal/observers/
func BenchmarkProxyObservers(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  *observers.Config
	}{
		{"off", nil},
		{"metrics", &observers.Config{NoInsight: true}},
		{"metrics+insight", &observers.Config{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			mem := floodgate.NewMemory()
			b.Cleanup(mem.Close)
			eng := engine.New(servicetest.Policies(b, perClient), engine.OneStore{Limiter: mem})
			if bc.cfg != nil {
				s, err := observers.New(context.Background(), *bc.cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close(context.Background()) })
				eng.Observe("proxy", s.Observer)
			}
			upstream, _ := url.Parse("http://127.0.0.1:1")
			p, err := proxy.New(proxy.Options{Upstream: upstream, Transport: canned{}, Engine: eng})
			if err != nil {
				b.Fatal(err)
			}
			reqs := make([]*http.Request, benchClients)
			for i := range reqs {
				reqs[i], _ = http.NewRequest(http.MethodGet, "http://example.com/items", nil)
				reqs[i].RemoteAddr = fmt.Sprintf("10.%d.%d.%d:4242", i>>16&255, i>>8&255, i&255)
				p.ServeHTTP(&sink{h: http.Header{}}, reqs[i])
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer() // the warm-up above made every client's state
			b.RunParallel(func(pb *testing.PB) {
				w := &sink{h: http.Header{}}
				i := int(next.Add(7919))
				for pb.Next() {
					clear(w.h)
					p.ServeHTTP(w, reqs[i%len(reqs)])
					i++
				}
			})
		})
	}
}
